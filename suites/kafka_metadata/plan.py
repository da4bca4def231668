"""The KIP-868 suite's plan on a real KRaft quorum, for a campaign (``eos-harness chaos --suite
kafka-metadata``): runs of :class:`.runner.Plan` (controller kills while topics are created, bootstrap
cuts), each with a seed drawn from the campaign seed (the kill timing). The system is the KRaft quorum of
the pinned Kafka jars: it must pass every run."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..rotation import in_turn
from .runner import Plan

__all__ = ["QUORUM", "expected", "campaign", "known_subjects", "subjects"]

QUORUM = "kraft"  # the system: Kafka's KRaft quorum, from the pinned jars


def known_subjects() -> list[str]:
    return [QUORUM]


def subjects(given: list[str] | None) -> list[str]:
    return list(given) if given is not None else [QUORUM]


def expected(system: str) -> tuple[bool, tuple[str, ...]]:
    return False, ()


def campaign(seed: int, options: Mapping) -> Iterator[Plan]:
    for _, _, drawn in in_turn(seed, options["systems"]):
        yield Plan(seed=drawn, topics=options["topics"], partitions=options["partitions"],
                   controller_kills=options["controller_kills"], bootstrap_kills=options["bootstrap_kills"],
                   brokers=options["brokers"], heap=options["heap"])
