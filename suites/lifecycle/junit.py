"""The lifecycle suite's results as JUnit (see :mod:`eos_harness.junit`): a testsuite per store, a
testcase per check of :data:`~eos_harness.suites.lifecycle.checks.CHECKS`, plus ``completed`` (every
scenario ran to its end, every scheduled fault was injected) and, for a store expected to fail,
``caught``."""

from __future__ import annotations

from eos_harness import junit
from eos_harness.junit import Suite
from eos_harness.suites.lifecycle.checks import CHECKS

__all__ = ["run_suites"]


def run_suites(result: dict) -> list[Suite]:
    """One scenario (``eos-harness run``): its store's testsuite. A failure is a failure here, mutant
    or not, as the command's exit code says."""
    return junit.run_suites(result, CHECKS, "store")
