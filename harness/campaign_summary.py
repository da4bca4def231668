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
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from eos_harness.campaign import UNTIL_FAILURE, error_lines, points_hit
from eos_harness.commands import command_line
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, exit_code

__all__ = ["NOT_EXERCISED", "Tally", "campaign_exit_code", "campaign_repro", "summarize", "waived_lines"]

Judge = Callable[[dict], str]  # a result -> its verdict (Spark's judges at-least-once duplicates under --strict)
NOT_EXERCISED = "not exercised"  # the status of a mutant every check naming its mistake was allowed, or of a subject
# none of whose scenarios applied (not judged)
REPEATED = frozenset({"allow"})  # kept options given once per value (``--allow A --allow B``), not comma-joined


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
    inapplicable: int = 0  # scenarios that did not apply to it (nothing judged: e.g. a configuration Spark refuses)
    checks: dict[str, int] = field(default_factory=dict)  # check -> scenarios it fired in
    caught_by_its_check: int = 0
    first_catch: int | None = None  # how many of its scenarios ran, in plan order, up to its first failure
    exercised: Counter = field(default_factory=Counter)  # check -> scenarios that met its condition
    not_applicable: dict[str, str] = field(default_factory=dict)  # check -> why it cannot fire on the subject
    allowed: tuple[str, ...] = ()  # the checks the campaign waived (``--allow``)
    waived: Counter = field(default_factory=Counter)  # allowed check -> times it fired (waived)
    waived_in: Counter = field(default_factory=Counter)  # allowed check -> scenarios it fired in
    # a mutant every check that names its mistake was allowed: why no scenario could catch it (not judged)
    allowed_reason: str | None = None

    def add(self, result: dict, verdict: str) -> None:
        self.total += 1
        self.exercised.update(result.get("exercised", []))
        for check, times in (result.get("waived") or {}).items():
            if times:
                self.waived[check] += times
                self.waived_in[check] += 1
        self.not_applicable.update(not_applicable_checks(result.get("not_applicable")))
        if verdict == ERROR:
            self.errors += 1
        if verdict == NOT_APPLICABLE:
            self.inapplicable += 1
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
    def allowed_out(self) -> str | None:
        """Why a mutant is not judged because of ``--allow``: every check that names its mistake was allowed;
        or, caught by any check, it failed no scenario but an allowed check fired in some (its mistake showed
        only there). None: it is judged."""
        if self.allowed_reason is not None:
            if self.failed:  # its own checks could not fire, others did: say so, not that nothing could catch it
                fired = ", ".join(f"{c}×{n}" for c, n in self.checks.items())
                return (f"{self.allowed_reason}, so it is not judged by its own; it failed {self.failed} scenario(s) "
                        f"on other checks ({fired})")
            return f"{self.allowed_reason}, so no scenario of this campaign could catch it (not judged)"
        if not self.expected_fail or self.caught_by or self.failed:
            return None
        fired = [c for c in self.allowed if self.waived[c]]
        if not fired:
            return None
        return (f"its mistake showed only in {' and '.join(fired)}, allowed (--allow), so no scenario of this "
                "campaign could catch it (not judged)")

    @property
    def caught(self) -> bool:
        return bool(self.caught_by_its_check if self.caught_by else self.failed)

    @property
    def unexpected(self) -> bool:
        """Judged only over the scenarios that ran to their end: a subject whose every scenario ended in
        ``error`` was not tested (the campaign exits 3, not 1); a mutant whose checks were all allowed is
        not judged (no scenario could catch it)."""
        if self.expected_fail and self.allowed_out:
            return False
        return self.total > self.errors and (not self.caught if self.expected_fail else self.failed > 0)

    @property
    def status(self) -> str:
        if not self.total:
            return "not run"
        if self.inapplicable == self.total:  # none of its scenarios applied: nothing was judged, not "ok"
            return NOT_EXERCISED
        if self.expected_fail and self.allowed_out:
            return NOT_EXERCISED
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
        waived = {"waived": {c: self.waived[c] for c in self.allowed if self.waived[c]},
                  "waived_scenarios": {c: self.waived_in[c] for c in self.allowed if self.waived_in[c]}} \
            if self.allowed else {}
        return {"expected": "fail" if self.expected_fail else "pass", "caught_by": caught_by,
                "scenarios": self.total, "failed": self.failed, "caught_by_its_check": self.caught_by_its_check,
                "errors": self.errors, "status": self.status, "checks": self.checks, **coverage, **waived,
                **({"not_exercised_why": self.allowed_out} if self.expected_fail and self.allowed_out else {}),
                **({"scenarios_to_first_catch": self.first_catch} if self.expected_fail else {})}


def _allowing(caught_by: str | tuple[str, ...] | None, allowed: tuple[str, ...]) -> tuple[object, str | None]:
    """A mutant's ``caught_by`` with the ``allowed`` checks left out, and, when every check that names its
    mistake was allowed, why it is not judged (None when some check may still catch it)."""
    named = (caught_by,) if isinstance(caught_by, str) else tuple(caught_by or ())
    left = tuple(c for c in named if c not in allowed)
    if not named or left == named:
        return caught_by, None
    if left:
        return (left[0] if len(left) == 1 else left), None
    return caught_by, (f"its check{'s' if len(named) > 1 else ''} {' and '.join(named)} "
                       f"{'were' if len(named) > 1 else 'was'} allowed (--allow)")


def summarize(results: list[dict], subjects: Iterable[str], subject: str, tallies_key: str,
              expected_to_fail: Callable[[str], bool],
              caught_by: Callable[[str], str | tuple[str, ...] | None] = lambda s: None,
              judge: Judge = _recorded, checks: Iterable[str] = (),
              not_applicable: Mapping[str, Mapping[str, str]] | None = None, allowed: Iterable[str] = ()) -> dict:
    """A campaign's ``summary``: counts, the crash points hit, the faults that could not be injected,
    the scenarios that could not be run to their end (``errors``: a line each, with its replay), the
    tally of each of ``subjects`` (under ``tallies_key``; ``subject``: the results' field naming it;
    with the suite's ``checks``, the scenarios whose result lists each in its ``exercised``), the
    ``unexpected`` subjects and those ``not_run``; ``not_applicable``: per subject, the checks that cannot
    fire on it, with why (what it declares), besides those its scenarios' results name). ``allowed``: the
    checks the campaign waived (``--allow``): their totals (``waived``: times each fired; ``waived_scenarios``:
    scenarios it fired in), and a mutant every check naming its mistake was allowed is not exercised (not
    judged: ``not_exercised``, subject -> why)."""
    allowed = tuple(allowed)
    tallies = {}
    for s in subjects:
        named, out = _allowing(caught_by(s), allowed) if expected_to_fail(s) else (None, None)
        tallies[s] = Tally(s, expected_to_fail(s), named, not_applicable=dict((not_applicable or {}).get(s, {})),
                           allowed=allowed, allowed_reason=out)
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
        **(_waived_totals(tallies.values(), allowed) if allowed else {}),
    }


def _waived_totals(tallies: Iterable[Tally], allowed: tuple[str, ...]) -> dict:
    """What a campaign with ``--allow`` waived, in total: the checks allowed, the times each fired and the
    scenarios it fired in, and the mutants not exercised because their checks were allowed."""
    tallies = list(tallies)
    times = {c: sum(t.waived[c] for t in tallies) for c in allowed}
    scenarios = {c: sum(t.waived_in[c] for t in tallies) for c in allowed}
    return {"allowed": list(allowed), "waived": {c: n for c, n in times.items() if n},
            "waived_scenarios": {c: n for c, n in scenarios.items() if n},
            "not_exercised": {t.subject: t.allowed_out for t in tallies if t.expected_fail and t.allowed_out and t.total}}


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


def campaign_repro(state: dict, options: tuple[str, ...], negatable: Collection[str] = ()) -> str:
    """The command that runs a campaign's plan again: ``eos-harness chaos --suite SUITE`` with the
    ``options`` of its kept ``state`` that decide the plan (a list comma-joined, a flag when true; one of
    ``negatable``, ``--NAME/--no-NAME``, as ``--no-NAME`` when false)."""
    words: list[object] = ["chaos", "--suite", state["suite"]]
    for name in options:
        value = state.get(name)
        flag = "--" + name.replace("_", "-")
        if value is False and name in negatable:
            words.append("--no-" + flag[2:])
            continue
        if value is None or value is False or value == []:
            continue
        if name in REPEATED:
            words += [word for item in value for word in (flag, item)]
            continue
        words += [flag] if value is True else [flag, ",".join(map(str, value)) if isinstance(value, list) else value]
    return command_line(*words)


def waived_lines(summary: dict) -> list[str]:
    """What a campaign with ``--allow`` waived, in total, and the mutants it left not exercised, a line each (the
    terminal and the report say the same)."""
    lines = []
    for check in summary.get("allowed", []):
        times, scenarios = summary["waived"].get(check, 0), summary["waived_scenarios"].get(check, 0)
        lines.append(f"waived: {check} (--allow; fired {times} time{'s' if times != 1 else ''} in {scenarios} of "
                     f"{summary['total']} scenarios)")
    for subject, why in summary.get("not_exercised", {}).items():
        lines.append(f"not exercised: {subject}: {why}")
    return lines
