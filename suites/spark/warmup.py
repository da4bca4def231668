"""``python -m eos_harness.suites.spark.warmup``: the driver's class archive made before the Spark tests.

Every pipeline run starts a new driver JVM, which starts in about half the time from the class archive
of :mod:`eos_harness.spark.jvm`. Only a run that ends on its own can make it, and making it takes that
run 25 s to 90 s on a loaded 2-core machine; on a fresh checkout the Spark tests would run their first
scenarios without it and one of them would make it. ``make test`` runs this first instead: one short
run that ends on its own (the running count through the ``foreachBatch`` sink, 3 micro-batches, its
state read back), nothing else running. A no-op when the archive is there or turned off.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from eos_harness.spark.jvm import archive_path
from eos_harness.suites.spark.runner import SparkScenario, run_spark_scenario


def main() -> int:
    archive = archive_path()
    if archive is None:
        print("Spark driver class archive: off (EOS_HARNESS_SPARK_JVM=plain, or a JVM without the flags)")
        return 0
    if archive.exists():
        print(f"Spark driver class archive: {archive}")
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eos-spark-warmup-") as tmp:
        result = run_spark_scenario(SparkScenario("count", "foreach", batches=3, seed=1), Path(tmp) / "run")
    took = time.monotonic() - started
    if archive.exists():
        print(f"Spark driver class archive made in {took:.0f} s: {archive}")
    else:  # not fatal: the tests' runs make it then
        print(f"Spark driver class archive not made (run {result['verdict']}, {took:.0f} s): "
              f"{result.get('error') or 'another run may be making it'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
