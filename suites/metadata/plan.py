"""The metadata suite's plan: a pure function of the seed, the scenarios of a campaign in order.

Coverage first: every mutant, each with a fault that gives its mistake a chance to show, among
every crash point of the controller for the real controller (a crash during the new controller's
abort after a crash that left a partial transaction, a zombie controller frozen mid-transaction, a
driver kill); then random schedules of one to three faults, forever, each fault one a scenario reaches
(:func:`reachable_faults`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import replace

from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.faults import kinds, points
from eos_harness.metadata.controller import (
    ABORT_KEEPS_STATE,
    INTERLEAVES,
    P_ABORT_AFTER,
    P_ABORT_BEFORE,
    P_AFTER_BEGIN,
    P_AFTER_END,
    P_BEFORE_END,
    P_BETWEEN_BATCHES,
    POINTS,
    SKIPS_ABORT,
)
from eos_harness.metadata.reader import PUBLISHES_BATCHES, SNAPSHOT_MID_TRANSACTION
from eos_harness.suites.lifecycle.schedule import Fault
from eos_harness.suites.metadata.runner import REAL, SYSTEMS, Scenario

__all__ = ["MUTANTS", "campaign", "check_options", "expected", "expected_to_fail", "known_subjects", "plan",
           "reachable_faults", "subjects"]

# Each mutant: its mistake, and the check that names it (the one that must catch it).
MUTANTS = {
    PUBLISHES_BATCHES: ("the reader publishes its image at every batch boundary, inside a transaction too",
                        "no_partial_publish"),
    SKIPS_ABORT: ("a new controller does not abort the partial transaction it finds", "one_open_transaction"),
    ABORT_KEEPS_STATE: ("a new controller appends Abort but does not revert its in-memory state",
                        "controller_state_matches_model"),
    SNAPSHOT_MID_TRANSACTION: ("the reader snapshots its image with an open transaction's records",
                               "snapshot_matches_replay"),
    INTERLEAVES: ("the controller writes two transactions' batches interleaved", "no_interleaving"),
}
BATCH_BYTES = (1024, 2048, 4096, 8192)
PARTIAL = (P_AFTER_BEGIN, P_BETWEEN_BATCHES, P_BEFORE_END)  # crash points that leave a partial transaction
# The latest event a driver's kill is drawn at: after the second command (activated, written, written), with the
# others still to write. The controller waits after that event for the kill (held_after), so a later one would be
# reached too; the bound stays so that a seed draws the scenarios it always drew.
KILL_EVENTS = 3


def expected_to_fail(system: str) -> bool:
    return system in MUTANTS


def _crash(point: str, hit: int = 1) -> Fault:
    return Fault(point, hit)


def _coverage(rng: random.Random) -> list[tuple[str, tuple[Fault, ...]]]:
    real = [
        (_crash(P_AFTER_BEGIN, rng.randint(1, 2)),),
        (_crash(P_BETWEEN_BATCHES, rng.randint(1, 2)),),  # hits within a scenario's first two transactions
        (_crash(P_BEFORE_END, rng.randint(1, 2)),),
        (_crash(P_AFTER_END, rng.randint(1, 2)),),
        (_crash(rng.choice(PARTIAL)), _crash(P_ABORT_BEFORE)),
        (_crash(rng.choice(PARTIAL)), _crash(P_ABORT_AFTER)),
        (_crash(rng.choice(PARTIAL)), _crash(P_ABORT_BEFORE), _crash(P_ABORT_BEFORE)),
        (Fault(rng.choice(PARTIAL), 1, points.FREEZE),),
        (Fault("kill", rng.randint(2, KILL_EVENTS)),),
    ]
    mutants = [
        (PUBLISHES_BATCHES, ()),
        (SKIPS_ABORT, (_crash(rng.choice(PARTIAL)),)),
        (ABORT_KEEPS_STATE, (_crash(rng.choice(PARTIAL)),)),
        (SNAPSHOT_MID_TRANSACTION, ()),
        (INTERLEAVES, ()),
    ]
    # Mutants first, two to one, so that a short campaign on a slow broker (Kafka: one broker
    # transaction per batch) still reaches every mutant: M R M M R M M R R R …
    out: list[tuple[str, tuple[Fault, ...]]] = [mutants[0]]
    for i, schedule in enumerate(real):
        out.append((REAL, schedule))
        out.extend(mutants[1 + 2 * i:3 + 2 * i])
    return out


def _random_fault(rng: random.Random) -> Fault:
    roll = rng.random()
    if roll < 0.1:
        return Fault("kill", kinds.named("kill").draw_hit(rng, "kill", 10))
    point = rng.choice(POINTS)
    return Fault(point, kinds.CRASH_POINT.draw_hit(rng, point, 10),
                 points.FREEZE if roll > 0.92 and point in PARTIAL else points.KILL)


def reachable_faults(system: str, schedule: tuple[Fault, ...], commands: int) -> tuple[Fault, ...]:
    """The faults of ``schedule`` that fire, each in its turn (one per controller), on any scenario of
    ``system`` with ``commands`` commands: a scheduled fault that never fired makes the scenario an
    ``error``, so the plan draws none. A scenario's first two commands are always transactions of two
    batches or more (:func:`~eos_harness.suites.metadata.runner.commands_for`); a controller runs the
    commands not yet in the log, in order. So, counting on nothing else:

    * a transaction's point (``after_begin``, ``between_batches``, ``before_end``, ``after_end``) ``@n``
      fires while n of those transactions are still to be written (a crash before a transaction's
      ``End`` leaves it to be written again);
    * ``abort.*`` fires the first time in the controller after a crash that left a partial transaction
      (a transaction's point before its ``End``, or ``abort.before_append``), except in a system that
      does not abort;
    * ``kill@n`` fires for n up to 3 while n commands are left (a controller's events: activated, then
      one for each command, written or refused; it waits after its n-th event for the driver's kill, so
      the kill lands there whatever the machine's load); after a kill, nothing more is counted on;
    * in ``interleaved-transactions`` the two transactions are written without their points."""
    kept: list[Fault] = []
    transactions, left, partial = 2, commands, False
    for fault in schedule:
        point, n = fault.point, fault.hit
        if point == "kill":
            if n <= min(KILL_EVENTS, left):
                kept.append(fault)
                break  # how far the killed controller got is not known
        elif point in (P_ABORT_BEFORE, P_ABORT_AFTER):
            if n == 1 and partial and system != SKIPS_ABORT:
                kept.append(fault)
                partial = point == P_ABORT_BEFORE
        elif point in (*PARTIAL, P_AFTER_END) and n <= transactions and system != INTERLEAVES:
            kept.append(fault)
            transactions -= n if point == P_AFTER_END else n - 1
            left, partial = commands - (2 - transactions), point in PARTIAL  # the two are the first commands
    return tuple(kept)


def plan(seed: int, broker: BrokerSpec | str = EMBEDDED,
         systems: tuple[str, ...] | None = None) -> Iterator[Scenario]:
    """The campaign's scenarios, in order, forever (the caller stops). ``systems``: only these."""
    rng = random.Random(seed)
    chosen = systems or (REAL, *MUTANTS)

    def scenario(system: str, schedule: tuple[Fault, ...]) -> Scenario | None:
        """The scenario with the faults it reaches only (None when it was given some, and none is left)."""
        sc = Scenario(system, rng.randrange(2**31), schedule, rng.choice(BATCH_BYTES), rng.randint(6, 12),
                      broker=broker)
        reached = reachable_faults(system, schedule, sc.commands)
        if schedule and not reached:
            return None
        return sc if reached == schedule else replace(sc, schedule=reached)

    for system, schedule in _coverage(rng):
        sc = scenario(system, schedule)
        if system in chosen and sc is not None:
            yield sc
    while True:
        system = REAL if rng.random() < 0.6 else rng.choice(list(MUTANTS))
        schedule = tuple(_random_fault(rng) for _ in range(rng.randint(0 if system != REAL else 1, 3)))
        sc = scenario(system, schedule)
        if system in chosen and sc is not None:
            yield sc


# -- the suite contract (:mod:`eos_harness.suite`) ------------------------------------------------------


def known_subjects() -> list[str]:
    return list(SYSTEMS)


def subjects(given: list[str] | None) -> list[str]:
    """The systems given, or every one (the real controller and every mutant)."""
    return list(given) if given else list(SYSTEMS)


def expected(system: str) -> tuple[bool, tuple[str, ...]]:
    """A mutant must fail, caught by the check that names its mistake (:data:`MUTANTS`)."""
    return (True, (MUTANTS[system][1],)) if system in MUTANTS else (False, ())


def campaign(seed: int, options: Mapping) -> Iterator[Scenario]:
    """:func:`plan` of the campaign's ``systems`` on its broker (``opened``: the broker opened for it)."""
    return plan(seed, options.get("opened") or parse(options["broker"], internal=True), tuple(options["systems"]))


def check_options(options: Mapping) -> None:
    """The metadata suite runs on embedded, kafka-local (one broker), kafka-quorum[:N] or kafka://HOST:PORT."""
    broker = parse(options["broker"])
    if broker.kind == "kafka-local" and broker.brokers != 1:
        raise ValueError(f"--broker {broker.cli_text!r}: the metadata suite runs on embedded, kafka-local, "
                         "kafka-quorum[:N] or kafka://HOST:PORT")


def engine_problem(options: Mapping, master: str) -> str | None:
    """Why ``chaos --engine spark`` cannot run this campaign's scenarios elsewhere (a Kafka broker), or None."""
    from eos_harness.engine import embedded_only

    return embedded_only("metadata", options.get("broker"))
