"""Benchmark of a user's own Spark query judged against its crash-free run (``--pipeline module:function``).

The target: a query over 5 micro-batches, judged in all four commit windows (offsets, state, sink, commit)
for one state configuration, in under 3 minutes on 2 cores: the crash-free run once, then each window's
killed run and restart, two windows at a time (``eos_spark_pipeline.verify``). The query here is a
deduplicating windowed count to a Parquet file sink, written as a user would.

``python -m benchmarks.bench_spark_user [--workers 2]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

TARGET_S = 180.0


def build(source):
    from pyspark.sql import functions as F

    events = source.withColumn("at", F.timestamp_seconds("ts")).withWatermark("at", "10 seconds")
    return (events.dropDuplicates(["id", "at"]).groupBy(F.window("at", "10 seconds"), "key").count()
            .select("key", F.col("window.start").cast("long").alias("start"), "count")
            .writeStream.outputMode("append").format("parquet"))


def batches(count: int = 5) -> list[list[dict]]:
    out = []
    for n in range(count):
        rows = [{"id": n * 6 + i, "key": "abc"[i % 3], "ts": 1_000_000 + n * 10 + i} for i in range(6)]
        out.append([*rows, rows[0]])
    return out


def main() -> None:
    from eos_harness.suites.spark.pipeline_fixture import SparkPipelineFixture

    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-spark-user-") as tmp:
        started = time.monotonic()
        found = SparkPipelineFixture(Path(tmp)).verify("benchmarks.bench_spark_user:build", batches(), fail=False,
                                                       workers=args.workers)
        took = time.monotonic() - started
    print(found.table())
    print(f"5 micro-batches, 4 windows, one state configuration, {args.workers} at a time: {took:.0f} s "
          f"(crash-free run {found.results[0]['reference']['seconds']:.0f} s; verdict {found.verdict}; "
          f"aim < {TARGET_S:.0f} s: {'met' if took < TARGET_S else 'NOT met'})")
    print("  per window: " + json.dumps({r["schedule"][0]: r["seconds"] for r in found.results}))


if __name__ == "__main__":
    main()
