"""Faster driver JVM starts for pipeline runs.

A Spark scenario starts a new driver JVM for every run (the kill takes the old one), and on a small
machine most of a run is the JVM loading Spark's classes: about 9 s of a 17 s run on 2 cores. Two
standard HotSpot features cut that to about 3.5 s, without changing what Spark does:

- a dynamic class-data-sharing archive (JDK 13+, ``-XX:ArchiveClassesAtExit`` then
  ``-XX:SharedArchiveFile``) of the classes a pipeline run loads, made by the first run that exits
  normally and kept in the cache directory under a name derived from the Java version, the pyspark
  version and the classpath (a stale or foreign archive is never used: the JVM checks it, and a
  mismatch only costs the sharing, never correctness). Writing the archive at exit takes a run
  25 s to 90 s on a loaded 2-core machine, so only a run meant to end on its own (not one a kill
  is planned for, which could never write it) makes it, one at a time (a lock file beside it names
  the process); runs started meanwhile start without one and make none;
- the client compiler only (``-XX:TieredStopAtLevel=1``): the micro-batches of a scenario are tiny,
  so start-up matters more than peak speed.

``EOS_HARNESS_SPARK_JVM=plain`` turns both off (for comparing); a JVM without these HotSpot flags
gets neither.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from functools import lru_cache
from pathlib import Path

__all__ = ["JvmOptions", "archive_path", "driver_options"]

ENV = "EOS_HARNESS_SPARK_JVM"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xshare:auto"


def _java() -> str:
    """The ``java`` Spark will start (JAVA_HOME first, then PATH), as the Kafka cluster finds it."""
    from eos_harness.cluster.local import ClusterError
    from eos_harness.cluster.local import _java as find_java

    try:
        return find_java()
    except ClusterError:  # no Java: Spark itself will say so; no options meanwhile
        return "java"


@lru_cache(maxsize=1)
def _supported() -> bool:
    """Whether this JVM has HotSpot's dynamic archive flags (another JVM would refuse to start)."""
    try:
        flags = subprocess.run([_java(), "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True,
                               timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "ArchiveClassesAtExit" in flags and "TieredStopAtLevel" in flags


@lru_cache(maxsize=1)
def _fingerprint() -> str:
    """Java version, pyspark version and the jars directory: what a class archive depends on."""
    import pyspark

    try:
        version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    text = "\n".join([version, pyspark.__version__, str(jars), *listing])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class JvmOptions:
    """The driver's extra Java options for one run, and what to do when it has exited."""

    def __init__(self, options: str, pending: Path | None = None, archive: Path | None = None,
                 lock: Path | None = None) -> None:
        self.options = options
        self._pending = pending
        self._archive = archive
        self._lock = lock

    def finish(self, exit_code: int | None) -> None:
        """After the run: a run that exited normally leaves its archive for the next runs (renamed
        into place atomically); otherwise it is removed. Either way the next run may make one."""
        if self._pending is None or self._archive is None:
            return
        if exit_code == 0 and self._pending.exists() and self._pending.stat().st_size > 0:
            with contextlib.suppress(OSError):
                os.replace(self._pending, self._archive)
        with contextlib.suppress(OSError):
            self._pending.unlink()
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.unlink()


LOCK_STALE_S = 1800.0  # a lock older than this is left over (a run that makes the archive takes minutes at most)


def _claim(lock: Path) -> bool:
    """Take the lock that lets one run make the archive: False while a live process holds it. A lock
    whose process is gone (killed before :meth:`JvmOptions.finish`), or too old, is taken over."""
    import time

    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(lock.read_text().strip() or "0")
                age = time.time() - lock.stat().st_mtime
            except (OSError, ValueError):
                holder, age = 0, LOCK_STALE_S + 1
            if holder and age <= LOCK_STALE_S and _alive(holder):
                return False
            with contextlib.suppress(OSError):
                lock.unlink()
            continue
        except OSError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def archive_path(cache: Path | None = None) -> Path | None:
    """Where this Java and pyspark's class archive is (or will be); None when it is off (``plain``, or
    a JVM without the flags)."""
    if os.environ.get(ENV) == "plain" or not _supported():
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
        return JvmOptions("")
    folder = archive.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return JvmOptions("-XX:TieredStopAtLevel=1")
    if archive.exists():
        return JvmOptions(f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive} {QUIET}")
    lock = folder / f"driver-{_fingerprint()}.lock"
    if not make or not _claim(lock):  # another run is making it: this one starts without
        return JvmOptions("-XX:TieredStopAtLevel=1")
    if archive.exists():  # made by the run that held the lock a moment ago
        lock.unlink(missing_ok=True)
        return JvmOptions(f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive} {QUIET}")
    pending = folder / f"driver-{_fingerprint()}.{os.getpid()}-{id(folder):x}-{os.urandom(3).hex()}.jsa.tmp"
    return JvmOptions(f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={pending} {QUIET}", pending, archive, lock)
