"""The plan piece every campaign of seeded runs shares: its subjects in turn, each run with a seed drawn
from the campaign seed (the same campaign seed, the same runs in the same order), forever; ``--scenarios``
or ``--minutes`` ends it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence

__all__ = ["in_turn"]


def in_turn(seed: int, subjects: Sequence[str], rounds: Sequence[str] = ("",)) -> Iterator[tuple[str, str, int]]:
    """(subject, round, drawn seed): every subject in turn, the first of ``rounds`` for each, then the next
    round for each, …, over and over (``rounds``: what each pass runs, e.g. one offsets scenario each)."""
    rng = random.Random(seed)
    for number in itertools.count():
        for subject in subjects:
            yield subject, rounds[number % len(rounds)], rng.randrange(2**31)
