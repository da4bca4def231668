"""A real Kafka Streams application under test: its build, its JVM, and what it says while it runs.

The application (``app/StreamsApp.java`` beside this module) is a key-value aggregate with a changelogged
store "sums" (RocksDB or in memory; or per tumbling window; or fed by a stream-table join with a KTable
"rates" of a second topic), under ``processing.guarantee`` and ``enable.transactional.statestores``
as asked. It is compiled on first use against the pinned Kafka Streams jars (:mod:`.bundles`) into
``<cache>/kafka-streams/app-<version>-<digest>/`` (written in a temp folder and renamed into place, as the
store server is, :mod:`.build`). :class:`StreamsAppProcess` starts one instance (its JVM small: ``-Xmx``
of :data:`HEAP`), with Byteman's agent and the rules of the crash point it arms (:mod:`.app_points`), reads
its lines into timed events, asks it for its store (interactive queries, ``READ_COMMITTED``), stops it
cleanly or SIGKILLs it, and never outlives its ``with`` block.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness import jars
from eos_harness.kafka_streams import bundles
from eos_harness.kafka_streams.build import NATIVE, BuildError, _root, publish

__all__ = ["APP_SOURCE", "HEAP", "AppBuild", "AppEvent", "StreamsAppProcess", "ensure_app_built"]

APP_SOURCE = Path(__file__).resolve().parent / "app"
MAIN = "eosharness.app.StreamsApp"
HEAP = "160m"
VERSION = "4.4.0"  # the Kafka Streams release the application runs on (KIP-892's transactional stores)
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss1m", f"-Xmx{HEAP}", "-XX:-UsePerfData",
               "-Xlog:disable", "-Xlog:all=warning:stderr")


@dataclass(frozen=True)
class AppBuild:
    version: str
    folder: Path
    classpath: tuple[Path, ...]
    byteman: Path

    def command(self, arguments: dict[str, object], rules: Path | None, properties: dict[str, str]) -> list[str]:
        agent = [f"-javaagent:{self.byteman}=script:{rules}"] if rules is not None else []
        return ["java", *JVM_OPTIONS, f"-Djava.library.path={self.folder / 'native'}", *agent,
                *(f"-D{k}={v}" for k, v in properties.items()),
                "-cp", os.pathsep.join(str(p) for p in (self.folder / "app.jar", *self.classpath)), MAIN,
                *(f"{k}={v}" for k, v in arguments.items())]


def _digest(version: str) -> str:
    digest = hashlib.sha256(version.encode())
    for path in sorted(APP_SOURCE.rglob("*.java")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


_built: dict[tuple[str, str], AppBuild] = {}


def ensure_app_built(version: str = VERSION) -> AppBuild:
    """The application compiled against Kafka Streams ``version`` (built on first use; jars fetched and
    checked once per process). Raises :class:`~eos_harness.kafka_streams.build.BuildError` saying why not."""
    key = (str(_root()), version)
    if key in _built and (_built[key].folder / ".complete").is_file():
        return _built[key]
    try:
        classpath = tuple(p.resolve() for p in jars.ensure(bundles.streams_bundle(version)))
        byteman = jars.ensure("byteman")[0].resolve()
    except jars.JarFetchError as exc:
        raise BuildError(str(exc)) from None
    folder = _root().resolve() / f"app-{version}-{_digest(version)}"
    if not (folder / ".complete").is_file():
        javac = shutil.which("javac")
        if javac is None or shutil.which("java") is None:
            raise BuildError("the Kafka Streams application needs a JDK (java and javac, 17 or later) on PATH; "
                             "install one (apt-get install openjdk-17-jdk-headless)")
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".build-app-{version}-", dir=folder.parent))
        try:
            _build(version, work, classpath, javac)
            publish(work, folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _built[key] = AppBuild(version, folder, classpath, byteman)
    return _built[key]


def _build(version: str, work: Path, classpath: tuple[Path, ...], javac: str) -> None:
    sources = sorted(str(p) for p in APP_SOURCE.rglob("*.java"))
    proc = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(work / "classes"),
                           "-cp", os.pathsep.join(map(str, classpath)), *sources],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BuildError(f"javac failed building the Kafka Streams application for {version}:\n"
                         + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:]))
    with zipfile.ZipFile(work / "app.jar", "w") as archive:
        for path in sorted((work / "classes").rglob("*.class")):
            archive.writestr(zipfile.ZipInfo(path.relative_to(work / "classes").as_posix()), path.read_bytes())
    shutil.rmtree(work / "classes")
    rocksdb = [p for p in classpath if p.name.startswith("rocksdbjni-")]
    if not rocksdb:
        raise BuildError(f"no rocksdbjni jar among the Kafka Streams {version} jars")
    (work / "native").mkdir()
    with zipfile.ZipFile(rocksdb[0]) as archive, archive.open(NATIVE) as source, \
            open(work / "native" / NATIVE, "wb") as target:
        shutil.copyfileobj(source, target)


PROTOCOL = {"STATE", "THREAD", "RESTORE_START", "RESTORE_END", "POINT", "STORE", "STORE_ERROR", "UNCAUGHT", "CLOSED", "ARMED",
            "RELEASED", "ZOMBIE_COMMITTED", "ZOMBIE_FENCED", "TASK_START", "TASK_CLOSE"}


@dataclass(frozen=True)
class AppEvent:
    """One line the application said, ``at`` seconds after its JVM was started."""

    at: float
    kind: str  # STATE, RESTORE_START, RESTORE_END, POINT, STORE, STORE_ERROR, UNCAUGHT, CLOSED
    words: tuple[str, ...]
    text: str


@dataclass
class StreamsAppProcess:
    """One instance of the application (a JVM), started by :meth:`start`, always ended by :meth:`close`."""

    build: AppBuild
    arguments: dict[str, object]
    log: Path  # its stderr (Kafka's own warnings, a JVM crash)
    rules: Path | None = None
    properties: dict[str, str] = field(default_factory=dict)
    events: list[AppEvent] = field(default_factory=list)
    started_at: float = 0.0
    _proc: subprocess.Popen | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> StreamsAppProcess:
        self.started_at = time.monotonic()
        with open(self.log, "ab") as err:
            self._proc = subprocess.Popen(self.build.command(self.arguments, self.rules, self.properties),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                          bufsize=1, start_new_session=True)
        threading.Thread(target=self._read, daemon=True, name="streams-app-stdout").start()
        return self

    def __enter__(self) -> StreamsAppProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            words = tuple(line.split())
            if not words:
                continue
            if words[0] not in PROTOCOL:  # Byteman's own messages (a rule that did not compile): to the log
                with contextlib.suppress(OSError), open(self.log, "a") as log:
                    log.write(line)
                continue
            event = AppEvent(round(time.monotonic() - self.started_at, 3), words[0], words[1:], line.rstrip("\n"))
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_for(self, found: Callable[[list[AppEvent]], object], timeout: float, since: int = 0):
        """What ``found(events[since:])`` returns once it is truthy; None after ``timeout`` s or once the
        JVM exited without it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = found(self.events[since:])
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive():
                    return found(self.events[since:]) or None
                self._changed.wait(min(left, 0.5))

    def state_reached(self, state: str, timeout: float):
        return self.wait_for(lambda evs: next((e for e in evs if e.kind == "STATE" and e.words[-1] == state), None),
                             timeout)

    def point_fired(self) -> AppEvent | None:
        with self._changed:
            return next((e for e in self.events if e.kind == "POINT"), None)

    def query(self, timeout: float = 20.0) -> AppEvent | None:
        """The store, read committed (a ``STORE`` event), or its ``STORE_ERROR``; None if no answer."""
        since = len(self.events)
        if not self._send("QUERY"):
            return None
        return self.wait_for(lambda evs: next((e for e in evs if e.kind in ("STORE", "STORE_ERROR")), None),
                             timeout, since)

    def arm(self, point: str, timeout: float = 20.0) -> bool:
        """Arm ``NAME@N`` in the running JVM (hits counted from now); whether it said so."""
        since = len(self.events)
        return self._send(f"ARM {point}") and bool(
            self.wait_for(lambda evs: any(e.kind == "ARMED" for e in evs), timeout, since))

    def release(self) -> bool:
        """Let the thread waiting at the fired point go on (after :meth:`resume`: a zombie)."""
        return self._send("RELEASE")

    def _send(self, line: str) -> bool:
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def stop(self, timeout: float = 45.0) -> bool:
        """A clean close (``KafkaStreams.close``); whether it closed in time (else it is killed)."""
        self._send("STOP")
        closed = self.wait_for(lambda evs: any(e.kind == "CLOSED" for e in evs), timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            if self._proc is not None:
                self._proc.wait(10)
        self.kill()
        return bool(closed)

    def close_at(self, point: str, timeout: float = 45.0) -> AppEvent | None:
        """A clean close with the close's point ``NAME@N`` armed: its ``POINT`` event once it fired (the JVM then
        waits for its kill), or None if the close ended (``CLOSED``) or hung without reaching it."""
        since = len(self.events)
        if not self._send(f"STOP {point}"):
            return None
        said = self.wait_for(lambda evs: next((e for e in evs if e.kind in ("POINT", "CLOSED")), None), timeout, since)
        return said if said is not None and said.kind == "POINT" else None

    def freeze(self) -> None:
        if self.alive():
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            os.kill(self._proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL of the JVM (nothing of it runs after), and wait for it to be gone."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait(30)
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
