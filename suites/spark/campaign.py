"""The Spark suite's campaign: the plan's scenarios run, and judged."""

from __future__ import annotations

import time
from pathlib import Path

from eos_harness.suites.spark.plan import MATRIX_SINKS, MUTANT_SINK, matrix, plan


def run_campaign(seed: int, out: Path, minutes: float | None, count: int | None, source: str = "file",
                 strict: bool = False, on_result=None, workers: int = 1, sinks: tuple[str, ...] = MATRIX_SINKS,
                 kafka: str | None = None) -> dict:
    """Run :func:`plan`'s scenarios; ``kafka``: the broker of Kafka sources and sinks (needed when any is planned)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from eos_harness.suites.spark.runner import run_spark_scenario

    started = time.monotonic()
    results: list[dict] = []
    lock = threading.Lock()

    def one(i: int, scenario) -> None:
        if minutes is not None and i > 0 and time.monotonic() - started > minutes * 60:  # the first always runs
            return
        result = run_spark_scenario(scenario, out / f"{i:03d}-{scenario.pipeline}-{scenario.sink}", kafka=kafka)
        result["expected"] = "caught" if scenario.sink == MUTANT_SINK else "pass"
        result["index"] = i
        with lock:
            results.append(result)
            if on_result:
                on_result(result)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(one, i, s) for i, s in enumerate(plan(seed, count, source, sinks=sinks,
                                                                          strict=strict))]:
            future.result()
    def strict_duplicates_only(r: dict) -> bool:  # --strict: the Kafka sink's duplicates fail, as documented
        return r["sink"] == "kafka" and all(v["check"] == "exactly_once_output" and "--strict" in str(v["observed"])
                                            for v in r["violations"])

    unexpected = [r["repro"] for r in results
                  if (r["expected"] == "pass" and r["verdict"] == "fail" and not strict_duplicates_only(r))
                  or (r["expected"] == "caught" and r["verdict"] != "fail")]
    results.sort(key=lambda r: r["index"])
    return {"suite": "spark", "seed": seed, "source": source, "sinks": list(sinks), "scenarios": results,
            "summary": {"total": len(results), "failed": sum(r["verdict"] == "fail" for r in results),
                        "not_applicable": sum(r["verdict"] == "not_applicable" for r in results),
                        "unexpected": unexpected, "matrix_size": len(matrix(source, sinks)) + 1,
                        "duplicates": sum(r.get("duplicates", {}).get("count", 0) for r in results
                                          if r["sink"] == "kafka")},
            "seconds": round(time.monotonic() - started, 1)}
