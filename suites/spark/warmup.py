"""The driver's class archive, made once before a session's first Spark test (``python -m
eos_harness.suites.spark.warmup`` makes it ahead of time).

Every pipeline run starts a new driver JVM, which starts in about half the time from the class archive
of :mod:`eos_harness.spark.jvm`. Only a run that ends on its own can make it, and making it takes that
run 25 s to 90 s on a loaded 2-core machine; on a fresh checkout the Spark tests would run their first
scenarios without it and one of them would make it. The repository's tests call :func:`make_archive`
before their first Spark test instead (conftest.py), under a lock that a second pytest-xdist worker
waits on: one short run that ends on its own (the running count through the ``foreachBatch`` sink, 3
micro-batches, its state read back), while the other worker runs tests without Spark. A no-op when the
archive is there or turned off.
"""

from __future__ import annotations

import fcntl
import sys
import tempfile
import time
from pathlib import Path

from eos_harness.spark.jvm import archive_path
from eos_harness.suites.spark.runner import SparkScenario, run_spark_scenario


def make_archive() -> str:
    """Make the archive unless it is there or off (one process at a time: a second one waits for the
    first, then finds it made); what happened, in a line."""
    archive = archive_path()
    if archive is None:
        return "Spark driver class archive: off (EOS_HARNESS_SPARK_JVM=plain, or a JVM without the flags)"
    if archive.exists():
        return f"Spark driver class archive: {archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / f"{archive.stem}.warmup.lock", "a") as lock:  # left in the cache, like the archive
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, or by the kernel if this process dies
        if archive.exists():
            return f"Spark driver class archive: {archive} (made by another process meanwhile)"
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="eos-spark-warmup-") as tmp:
            result = run_spark_scenario(SparkScenario("count", "foreach", batches=3, seed=1), Path(tmp) / "run")
    took = time.monotonic() - started
    if archive.exists():
        return f"Spark driver class archive made in {took:.0f} s: {archive}"
    # not fatal: the tests' runs make it then
    return (f"Spark driver class archive not made (run {result['verdict']}, {took:.0f} s): "
            f"{result.get('error') or 'another run may be making it'}")


def main() -> int:
    print(make_archive())
    return 0


if __name__ == "__main__":
    sys.exit(main())
