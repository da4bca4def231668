"""One command's session: its temp root, its signals, and the processes it started.

Everything the harness puts in the temp directory (``eos-kafka-*``, ``eos-points-*``,
``eos-conformance-*``, multiprocessing's ``pymp-*``, Hypothesis' storage) lives under one root,
``$TMPDIR/eos-harness-<pid>-XXXX``, which the command removes at its end whatever ended it: a
normal exit, an exception, Ctrl-C (SIGINT) or SIGTERM. ``tempfile.tempdir`` and ``TMPDIR`` point
into it, so children (the forkserver, the zygote, Kafka's watchdog, Spark) put theirs there too. A
SIGKILLed command cannot clean up: the next command removes every root whose marker names a pid
that is no longer running.

SIGTERM is turned into :class:`Terminated` (a ``KeyboardInterrupt``) in the main thread, so that
SIGTERM unwinds exactly as Ctrl-C does: context managers stop what they started (a LocalKafka,
Spark process groups, store children) and a campaign prints and writes what finished.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

__all__ = ["STOPPING", "TempDirTooLong", "Terminated", "check_temp_dir", "exit_code_of", "kill_started_processes",
           "remove_dead_roots", "session", "signal_name", "stop_starting"]

ROOT_PREFIX = "eos-harness-"
MARKER = ".eos-harness-tmp"
# Set when the command is being interrupted: nothing may start a new child process after it.
STOPPING = threading.Event()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""

    signum = signal.SIGTERM


# A Unix socket's path holds at most 107 bytes (108 with its NUL). The one the harness makes is
# multiprocessing's forkserver's (the store children's zygote starts from it), under the command's temp
# root: this is what is added to TMPDIR.
SOCKET_PATH_MAX = 107
_ROOT_TAIL = "/{prefix}{pid}-xxxxxxxx"  # the command's temp root under TMPDIR (mkdtemp's 8 letters)
_SOCKET_TAIL = "/pymp-xxxxxxxx/listener-xxxxxxxx"  # the forkserver's socket under the temp directory
_user_temp_dir: str | None = None  # TMPDIR as the user set it, while a session runs (its root is under it)


class TempDirTooLong(ValueError):
    """TMPDIR is too long for the Unix sockets the harness makes under it (a usage error)."""


def check_temp_dir(base: str | Path | None = None) -> None:
    """Raise :class:`TempDirTooLong` when the Unix socket the harness makes to start store processes
    (the forkserver's, under the command's temp root) would not fit in a socket address under ``base``
    (TMPDIR; default: TMPDIR as the user set it, or the temp directory outside a session). Called where
    that socket is made (:mod:`eos_harness.process.zygote`), and by the commands that start store
    processes before they run anything (:func:`eos_harness.faces.toolkit.starts_store_processes`); a
    command that starts none (a Spark run, ``report``) runs under any TMPDIR."""
    if base is None:
        base = _user_temp_dir or tempfile.gettempdir()
        in_root = _user_temp_dir is not None
    else:
        in_root = True
    length = len(os.fsencode(os.path.abspath(base)))
    tail = len(_SOCKET_TAIL) + (len(_ROOT_TAIL.format(prefix=ROOT_PREFIX, pid=os.getpid())) if in_root else 0)
    if length + tail > SOCKET_PATH_MAX:
        raise TempDirTooLong(
            f"TMPDIR={base} is too long ({length} bytes): the harness's Unix sockets live under it, and a socket "
            f"path holds at most {SOCKET_PATH_MAX} bytes; set TMPDIR to a directory of at most "
            f"{SOCKET_PATH_MAX - tail} bytes (e.g. TMPDIR=/tmp)")


class Stopped(RuntimeError):
    """Raised where a child process would start after the command began to stop."""


def stop_starting() -> None:
    """Raise :class:`Stopped` if the command is stopping (called before a child process is started)."""
    if STOPPING.is_set():
        raise Stopped("the command is stopping (interrupted): no new process is started")


def signal_name(exc: BaseException) -> str:
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


def exit_code_of(exc: BaseException) -> int:
    """The shell's code for a command ended by this signal: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def _process_alive(pid: int, created: float | None) -> bool:
    try:
        proc = psutil.Process(pid)
        if created is not None and abs(proc.create_time() - created) > 1.0:
            return False  # the pid was reused by another process
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def remove_dead_roots(base: str | Path | None = None) -> list[Path]:
    """Remove the temp roots of commands that died without cleaning up (their marker's pid is gone)."""
    base = Path(base or tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError):
        for root in base.glob(f"{ROOT_PREFIX}*"):
            try:
                pid_text, _, created_text = (root / MARKER).read_text().partition(" ")
                pid, created = int(pid_text), float(created_text) if created_text else None
            except (OSError, ValueError):
                # A root without a readable marker: only one older than a minute is a leftover
                # (a new one may be between mkdtemp and writing its marker).
                with contextlib.suppress(OSError):
                    if time.time() - root.stat().st_mtime < 60:
                        continue
                pid, created = -1, None
            if pid > 0 and _process_alive(pid, created):
                continue
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed


def kill_started_processes() -> int:
    """SIGKILL every process this command started (all descendants, listed before any is killed,
    so that grandchildren reparented by a killed parent are not missed). Returns how many."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=3)
    return len(children)


@contextlib.contextmanager
def session() -> Iterator[Path]:
    """The command's temp root (created, exported as ``TMPDIR``, removed at the end) and its signal
    handling (SIGTERM → :class:`Terminated`; SIGINT → ``KeyboardInterrupt`` even when the command was
    started with SIGINT ignored, as a shell starts a background job: a ``kill -INT`` stops it as Ctrl-C
    does). Yields the root."""
    global _user_temp_dir
    base = tempfile.gettempdir()
    remove_dead_roots(base)
    root = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-", dir=base))
    (root / MARKER).write_text(f"{os.getpid()} {psutil.Process().create_time()}")
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "HYPOTHESIS_STORAGE_DIRECTORY")}
    saved_tempdir = tempfile.tempdir
    os.environ["TMPDIR"] = str(root)
    # Hypothesis keeps its cache (unicode data, examples) in ./.hypothesis unless told otherwise.
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(root / "hypothesis")
    tempfile.tempdir = str(root)
    saved_user_temp_dir, _user_temp_dir = _user_temp_dir, base
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler) if main_thread else None
    interrupted = False
    try:
        yield root
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if interrupted:
            STOPPING.set()
            kill_started_processes()
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
        _shutdown_children()
        _release_run_directories()
        tempfile.tempdir = saved_tempdir
        _user_temp_dir = saved_user_temp_dir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


def _release_run_directories() -> None:
    """Release the run directories the command held (:func:`eos_harness.rundir.hold`): the operating
    system does it when the process ends; a command run in-process (a test) ends here."""
    import sys

    rundir = sys.modules.get("eos_harness.rundir")
    if rundir is not None:
        rundir.release_all()


def _shutdown_children() -> None:
    """Stop what the harness's process-wide helpers keep running (the zygote, multiprocessing's
    forkserver) before the temp root they live in is removed."""
    import sys

    server = sys.modules.get("eos_harness.process.server")
    if server is not None and getattr(server, "_context", None) is not None:
        with contextlib.suppress(Exception):
            server._context.shutdown()
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is not None:
        with contextlib.suppress(Exception):
            _stop_forkserver(forkserver._forkserver)
    util = sys.modules.get("multiprocessing.util")
    if util is not None:  # what multiprocessing does at exit, among it removing its pymp-* directory
        with contextlib.suppress(Exception):
            util._run_finalizers()


def _stop_forkserver(server, grace_s: float = 3.0) -> None:
    """multiprocessing's own ``ForkServer._stop`` asks the forkserver to end and then waits for it
    without a bound; a forkserver that does not end (seen with a full disk: it hung, and so did the
    command) is killed with its children after ``grace_s``."""
    from multiprocessing import util

    import psutil

    with server._lock:
        pid = server._forkserver_pid
        if pid is None:
            return
        os.close(server._forkserver_alive_fd)  # asks the forkserver to stop
        server._forkserver_alive_fd = None
        try:
            process = psutil.Process(pid)
            try:
                process.wait(grace_s)
            except psutil.TimeoutExpired:
                for child in process.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                process.kill()
                process.wait(5)
        except psutil.NoSuchProcess:
            pass
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        server._forkserver_pid = None
        address, server._forkserver_address = server._forkserver_address, None
        if address and not util.is_abstract_socket_namespace(address):
            with contextlib.suppress(OSError):
                os.unlink(address)
