"""Which of a schedule's faults a lifecycle scenario can reach: a pure function of the schedule, the
input's length and the commit interval, so that a campaign never plans a fault that cannot fire (a
scenario whose scheduled fault never fired is an ``error``: it did not test what it planned).

Faults fire in order, one per task instance. Each instance restores the store (replaying the
changelog tail its committed offset leaves), processes the input past the last committed input offset
(a commit every ``commit_interval`` records, and one in ``close`` for the rest), and closes. Walking
the schedule, this keeps, for the next instance, the fewest input records it can have left and
whether it certainly has a changelog tail to replay; a fault is kept when it fires even then:

* ``task.process.mid_batch@n``: n records left; ``task.commit.*@n`` and ``kafka.commit.in_flight``
  faults (``coordinator-kill@n``, ``txn-timeout@n``): n commits left; a store's own point ``@n``: n
  commits left (a store's commit reaches its points at least once);
* ``task.close.mid``, and a store's own point of its close or open (its name holds ".close." or
  ".open.": Kafka Streams' status marker, its database close): the first time only (an instance opens
  and closes its store once);
* ``task.restore.mid_replay``: the first time only, and only after a crash (or a freeze: the next
  instance restores a fresh store) between the EOS commit and the store's commit
  (``task.commit.after_eos``), or during a replay, which leave a tail for every kind of store (a crash
  elsewhere leaves one for some stores only: not counted on);
* ``kill@n`` (and a broker fault after n events): n events at most, a commit's work still to do
  after them (the driver acts while the instance runs on; a restore sends three events, a commit
  three at least);
* after a fault that leaves the task process running (a broker killed, paused, a coordinator killed),
  the instance may run to its end: no later fault is counted on.

A fault that cannot fire is left out of the schedule (the next one is armed in that instance
instead); a scenario left with no fault is not run (:func:`fireable`)."""

from __future__ import annotations

from dataclasses import replace

from eos_harness.faults import kinds
from eos_harness.models.workloads import WORKLOADS
from eos_harness.runtime import (
    P_AFTER_CHECKPOINT,
    P_AFTER_EOS,
    P_AFTER_STORE,
    P_BEFORE_EOS,
    P_CLOSE_MID,
    P_MID_BATCH,
    P_MID_REPLAY,
)
from eos_harness.suites.conformance.driver import step_of
from eos_harness.suites.lifecycle.scenario import Scenario
from eos_harness.suites.lifecycle.schedule import Fault

__all__ = ["fireable", "reachable_faults"]

RESTORE_EVENTS = 3  # events every instance sends before it processes a record (store commit begun, done, recover)
EVENTS_PER_COMMIT = 3  # at least: the commit, the store's commit begun and done
ENDS_INSTANCE = {"kill", "txn-timeout"}  # kinds (not at a point) after which the task's process is gone or fenced


def reachable_faults(schedule: tuple[Fault, ...], records: int, commit_interval: int) -> tuple[Fault, ...]:
    """The faults of ``schedule`` that fire, each in its turn, on ``records`` input records committed
    every ``commit_interval`` records (see the module's docstring), in order."""
    left, tail = records, False
    kept: list[Fault] = []
    for fault in schedule:
        outcome = _step(fault, left, tail, commit_interval)
        if outcome is None:
            continue  # cannot fire here: the next fault is armed in this instance instead
        kept.append(fault)
        left, tail, goes_on = outcome
        if goes_on:
            break  # the instance may run to its end after it: no later fault is counted on
    return tuple(kept)


def fireable(scenario: Scenario) -> Scenario | None:
    """``scenario`` with only the faults it can reach (:func:`reachable_faults`); None when none is left."""
    records = scenario.records or WORKLOADS[scenario.workload].default_records
    schedule = reachable_faults(scenario.schedule, records, scenario.commit_interval)
    if not schedule:
        return None
    return scenario if schedule == scenario.schedule else replace(scenario, schedule=schedule)


def _step(fault: Fault, left: int, tail: bool, interval: int) -> tuple[int, bool, bool] | None:
    """For ``fault`` armed in an instance with at least ``left`` records to process (and a changelog
    tail to replay when ``tail``): None when it may not fire; else the fewest records the next instance
    has left, whether it certainly replays a tail, and whether this instance goes on after the fault."""
    commits = -(-left // interval)  # the fewest commits the instance makes (the last one in close)
    n = fault.hit
    kind = kinds.kind_of(fault)
    if kind.at_point:
        point = fault.point
        if point == P_MID_REPLAY:
            return (left, True, False) if n == 1 and tail else None
        if point == P_CLOSE_MID or step_of(point) == "close":  # the task's close, a store's own in its close
            return (0, False, False) if n == 1 else None
        if step_of(point) == "open":  # a store's own point in its open, before any record
            return (left, tail, False) if n == 1 else None
        if point == P_MID_BATCH:
            return (left - (n - 1), False, False) if n <= left else None
        if point == P_BEFORE_EOS:
            return (left - (n - 1) * interval, False, False) if n <= commits else None
        if point == P_AFTER_EOS:
            return (max(0, left - n * interval), True, False) if n <= commits else None
        if point in (P_AFTER_STORE, P_AFTER_CHECKPOINT) or not point.startswith("task."):
            return (max(0, left - n * interval), False, False) if n <= commits else None
        return None  # a task point of no known place in the lifecycle
    if kind.after_events is not None:
        # The driver acts after the instance's n-th event, while the instance runs on: a commit's work at
        # least is left after it, so that the fault lands before the instance ends.
        if n > RESTORE_EVENTS + EVENTS_PER_COMMIT * (commits - 1):
            return None
        return max(0, left - (n // EVENTS_PER_COMMIT) * interval), False, kind.name not in ENDS_INSTANCE
    if kind.child_point is not None:  # reached once in every commit
        if n > commits:
            return None
        return max(0, left - (n - 1) * interval), False, kind.name not in ENDS_INSTANCE
    return (0, False, True)  # a kind of no known reach: counted on, and nothing after it
