"""The driver's side of a child instance with a fault armed in it (a kind of :mod:`eos_harness.faults.kinds`).

A suite's instance (the lifecycle's task :class:`~eos_harness.suites.lifecycle.instance.Instance`, the
metadata suite's controller) starts its child and reads its events; this holds what is the same for
each: the fault, its kind and what it fired, the events recorded into the history, the kind's hooks
called when its point fires or after its number of events, and what those hooks may do here.
"""

from __future__ import annotations

from typing import Any

from eos_harness.faults import kinds
from eos_harness.history import History

__all__ = ["FaultedChild"]


class FaultedChild:
    """A child instance of number ``number`` in ``history``, with ``fault`` (or none) armed. A subclass
    starts ``proc`` (the child process) with ``parent`` (the driver's end of its event pipe), and says
    how to wait for an event (:meth:`_wait_for_event`)."""

    proc: Any
    parent: Any
    endings: tuple[str, ...] = ("done", "fenced", "error")  # the events that say how the child ended

    def __init__(self, fault: Any, number: int, history: History) -> None:
        self.fault, self.number, self.history = fault, number, history
        self.kind = kinds.kind_of(fault) if fault is not None else None
        self.fired: str | None = None  # what the verdict reports the instance died of
        self.seen = 0  # the child's events recorded so far

    @property
    def hold(self) -> int | None:
        """After how many events the child waits for the driver's kill (its fault's kind ``holds_child``:
        :func:`~eos_harness.process.child_events.held_after`), or None."""
        return self.fault.hit if self.kind is not None and self.kind.holds_child else None

    def collect(self) -> str:
        """Record the child's events until it ends: how it said it ended (one of :attr:`endings`),
        ``hang``, ``crash``, or what the fault's kind ends it with when its point fires (``frozen``)."""
        outcome = "crash"
        while True:
            if not self._wait_for_event():
                outcome = "hang"
                break
            try:
                event = self.parent.recv()
            except (EOFError, OSError):  # the child died, perhaps in the middle of a message
                break
            if event["type"] == "fault_fired":
                ended = self.fault_fired(event)
                if ended is not None:
                    return ended
                continue
            if event["type"] in self.endings:
                outcome = event["type"]
            self.record(event)
        self._ended()
        if outcome == "crash":
            self.record_crash()
        return outcome

    def _wait_for_event(self) -> bool:
        """True when an event is there; False when the child hangs (recorded, the child killed)."""
        raise NotImplementedError

    def _ended(self) -> None:
        """The child's events ended: reap it."""
        self.reap()

    def reap(self) -> None:
        """Wait for the child to exit (kill it after 5 s); close the pipe."""
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.parent.close()

    def fault_fired(self, event: dict) -> str | None:
        """The child says its armed point fired: note it; the outcome the kind's ``when_fired`` hook
        ends the instance with (``frozen``), or None when the child goes on."""
        self.fired = event["point"]
        if self.kind is not None and self.kind.when_fired is not None:
            ended = self.kind.when_fired(self, self.fault)
            if isinstance(ended, str):
                return ended
        return None

    def record(self, event: dict) -> None:
        """Record one of the child's events; at the fault's hit-th, call its kind's ``after_events`` hook."""
        self.history.add(self.number, event)
        self.seen += 1
        if self.kind is not None and self.kind.after_events is not None and self.seen == self.fault.hit:
            self.fired = self.fault.point
            self.kind.after_events(self, self.fault)

    def record_crash(self) -> None:
        """The child ended without saying how: it crashed, at the point that fired if one did."""
        self.history.add(self.number, {"type": "crash", "point": self.fired or "unexpected-exit",
                                       "exitcode": self.proc.exitcode})

    # -- what a fault kind's hooks may do ------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the instance's process."""
        self.proc.kill()

    def frozen(self) -> str:
        """The instance stopped itself at its point: a zombie now, while a newer one takes over."""
        self.history.add(self.number, {"type": "frozen", "point": self.fired})
        return "frozen"
