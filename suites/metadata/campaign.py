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
from eos_harness.suites.metadata.plan import expected, expected_to_fail
from eos_harness.suites.metadata.runner import SYSTEMS, ScheduleError

__all__ = ["SUITE", "campaign_exit_code", "run_campaign", "summarize"]

SUITE = "metadata"  # how campaign.json names this suite (``--suite metadata``)
CHILDREN_LOG = "children.log"  # in the run directory: the controllers' and readers' stdout and stderr


def run_campaign(seed: int, out_dir: Path, minutes: float | None = None, scenarios: int | None = None,
                 workers: int = 2, on_result: Callable[[dict], None] = lambda r: None,
                 broker: BrokerSpec | str = EMBEDDED, systems: tuple[str, ...] | None = None,
                 until_failure: bool = False, resume: bool = False, outputs: dict | None = None) -> dict:
    """Run a campaign (:func:`eos_harness.suite_campaign.run_suite_campaign`: the suite's plan and runner on
    the shared campaign loop); returns the chaos JSON object (``suite``, ``seed``, ``scenarios``, ``summary``).

    As every campaign: the options are kept in ``out_dir`` (with ``outputs``: the JSON and JUnit paths),
    ``resume`` continues the stopped campaign of ``out_dir`` (the same plan) with the scenarios that have no
    result yet, and for ``minutes`` the time it had left; ``until_failure`` stops at the first failure of
    the real controller (of any system when only mutants run). ``broker``: the broker the metadata log is on,
    opened (its name as asked is what the campaign keeps)."""
    from eos_harness.suite import suite
    from eos_harness.suite_campaign import run_suite_campaign

    broker = parse(broker, internal=True)
    options = {"systems": list(systems or SYSTEMS), "broker": broker.cli_text}
    return run_suite_campaign(suite(SUITE), seed, options, out_dir, minutes=minutes, scenarios=scenarios,
                              workers=workers, on_result=on_result, until_failure=until_failure, resume=resume,
                              outputs=outputs, running={"opened": broker}, log=out_dir / CHILDREN_LOG,
                              fatal=(ScheduleError,))


def summarize(results: list[dict], systems: tuple[str, ...] = SYSTEMS) -> dict:
    """The campaign's summary (:func:`eos_harness.campaign_summary.summarize`), a tally per system; a
    mutant is caught only by the check that names its mistake (:data:`MUTANTS`)."""
    return campaign_summary.summarize(results, systems, "system", "systems", expected_to_fail,
                                      caught_by=lambda system: expected(system)[1] or None)


def campaign_exit_code(campaign: dict) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`)."""
    return campaign_summary.campaign_exit_code(campaign, "systems")
