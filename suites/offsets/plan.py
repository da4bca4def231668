"""The offsets suite's plan for a campaign (``eos-harness chaos --suite offsets``): the stores in turn, each
run through one offsets scenario (:func:`.runner.scenarios`) at a time, the next scenario on the next pass,
each with a seed drawn from the campaign seed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..rotation import in_turn
from ..store_subjects import StoreSubjects
from .runner import scenarios

__all__ = ["Scenario", "expected", "known_subjects", "plan", "subjects"]

STORES = StoreSubjects(("store", "mutant"), lambda spec: spec.kind == "store" or spec.suite == "offsets",
                       "check a window store with --suite windows, an unsafe runtime variant with the lifecycle suite")
known_subjects, subjects, expected = STORES.known, STORES.subjects, STORES.expected


@dataclass(frozen=True)
class Scenario:
    """One offsets scenario (its ``name``) run against a store."""

    store: str
    name: str
    seed: int
    store_timeout: float


def plan(seed: int, options: Mapping) -> Iterator[Scenario]:
    names = [s.name for s in scenarios()]
    for store, name, drawn in in_turn(seed, options["stores"], names):
        yield Scenario(store, name, drawn, options["store_timeout"])
