"""The child's side of an instance that reports by events (a lifecycle task, a metadata controller or
reader, the offsets suite's upgrade task): what it does with its event pipe is the same for each.

The driver's side is :class:`eos_harness.process.faulted.FaultedChild`: it reads ``fault_fired``
when the armed crash point fires, the child's own events, and ``error`` when the child raised.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable
from typing import NoReturn

from eos_harness.faults import points

__all__ = ["HOLD_S", "held_after", "report_fault_firings", "run_reporting_child"]

# How long a child waits after its hit-th event for the driver's kill (less than any driver's event timeout).
HOLD_S = 10.0


def held_after(send: Callable[[dict], object], hit: int | None) -> Callable[[dict], object]:
    """``send``, waiting HOLD_S after the ``hit``-th event it sends for the driver, who kills the process on
    reading that event (a fault kind that ``holds_child``, ``kill@n``): the kill then lands right after that
    event whatever the machine's load, not after whatever the child did next. ``hit`` None: ``send`` as is."""
    if hit is None:
        return send
    sent = 0

    def emit(event: dict) -> None:
        nonlocal sent
        send(event)
        sent += 1
        if sent == hit:
            time.sleep(HOLD_S)

    return emit


def report_fault_firings(conn) -> None:
    """Send a ``fault_fired`` event (naming the point) each time an armed crash point fires."""
    points.set_notifier(lambda name: conn.send({"type": "fault_fired", "point": name}))


def run_reporting_child(conn, body: Callable[[], None],
                        error_fields: Callable[[BaseException], dict] | None = None) -> NoReturn:
    """Run ``body`` and end the child process: exit 0 (the pipe closed) when it returns; when it
    raises, an ``error`` event with the traceback (and ``error_fields(exc)``, if given) and exit 1."""
    try:
        body()
    except BaseException as exc:  # noqa: BLE001 - everything the child hits is reported as an event
        event = {"type": "error", "error": traceback.format_exc()}
        if error_fields is not None:
            event.update(error_fields(exc))
        with contextlib.suppress(Exception):
            conn.send(event)
        os._exit(1)
    conn.close()
    os._exit(0)
