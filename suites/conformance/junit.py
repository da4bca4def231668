"""``eos-harness verify`` as JUnit (see :mod:`eos_harness.junit`): a testsuite for the store, a
testcase per conformance check; each violation is listed under its check with the case (the shrunk
steps) it showed in and the command that replays the run. A failure is a failure, mutant or not, as
the command's exit code says."""

from __future__ import annotations

from eos_harness.junit import Scenario, Suite, check_cases
from eos_harness.suites.conformance.runner import CHECKS

__all__ = ["verify_suites"]


def verify_suites(result: dict, window: bool = False) -> list[Suite]:
    """``window``: the result is the window store suite's (its own checks)."""
    checks = CHECKS
    if window:
        from eos_harness.suites.windows.checks import CHECKS as checks
    store = result["store"]
    found = [Scenario(f"case {(v.get('case') or '?').splitlines()[0]}", result["repro"], [v])
             for v in result["violations"]]
    cases = check_cases(f"verify.{store}", checks, found, len(result["cases"]), unit="case")
    return [Suite(store, cases, {"seed": result["seed"], "cases": len(result["cases"]), "verdict": result["verdict"]})]
