"""The metadata suite's results as JUnit (see :mod:`eos_harness.junit`): a testsuite per system (the
real controller, each mutant), a testcase per check of :data:`~eos_harness.suites.metadata.checks.CHECKS`,
plus ``completed`` and, for a mutant, ``caught`` (by the check that names its mistake)."""

from __future__ import annotations

from eos_harness import junit
from eos_harness.junit import Suite
from eos_harness.suites.metadata.checks import CHECKS

__all__ = ["run_suites"]


def run_suites(result: dict) -> list[Suite]:
    """One scenario (``eos-harness run --suite metadata``): its system's testsuite."""
    return junit.run_suites(result, CHECKS, "system")
