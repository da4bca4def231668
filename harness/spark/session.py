"""A Spark session for DataFrame jobs over a run's Parquet datasets (``eos-harness check --engine spark``): on
``master``, its driver in this process with at most ``driver_memory`` of heap, its JVM's output in ``log``, its
temp files in the command's temp root; on ``local[…]`` or a loopback master it listens on 127.0.0.1 only, the
Spark UI off. Stopped, its JVM ended, when the block ends however it ends."""

from __future__ import annotations

import contextlib
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eos_harness.spark.engine import _environment, _loopback, _stop
from eos_harness.spark.jvm import driver_environment, launcher_options, session_options

__all__ = ["DRIVER_MEMORY", "dataframe_session"]

DRIVER_MEMORY = "2g"


@contextlib.contextmanager
def dataframe_session(master: str, log: Path, app: str, driver_memory: str = DRIVER_MEMORY,
                      small: bool = False) -> Iterator[Any]:
    """``small``: the input is small (start-up matters more than peak speed): the driver JVM compiles with the client
    compiler only, and each shuffle has two partitions. The driver JVM and its launcher start from the pipeline drivers'
    class archives when they are there (:func:`eos_harness.spark.jvm.session_options`)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = (SparkConf().setMaster(master).setAppName(app)
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.pyspark.python", sys.executable).set("spark.pyspark.driver.python", sys.executable)
            .set("spark.driver.memory", driver_memory)
            # a partition's value is a name (a store called 1234 stays a string)
            .set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
            .set("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={shlex.quote(tempfile.gettempdir())}"
                 + " -XX:TieredStopAtLevel=1" * small + f" {session_options().options}".rstrip()))
    if master.startswith("local"):
        conf.set("spark.local.dir", tempfile.gettempdir())
    loopback = _loopback(master)
    if loopback:
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    with open(log, "ab") as out, _environment(SPARK_LOCAL_IP="127.0.0.1" if loopback else None,
                                              **driver_environment(launcher_options(make=False))):
        gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
    context = None
    try:
        with _environment(PYSPARK_PYTHON=sys.executable):
            context = SparkContext(conf=conf, gateway=gateway)
        context.setLogLevel("WARN")
        spark = SparkSession(context)
        # a few partitions a core (the default 200 cost more than they hold on a small history), planned once:
        # adaptive execution runs each shuffle as a job of its own, three times the jobs of a check
        spark.conf.set("spark.sql.shuffle.partitions", str(2 if small else max(4, 4 * context.defaultParallelism)))
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        yield spark
    finally:
        _stop(context, gateway)
