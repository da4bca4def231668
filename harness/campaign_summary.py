"""How a campaign is judged, the same for every suite: a tally per subject (a store, a metadata
system, a Spark sink), the ``summary`` of the campaign JSON, and the campaign's exit code.

A subject expected to pass (a real store) must pass every scenario. One expected to fail (a mutant,
an unsafe variant) must be caught: fail at least one scenario and, when it names the check that
must catch it, fail by that check (caught only by other checks is a hole in the harness, as is
never caught). Either is an unexpected result (exit 1). Only a subject that ran is judged: one the
campaign's budget did not reach is "not run", never unexpected; one whose every scenario ended in
``error`` was not tested. A scenario that could not be run to its end, a scheduled fault that could
not be injected, or a campaign stopped early means the campaign did not test what it planned (exit 3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from eos_harness.campaign import UNTIL_FAILURE, error_lines, points_hit
from eos_harness.commands import command_line
from eos_harness.verdict import ERROR, FAIL, exit_code

__all__ = ["Tally", "campaign_exit_code", "campaign_repro", "summarize"]

Judge = Callable[[dict], str]  # a result -> its verdict (Spark's judges at-least-once duplicates under --strict)


def _recorded(result: dict) -> str:
    return result["verdict"]


def not_applicable_checks(value) -> dict[str, str]:
    """A result's ``not_applicable`` as check -> why: most suites give that mapping; the offsets suite lists
    each scenario that does not apply to the store (``{"scenario", "checks", "reason"}``)."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {check: f"scenario {entry['scenario']}: {entry['reason']}" for entry in value
            for check in entry.get("checks", [])}


@dataclass
class Tally:
    """What a campaign's scenarios of one subject showed."""

    subject: str
    expected_fail: bool
    caught_by: str | tuple[str, ...] | None = None  # the check (or checks, any one) that must catch a mutant; None: any
    total: int = 0
    failed: int = 0
    errors: int = 0  # scenarios that could not be run to their end
    checks: dict[str, int] = field(default_factory=dict)  # check -> scenarios it fired in
    caught_by_its_check: int = 0
    first_catch: int | None = None  # how many of its scenarios ran, in plan order, up to its first failure
    exercised: Counter = field(default_factory=Counter)  # check -> scenarios that met its condition
    not_applicable: dict[str, str] = field(default_factory=dict)  # check -> why it cannot fire on the subject

    def add(self, result: dict, verdict: str) -> None:
        self.total += 1
        self.exercised.update(result.get("exercised", []))
        self.not_applicable.update(not_applicable_checks(result.get("not_applicable")))
        if verdict == ERROR:
            self.errors += 1
        if verdict == FAIL:
            self.failed += 1
            if self.first_catch is None:
                self.first_catch = self.total
            fired = list(dict.fromkeys(v["check"] for v in result["violations"]))  # in the order they fired
            for check in fired:
                self.checks[check] = self.checks.get(check, 0) + 1
            named = (self.caught_by,) if isinstance(self.caught_by, str) else self.caught_by or ()
            self.caught_by_its_check += bool(set(fired).intersection(named))

    @property
    def caught(self) -> bool:
        return bool(self.caught_by_its_check if self.caught_by else self.failed)

    @property
    def unexpected(self) -> bool:
        """Judged only over the scenarios that ran to their end: a subject whose every scenario ended in
        ``error`` was not tested (the campaign exits 3, not 1)."""
        return self.total > self.errors and (not self.caught if self.expected_fail else self.failed > 0)

    @property
    def status(self) -> str:
        if not self.total:
            return "not run"
        if self.expected_fail:
            if self.caught:
                return "caught"
            return "CAUGHT BY OTHER CHECKS" if self.failed else "ERROR" if self.errors else "NOT CAUGHT"
        return "FAILED" if self.failed else "ERROR" if self.errors else "ok"

    def to_json(self, checks: Iterable[str] = ()) -> dict:
        """The tally as the summary shows it; with the suite's ``checks``, the scenarios that met each
        one's condition (``exercised``), those no scenario met (``not_exercised``: never passed) and those
        that cannot fire on the subject (``not_applicable``: check -> why; a check some scenario exercised
        is never one)."""
        checks = list(checks)
        not_applicable = {c: why for c, why in self.not_applicable.items() if c in checks and not self.exercised[c]}
        applying = [c for c in checks if c not in not_applicable]
        coverage = {"exercised": {c: self.exercised[c] for c in applying},
                    "not_exercised": [c for c in applying if self.total and not self.exercised[c]],
                    "not_applicable": not_applicable} if checks else {}
        caught_by = self.caught_by if not isinstance(self.caught_by, tuple) else " or ".join(self.caught_by)
        return {"expected": "fail" if self.expected_fail else "pass", "caught_by": caught_by,
                "scenarios": self.total, "failed": self.failed, "caught_by_its_check": self.caught_by_its_check,
                "errors": self.errors, "status": self.status, "checks": self.checks, **coverage,
                **({"scenarios_to_first_catch": self.first_catch} if self.expected_fail else {})}


def summarize(results: list[dict], subjects: Iterable[str], subject: str, tallies_key: str,
              expected_to_fail: Callable[[str], bool],
              caught_by: Callable[[str], str | tuple[str, ...] | None] = lambda s: None,
              judge: Judge = _recorded, checks: Iterable[str] = (),
              not_applicable: Mapping[str, Mapping[str, str]] | None = None) -> dict:
    """A campaign's ``summary``: counts, the crash points hit, the faults that could not be injected,
    the scenarios that could not be run to their end (``errors``: a line each, with its replay), the
    tally of each of ``subjects`` (under ``tallies_key``; ``subject``: the results' field naming it;
    with the suite's ``checks``, the scenarios whose result lists each in its ``exercised``), the
    ``unexpected`` subjects and those ``not_run``; ``not_applicable``: per subject, the checks that cannot
    fire on it, with why (what it declares), besides those its scenarios' results name)."""
    tallies = {s: Tally(s, expected_to_fail(s), caught_by(s) if expected_to_fail(s) else None,
                        not_applicable=dict((not_applicable or {}).get(s, {}))) for s in subjects}
    checks = list(checks)
    fault_errors: list[str] = []
    verdicts = [judge(r) for r in results]
    for r, verdict in zip(results, verdicts, strict=True):
        tallies[r[subject]].add(r, verdict)
        fault_errors.extend(f"scenario {r.get('index', '?')}: {e}" for e in r.get("fault_errors", []))
    return {
        "total": len(results),
        "failed": verdicts.count(FAIL),
        "points_hit": points_hit(results),
        "fault_errors": fault_errors,
        "errors": error_lines([r for r, v in zip(results, verdicts, strict=True) if v == ERROR], subject),
        tallies_key: {s: t.to_json(checks) for s, t in tallies.items()},
        "unexpected": sorted(s for s, t in tallies.items() if t.unexpected),
        "not_run": sorted(s for s, t in tallies.items() if not t.total),  # not reached: not judged
    }


def campaign_exit_code(campaign: dict, tallies_key: str, judge: Judge = _recorded) -> int:
    """The exit code of a campaign (:func:`eos_harness.verdict.exit_code`): 1 for an unexpected result,
    else 3 if it did not test what it planned (a scenario that could not be run to its end, a scheduled
    fault that could not be injected, a campaign stopped early or whose JSON could not be written), else 0.
    A campaign stopped early is judged on the subjects expected to pass only: a mutant not yet caught
    says nothing. Stopped by ``--until-failure``, it ran as asked: not incomplete."""
    summary = campaign["summary"]
    stopped = campaign.get("stopped")
    cut_short = stopped is not None or bool(campaign.get("json_error"))
    unexpected = [s for s in summary["unexpected"]
                  if not cut_short or summary[tallies_key][s]["expected"] == "pass"]
    incomplete = (cut_short and (stopped or {}).get("why") != UNTIL_FAILURE) or bool(campaign.get("json_error"))
    return exit_code([judge(r) for r in campaign["scenarios"]], unexpected=bool(unexpected),
                     incomplete=incomplete or bool(summary.get("fault_errors")))


def campaign_repro(state: dict, options: tuple[str, ...]) -> str:
    """The command that runs a campaign's plan again: ``eos-harness chaos --suite SUITE`` with the
    ``options`` of its kept ``state`` that decide the plan (a list comma-joined, a flag when true)."""
    words: list[object] = ["chaos", "--suite", state["suite"]]
    for name in options:
        value = state.get(name)
        if value is None or value is False or value == []:
            continue
        flag = "--" + name.replace("_", "-")
        words += [flag] if value is True else [flag, ",".join(map(str, value)) if isinstance(value, list) else value]
    return command_line(*words)
