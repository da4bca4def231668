"""Faster driver JVM starts for pipeline runs.

A Spark scenario starts a new driver JVM for every run (the kill takes the old one), and on a small
machine most of a run is the JVM loading Spark's classes: about 9 s of a 17 s run on 2 cores. Two
standard HotSpot features cut that to about 3.5 s, without changing what Spark does:

- a dynamic class-data-sharing archive (:mod:`eos_harness.class_archive`) of the classes a pipeline
  run loads, made by the first run that exits normally, under a name derived from the Java version,
  the pyspark version and the classpath. Writing the archive at exit takes a run 25 s to 90 s on a
  loaded 2-core machine, so only a run meant to end on its own (not one a kill is planned for, which
  could never write it) makes it, one at a time; runs started meanwhile start without one and make none;
- the client compiler only (``-XX:TieredStopAtLevel=1``): the micro-batches of a scenario are tiny,
  so start-up matters more than peak speed.

``EOS_HARNESS_SPARK_JVM=plain`` turns both off (for comparing); a JVM without these HotSpot flags
gets neither.
"""

from __future__ import annotations

import os
from pathlib import Path

from eos_harness.class_archive import JvmOptions, archive_options, fingerprint, supported

__all__ = ["JvmOptions", "archive_path", "driver_options"]

ENV = "EOS_HARNESS_SPARK_JVM"


def _java() -> str:
    """The ``java`` Spark will start (JAVA_HOME first, then PATH), as the Kafka cluster finds it."""
    from eos_harness.cluster.local import ClusterError
    from eos_harness.cluster.local import _java as find_java

    try:
        return find_java()
    except ClusterError:  # no Java: Spark itself will say so; no options meanwhile
        return "java"


def _fingerprint() -> str:
    """Java version, pyspark version and the jars directory: what a class archive depends on."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    return fingerprint(_java(), pyspark.__version__, str(jars), *listing)


def archive_path(cache: Path | None = None) -> Path | None:
    """Where this Java and pyspark's class archive is (or will be); None when it is off (``plain``, or
    a JVM without the flags)."""
    if os.environ.get(ENV) == "plain" or not supported(_java()):
        return None
    if cache is None:
        from eos_harness.jars import cache_dir

        cache = cache_dir()
    return cache / "spark-cds" / f"driver-{_fingerprint()}.jsa"


def driver_options(cache: Path | None = None, make: bool = True) -> JvmOptions:
    """The options of a driver about to start; ``make=False``: this run will not make the archive when
    there is none yet (it is to be killed)."""
    archive = archive_path(cache)
    if archive is None:
        return JvmOptions([])
    return archive_options(archive, make)
