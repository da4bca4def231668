"""Waiting until something holds: the one poll-until-deadline loop of the harness.

``wait_until(lambda: port_open(p), timeout=30, what=f"port {p} to listen")`` calls the predicate
until it returns something truthy and returns that; after ``timeout`` seconds it raises
:class:`WaitTimeout` (a ``TimeoutError``) naming what it waited for. A predicate that knows the
wait is hopeless (the process it waits for has exited) raises, and that ends the wait at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "wait_until"]

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """What was awaited did not happen in time; ``what`` and ``timeout`` say what and how long."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g} s waiting for {what}")
        self.what = what
        self.timeout = timeout


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.1,
               what: str = "a condition") -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value, and return it.

    It is called at least once, and once more at the deadline. Raises :class:`WaitTimeout` naming
    ``what`` when ``timeout`` seconds pass first; an exception from ``predicate`` propagates at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(what, timeout)
        time.sleep(min(interval, remaining))
