"""Benchmarks of the Spark suite, measured in one run (real PySpark, local[2]).

1. Micro-batch latency (``offsets/N`` written → ``commits/N`` written, from the files' modification
   times) of the running count into the ``foreachBatch`` store sink, with and without the inotify
   watcher on the checkpoint and output directories (aim: overhead ≤ 5 %).
2. Seconds from a kill (right after ``commits/2``) to the first batch committed after the restart
   (a new driver JVM, the state loaded from the checkpoint).

``python -m benchmarks.bench_spark [--batches 12] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from eos_harness.suites.spark.runner import SparkScenario, run_spark_scenario


def batch_latencies(root: Path, name: str, batches: int, watch: bool) -> list[float]:
    measure: dict = {}
    scenario = SparkScenario("count", "foreach", "rocksdb", 1, False, "file", (), seed=5, batches=batches)
    result = run_spark_scenario(scenario, root / name, measure=measure, watch=watch)
    if result["verdict"] != "pass":
        raise RuntimeError(f"benchmark run failed: {result['violations'][:2]}")
    return [seconds for batch, seconds in measure["batch_latencies"] if batch >= 2]  # skip JIT warm-up batches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        root = Path(tmp)
        watched, unwatched = [], []
        for r in range(args.rounds):  # interleaved, so drift of the machine hits both alike
            unwatched += batch_latencies(root, f"plain-{r}", args.batches, watch=False)
            watched += batch_latencies(root, f"watched-{r}", args.batches, watch=True)
        plain, with_watcher = statistics.median(unwatched), statistics.median(watched)
        overhead = (with_watcher - plain) / plain * 100
        print(f"micro-batch latency, median of {len(unwatched)} batches: without watcher {plain * 1000:.0f} ms, "
              f"with watcher {with_watcher * 1000:.0f} ms, ratio {with_watcher / plain:.3f}, "
              f"overhead {overhead:+.1f} % (aim <= 5 %: {'met' if overhead <= 5 else 'NOT met'})")
        print(f"  means: {statistics.mean(unwatched) * 1000:.0f} ms vs {statistics.mean(watched) * 1000:.0f} ms")
        recoveries = []
        for r in range(args.rounds):
            scenario = SparkScenario("count", "foreach", "rocksdb", 1, False, "file", ("commit@2",), seed=5 + r)
            result = run_spark_scenario(scenario, root / f"kill-{r}")
            recoveries.append(result["runs"][1]["first_commit_s"])
        print(f"kill (after commits/2) to the first batch committed after the restart: "
              f"{', '.join(f'{s:.1f}' for s in recoveries)} s (median {statistics.median(recoveries):.1f} s)")


if __name__ == "__main__":
    main()
