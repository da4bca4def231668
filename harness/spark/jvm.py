"""Faster driver JVM starts for pipeline runs.

A Spark scenario starts a new driver JVM for every run (the kill takes the old one), and on a small
machine most of a run is the JVM loading Spark's classes: about 9 s of a 17 s run on 2 cores. Standard
HotSpot and JDK features cut that, without changing what Spark does (the same Spark, the same configuration):

- a dynamic class-data-sharing archive (:mod:`eos_harness.class_archive`) of the classes a pipeline
  run loads, made by the first run that exits normally, under a name derived from the Java version,
  the pyspark version and the classpath. Writing the archive at exit takes a run 25 s to 90 s on a
  loaded 2-core machine, so only a run meant to end on its own (not one a kill is planned for, which
  could never write it) makes it, one at a time; runs started meanwhile start without one and make none;
- the client compiler only (``-XX:TieredStopAtLevel=1``): the micro-batches of a scenario are tiny,
  so start-up matters more than peak speed;
- the archive mapped at the address it was written for (:func:`eos_harness.class_archive.at_its_address`), not
  moved and patched at every start: 0.30 to 0.18 CPU-s a driver start;
- the JVM that ``spark-submit`` starts first to build the driver's command line (``spark-class``'s
  launcher, ``SPARK_LAUNCHER_OPTS``): the client compiler and a class archive of its own, made by the
  first run whose driver got as far as its Spark session (the launcher had exited by then): 0.30 to
  0.09 CPU-s a run;
- Hadoop's local file system without its native library starts a process for every file the checkpoint
  writes or renames (``chmod``, ``readlink``: about 350 in a five-batch run); on Java 17 to 24 the driver
  starts them with ``vfork`` (``jdk.lang.Process.launchMechanism=VFORK``), one ``exec`` each instead of
  two (through ``jspawnhelper``): 0.76 ms less CPU a process (Java 25 deprecates it: left as it is there);
- RocksDB's native library (the RocksDB state store) taken out of pyspark's ``rocksdbjni`` jar once
  (:func:`native_library`, in the cache) and put first on the driver's ``java.library.path``, so that RocksDB's
  loader finds it there instead of unpacking 15 MB into the run's temp directory at every start, and
  ``ROCKSDB_MUSL_LIBC=false`` (the C library is glibc: the library taken out is glibc's), so that it does
  not ask ``ldd`` (eight processes) at every start.

A Spark driver in the harness's own process (``check --engine spark``, ``chaos --engine spark``) maps the
pipeline drivers' class archive too (:func:`session_options`; 11 to 7 CPU-s for a small check's session), and
its launcher the launcher's.

``EOS_HARNESS_SPARK_JVM=plain`` turns all of them off (for comparing); a JVM without these HotSpot flags
gets none.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import zipfile
from pathlib import Path

from eos_harness.class_archive import (
    QUIET,
    JvmOptions,
    archive_options,
    at_its_address,
    fingerprint,
    java_property,
    supported,
)

__all__ = ["JvmOptions", "archive_path", "driver_environment", "driver_options", "launcher_options",
           "native_library", "session_options"]

ENV = "EOS_HARNESS_SPARK_JVM"
# The launcher JVM's output on stdout is the driver's command line (spark-class reads it): its own logging
# (a class archive's warnings) goes to stderr, the run's log
LAUNCHER_QUIET = ("-Xshare:auto", "-Xlog:disable", "-Xlog:all=warning:stderr")
# the name rocksdbjni's loader asks java.library.path for (org.rocksdb.util.Environment), by machine, glibc's
ROCKSDB_LIBRARY = {"x86_64": "librocksdbjni-linux64.so", "aarch64": "librocksdbjni-linux-aarch64.so"}
VFORK_UNTIL = 25  # the Java feature release that deprecates jdk.lang.Process.launchMechanism=VFORK


def _java() -> str:
    """The ``java`` Spark will start (JAVA_HOME first, then PATH), as the Kafka cluster finds it."""
    from eos_harness.cluster.local import ClusterError
    from eos_harness.cluster.local import _java as find_java

    try:
        return find_java()
    except ClusterError:  # no Java: Spark itself will say so; no options meanwhile
        return "java"


def _jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _fingerprint() -> str:
    """Java version, pyspark version and the jars directory: what a class archive depends on."""
    import pyspark

    jars = _jars()
    listing = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    return fingerprint(_java(), pyspark.__version__, str(jars), *listing)


def _on() -> bool:
    return os.environ.get(ENV) != "plain" and supported(_java())


def _cache(cache: Path | None) -> Path:
    if cache is None:
        from eos_harness.jars import cache_dir

        cache = cache_dir()
    return cache


def archive_path(cache: Path | None = None) -> Path | None:
    """Where this Java and pyspark's class archive is (or will be); None when it is off (``plain``, or
    a JVM without the flags)."""
    if not _on():
        return None
    return _cache(cache) / "spark-cds" / f"driver-{_fingerprint()}.jsa"


def _feature(java: str) -> int | None:
    version = java_property(java, "java.specification.version") or ""
    return int(version) if version.isdigit() else None


def _vfork(options: JvmOptions, java: str) -> None:
    """Hadoop's processes started with vfork on Java 17 to 24 (see the module)."""
    feature = _feature(java)
    if feature is not None and feature < VFORK_UNTIL:
        options.add("-Djdk.lang.Process.launchMechanism=VFORK")


def native_library(cache: Path | None = None) -> Path | None:
    """The folder holding RocksDB's native library taken out of pyspark's ``rocksdbjni`` jar (once, into the
    cache, written under a temp name and renamed); None off glibc on x86_64 and aarch64 Linux, or without the jar
    (RocksDB's loader then unpacks it at each start, as it does on its own)."""
    name = ROCKSDB_LIBRARY.get(platform.machine())
    jars = sorted(_jars().glob("rocksdbjni-*.jar"))
    if name is None or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or len(jars) != 1:
        return None
    folder = _cache(cache) / "spark-native" / f"{jars[0].stem}-{jars[0].stat().st_size}"
    if (folder / name).is_file():
        return folder
    temp = folder.with_name(f".{folder.name}.{os.getpid()}-{os.urandom(3).hex()}")
    try:
        temp.mkdir(parents=True)
        with zipfile.ZipFile(jars[0]) as jar, jar.open(name) as source, open(temp / name, "wb") as target:
            shutil.copyfileobj(source, target)
        with contextlib.suppress(OSError):  # a process beside this one put it there first: the same bytes
            temp.rename(folder)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return folder if (folder / name).is_file() else None


def driver_options(cache: Path | None = None, make: bool = True) -> JvmOptions:
    """The options of a driver about to start; ``make=False``: this run will not make the archive when
    there is none yet (it is to be killed)."""
    archive = archive_path(cache)
    if archive is None:
        return JvmOptions([])
    java = _java()
    options = archive_options(archive, make, quiet=(*QUIET.split(), *at_its_address(java)))
    _vfork(options, java)
    native = native_library(cache)
    default = java_property(java, "java.library.path")
    if native is not None and default is not None and not any(c.isspace() for c in f"{native}{default}"):
        options.add(f"-Djava.library.path={os.pathsep.join([str(native), default])}")
    return options


def session_options(cache: Path | None = None) -> JvmOptions:
    """The options of a driver JVM in the harness's own process (``check --engine spark``'s session, ``chaos
    --engine spark``'s driver; started the way a pipeline run's is, by pyspark's ``spark-submit``, with the same
    class path): the pipeline drivers' class archive when it is there (these never make it: their JVM does not
    exit on its own), and vfork for its processes as :func:`driver_options`. Its compiler is the caller's choice."""
    archive = archive_path(cache)
    if archive is None:
        return JvmOptions([])
    java = _java()
    options = JvmOptions([f"-XX:SharedArchiveFile={archive}", *QUIET.split(), *at_its_address(java)]
                         if archive.is_file() else [])
    _vfork(options, java)
    return options


def launcher_options(cache: Path | None = None, make: bool = True) -> JvmOptions:
    """The options of the launcher JVM ``spark-submit`` starts first (``SPARK_LAUNCHER_OPTS``, which its shell
    splits at spaces: none when the cache's path has one). With ``make``, it may make its archive: call
    ``finish(0)`` once the driver's Spark session is up (the launcher exited before the driver started),
    ``finish(None)`` otherwise."""
    if not _on():
        return JvmOptions([])
    archive = _cache(cache) / "spark-cds" / f"launcher-{_fingerprint()}.jsa"
    if any(c.isspace() for c in str(archive)):
        return JvmOptions([])
    return archive_options(archive, make, quiet=(*LAUNCHER_QUIET, *at_its_address(_java())))


def driver_environment(launcher: JvmOptions, cache: Path | None = None) -> dict[str, str]:
    """What the environment of ``spark-submit`` adds for a driver: the launcher's options, followed by the user's own
    ``SPARK_LAUNCHER_OPTS`` if any (the last of an option wins), and RocksDB's loader told the C library (glibc: no
    ``ldd``) when the harness took its library out (:func:`native_library`)."""
    env = {}
    if launcher.options:
        env["SPARK_LAUNCHER_OPTS"] = " ".join(filter(None, [launcher.options, os.environ.get("SPARK_LAUNCHER_OPTS")]))
    if _on() and native_library(cache) is not None:
        env["ROCKSDB_MUSL_LIBC"] = "false"
    return env
