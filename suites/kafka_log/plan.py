"""The Kafka log suite's plan for a campaign (``eos-harness chaos --suite kafka-log``): the readers in turn
(``read_committed``, the promise; ``read_uncommitted``, a deliberately broken reader that must be caught
reading aborted records), each reading a fresh workload whose seed is drawn from the campaign seed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from eos_harness.commands import command_line

from ..rotation import in_turn

__all__ = ["READERS", "Scenario", "campaign", "engine_problem", "expected", "known_subjects", "subjects"]

# Each reader (the consumer's isolation level): whether it must fail, and the checks that name its mistake.
READERS = {"read_committed": (False, ()), "read_uncommitted": (True, ("aborted_read",))}


@dataclass(frozen=True)
class Scenario:
    """One workload (:func:`.runner.run_workload`) read by one reader, on the campaign's broker (``broker``:
    as asked, for the replay; ``opened``: where it runs)."""

    system: str  # the reader's isolation level
    seed: int
    transactions: int
    partitions: int
    abort_ratio: float
    broker: str
    opened: str | None = None

    def repro(self) -> str:
        return command_line("kafka-log", "--broker", self.broker, "--seed", self.seed, "--transactions",
                            self.transactions, "--partitions", self.partitions, "--abort-ratio", self.abort_ratio,
                            "--isolation", self.system)


def known_subjects() -> list[str]:
    return list(READERS)


def subjects(given: list[str] | None) -> list[str]:
    return list(given) if given is not None else list(READERS)


def expected(system: str) -> tuple[bool, tuple[str, ...]]:
    return READERS.get(system, (False, ()))


def campaign(seed: int, options: Mapping) -> Iterator[Scenario]:
    for system, _, drawn in in_turn(seed, options["systems"]):
        yield Scenario(system, drawn, options["transactions"], options["partitions"], options["abort_ratio"],
                       options["broker"], options.get("opened"))


def engine_problem(options: Mapping, master: str) -> str | None:
    """Why ``chaos --engine spark --master MASTER`` cannot run this campaign's scenarios (a Kafka broker its executors
    do not reach), or None: each scenario is a client of the campaign's broker."""
    from eos_harness.engine import kafka_reached

    return kafka_reached("kafka-log", options.get("broker"), master)
