"""Named crash points: step boundaries where an armed fault kills (or freezes) its own process.

Code under test calls ``crash_point("store.commit.after_data")`` at each boundary. Unarmed, a
point costs one dict lookup. Armed with ``arm(name, hit=n)``, the n-th time the point is reached
the notifier (if any) is told the point's name and the process SIGKILLs (or SIGSTOPs) itself;
armed with ``action="notify"`` it only tells the notifier and goes on, so that a fault outside the
process (a broker killed, ``faults.kafka``) lands at that exact step.

Every point has a stable dotted name and a one-line meaning, declared with ``declare`` by the
module that reaches it. :func:`load_declarations` loads the harness's declaring modules (the
command line, the schedule parser and a task's process call it before naming a point);
``eos-harness points`` lists them. A user's store module declares its own points with ``declare``
and is loaded with the store.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "CrashPoint",
    "UnknownCrashPoint",
    "active",
    "arm",
    "armed",
    "crash_point",
    "declare",
    "declare_for_run",
    "declared_for_run",
    "declared",
    "disarm_all",
    "load_declarations",
    "reached",
    "set_notifier",
    "start_tracing",
    "stop_tracing",
    "tracing",
]

KILL = "kill"
FREEZE = "freeze"
NOTIFY = "notify"  # tell the notifier and go on: an outside fault is injected at this step
ACTIONS = (KILL, FREEZE, NOTIFY)


@dataclass(frozen=True)
class CrashPoint:
    name: str
    description: str


class UnknownCrashPoint(ValueError):
    """Raised when arming a name that no loaded module declared."""


_declared: dict[str, CrashPoint] = {}
# name -> [hits remaining before firing, action]; the only state read on the hot path.
_armed: dict[str, list] = {}
_notifier: Callable[[str], None] | None = None
_trace: list[str] | None = None


def declare(name: str, description: str) -> str:
    """Declare a crash point (idempotent for the same name and meaning). Returns the name."""
    existing = _declared.get(name)
    if existing is not None and existing.description != description:
        raise ValueError(f"crash point {name!r} declared twice with different meanings")
    _declared[name] = CrashPoint(name, description)
    return name


DECLARED_FOR_RUN = "reached by the store under test but never declared (declared for this run only)"


def declare_for_run(name: str) -> str:
    """Declare ``name`` for this process's run if no module did (a store's own point, found reached
    by the probe): it can then be armed. Returns the name."""
    if name not in _declared:
        _declared[name] = CrashPoint(name, DECLARED_FOR_RUN)
    return name


def declared_for_run(name: str) -> bool:
    """Whether ``name`` was declared for this run only (:func:`declare_for_run`), not by a module: a
    task's process forked from the preloaded server must then declare it too before arming it."""
    point = _declared.get(name)
    return point is not None and point.description == DECLARED_FOR_RUN


# The harness's modules that declare crash points (the task runtime, the built-in stores and mutants,
# the Kafka adapter's, without loading the adapter: none without confluent-kafka; the metadata controller),
# in the order load_declarations() loads them.
DECLARING_MODULES = ("eos_harness.runtime", "eos_harness.stores.catalogue", "eos_harness.broker.kafka_points",
                     "eos_harness.metadata.controller", "eos_harness.kafka_streams.app_points")


def load_declarations(*modules: str) -> list[CrashPoint]:
    """Load every module of :data:`DECLARING_MODULES`, then ``modules`` (a user's), so that their
    points are declared; returns all declared points."""
    for name in (*DECLARING_MODULES, *modules):
        importlib.import_module(name)
    return declared()


def declared() -> list[CrashPoint]:
    """All declared points, sorted by name."""
    return [_declared[n] for n in sorted(_declared)]


def check_known(name: str) -> None:
    if name not in _declared:
        close = difflib.get_close_matches(name, list(_declared), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownCrashPoint(
            f"unknown crash point {name!r}{hint} (run 'eos-harness points' to list them all)"
        )


def arm(name: str, hit: int = 1, action: str = KILL) -> None:
    """Arm ``name`` to fire the ``hit``-th time it is reached from now (1 = next time)."""
    check_known(name)
    if hit < 1:
        raise ValueError(f"hit must be >= 1, got {hit}")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
    _armed[name] = [hit, action]


def armed() -> dict[str, tuple[int, str]]:
    return {name: (left, action) for name, (left, action) in _armed.items()}


def active() -> bool:
    """Whether any point is armed or traced in this process (a store that reaches its points through
    another process, a JVM's, asks it only then: unarmed and untraced, its points cost nothing)."""
    return bool(_armed) or _trace is not None


def tracing() -> bool:
    """Whether the points reached are being recorded in this process (:func:`start_tracing`)."""
    return _trace is not None


def disarm_all() -> None:
    _armed.clear()


def set_notifier(notifier: Callable[[str], None] | None) -> None:
    """Called with the point's name just before the process kills or freezes itself (or, for a
    ``notify`` point, goes on)."""
    global _notifier
    _notifier = notifier


def start_tracing() -> list[str]:
    """Record every point reached from now on (in order) into the returned list."""
    global _trace
    _trace = []
    return _trace


def stop_tracing() -> None:
    global _trace
    _trace = None


def reached() -> list[str]:
    return list(_trace or [])


def crash_point(name: str) -> None:
    """Mark a step boundary. Fires if this point is armed and its hit count runs out."""
    if _trace is not None:
        _trace.append(name)
    entry = _armed.get(name)
    if entry is None:
        return
    entry[0] -= 1
    if entry[0] > 0:
        return
    del _armed[name]
    if _notifier is not None:
        with contextlib.suppress(Exception):  # the kill must happen even if the pipe is gone
            _notifier(name)
    if entry[1] == NOTIFY:
        return
    if entry[1] == FREEZE:
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    os.kill(os.getpid(), signal.SIGKILL)
