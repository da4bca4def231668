"""``eos-harness verify`` as JUnit (see :mod:`eos_harness.junit`): a testsuite for the store, a
testcase per conformance check (and a testsuite ``STORE (offsets)`` of the offsets suite's
promises, skipped with the reason where none of its scenarios applies, or "not checked" where the
store declares it lacks what they check); each finding is listed once under its check with the case
(the shrunk steps) it showed in, how many cases it fired in (offsets), and its own replay command. A failure is a failure, mutant or not, as
the command's exit code says."""

from __future__ import annotations

from eos_harness.junit import SKIPPED, Case, Scenario, Suite, check_cases
from eos_harness.suites.conformance.runner import CHECKS
from eos_harness.suites.offsets.checks import PROMISES
from eos_harness.verdict import NOT_APPLICABLE

__all__ = ["verify_suites"]


def verify_suites(result: dict, window: bool = False) -> list[Suite]:
    """``window``: the result is the window store suite's (its own checks)."""
    checks = CHECKS
    if window:
        from eos_harness.suites.windows.checks import CHECKS as checks
    store = result["store"]
    found = [Scenario(_label(v), v.get("replay") or result["repro"], [v]) for v in result["violations"]]
    offsets = result.get("offsets")
    mine = [s for s in found if s.violations[0].get("check") not in PROMISES] if offsets else found
    cases = check_cases(f"verify.{store}", checks, mine, len(result["cases"]), unit="case",
                        coverage=result.get("coverage"))
    suites = [Suite(store, cases, {"seed": result["seed"], "cases": len(result["cases"]), "verdict": result["verdict"]})]
    if offsets:
        suites.append(_offsets_suite(result, offsets, [s for s in found if s not in mine]))
    return suites


def _label(violation: dict) -> str:
    """``case FIRST LINE`` (and, for an offsets finding, ``(fired in N of M cases)``)."""
    label = f"case {(violation.get('case') or '?').splitlines()[0]}"
    fired = violation.get("fired")
    return f"{label} (fired in {fired['cases']} of {fired['of']} cases)" if fired else label


def _offsets_suite(result: dict, offsets: dict, found: list[Scenario]) -> Suite:
    """The offsets suite's testsuite: a testcase per promise; one none of whose scenarios applies to
    the store is skipped with the reason."""
    store = result["store"]
    classname = f"verify.offsets.{store}"
    cases = []
    for case in check_cases(classname, PROMISES, found, len(offsets["cases"]), unit="scenario"):
        if offsets["checks"].get(case.name) == NOT_APPLICABLE:
            lacked = [f"{n['scenario']}: {n['reason']}" for n in offsets.get("not_checked", [])
                      if case.name in n["checks"]]
            reasons = [f"{n['scenario']}: {n['reason']}" for n in offsets["not_applicable"] if case.name in n["checks"]]
            message = "not checked: " + "; ".join(lacked) if lacked else "not applicable: " + "; ".join(reasons)
            case = Case(case.name, classname, SKIPPED, message)
        cases.append(case)
    return Suite(f"{store} (offsets)", cases, {"seed": result["seed"], "scenarios": len(offsets["cases"]),
                                               "verdict": offsets["verdict"]})
