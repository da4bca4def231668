"""Store JVMs kept by the driver and lent to store processes, so that a JVM starts per crash, not per open.

A store process (forked by the store server) that opens one of Kafka's stores borrows a JVM that is already
up: the server hands it the JVM's pipes. A clean ``close`` leaves the JVM running with no store open, and
it goes back to the pool for the next open; a store process that dies (killed by the driver, at a crash
point, or by itself) takes its JVM with it: the server SIGKILLs the JVM before it goes on, and a JVM
waiting at a crash point for the store process's answer never gets one, so nothing of Kafka's code
after the point runs. Every JVM dies with the pool (:meth:`JvmPool.shutdown`), and halts by itself when
its pipe from the driver closes.

A JVM is never shared by two stores at once, and a crash is always the death of the store's own JVM: a
store killed inside a JVM that lived on could not lose what a process death loses (RocksDB's background
flushes and compactions run to their end when a database is closed, and one still open cannot be opened
again in the same process; Kafka's threads and objects of the dead store would stay). What a crash costs is
kept off the store's way instead: for each JVM killed the pool starts the next one at once, so that it boots
while the store's restart is on its way. A pool with spares (``spare``: one for each user of the shared pool
that asks, ``verify`` and each lifecycle scenario running) does more: it keeps that many JVMs per key booted
ahead, started as idle ones are taken, so that the next store's open does not wait for a JVM's start: the
JVM boots beside the store before it, whose process and JVM take turns on one core. A campaign of the
lifecycle on two workers keeps two (``chaos --stores kafka-streams-4.4.0-rocksdb-tx --scenarios 12 --seed 7``
on Java 25, 3 rounds interleaved at load 8-10: 0.76, 0.63, 0.64 scenarios per second with a JVM started
ahead only after a kill, 1.15, 0.72, 0.82 with two spares; 8.9-9.4 CPU-s against 9.3-10.4: the spares
left at its end). A spare does no more than boot: a warm-up (a store of each kind opened, used and closed
before it was lent) cost more CPU than it saved its store (a JVM's life, a transactional RocksDB store
opened, written, committed and read: 0.20 CPU-s cold, 0.26 warmed up; ``verify
kafka-streams-4.4.0-rocksdb-tx --seed 1 --examples 10`` 38.9-41.3 CPU-s with the warm-up, 28.9-34.8
without, interleaved).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import select
import shutil
import signal
import subprocess
import threading
import time

from eos_harness.stores import LendError

__all__ = ["AGENT", "VERIFYING", "Jvm", "JvmPool", "JvmStartError", "current", "shared"]

VERIFYING = "+verifying"  # a pool key's suffix: JVMs that verify the classes they load from jars (a user's store)
# a pool key's suffix: JVMs started with the store server's agent, which Byteman's installs through (a mutant's store)
AGENT = "+agent"

READY_TIMEOUT_S = 120.0
IDLE_TIMEOUT_S = 10.0  # how long a JVM whose store's process ended may take to say it is idle
_PR_SET_PDEATHSIG = 1


class JvmStartError(LendError):
    """A store JVM did not start; the message says what it wrote."""


def _die_with_parent() -> None:  # in the JVM's process, between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@functools.cache
def _with_parent_death() -> tuple[str, ...]:
    """What a JVM's command line starts with so that it dies with the thread that started it: ``setpriv
    --pdeathsig KILL`` (util-linux), which sets the parent-death signal and execs the JVM, where it works
    here; else nothing, and the JVM's process sets it itself between fork and exec (:func:`_die_with_parent`).
    A start then needs no code run in the child, so Python starts it with vfork instead of a fork of this
    process (a campaign's driver: 17-50 ms per JVM started; ``chaos --scenarios 12`` on
    ``kafka-streams-4.4.0-rocksdb-tx`` about 0.4 of its 9-10 CPU-s)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    try:
        works = subprocess.run([setpriv, "--pdeathsig", "KILL", "true"], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        works = False
    return (setpriv, "--pdeathsig", "KILL") if works else ()


_starter: concurrent.futures.ThreadPoolExecutor | None = None
_starter_lock = threading.Lock()


def _started(command: list[str], **options) -> subprocess.Popen:
    """The JVM's process, started from the main thread or from one thread kept for the process's life: the
    parent-death signal (:func:`_die_with_parent`) fires when the *thread* that started a child ends, and a
    pooled JVM started in a campaign's scenario thread would be killed when that scenario ends, under the
    store of another scenario that borrowed it."""
    global _starter
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(command, **options)
    with _starter_lock:
        if _starter is None:
            _starter = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-jvm-starter")
    return _starter.submit(subprocess.Popen, command, **options).result()


class Jvm:
    """One store JVM (``eosharness.StoreServer``), its pipes unbuffered so that it can be lent."""

    def __init__(self, version: str, command: list[str], log: str | None = None, key: str = "") -> None:
        self.version = version
        self.key = key or version  # what the pool keeps it under
        from eos_harness.kafka_streams.build import jvm_environment

        # What Kafka, RocksDB and the JVM print goes where the store processes' output goes (``log``).
        stderr = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644) if log else None
        try:
            prefix = _with_parent_death()
            self.process = _started([*prefix, *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                    bufsize=0, preexec_fn=None if prefix else _die_with_parent, close_fds=True,
                                    env=jvm_environment())
        finally:
            if stderr is not None:
                os.close(stderr)
        self._ready = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait for its ``{"ready":true}`` line (read byte by byte: nothing of a later line is taken)."""
        if self._ready:
            return
        fd = self.process.stdout.fileno()
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], timeout)
            chunk = os.read(fd, 1) if ready else b""
            if not chunk:
                self.kill()
                raise JvmStartError(f"the store JVM (Kafka Streams {self.version}) did not start "
                                    f"(exit code {self.process.returncode}); it wrote {line[:300]!r}")
            line += chunk
        if not line.startswith(b'{"ready"'):
            self.kill()
            raise JvmStartError(f"the store JVM (Kafka Streams {self.version}) wrote {line[:300]!r} instead of ready")
        self._ready = True

    def pipes(self) -> tuple[int, int]:
        """(the fd the JVM reads requests from, the fd its answers come on): duplicates, for a store process."""
        return os.dup(self.process.stdin.fileno()), os.dup(self.process.stdout.fileno())

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def idle(self, timeout: float = IDLE_TIMEOUT_S) -> bool:
        """Whether the JVM answers, within ``timeout``, that no store is open in it (asked once its store's
        process has ended: a JVM waiting at a crash point takes the question for the answer and halts, so
        nothing of Kafka's code after the point runs, and answers nothing)."""
        if not self.alive:
            return False
        fd = self.process.stdout.fileno()
        try:
            self.process.stdin.write(b'{"op":"idle"}\n')
        except OSError:
            return False
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 1) if ready else b""
            if not chunk:
                return False
            line += chunk
        return line.strip() == b'{"ok":true}'

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class JvmPool:
    """The store JVMs of one store server: idle ones by key, and ``spare`` per key started ahead."""

    def __init__(self, output, spare: int = 0) -> None:
        """``output``: a callable giving where the JVMs' stdout and stderr go now (the store server's
        children's output); ``spare``: how many JVMs per key to keep booted ahead (see the module)."""
        self._output = output
        self.spare = int(spare)
        self._idle: dict[str, list[Jvm]] = {}
        self._all: list[Jvm] = []
        self._lock = threading.Lock()
        self._closed = False

    def _start(self, key: str) -> Jvm:
        """A JVM of ``key`` started now."""
        from eos_harness.kafka_streams.build import BuildError, ensure_built

        version = key.partition("+")[0]
        try:
            command = ensure_built(version).command(verify=VERIFYING in key, agent=AGENT in key)
        except BuildError as exc:
            raise JvmStartError(str(exc)) from None
        jvm = Jvm(version, command, self._output(), key)
        self._all.append(jvm)
        return jvm

    def _spare(self, key: str) -> None:
        """Start spares of ``key`` until ``spare`` of them (at least one) are idle, unless the pool is shut
        down (under the lock)."""
        idle = self._idle.setdefault(key, [])
        while not self._closed and sum(j.alive for j in idle) < max(1, self.spare):
            idle.append(self._start(key))

    def take(self, key: str) -> Jvm:
        """An idle JVM of ``key`` (a version, :data:`VERIFYING` after it for one that verifies the classes it
        loads, :data:`AGENT` for one started with the agent a mutant's rules are installed through), ready
        (started now when none is idle); in a pool with spares, as many are started as it took below
        ``spare``."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            while idle and not idle[0].alive:
                idle.pop(0)
            jvm = idle.pop(0) if idle else self._start(key)
            if self.spare:
                with contextlib.suppress(JvmStartError):  # the one taken says why, if it fails as well
                    self._spare(key)
        jvm.wait_ready()
        return jvm

    def give_back(self, jvm: Jvm) -> None:
        """A JVM whose store was closed cleanly: idle again (killed, once the pool is shut down)."""
        with self._lock:
            if jvm.alive and not self._closed:
                self._idle.setdefault(jvm.key, []).insert(0, jvm)
                return
        jvm.kill()

    def kill(self, jvm: Jvm) -> None:
        """SIGKILL a JVM whose store process died, and start a spare at once if none is idle: a restart of
        the store follows a crash, and finds it booted (or booting)."""
        jvm.kill()
        with self._lock:
            self._all = [j for j in self._all if j is not jvm]
            self._spare(jvm.key)

    def shutdown(self) -> None:
        """Kill every JVM of the pool; one given back or killed later starts none (it dies)."""
        with self._lock:
            every, self._all, self._idle, self._closed = self._all, [], {}, True
        for jvm in every:
            jvm.kill()


_shared: JvmPool | None = None
_users = 0  # the blocks inside shared() now
_shared_lock = threading.Lock()


def current() -> JvmPool | None:
    """The pool every store server in this process lends from (inside :func:`shared`), else None."""
    return _shared


@contextlib.contextmanager
def shared(output, spare: int = 0):
    """Within: every store server of this process (and every lifecycle task instance) lends from one pool,
    so that a JVM whose store closed cleanly serves the next store (a suite makes a server per case)
    instead of dying with its server; a server's exit still kills the JVMs of its children, as a crash
    would. Nested, or entered by several threads at once (a campaign's scenarios): one pool, whose every
    JVM dies when the last of them leaves. ``spare``: how many JVMs this entry keeps booted ahead, for as long
    as it is inside (see :class:`JvmPool`: the pool keeps the sum of its users')."""
    global _shared, _users
    with _shared_lock:
        if _shared is None:
            _shared = JvmPool(output)
        _users += 1
        pool = _shared
        with pool._lock:
            pool.spare += spare
    try:
        yield pool
    finally:
        with _shared_lock:
            with pool._lock:
                pool.spare -= spare
            _users -= 1
            last = _users == 0
            if last:
                _shared = None
        if last:
            pool.shutdown()
