"""The Spark suite's campaign: the plan's scenarios run, and judged.

A scenario of a real sink must pass; the mutant sink must fail. Which results are unexpected is
decided by :func:`unexpected` from the verdict's fields (each violation's ``check`` and
``strict_only``, the verdict word), never from the text of a finding.
"""

from __future__ import annotations

from pathlib import Path

from eos_harness import campaign_summary
from eos_harness.campaign import KeptCampaign, run_plan, until_failure_rule
from eos_harness.suites.spark.plan import MATRIX_SINKS, MUTANT_SINK, matrix
from eos_harness.suites.spark.plan import campaign as scenarios_of
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, Violation, verdict_of

SUITE = "spark"  # how campaign.json names this suite (``--suite spark``)

__all__ = ["SUITE", "campaign_exit_code", "counted_violations", "judge", "run_campaign", "summarize", "unexpected"]


def counted_violations(result: dict, strict: bool) -> list[dict]:
    """The violations of a scenario's result that fail its verdict (``strict_only`` ones only when ``strict``)."""
    return [v for v in result["violations"] if Violation.from_json(v).counts(strict)]


def judge(result: dict, strict: bool) -> str:
    """A scenario's verdict from its fields: ``not_applicable`` and ``error`` as recorded (nothing
    was judged), else :func:`verdict_of` its violations (duplicates of the at-least-once Kafka sink
    are ``strict_only``: they fail only under ``--strict``)."""
    if result["verdict"] in (NOT_APPLICABLE, ERROR):
        return result["verdict"]
    return verdict_of([Violation.from_json(v) for v in result["violations"]], strict)


def expected_to_fail(sink: str) -> bool:
    """The mutant sink must be caught; every real sink must pass."""
    return sink == MUTANT_SINK


def unexpected(result: dict, strict: bool) -> bool:
    """Whether a scenario's result is not the one expected: a real sink that failed, or the mutant
    sink (``expected: caught``) that was not caught."""
    verdict = judge(result, strict)
    if result["expected"] == "caught":
        return verdict != FAIL
    return verdict == FAIL


def run_campaign(seed: int, out: Path, minutes: float | None, count: int | None, source: str = "file",
                 strict: bool = False, on_result=None, workers: int = 1, sinks: tuple[str, ...] = MATRIX_SINKS,
                 kafka: str | None = None, until_failure: bool = False, resume: bool = False,
                 options: dict | None = None) -> dict:
    """Run :func:`plan`'s scenarios; ``kafka``: the broker of Kafka sources and sinks (needed when any is planned).

    As the lifecycle campaign: the options are kept in ``out`` (with ``options``: what else a resume
    needs, the broker and output paths), ``resume`` continues the stopped campaign of ``out`` with
    the scenarios that have no result yet, and ``until_failure`` stops at the first unexpected
    failure (a real sink failing; the mutant sink is expected to fail)."""
    from eos_harness.suites.spark.runner import error_result, run_one

    kept = KeptCampaign.start(out, {"suite": SUITE, "seed": seed, "minutes": minutes, "scenarios": count,
                                    "source": source, "strict": strict, "workers": workers, "sinks": list(sinks),
                                    "until_failure": until_failure, **(options or {})}, resume)
    recorded = kept.recorded(on_result or (lambda result: None))

    def expected(scenario) -> str:
        return "caught" if scenario.sink == MUTANT_SINK else "pass"

    def one(i: int, scenario) -> dict:
        result = run_one(scenario, out / f"{i:03d}-{scenario.pipeline}-{scenario.sink}", kafka=kafka)
        result["expected"] = expected(scenario)
        return result

    def error(scenario, exc: BaseException) -> dict:
        return {**error_result(scenario, exc), "expected": expected(scenario)}

    def more(count_started: int) -> bool:  # the first scenario always runs, however short --minutes is
        return minutes is None or not count_started or kept.seconds <= minutes * 60

    planned = scenarios_of(seed, {"scenarios": count, "source": source, "sinks": list(sinks), "strict": strict})
    run = run_plan(planned, one, workers=workers, more=more,
                   error_result=error, on_result=recorded, results_file=out / "results.jsonl",
                   skip=kept.skip, stop_after=until_failure_rule(_sinks(sinks), expected_to_fail, "sink",
                                                                 lambda result: judge(result, strict))
                   if until_failure else lambda result: None)
    kept.end(stopped=run.stopped is not None)
    results = kept.results(run)
    campaign = {"suite": SUITE, "seed": seed, "source": source, "sinks": list(sinks), "scenarios": results,
                "repro": campaign_summary.campaign_repro(kept.state, ("source", "minutes", "scenarios", "strict", "seed",
                                                                      "sinks", "broker")),
                "summary": summarize(results, strict, source, sinks),
                "seconds": round(kept.seconds, 1)}
    if until_failure:
        campaign["until_failure"] = True
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
    return campaign


def _sinks(sinks: tuple[str, ...]) -> list[str]:
    return [MUTANT_SINK, *(s for s in sinks if s != MUTANT_SINK)]


def summarize(results: list[dict], strict: bool, source: str = "file", sinks: tuple[str, ...] = MATRIX_SINKS) -> dict:
    """The campaign's summary (:func:`eos_harness.campaign_summary.summarize`), a tally per sink, each
    scenario judged from its fields (:func:`judge`); with the scenarios Spark refused, the size of the
    matrix and the duplicates of the at-least-once Kafka sink."""
    summary = campaign_summary.summarize(results, _sinks(sinks), "sink", "sinks", expected_to_fail,
                                         judge=lambda result: judge(result, strict))
    return {**summary, "not_applicable": [judge(r, strict) for r in results].count(NOT_APPLICABLE),
            "matrix_size": len(matrix(source, sinks)) + 1,
            "duplicates": sum(r.get("duplicates", {}).get("count", 0) for r in results if r["sink"] == "kafka")}


def campaign_exit_code(campaign: dict, strict: bool) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`), each scenario
    judged from its fields (:func:`judge`)."""
    return campaign_summary.campaign_exit_code(campaign, "sinks", lambda result: judge(result, strict))
