"""How the metadata suite's chaos campaign is judged (it runs on the shared campaign loop,
:mod:`eos_harness.suite_campaign`, through the suite's plan and runner).

The real controller (and its readers) must pass every scenario. Each mutant must be caught, and by
the check that names its mistake (:data:`~eos_harness.suites.metadata.plan.MUTANTS`): a mutant
never caught, or caught only by other checks, is a hole in the harness. Either is an unexpected
result (exit 1). A system the campaign's budget did not reach is "not run", never unexpected. A
scenario that could not be run to its end means the campaign did not test what it planned (exit 3).
"""

from __future__ import annotations

from eos_harness import campaign_summary
from eos_harness.suites.metadata.plan import expected, expected_to_fail
from eos_harness.suites.metadata.runner import CHILDREN_LOG, SYSTEMS

__all__ = ["CHILDREN_LOG", "SUITE", "campaign_exit_code", "summarize"]

SUITE = "metadata"  # how campaign.json names this suite (``--suite metadata``)


def summarize(results: list[dict], systems: tuple[str, ...] = SYSTEMS) -> dict:
    """The campaign's summary (:func:`eos_harness.campaign_summary.summarize`), a tally per system; a
    mutant is caught only by the check that names its mistake (:data:`MUTANTS`)."""
    return campaign_summary.summarize(results, systems, "system", "systems", expected_to_fail,
                                      caught_by=lambda system: expected(system)[1] or None)


def campaign_exit_code(campaign: dict) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`)."""
    return campaign_summary.campaign_exit_code(campaign, "systems")
