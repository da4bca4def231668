"""The metadata suite's chaos campaign: the plan's scenarios on the campaign engine, and judged.

The real controller (and its readers) must pass every scenario. Each mutant must be caught, and by
the check that names its mistake (:data:`~eos_harness.suites.metadata.plan.MUTANTS`): a mutant
never caught, or caught only by other checks, is a hole in the harness. Either is an unexpected
result (exit 1). A system the campaign's budget did not reach is "not run", never unexpected. A
scenario that could not be run to its end means the campaign did not test what it planned (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.campaign import (
    UNTIL_FAILURE,
    KeptCampaign,
    budget,
    error_lines,
    points_hit,
    run_plan,
    until_failure_rule,
)
from eos_harness.process.server import children_output
from eos_harness.suites.metadata.plan import MUTANTS, expected_to_fail, plan
from eos_harness.suites.metadata.runner import REAL, SYSTEMS, ScheduleError, error_verdict, run_scenario
from eos_harness.verdict import ERROR, FAIL, exit_code

__all__ = ["SUITE", "campaign_exit_code", "run_campaign", "summarize"]

SUITE = "metadata"  # how campaign.json names this suite (``--suite metadata``)
CHILDREN_LOG = "children.log"  # in the run directory: the controllers' and readers' stdout and stderr


@dataclass
class SystemTally:
    system: str
    caught_by: str | None  # the check that must catch a mutant; None for the real controller
    total: int = 0
    failed: int = 0
    errors: int = 0
    checks: dict[str, int] = field(default_factory=dict)
    caught_by_its_check: int = 0

    @property
    def expected_fail(self) -> bool:
        return self.caught_by is not None

    @property
    def unexpected(self) -> bool:
        if self.total <= self.errors:
            return False
        return not self.caught_by_its_check if self.expected_fail else self.failed > 0

    @property
    def status(self) -> str:
        if not self.total:
            return "not run"
        if self.expected_fail:
            if self.caught_by_its_check:
                return "caught"
            return "CAUGHT BY OTHER CHECKS" if self.failed else "ERROR" if self.errors else "NOT CAUGHT"
        return "FAILED" if self.failed else "ERROR" if self.errors else "ok"


def run_campaign(seed: int, out_dir: Path, minutes: float | None = None, scenarios: int | None = None,
                 workers: int = 2, on_result: Callable[[dict], None] = lambda r: None,
                 broker: BrokerSpec | str = EMBEDDED, systems: tuple[str, ...] | None = None,
                 until_failure: bool = False, resume: bool = False, outputs: dict | None = None) -> dict:
    """Run a campaign; returns the chaos JSON object (``suite``, ``seed``, ``scenarios``, ``summary``).

    As the lifecycle campaign: the options are kept in ``out_dir`` (with ``outputs``: the JSON and JUnit
    paths), ``resume`` continues the stopped campaign of ``out_dir`` (the same plan) with the scenarios
    that have no result yet, and for ``minutes`` the time it had left; ``until_failure`` stops at the
    first failure of the real controller (of any system when only mutants run)."""
    systems = tuple(systems or SYSTEMS)
    if minutes is None and scenarios is None:
        minutes = 1.0
    broker = parse(broker, internal=True)
    kept = KeptCampaign.start(out_dir, {"suite": SUITE, "seed": seed, "systems": list(systems), "minutes": minutes,
                                        "scenarios": scenarios, "broker": broker.cli_text, "workers": workers,
                                        "until_failure": until_failure, **(outputs or {})}, resume)
    deadline = kept.started + minutes * 60 - kept.spent if minutes is not None else None

    def one(index: int, scenario) -> dict:
        return run_scenario(scenario, out_dir / f"scenario-{index:05d}", keep=False)

    stop_after = until_failure_rule(systems, expected_to_fail, "system") if until_failure else lambda result: None
    log = out_dir / CHILDREN_LOG
    with children_output(log):  # the controllers' and readers' output (a fenced zombie's client logs): resumed, appended
        run = run_plan(plan(seed, broker, systems), one, workers=workers, more=budget(scenarios, deadline),
                       error_result=error_verdict, on_result=kept.recorded(on_result),
                       results_file=out_dir / "results.jsonl", fatal=(ScheduleError,), skip=kept.skip,
                       stop_after=stop_after)
    kept.end(stopped=run.stopped is not None)
    results = kept.results(run)
    campaign = {"suite": SUITE, "seed": seed, "broker": broker.cli_text, "minutes": minutes,
                "scenarios": results, "summary": summarize(results, systems), "seconds": round(kept.seconds, 1),
                "log": str(log)}
    if until_failure:
        campaign["until_failure"] = True
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
    return campaign


def summarize(results: list[dict], systems: tuple[str, ...] = SYSTEMS) -> dict:
    tallies = {s: SystemTally(s, MUTANTS[s][1] if expected_to_fail(s) else None) for s in systems}
    for r in results:
        tally = tallies[r["system"]]
        tally.total += 1
        if r["verdict"] == ERROR:
            tally.errors += 1
        if r["verdict"] == FAIL:
            tally.failed += 1
            fired = {v["check"] for v in r["violations"]}
            for check in fired:
                tally.checks[check] = tally.checks.get(check, 0) + 1
            tally.caught_by_its_check += tally.caught_by in fired
    return {
        "total": len(results),
        "failed": sum(1 for r in results if r["verdict"] == FAIL),
        "points_hit": points_hit(results),
        "fault_errors": [],
        "errors": error_lines(results, "system"),
        "systems": {
            s: {"expected": "fail" if t.expected_fail else "pass", "caught_by": t.caught_by, "scenarios": t.total,
                "failed": t.failed, "caught_by_its_check": t.caught_by_its_check, "errors": t.errors,
                "status": t.status, "checks": t.checks}
            for s, t in tallies.items()
        },
        "unexpected": sorted(s for s, t in tallies.items() if t.unexpected),
        "not_run": sorted(s for s, t in tallies.items() if not t.total),
    }


def campaign_exit_code(campaign: dict) -> int:
    """1 for an unexpected result, else 3 if the campaign did not test what it planned (a scenario
    that could not be run to its end, a campaign stopped early, its JSON not written), else 0. A
    campaign stopped early is judged on the real controller only: a mutant not yet caught says nothing.
    Stopped by ``--until-failure``, it ran as asked: not incomplete."""
    summary = campaign["summary"]
    stopped = campaign.get("stopped")
    cut_short = stopped is not None or bool(campaign.get("json_error"))
    unexpected = [s for s in summary["unexpected"] if not cut_short or s == REAL]
    incomplete = (cut_short and (stopped or {}).get("why") != UNTIL_FAILURE) or bool(campaign.get("json_error"))
    return exit_code([r["verdict"] for r in campaign["scenarios"]], unexpected=bool(unexpected),
                     incomplete=incomplete)
