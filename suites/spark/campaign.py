"""The Spark suite's campaign: the plan's scenarios run, and judged."""

from __future__ import annotations

import time
from pathlib import Path

from eos_harness.campaign import run_plan
from eos_harness.rundir import claim
from eos_harness.suites.spark.plan import MATRIX_SINKS, MUTANT_SINK, matrix, plan


def run_campaign(seed: int, out: Path, minutes: float | None, count: int | None, source: str = "file",
                 strict: bool = False, on_result=None, workers: int = 1, sinks: tuple[str, ...] = MATRIX_SINKS,
                 kafka: str | None = None) -> dict:
    """Run :func:`plan`'s scenarios; ``kafka``: the broker of Kafka sources and sinks (needed when any is planned)."""
    from eos_harness.suites.spark.runner import run_spark_scenario

    started = time.monotonic()
    claim(out)

    def one(i: int, scenario) -> dict:
        result = run_spark_scenario(scenario, out / f"{i:03d}-{scenario.pipeline}-{scenario.sink}", kafka=kafka)
        result["expected"] = "caught" if scenario.sink == MUTANT_SINK else "pass"
        return result

    def error_result(scenario, exc: BaseException) -> dict:
        return {"pipeline": scenario.pipeline, "sink": scenario.sink, "configuration": scenario.configuration,
                "seed": scenario.seed, "schedule": list(scenario.schedule), "repro": scenario.repro(),
                "expected": "caught" if scenario.sink == MUTANT_SINK else "pass", "verdict": "error",
                "error": f"{type(exc).__name__}: {exc}", "violations": [], "crash_points": [], "crash_windows": []}

    def more(count_started: int) -> bool:  # the first scenario always runs, however short --minutes is
        return minutes is None or not count_started or time.monotonic() - started <= minutes * 60

    run = run_plan(plan(seed, count, source, sinks=sinks, strict=strict), one, workers=workers, more=more,
                   error_result=error_result, on_result=on_result or (lambda result: None),
                   results_file=out / "results.jsonl")
    results = run.results

    def strict_duplicates_only(r: dict) -> bool:  # --strict: the Kafka sink's duplicates fail, as documented
        return r["sink"] == "kafka" and all(v["check"] == "exactly_once_output" and "--strict" in str(v["observed"])
                                            for v in r["violations"])

    unexpected = [r["repro"] for r in results
                  if (r["expected"] == "pass" and r["verdict"] == "fail" and not strict_duplicates_only(r))
                  or (r["expected"] == "caught" and r["verdict"] != "fail")]
    campaign = {"suite": "spark", "seed": seed, "source": source, "sinks": list(sinks), "scenarios": results,
                "summary": {"total": len(results), "failed": sum(r["verdict"] == "fail" for r in results),
                            "not_applicable": sum(r["verdict"] == "not_applicable" for r in results),
                            "errors": sum(r["verdict"] == "error" for r in results),
                            "unexpected": unexpected, "matrix_size": len(matrix(source, sinks)) + 1,
                            "duplicates": sum(r.get("duplicates", {}).get("count", 0) for r in results
                                              if r["sink"] == "kafka")},
                "seconds": round(time.monotonic() - started, 1)}
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
    return campaign
