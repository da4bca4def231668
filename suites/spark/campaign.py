"""The Spark suite's campaign: the plan's scenarios run, and judged.

A scenario of a real sink must pass; the mutant sink must fail. Which results are unexpected is
decided by :func:`unexpected` from the verdict's fields (each violation's ``check`` and
``strict_only``, the verdict word), never from the text of a finding.
"""

from __future__ import annotations

from pathlib import Path

from eos_harness.campaign import UNTIL_FAILURE, KeptCampaign, run_plan
from eos_harness.suites.spark.plan import MATRIX_SINKS, MUTANT_SINK, matrix, plan
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, Violation, exit_code, verdict_of

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
    from eos_harness.suites.spark.runner import error_result, run_spark_scenario

    kept = KeptCampaign.start(out, {"suite": SUITE, "seed": seed, "minutes": minutes, "scenarios": count,
                                    "source": source, "strict": strict, "workers": workers, "sinks": list(sinks),
                                    "until_failure": until_failure, **(options or {})}, resume)
    recorded = kept.recorded(on_result or (lambda result: None))

    def stop_after(result: dict) -> str | None:
        if not until_failure or result["expected"] == "caught" or judge(result, strict) != FAIL:
            return None
        return (f"stopped at the first unexpected failure (--until-failure): scenario {result['index']} "
                f"({result['pipeline']}/{result['sink']}); replay: {result['repro']}")

    def expected(scenario) -> str:
        return "caught" if scenario.sink == MUTANT_SINK else "pass"

    def one(i: int, scenario) -> dict:
        result = run_spark_scenario(scenario, out / f"{i:03d}-{scenario.pipeline}-{scenario.sink}", kafka=kafka)
        result["expected"] = expected(scenario)
        return result

    def error(scenario, exc: BaseException) -> dict:
        return {**error_result(scenario, exc), "expected": expected(scenario)}

    def more(count_started: int) -> bool:  # the first scenario always runs, however short --minutes is
        return minutes is None or not count_started or kept.seconds <= minutes * 60

    run = run_plan(plan(seed, count, source, sinks=sinks, strict=strict), one, workers=workers, more=more,
                   error_result=error, on_result=recorded, results_file=out / "results.jsonl",
                   skip=kept.skip, stop_after=stop_after)
    kept.end(stopped=run.stopped is not None)
    results = kept.results(run)
    campaign = {"suite": "spark", "seed": seed, "source": source, "sinks": list(sinks), "scenarios": results,
                "summary": summarize(results, strict, source, sinks),
                "seconds": round(kept.seconds, 1)}
    if until_failure:
        campaign["until_failure"] = True
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
    return campaign


def summarize(results: list[dict], strict: bool, source: str = "file", sinks: tuple[str, ...] = MATRIX_SINKS) -> dict:
    """The campaign's summary, from the results' fields."""
    verdicts = [judge(r, strict) for r in results]
    return {"total": len(results), "failed": verdicts.count(FAIL), "not_applicable": verdicts.count(NOT_APPLICABLE),
            "errors": verdicts.count(ERROR), "unexpected": [r["repro"] for r in results if unexpected(r, strict)],
            "matrix_size": len(matrix(source, sinks)) + 1,
            "duplicates": sum(r.get("duplicates", {}).get("count", 0) for r in results if r["sink"] == "kafka")}


def campaign_exit_code(campaign: dict, strict: bool) -> int:
    """The exit code of a campaign (:func:`eos_harness.verdict.exit_code`): 1 for an unexpected result,
    else 3 if it did not test what it planned (a scenario that could not be run to its end, a campaign
    stopped early or whose JSON could not be written), else 0. A campaign stopped early is judged on
    its real sinks only: a mutant not yet caught says nothing."""
    cut_short = campaign.get("stopped") is not None or bool(campaign.get("json_error"))
    broken = [r for r in campaign["scenarios"] if unexpected(r, strict) and not (cut_short and r["expected"] == "caught")]
    incomplete = (cut_short and (campaign.get("stopped") or {}).get("why") != UNTIL_FAILURE) or bool(
        campaign.get("json_error"))
    return exit_code([judge(r, strict) for r in campaign["scenarios"]], unexpected=bool(broken), incomplete=incomplete)
