"""The metadata suite's chaos campaign: the plan's scenarios on the campaign engine, and judged.

The real controller (and its readers) must pass every scenario. Each mutant must be caught, and by
the check that names its mistake (:data:`~eos_harness.suites.metadata.plan.MUTANTS`): a mutant
never caught, or caught only by other checks, is a hole in the harness. Either is an unexpected
result (exit 1). A system the campaign's budget did not reach is "not run", never unexpected. A
scenario that could not be run to its end means the campaign did not test what it planned (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eos_harness import campaign_summary
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.campaign import KeptCampaign, budget, run_plan, until_failure_rule
from eos_harness.process.server import children_output
from eos_harness.suites.metadata.plan import MUTANTS, expected_to_fail, plan
from eos_harness.suites.metadata.runner import SYSTEMS, ScheduleError, error_verdict, run_scenario

__all__ = ["SUITE", "campaign_exit_code", "run_campaign", "summarize"]

SUITE = "metadata"  # how campaign.json names this suite (``--suite metadata``)
CHILDREN_LOG = "children.log"  # in the run directory: the controllers' and readers' stdout and stderr


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
                "repro": campaign_summary.campaign_repro(kept.state, ("systems", "minutes", "scenarios", "seed", "broker")),
                "scenarios": results, "summary": summarize(results, systems), "seconds": round(kept.seconds, 1),
                "log": str(log)}
    if until_failure:
        campaign["until_failure"] = True
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
    return campaign


def summarize(results: list[dict], systems: tuple[str, ...] = SYSTEMS) -> dict:
    """The campaign's summary (:func:`eos_harness.campaign_summary.summarize`), a tally per system; a
    mutant is caught only by the check that names its mistake (:data:`MUTANTS`)."""
    return campaign_summary.summarize(results, systems, "system", "systems", expected_to_fail,
                                      caught_by=lambda system: MUTANTS[system][1])


def campaign_exit_code(campaign: dict) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`)."""
    return campaign_summary.campaign_exit_code(campaign, "systems")
