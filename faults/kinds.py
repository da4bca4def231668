"""Fault kinds: every way a schedule can fault a run, in one registry.

Each kind is one :class:`FaultKind` entry that says how a schedule spells it, where it is armed (in
the task's own process at a crash point, by the driver after the instance's n-th event, on a Kafka
cluster this process started, by the Spark file watcher), what it needs from the run, whether it
kills or stops a broker (a campaign then runs it alone), what it means, and how a planner draws its
hit count. The entry also holds the hooks through which a suite applies it; the mechanics stay
where they live (:mod:`eos_harness.faults.kafka`, the lifecycle suite's task instance).

The schedule parsers, the lifecycle driver and the planners read this registry and match no fault
names of their own, so a new kind is one ``register(FaultKind(...))``. The power cut to come is one
more entry: armed by the driver after the instance's n-th event (an ``after_events`` hook that drops
the writes the store has not synced), needing a :class:`Need` of its own (a state directory whose
unsynced writes can be dropped), drawn by the planner like ``kill``.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from eos_harness.faults import points
from eos_harness.faults.kafka import (
    COMMIT_IN_FLIGHT,
    TXN_TIMEOUT_MS,
    ClusterHandle,
    coordinator_of,
    fault_lock,
    kill_and_restart_broker,
    pause_broker,
)

__all__ = [
    "BY_DRIVER",
    "BY_FILE_WATCHER",
    "CLUSTER",
    "CRASH_POINT",
    "FREEZE",
    "IN_CHILD",
    "KAFKA",
    "LIFECYCLE",
    "ON_CLUSTER",
    "SPARK",
    "FaultKind",
    "Need",
    "TaskInstance",
    "kind_of",
    "kinds",
    "named",
    "register",
    "register_cluster_lookup",
    "registered",
    "run_broker_fault",
]

# The suites whose schedules name fault kinds.
LIFECYCLE = "lifecycle"
SPARK = "spark"

# Where a kind is armed.
IN_CHILD = "in the task's process, at a crash point"
BY_DRIVER = "by the driver, after the instance's n-th event"
ON_CLUSTER = "by the driver, on a Kafka cluster this process started"
BY_FILE_WATCHER = "by the Spark file watcher"


@dataclass(frozen=True)
class Need:
    """Something a fault kind needs from the run: what it is, how a user gets it, and whether a run
    on a given broker spec has it."""

    what: str
    how: str
    met_by: Callable[[str], bool]


def _is_kafka(broker: str) -> bool:
    return broker.startswith("kafka://")


# How to find a Kafka cluster this process started, by its address: registered by the clusters
# (:mod:`eos_harness.cluster.local`, on import), which are built above the faults. None registered:
# no cluster was started here.
_cluster_lookups: list[Callable[[str], object | None]] = []


def register_cluster_lookup(lookup: Callable[[str], object | None]) -> None:
    """Let the ``CLUSTER`` need find the clusters this process started (``lookup(address)``: one, or None)."""
    _cluster_lookups.append(lookup)


def _is_cluster_started_here(broker: str) -> bool:
    return _is_kafka(broker) and any(lookup(broker) is not None for lookup in _cluster_lookups)


KAFKA = Need("a Kafka broker", "--broker kafka-local, kafka-quorum, or kafka://HOST:PORT", _is_kafka)
CLUSTER = Need("a Kafka cluster this process started (it kills or stops broker processes)",
               "--broker kafka-local or kafka-quorum",
               _is_cluster_started_here)


class TaskInstance(Protocol):
    """What a kind's hooks may do to the task instance its fault is armed in (the lifecycle suite's
    ``Instance``). ``fired`` is what the verdict reports the instance died of; ``history``,
    ``number`` and ``seen`` are the scenario's history, the instance's number in it and how many of
    its events have arrived."""

    fired: str | None
    history: object
    number: int
    seen: int

    def kill(self) -> None: ...  # SIGKILL the instance's process
    def frozen(self) -> str: ...  # record the instance stopped at its point (a zombie); returns the outcome
    def start_broker_fault(self, fault) -> None: ...  # run the fault's broker action beside the instance
    def resolve_coordinator(self) -> None: ...  # note the transaction coordinator before the instance runs
    def kill_coordinator(self, fault) -> None: ...  # SIGKILL the noted coordinator now, restart it beside
    def stall(self, fault) -> None: ...  # keep the stopped instance stopped past the transaction timeout


# A hit-count rule: (rng, the name the schedule uses, the suite's unit: the commit interval for the
# lifecycle, the number of batches for Spark) -> the hit count.
HitRule = Callable[[random.Random, str, int], int]
Hook = Callable[[TaskInstance, object], object]


@dataclass(frozen=True)
class FaultKind:
    """One fault kind. ``name`` is the word a schedule uses (``kill``, ``broker-kill``, ``offsets``);
    a kind with ``at_point`` is spelled by a declared crash point's name instead (with ``prefix``
    before it, if any), and ``name`` only labels it."""

    name: str
    spelling: str  # how a schedule writes it: ``kill@n``, ``POINT[@n]``, ``freeze:POINT[@n]``
    meaning: str
    armed: str  # IN_CHILD, BY_DRIVER, ON_CLUSTER, BY_FILE_WATCHER
    suite: str = LIFECYCLE
    needs: tuple[Need, ...] = ()  # the broadest first (a Kafka broker, then a cluster started here)
    stops_broker: bool = False  # kills or stops a broker process: every client of the cluster sees it
    draw_hit: HitRule | None = None  # None: a planner never draws this kind
    # A kind spelled by a crash point: what the point does when it fires in the child, and the prefix.
    at_point: bool = False
    prefix: str = ""
    action: str = points.KILL
    # A kind armed in the child at a fixed point (the point and what it does there).
    child_point: str | None = None
    child_action: str = points.KILL
    # Hooks of the lifecycle driver, each called with the instance and the fault:
    before_start: Hook | None = None  # before the instance's process starts
    after_events: Hook | None = None  # when the instance's ``hit``-th event has arrived
    # The task's process waits after sending its ``hit``-th event, so that what ``after_events`` does (a
    # kill) lands right after that event whatever the machine's load, not after whatever the process
    # did next (a replay of the same schedule is then the same run).
    holds_child: bool = False
    when_fired: Hook | None = None  # the child reported its armed point fired; a str returned ends the instance
    broker_options: tuple[tuple[str, str], ...] = ()  # options the broker spec must carry
    broker_action: Callable[..., None] | None = None  # (cluster, node): what the fault does to that broker

    def armed_in_child(self, fault) -> tuple[str, int, str] | None:
        """The (point, hit, action) the task's process arms for ``fault``, or None."""
        if self.at_point:
            return fault.point, fault.hit, self.action
        if self.child_point is not None:
            return self.child_point, fault.hit, self.child_action
        return None

    def needs_unmet(self, broker: object) -> list[Need]:
        """The needs a run on ``broker`` (a BrokerSpec, or its runtime text) does not meet; each
        need judges the runtime text (``kafka://…``, ``embedded:…``)."""
        return [need for need in self.needs if not need.met_by(str(broker))]


_registry: dict[tuple[str, str], FaultKind] = {}


def register(kind: FaultKind) -> FaultKind:
    """Add ``kind`` to the registry (its suite's schedules, drivers and planners then know it)."""
    key = (kind.suite, kind.name)
    if key in _registry:
        raise ValueError(f"fault kind {kind.name!r} of the {kind.suite} suite is registered already")
    _registry[key] = kind
    return kind


@contextlib.contextmanager
def registered(kind: FaultKind) -> Iterator[FaultKind]:
    """``kind`` registered for the duration of the block (a test's own kind)."""
    register(kind)
    try:
        yield kind
    finally:
        del _registry[(kind.suite, kind.name)]


def kinds(suite: str | None = None) -> list[FaultKind]:
    """The registered kinds (of ``suite``), in the order they were registered."""
    return [k for k in _registry.values() if suite is None or k.suite == suite]


def named(word: str, suite: str = LIFECYCLE) -> FaultKind | None:
    """The kind a schedule names by its own word (``kill``, ``txn-timeout``), or None."""
    kind = _registry.get((suite, word))
    return None if kind is None or kind.at_point else kind


def kind_of(fault) -> FaultKind:
    """The lifecycle kind of a scheduled fault (``point``, ``action``): the kind it names, else the
    crash point kind with that action."""
    if fault.action == points.KILL:
        kind = named(fault.point)
        if kind is not None:
            return kind
    for kind in kinds(LIFECYCLE):
        if kind.at_point and kind.action == fault.action:
            return kind
    raise ValueError(f"no fault kind for {fault!r}")


def _draw(low: int, high: int) -> HitRule:
    return lambda rng, name, unit: rng.randint(low, high)


def _events_of_the_instance(rng: random.Random, name: str, unit: int) -> int:
    return rng.randint(3, 40)


# The lifecycle suite's kinds. A crash point's hit count is drawn by this rule unless the planner
# knows the point better (a point reached per record, or once per instance).
CRASH_POINT = register(FaultKind(
    "crash-point", "POINT[@n]", "the task's process SIGKILLs itself the n-th time it reaches POINT",
    IN_CHILD, at_point=True, action=points.KILL, draw_hit=_draw(1, 4)))
FREEZE = register(FaultKind(
    "freeze", "freeze:POINT[@n]", "the task's process SIGSTOPs itself at POINT and stays a zombie; the task moves on",
    IN_CHILD, at_point=True, prefix="freeze:", action=points.FREEZE,
    when_fired=lambda instance, fault: instance.frozen()))
register(FaultKind(
    "kill", "kill@n", "the driver SIGKILLs the task's process after its n-th event",
    BY_DRIVER, draw_hit=_draw(1, 25), after_events=lambda instance, fault: instance.kill(), holds_child=True))
register(FaultKind(
    "broker-kill", "broker-kill@n",
    "after the instance's n-th event: SIGKILL the task's transaction coordinator broker, restart it",
    ON_CLUSTER, needs=(KAFKA, CLUSTER), stops_broker=True, draw_hit=_events_of_the_instance,
    after_events=lambda instance, fault: instance.start_broker_fault(fault), broker_action=kill_and_restart_broker))
register(FaultKind(
    "broker-pause", "broker-pause@n",
    "after the instance's n-th event: SIGSTOP the task's transaction coordinator broker for a while",
    ON_CLUSTER, needs=(KAFKA, CLUSTER), stops_broker=True, draw_hit=_events_of_the_instance,
    after_events=lambda instance, fault: instance.start_broker_fault(fault), broker_action=pause_broker))
register(FaultKind(
    "coordinator-kill", "coordinator-kill@n",
    "at the instance's n-th commit, in flight: SIGKILL the transaction coordinator, restart it",
    ON_CLUSTER, needs=(KAFKA, CLUSTER), stops_broker=True, draw_hit=_draw(1, 4),
    child_point=COMMIT_IN_FLIGHT, child_action=points.FREEZE,  # stopped until the coordinator is dead
    before_start=lambda instance, fault: instance.resolve_coordinator(),
    when_fired=lambda instance, fault: instance.kill_coordinator(fault), broker_action=kill_and_restart_broker))
register(FaultKind(
    "txn-timeout", "txn-timeout@n",
    "freeze the instance at its n-th commit, records delivered, past transaction.timeout.ms",
    IN_CHILD, needs=(KAFKA,), draw_hit=_draw(1, 4),
    child_point=COMMIT_IN_FLIGHT, child_action=points.FREEZE,
    when_fired=lambda instance, fault: instance.stall(fault),
    broker_options=(("transaction.timeout.ms", str(TXN_TIMEOUT_MS)),)))

# The Spark suite's kinds: the file watcher SIGKILLs the driver's process group (faults.spark).
for _step, _what in (("offsets", "the batch's offsets/N file"), ("state", "the batch's first state file"),
                     ("sink", "the batch's sink commit"), ("commit", "the batch's commits/N file")):
    register(FaultKind(
        _step, f"{_step}@N", f"SIGKILL the Spark driver right after {_what} appears (N: the batch id)",
        BY_FILE_WATCHER, suite=SPARK, draw_hit=lambda rng, name, batches: rng.randint(1, batches - 2)))
del _step, _what
register(FaultKind(
    "random", "random@MS", "SIGKILL the Spark driver MS milliseconds after the run's first offsets file",
    BY_FILE_WATCHER, suite=SPARK, draw_hit=_draw(500, 8000)))


def run_broker_fault(cluster: ClusterHandle, name: str, transactional_id: str | None = None,
                     node: int | None = None, locked: bool = False) -> dict:
    """Execute the schedule fault ``name`` on ``cluster`` (on ``node``, default the coordinator of
    ``transactional_id``): the broker action its registry entry names. Returns what was done (for
    the history). Takes the cluster's :func:`fault_lock` for the whole fault; ``locked``: the caller
    holds it already (and this releases it when done)."""
    kind = named(name)
    if kind is None or kind.broker_action is None:
        known = [k.name for k in kinds() if k.broker_action is not None]
        raise ValueError(f"unknown broker fault {name!r}; known: {', '.join(known)}")
    lock = fault_lock(cluster)
    started = time.monotonic()
    if not locked:
        lock.acquire()
    waited = time.monotonic() - started
    try:
        node = coordinator_of(cluster, transactional_id) if node is None else node
        kind.broker_action(cluster, node)
    finally:
        lock.release()
    return {"fault": name, "node": node, "seconds": round(time.monotonic() - started, 3),
            "waited_for_other_fault": round(waited, 3)}
