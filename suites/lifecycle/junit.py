"""The lifecycle suite's results as JUnit (see :mod:`eos_harness.junit`): a testsuite per store, a
testcase per check of :data:`~eos_harness.suites.lifecycle.checks.CHECKS`, plus ``completed`` (every
scenario ran to its end, every scheduled fault was injected) and, for a store expected to fail,
``caught``."""

from __future__ import annotations

from eos_harness.junit import FAILED, SKIPPED, Case, Scenario, Suite, check_cases, completed_case
from eos_harness.suites.lifecycle.checks import CHECKS
from eos_harness.verdict import ERROR

__all__ = ["campaign_suites", "run_suites"]


def _scenario(result: dict, label: str) -> Scenario:
    problems = ([result["error"]] if result["verdict"] == ERROR and result.get("error") else []) + [
        f"a scheduled fault could not be injected: {e}" for e in result.get("fault_errors", [])]
    return Scenario(label, result["repro"], result["violations"], "; ".join(problems) or None)


def _caught_case(classname: str, store: str, tally: dict, cut_short: bool) -> Case:
    if tally["failed"]:
        return Case("caught", classname)
    if tally["scenarios"] == tally["errors"]:
        return Case("caught", classname, SKIPPED, f"{store}: every scenario ended in error; not judged")
    if cut_short:
        return Case("caught", classname, SKIPPED, f"{store}: not caught before the campaign stopped; not judged")
    return Case("caught", classname, FAILED,
                f"{store} is expected to fail (a mutant or unsafe variant) but passed all {tally['scenarios']} "
                "scenario(s): no check caught it (a hole in the harness); run a longer campaign or add a check")


def campaign_suites(campaign: dict) -> list[Suite]:
    """A chaos campaign (its JSON object) as JUnit testsuites, one per store of the campaign."""
    cut_short = campaign.get("stopped") is not None
    suites = []
    for store, tally in campaign["summary"]["stores"].items():
        classname = f"chaos.{store}"
        properties = {"seed": campaign["seed"], "expected": tally["expected"], "scenarios": tally["scenarios"],
                      "failed": tally["failed"], "status": tally["status"]}
        if not tally["scenarios"]:
            suites.append(Suite(store, [Case("not_run", classname, SKIPPED,
                                             f"{store}: not reached before the campaign ended; not judged")],
                                properties))
            continue
        results = [r for r in campaign["scenarios"] if r["store"] == store]
        scenarios = [_scenario(r, f"scenario {r.get('index', '?')}") for r in results]
        expected_fail = tally["expected"] == "fail"
        cases = check_cases(classname, CHECKS, scenarios, len(results), expected_to_fail=expected_fail)
        cases.append(completed_case(classname, scenarios, len(results)))
        if expected_fail:
            cases.append(_caught_case(classname, store, tally, cut_short))
        suites.append(Suite(store, cases, properties))
    return suites


def run_suites(result: dict) -> list[Suite]:
    """One scenario (``eos-harness run``): its store's testsuite. A failure is a failure here, mutant
    or not, as the command's exit code says."""
    classname = f"run.{result['store']}"
    scenario = _scenario(result, "scenario")
    cases = check_cases(classname, CHECKS, [scenario], 1)
    cases.append(completed_case(classname, [scenario], 1))
    return [Suite(result["store"], cases, {"seed": result["seed"], "verdict": result["verdict"]})]

