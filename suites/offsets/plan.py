"""The offsets suite's plan for a campaign (``eos-harness chaos --suite offsets``): the stores in turn, each
run through one offsets scenario (:func:`.runner.scenarios`) at a time, the next scenario on the next pass,
each with a seed drawn from the campaign seed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..store_subjects import StoreRun, StoreSubjects, store_runs
from .runner import scenarios

__all__ = ["expected", "campaign", "known_subjects", "subjects"]

STORES = StoreSubjects(("store", "mutant"), lambda spec: spec.kind == "store" or spec.suite == "offsets",
                       "check a window store with --suite windows, an unsafe runtime variant with the lifecycle suite")
known_subjects, subjects, expected = STORES.known, STORES.subjects, STORES.expected


def campaign(seed: int, options: Mapping) -> Iterator[StoreRun]:
    return store_runs(seed, options, [s.name for s in scenarios()])
