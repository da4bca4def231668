"""JUnit XML of any suite's results, so that a CI system shows each broken promise where it shows
every other test failure.

The mapping, the same for every suite: a ``<testsuite>`` per store (or Spark pipeline
configuration), a ``<testcase>`` per check (promise) of the suite, named by the check. A check
that never fired is a passing testcase. A check that fired is a ``<failure>`` whose message names
the check, how many scenarios broke it, the first violation (key, expected, observed) and the
command that replays it; its text lists the first few scenarios with their violations and repro
commands. Scenarios that could not be run to their end are an ``<error>`` of the testcase
``completed``. The JUnit file agrees with the exit code: a failure a campaign expects (a mutant
caught) is not a JUnit failure but ``<skipped type="expected-failure">`` with the same evidence
(as pytest reports an ``xfail``), and a mutant that was *not* caught is the failure of its
testcase ``caught``.

The suites turn their results into :class:`Case` lists (``suites/<suite>/junit.py``); this module
groups violations and writes the file with ``junitparser``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["COMPLETED", "Case", "Scenario", "Suite", "check_cases", "completed_case", "result_scenario", "run_suites",
           "tally_suites", "write_junit"]

PASSED, FAILED, ERRORED, SKIPPED, EXPECTED_FAILURE = "passed", "failed", "error", "skipped", "expected-failure"
COMPLETED = "completed"  # the testcase that every scenario ran to its end (errors land here)
SHOWN_SCENARIOS = 5  # scenarios listed in a testcase's text
SHOWN_VIOLATIONS = 3  # violations listed per scenario
VALUE_CHARS = 300  # a key, expected or observed value is cut to this many characters


@dataclass(frozen=True)
class Case:
    """One ``<testcase>``: ``outcome`` one of passed, failed, error, skipped, expected-failure."""

    name: str
    classname: str
    outcome: str = PASSED
    message: str = ""
    text: str = ""
    seconds: float | None = None


@dataclass
class Suite:
    """One ``<testsuite>``: a store or a pipeline configuration, its checks as cases."""

    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """What a testcase says of one scenario: where it is in the plan, its replay command, its
    counted violations (as JSON dicts) and, for one that could not finish, why."""

    label: str  # "scenario 12", "run 0", …
    repro: str
    violations: Sequence[dict] = ()
    error: str | None = None


_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_safe(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold (NUL, other control characters) escaped."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + f"… ({len(text)} chars)"


def describe_violation(violation: dict, with_case: bool = True) -> str:
    """``key=… expected=… observed=… (event n)``, then the conformance case's steps when ``with_case``."""
    event = violation.get("event")
    where = f" (event {event})" if event is not None else ""
    case = violation.get("case") if with_case else None
    steps = f"\n      case: {_cut(case)}" if case else ""
    return (f"key={_cut(violation.get('key'))} expected={_cut(violation.get('expected'))} "
            f"observed={_cut(violation.get('observed'))}{where}{steps}")


def _scenario_lines(scenarios: Sequence[Scenario], check: str | None) -> str:
    lines = []
    for scenario in scenarios[:SHOWN_SCENARIOS]:
        lines.append(f"{scenario.label}: {scenario.repro}")
        if scenario.error is not None:
            lines.append(f"    error: {_cut(scenario.error)}")
        mine = [v for v in scenario.violations if check is None or v.get("check") == check]
        lines.extend(f"    {v.get('check')}: {describe_violation(v)}" for v in mine[:SHOWN_VIOLATIONS])
        if len(mine) > SHOWN_VIOLATIONS:
            lines.append(f"    … {len(mine) - SHOWN_VIOLATIONS} more violation(s) of {check}")
    if len(scenarios) > SHOWN_SCENARIOS:
        lines.append(f"… {len(scenarios) - SHOWN_SCENARIOS} more scenario(s)")
    return "\n".join(lines)


def check_cases(classname: str, checks: Iterable[str], scenarios: Sequence[Scenario], total: int,
                expected_to_fail: bool = False, unit: str = "scenario", coverage: Mapping | None = None) -> list[Case]:
    """A case per check (``checks`` first, in their order, then any other check that fired): passed
    when no scenario broke it, else failed (``expected-failure`` for a store expected to fail) with
    the first violation and its replay command in the message; a check ``--allow`` waived (the coverage's
    ``waived``: check -> what was waived) is skipped, never passed. With the run's ``coverage``
    (:func:`eos_harness.verdict.check_coverage`), a check no case exercised is skipped, never passed,
    with its condition; one that does not apply to the store, skipped with why."""
    names = list(dict.fromkeys([*checks, *(v.get("check") for s in scenarios for v in s.violations)]))
    unexercised = dict((coverage or {}).get("not_exercised", {}))
    not_applicable = dict((coverage or {}).get("not_applicable", {}))
    waived = dict((coverage or {}).get("waived", {}))  # check -> what --allow waived of it (never passed)
    cases = []
    for check in names:
        broke = [s for s in scenarios if any(v.get("check") == check for v in s.violations)]
        if not broke and check in waived:
            cases.append(Case(check, classname, SKIPPED, f"waived: {waived[check]}"))
            continue
        if not broke and check in not_applicable:
            cases.append(Case(check, classname, SKIPPED, f"not applicable: {not_applicable[check]}"))
            continue
        if not broke and check in unexercised:
            cases.append(Case(check, classname, SKIPPED, f"not exercised: no {unit} met its condition "
                                                          f"({unexercised[check]})"))
            continue
        if not broke:
            cases.append(Case(check, classname))
            continue
        first = next(v for v in broke[0].violations if v.get("check") == check)
        outcome = EXPECTED_FAILURE if expected_to_fail else FAILED
        prefix = "expected failure (caught): " if expected_to_fail else ""
        message = (f"{prefix}{check} broken in {len(broke)} of {total} {unit}(s); first: "
                   f"{describe_violation(first, with_case=False)}; replay: {broke[0].repro}")
        cases.append(Case(check, classname, outcome, message, _scenario_lines(broke, check)))
    return cases


def completed_case(classname: str, scenarios: Sequence[Scenario], total: int) -> Case:
    """The case ``completed``: an error when some scenario could not be run to its end (or a
    scheduled fault could not be injected: ``error`` set on its :class:`Scenario`)."""
    cut = [s for s in scenarios if s.error is not None]
    if not cut:
        return Case(COMPLETED, classname)
    message = (f"{len(cut)} of {total} scenario(s) could not be run to their end; first: "
               f"{_cut(cut[0].error)}; replay: {cut[0].repro}")
    return Case(COMPLETED, classname, ERRORED, message, _scenario_lines(cut, None))


def result_scenario(result: dict, label: str) -> Scenario:
    """A verdict object of the lifecycle's shape (lifecycle, metadata) as a :class:`Scenario`: its
    error, and any scheduled fault that could not be injected, make it one that did not finish."""
    problems = ([result["error"]] if result["verdict"] == "error" and result.get("error") else []) + [
        f"a scheduled fault could not be injected: {e}" for e in result.get("fault_errors", [])]
    return Scenario(label, result["repro"], result["violations"], "; ".join(problems) or None)


def _waived(campaign: dict, tally: dict) -> dict[str, str]:
    """The checks a campaign's ``--allow`` waived, each with how often it fired in a subject's scenarios."""
    fired, scenarios = tally.get("waived", {}), tally.get("waived_scenarios", {})
    return {check: f"--allow {check}: fired {fired.get(check, 0)} time(s) in {scenarios.get(check, 0)} of "
                   f"{tally['scenarios']} scenario(s); not judged" for check in campaign.get("allow") or ()}


def _caught_case(classname: str, name: str, tally: dict, cut_short: bool) -> Case:
    """The testcase ``caught`` of a subject expected to fail: passed when its tally's status is
    ``caught``; skipped when it was not judged (its checks allowed, every scenario an error, the campaign
    stopped first); else failed (a hole in the harness)."""
    if tally["status"] == "caught":
        return Case("caught", classname)
    if tally.get("not_exercised_why"):
        return Case("caught", classname, SKIPPED, f"{name}: not exercised: {tally['not_exercised_why']}")
    if tally["failed"] and tally.get("caught_by"):
        return Case("caught", classname, FAILED,
                    f"{name} failed {tally['failed']} scenario(s), but never {tally['caught_by']}, the check that "
                    "names its mistake (caught by other checks only: a hole in the harness)")
    if tally["scenarios"] == tally["errors"]:
        return Case("caught", classname, SKIPPED, f"{name}: every scenario ended in error; not judged")
    if cut_short:
        return Case("caught", classname, SKIPPED, f"{name}: not caught before the campaign stopped; not judged")
    return Case("caught", classname, FAILED,
                f"{name} is expected to fail (a mutant or unsafe variant) but passed all {tally['scenarios']} "
                "scenario(s): no check caught it (a hole in the harness); run a longer campaign or add a check")


def tally_suites(campaign: dict, checks: Iterable[str], subject: str, tallies: dict[str, dict]) -> list[Suite]:
    """A campaign's results (of the lifecycle's shape: ``subject`` names what each result ran, ``store`` or
    ``system``) as a testsuite per entry of its summary's ``tallies`` (``expected``, ``scenarios``,
    ``failed``, ``errors``, ``status``): a case per check, ``completed`` and, for one expected to fail,
    ``caught`` (:func:`_caught_case`)."""
    cut_short = campaign.get("stopped") is not None
    suites = []
    for name, tally in tallies.items():
        classname = f"chaos.{name}"
        properties = {"seed": campaign["seed"], "expected": tally["expected"], "scenarios": tally["scenarios"],
                      "failed": tally["failed"], "status": tally["status"]}
        if not tally["scenarios"]:
            suites.append(Suite(name, [Case("not_run", classname, SKIPPED,
                                            f"{name}: not reached before the campaign ended; not judged")],
                                properties))
            continue
        results = [r for r in campaign["scenarios"] if r[subject] == name]
        scenarios = [result_scenario(r, f"scenario {r.get('index', '?')}") for r in results]
        expected_fail = tally["expected"] == "fail"
        # a check no scenario of this subject exercised is skipped with its condition, never passed
        meanings = checks if isinstance(checks, Mapping) else {}
        coverage = {"not_exercised": {c: f"the condition of: {meanings[c]}" if c in meanings else "its condition" for c in tally.get("not_exercised", [])},
                    "not_applicable": tally.get("not_applicable", {}), "waived": _waived(campaign, tally)}
        cases = check_cases(classname, checks, scenarios, len(results), expected_to_fail=expected_fail,
                            coverage=coverage)
        cases.append(completed_case(classname, scenarios, len(results)))
        if expected_fail:
            cases.append(_caught_case(classname, name, tally, cut_short))
        suites.append(Suite(name, cases, properties))
    return suites


def run_suites(result: dict, checks: Iterable[str], subject: str) -> list[Suite]:
    """One scenario (``eos-harness run``) of the lifecycle's shape: its ``subject``'s testsuite. A failure
    is a failure here, mutant or not, as the command's exit code says. A check the run did not exercise (its
    ``coverage``) is skipped with its condition, never passed."""
    classname = f"run.{result[subject]}"
    scenario = result_scenario(result, "scenario")
    waived = {c: f"--allow {c}: fired {result.get('waived', {}).get(c, 0)} time(s); not judged"
              for c in result.get("allowed") or ()}
    coverage = {**(result.get("coverage") or {}), **({"waived": waived} if waived else {})}
    cases = check_cases(classname, checks, [scenario], 1, coverage=coverage or result.get("coverage"))
    cases.append(completed_case(classname, [scenario], 1))
    return [Suite(result[subject], cases, {"seed": result["seed"], "verdict": result["verdict"]})]


def write_junit(path: str | Path, suites: Sequence[Suite], name: str) -> str | None:
    """Write the JUnit XML file (via a temporary file renamed into place); returns why it could not
    be written, or None."""
    from eos_harness.rundir import write_text
    from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

    xml = JUnitXml(name)
    for suite in suites:
        junit_suite = TestSuite(suite.name)
        for key, value in suite.properties.items():
            junit_suite.add_property(key, str(value))
        for case in suite.cases:
            testcase = TestCase(case.name, case.classname, case.seconds)
            message = _xml_safe(case.message)
            if case.outcome == FAILED:
                testcase.result = [Failure(message, "violation")]
            elif case.outcome == ERRORED:
                testcase.result = [Error(message, "error")]
            elif case.outcome in (SKIPPED, EXPECTED_FAILURE):
                testcase.result = [Skipped(message, case.outcome)]
            if case.text and testcase.result:
                testcase.result[0].text = _xml_safe(case.text)
            junit_suite.add_testcase(testcase)
        junit_suite.update_statistics()
        xml.add_testsuite(junit_suite)
    xml.update_statistics()
    buffer = io.BytesIO()
    xml.write(buffer)
    try:
        write_text(Path(path), buffer.getvalue().decode("utf-8"))
    except OSError as exc:
        return f"could not write {path}: {exc.strerror or exc}"
    return None
