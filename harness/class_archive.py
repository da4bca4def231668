"""Faster JVM starts from a dynamic class-data-sharing archive (HotSpot, JDK 13+).

Most of the start of a short-lived JVM (a Spark driver, a Kafka node) is loading and verifying its
classes. ``-XX:ArchiveClassesAtExit`` makes a JVM that exits normally write the classes it loaded into
an archive; later JVMs with the same Java and class path map it (``-XX:SharedArchiveFile``) and start
in about half the time. The archive is kept in the cache directory under a name derived from what it
depends on (a stale or foreign archive is never used: the JVM checks it, and a mismatch only costs the
sharing, never correctness). One JVM at a time makes it (a lock file beside it names the process);
JVMs started meanwhile start without one and make none; a JVM that is killed leaves nothing behind and
the next one makes it. With the archive, the client compiler only (``-XX:TieredStopAtLevel=1``):
start-up matters more than peak speed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from functools import lru_cache
from pathlib import Path

__all__ = ["JvmOptions", "LOCK_STALE_S", "QUIET", "archive_options", "at_its_address", "fingerprint", "java_property",
           "supported"]

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xshare:auto"
C1 = "-XX:TieredStopAtLevel=1"
LOCK_STALE_S = 1800.0  # a lock older than this is left over (a JVM that makes the archive takes minutes at most)


@lru_cache(maxsize=4)
def _flags_and_properties(java: str) -> tuple[str, dict[str, str]]:
    """This JVM's flags (``-XX:+PrintFlagsFinal``, its diagnostic ones too) and system properties
    (``-XshowSettings:properties``), asked in one start; ("", {}) when it will not say (not HotSpot, or no Java)."""
    try:
        done = subprocess.run([java, "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintFlagsFinal",
                               "-XshowSettings:properties", "-version"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "", {}
    if done.returncode != 0:
        return "", {}
    properties: dict[str, str] = {}
    name = None
    for line in done.stderr.splitlines():  # "    name = value", a list's further values on lines of their own
        if line.startswith("    ") and not line.startswith("     ") and " = " in line:
            name, _, value = line.strip().partition(" = ")
            properties[name] = value
        elif name is not None and line.startswith("        ") and line.strip():
            properties[name] += os.pathsep + line.strip()
        else:
            name = None
    return done.stdout, properties


def supported(java: str) -> bool:
    """Whether this JVM has HotSpot's dynamic archive flags (another JVM would refuse to start)."""
    flags = _flags_and_properties(java)[0]
    return "ArchiveClassesAtExit" in flags and "TieredStopAtLevel" in flags


def at_its_address(java: str) -> list[str]:
    """The options that map a class archive at the address it was written for (``-XX:ArchiveRelocationMode=0``, a
    diagnostic flag: the JVM relocates it only when that address is taken), where this JVM has them; Java 17 to 25
    map it elsewhere by default (address-space randomisation) and patch every pointer in it at each start: 0.30 to
    0.18 CPU-s for a Spark driver's start from its 165 MB archive."""
    flags = _flags_and_properties(java)[0]
    return ["-XX:+UnlockDiagnosticVMOptions", "-XX:ArchiveRelocationMode=0"] if " ArchiveRelocationMode " in flags \
        else []


def java_property(java: str, name: str) -> str | None:
    """A system property of this JVM as it starts with no options (``java.library.path``,
    ``java.specification.version``); None when it will not say."""
    return _flags_and_properties(java)[1].get(name)


@lru_cache(maxsize=8)
def fingerprint(java: str, *parts: str) -> str:
    """The Java version and ``parts`` (what else an archive depends on: versions, the class path)."""
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    return hashlib.sha256("\n".join([version, *parts]).encode()).hexdigest()[:16]


class JvmOptions:
    """A JVM's extra options for one run (``options``, one string; ``arguments``, a list), and what to
    do when it has exited."""

    def __init__(self, arguments: list[str], pending: Path | None = None, archive: Path | None = None,
                 lock: Path | None = None, clean_exits: tuple[int, ...] = (0,)) -> None:
        self.arguments = arguments
        self.options = " ".join(arguments)
        self._pending = pending
        self._archive = archive
        self._lock = lock
        self._clean_exits = clean_exits

    def add(self, *arguments: str) -> None:
        """More options for the same JVM (after the archive's)."""
        self.arguments = [*self.arguments, *arguments]
        self.options = " ".join(self.arguments)

    @property
    def making(self) -> bool:
        """Whether this JVM writes the archive when it exits (its exit then takes seconds more)."""
        return self._pending is not None

    def finish(self, exit_code: int | None) -> None:
        """After the run: a JVM that exited normally (an exit code of ``clean_exits``) leaves its archive
        for the next runs (renamed into place atomically); otherwise it is removed. Either way the
        next run may make one."""
        if self._pending is None or self._archive is None:
            return
        if exit_code in self._clean_exits and self._pending.exists() and self._pending.stat().st_size > 0:
            with contextlib.suppress(OSError):
                os.replace(self._pending, self._archive)
        with contextlib.suppress(OSError):
            self._pending.unlink()
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.unlink()
        self._pending = None


def _claim(lock: Path) -> bool:
    """Take the lock that lets one run make the archive: False while a live process holds it. A lock
    whose process is gone (killed before :meth:`JvmOptions.finish`), or too old, is taken over."""
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


def archive_options(archive: Path, make: bool = True, clean_exits: tuple[int, ...] = (0,),
                    quiet: tuple[str, ...] = tuple(QUIET.split())) -> JvmOptions:
    """The options of a JVM about to start whose archive is (or will be) ``archive``; ``make=False``:
    this run will not make it when there is none yet (it is to be killed, or too short to be worth it).
    ``quiet``: the options that keep the archive's messages out of the JVM's output."""
    folder = archive.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return JvmOptions([C1])
    using = [C1, f"-XX:SharedArchiveFile={archive}", *quiet]
    if archive.exists():
        return JvmOptions(using)
    lock = archive.with_suffix(".lock")
    if not make or not _claim(lock):  # another run is making it: this one starts without
        return JvmOptions([C1])
    if archive.exists():  # made by the run that held the lock a moment ago
        lock.unlink(missing_ok=True)
        return JvmOptions(using)
    pending = archive.with_name(f"{archive.stem}.{os.getpid()}-{id(folder):x}-{os.urandom(3).hex()}.jsa.tmp")
    return JvmOptions([C1, f"-XX:ArchiveClassesAtExit={pending}", *quiet], pending, archive, lock, clean_exits)
