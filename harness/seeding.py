"""Hypothesis runs whose generated steps depend on the seed alone.

For a fixed seed, Hypothesis (6.1xx) still draws, about one time in twenty, a "local constant": a
literal found in the source of every non-library module loaded in the process (``sys.modules``),
which here includes the harness itself. The steps a seed generates then depend on which modules
happen to be imported (the CLI loads different ones than pytest or a script) and on every edit of
their literals: the same ``--seed`` found a bug from the command line that it missed in a test, and
a replay command could generate other steps than the run it replays. :func:`seed_only` turns that
pool off while a suite's state machine runs (Hypothesis's own fixed constants stay), so that the
seed, the settings and the code of the machine decide the steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["seed_only"]


@contextlib.contextmanager
def seed_only() -> Iterator[None]:
    """Within the block, Hypothesis draws no constants from the modules loaded in the process."""
    from hypothesis.internal.conjecture import providers

    original = providers._get_local_constants
    empty = providers.Constants()
    providers.CONSTANTS_CACHE.cache.clear()  # computed with whatever pool was current
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()
