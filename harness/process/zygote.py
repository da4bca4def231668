"""A zygote: one preloaded, single-threaded process that forks the children under test on request.

multiprocessing's forkserver costs ~15 ms per child here (a socket round trip, pickled preparation
data, ``spawn`` bookkeeping in the child); a plain ``os.fork()`` of a preloaded process costs ~1 ms.
The zygote keeps the forkserver's safety (it is started once *from* the forkserver, so it never
inherits the driver's threads, e.g. librdkafka's or a thread pool's) and forks directly:

- the driver sends ``(target, args)`` over a socket; :class:`multiprocessing.connection.Connection`
  objects in ``args`` travel as file descriptors (``SCM_RIGHTS``) and are rebuilt in the child;
- the zygote forks, and hands back the child's pid and a *pidfd* (Linux >= 5.3), through which the
  driver waits for, and signals, exactly that process (no pid-reuse race);
- the zygote forks each child ahead of its request (a *spare*, waiting for its target): a request is
  answered by handing the spare its target and connections, and the next spare is forked while the
  driver waits for this child (a start costs the driver two messages, no fork);
- the zygote reaps its children and reports each exit code (``-9`` for SIGKILL, as
  multiprocessing does);
- on request it imports more modules (a user's store module, :meth:`ZygoteContext.preload`), so that
  its children do not each import them again, and sends its own and its children's stdout and stderr
  to a file (:meth:`ZygoteContext.set_output`).

Each child leads a process group of its own, so that what it starts dies with it (:meth:`Process.kill`
kills the group, also once the child itself has ended). What a child starts in a session or group of
its own (``setsid``, a daemon) is swept: the zygote is the *subreaper* of its children's descendants
(``PR_SET_CHILD_SUBREAPER``), so such a process becomes the zygote's child when the child that started
it ends; when a child ends, and before it forks the next one, the zygote kills every such process whose
starting child has ended (each child's processes carry its pid in :data:`ORIGIN_ENV`), so that none
holds a pipe of the driver open past its child's end. Children die with the zygote
(``PR_SET_PDEATHSIG``), and the zygote kills its children and exits when the driver's end of the
socket closes; the driver kills live children at exit. So nothing
outlives the run.

:func:`context` returns an object with multiprocessing's ``Pipe`` and ``Process(target, args,
daemon)`` (``start``, ``pid``, ``is_alive``, ``join``, ``kill``, ``terminate``, ``exitcode``), so
callers use it like a multiprocessing context.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import select
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from multiprocessing.reduction import recvfds, sendfds

from eos_harness.session import check_temp_dir

__all__ = ["ZygoteError", "context"]

EXIT_CODE_WAIT_S = 10.0
SPARE_ATTEMPTS = 3  # spares forked for one start when each died before its turn (then the last is handed over dead)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
ORIGIN_ENV = "EOS_HARNESS_CHILD"  # in each child's environment (and so its processes'): the child's pid


class ZygoteError(RuntimeError):
    """The zygote could not start a child (it died, or the platform lacks pidfds)."""


class _Slot:
    """Stands in the pickled args for a Connection whose fd travels beside the message."""

    def __init__(self, index: int, readable: bool, writable: bool) -> None:
        self.index, self.readable, self.writable = index, readable, writable


# -- the zygote process ----------------------------------------------------------------------------


def _die_with_parent() -> None:
    # Not Linux: no prctl, and the zygote still kills its children when the driver goes.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _become_subreaper() -> None:
    """Make the zygote the subreaper of its children's descendants (see the module)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _own_children() -> list[int]:
    """The pids of this process's children (forked, or adopted as their subreaper)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        return []


def _origin(pid: int) -> int | None:
    """The child of the zygote that ``pid`` descends from (its :data:`ORIGIN_ENV`), or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            for entry in environ.read().split(b"\0"):
                if entry.startswith(ORIGIN_ENV.encode() + b"="):
                    return int(entry.partition(b"=")[2] or 0)
    except (OSError, ValueError):
        pass
    return None


def _descendants(pid: int) -> list[int]:
    """``pid``'s children, theirs, and so on (read from /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/task/{current}/children") as listing:
                children = [int(p) for p in listing.read().split()]
        except OSError:
            continue
        found += children
        todo += children
    return found


def _sweep(forked: set[int], everything: bool = False) -> None:
    """Kill, and reap, each process the zygote adopted (a descendant of a child, left when the child
    that started it ended) whose child has ended (with ``everything``: each one), with what it
    started; reap those that ended by themselves."""
    for pid in _own_children():
        if pid in forked:
            continue
        if everything or _origin(pid) not in forked:
            for victim in [pid, *_descendants(pid)]:
                with contextlib.suppress(OSError):
                    os.kill(victim, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # a setsid process leads its own group
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        else:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _child(target, args, fds: list[int], keep: set[int], close: list[int]) -> None:
    """Runs in the forked child: rebuild the connections, call the target, exit."""
    code = 1
    try:
        _become_a_child(close, keep)
        code = _run(target, args, fds)
    except BaseException:  # noqa: BLE001 - printed, then the child exits 1 as multiprocessing's would
        traceback.print_exc()
    finally:
        _exit(code)


def _spare(channel: Connection, close: list[int]) -> None:
    """Runs in a spare child (forked ahead, see :func:`_zygote_main`): set up as a child, then wait for
    its ``(target, args)`` and the fds of its connections from the zygote, and run it as :func:`_child`
    does. Ends at once (exit 0) when the zygote lets it go unused (EOF on ``channel``)."""
    code = 1
    try:
        _become_a_child(close, set())
        try:
            _, target, args, nfds = channel.recv()
            fds = _receive_fds(channel, nfds)
        except (EOFError, OSError):
            code = 0  # let go: never handed a target
            return
        channel.close()
        code = _run(target, args, fds)
    except BaseException:  # noqa: BLE001 - printed, then the child exits 1 as multiprocessing's would
        traceback.print_exc()
    finally:
        _exit(code)


def _become_a_child(close: list[int], keep: set[int]) -> None:
    """A child's set-up before its target: its own process group, its origin in its environment, death
    with the zygote, ^C as KeyboardInterrupt, the zygote's own fds closed."""
    _own_group(0)
    os.environ[ORIGIN_ENV] = str(os.getpid())
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd in close:
        if fd not in keep:
            os.close(fd)


def _run(target, args, fds: list[int]) -> int:
    """Call ``target`` with ``args`` (its connections rebuilt from ``fds``); the child's exit code."""
    try:
        args = tuple(Connection(fds[a.index], a.readable, a.writable) if isinstance(a, _Slot) else a
                     for a in args)
        target(*args)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - printed, then the child exits 1 as multiprocessing's would
        traceback.print_exc()
        return 1


def _exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # exiting anyway
            stream.flush()
    os._exit(code)


def _receive_fds(channel: Connection, count: int) -> list[int]:
    if not count:
        return []
    with socket.socket(fileno=os.dup(channel.fileno())) as sock:
        return recvfds(sock, count)


def _own_group(pid: int) -> None:
    """Put the child ``pid`` (0: this process) in a process group of its own, whose id is its pid:
    whatever it starts is in that group too, and dies with it (:meth:`Process.kill`). Done by the
    child and by the zygote both, so that the group exists whichever runs first."""
    with contextlib.suppress(OSError):  # the child has exec'd or ended: nothing left to group
        os.setpgid(pid, 0)


def _import_all(modules: list[str], sys_path: list[str]) -> dict[str, str]:
    """Import ``modules`` (after putting ``sys_path`` in front); {module: why it failed}."""
    import importlib

    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - the children import it themselves and report it
            failed[name] = f"{type(exc).__name__}: {exc}"
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return failed


_original_output: tuple[int, int] | None = None


def _set_output(fd: int | None) -> None:
    """Point the zygote's stdout and stderr (and so its children's) at ``fd``; None: back to the originals."""
    global _original_output
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if _original_output is None:
        _original_output = (os.dup(1), os.dup(2))
    out, err = (fd, fd) if fd is not None else _original_output
    os.dup2(out, 1)
    os.dup2(err, 2)


class _SpareChild:
    """A child forked ahead of its request (the zygote's end of its channel, its pid and pidfd)."""

    def __init__(self, channel: Connection, pid: int, pidfd: int) -> None:
        self.channel, self.pid, self.pidfd = channel, pid, pidfd


def _zygote_main(conn: Connection) -> None:
    """The zygote's loop: hand a child over on request, import modules or redirect output on request,
    reap children, report their exit codes.

    A child is forked ahead of its request (a *spare*, set up as a child and waiting for its target):
    a request is answered by handing the spare its target and connections, and the next spare is forked
    after the answer, while the driver waits for the child, not before. A spare forked before an import
    or a change of output is let go (killed, never reported), and the next one forked after it, so
    every child starts with what the zygote has loaded and writes where the zygote writes."""
    _die_with_parent()
    _become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C goes to the driver; it cleans up
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    selector = selectors.DefaultSelector()
    selector.register(conn.fileno(), selectors.EVENT_READ, None)
    children: dict[int, int] = {}  # pidfd -> pid (the spare's too)
    spare: _SpareChild | None = None

    def fork_spare() -> _SpareChild:
        mine, theirs = multiprocessing.Pipe(duplex=True)
        pid = os.fork()
        if pid == 0:
            _spare(theirs, [conn.fileno(), sock.fileno(), selector.fileno(), mine.fileno(), *children,
                            *(_original_output or ())])
        _own_group(pid)
        theirs.close()
        pidfd = os.pidfd_open(pid)
        children[pidfd] = pid
        selector.register(pidfd, selectors.EVENT_READ, pid)
        return _SpareChild(mine, pid, pidfd)

    def forget(child: _SpareChild) -> None:
        """Stop watching a spare (let go, or dead before it was handed over): its end is never reported."""
        selector.unregister(child.pidfd)
        del children[child.pidfd]
        child.channel.close()
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)
        os.close(child.pidfd)

    try:
        while True:
            for key, _ in selector.select():
                if key.data is not None:  # a child ended
                    pidfd, pid = key.fd, key.data
                    if children.get(pidfd) != pid:  # a spare let go earlier in this round
                        continue
                    if spare is not None and pid == spare.pid:  # a spare died unused: not the driver's
                        forget(spare)
                        spare = None
                        continue
                    selector.unregister(pidfd)
                    os.close(pidfd)
                    del children[pidfd]
                    _, status = os.waitpid(pid, 0)
                    _sweep(set(children.values()))  # what it started dies with it (and lets go of its pipes)
                    conn.send(("exit", pid, os.waitstatus_to_exitcode(status)))
                    continue
                try:
                    request = conn.recv()
                    if request[0] in ("import", "output") and spare is not None:
                        forget(spare)  # forked before the import or the output changes: let go
                        spare = None
                    if request[0] == "import":
                        conn.send(("imported", _import_all(*request[1:])))
                        continue
                    if request[0] == "output":
                        fds = recvfds(sock, 1) if request[1] else []
                        _set_output(fds[0] if fds else None)
                        for fd in fds:
                            os.close(fd)
                        conn.send(("output set",))
                        continue
                    _, target, args, nfds = request
                    fds = recvfds(sock, nfds) if nfds else []
                except EOFError:
                    return
                _sweep(set(children.values()))  # what ended children left, before the next child
                for attempt in range(SPARE_ATTEMPTS):
                    child, spare = spare or fork_spare(), None
                    try:
                        child.channel.send(("start", target, args, len(fds)))
                        if fds:
                            with socket.socket(fileno=os.dup(child.channel.fileno())) as to_child:
                                sendfds(to_child, fds)
                        break
                    except OSError:  # the spare died before its turn: let it go, fork another
                        if attempt == SPARE_ATTEMPTS - 1:
                            break  # none lives long enough: the driver sees its child end, as any other's
                        forget(child)
                child.channel.close()
                for fd in fds:
                    os.close(fd)
                conn.send(("started", child.pid))
                sendfds(sock, [child.pidfd])
                spare = fork_spare()  # the next child's, while the driver waits for this one
    except ConnectionError:
        return  # the driver went away mid-message (it is stopping): as at EOF, kill the children and end
    finally:
        for pidfd, pid in children.items():
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        _sweep(set(), everything=True)


# -- the driver's side -----------------------------------------------------------------------------


def _readable(fd: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))


class _Zygote:
    """The driver's handle on the zygote process (thread-safe)."""

    def __init__(self, preload: list[str]) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(preload)
        self._conn, child = ctx.Pipe(duplex=True)
        self._process = ctx.Process(target=_zygote_main, args=(child,), daemon=True, name="eos-harness-zygote")
        self._process.start()
        child.close()
        self._sock = socket.socket(fileno=os.dup(self._conn.fileno()))
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        self.live: weakref.WeakSet[Process] = weakref.WeakSet()

    def _read_one(self) -> tuple:
        try:
            message = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise ZygoteError(f"the zygote (pid {self._process.pid}) is gone: {exc!r}") from None
        if message[0] == "exit":
            self._exits[message[1]] = message[2]
        return message

    def start(self, target, args: tuple) -> tuple[int, int]:
        fds, wire = [], []
        for arg in args:
            if isinstance(arg, Connection):
                wire.append(_Slot(len(fds), arg.readable, arg.writable))
                fds.append(arg.fileno())
            else:
                wire.append(arg)
        with self._lock:
            if not self._process.is_alive():
                raise ZygoteError(f"the zygote (pid {self._process.pid}) is gone (exit code {self._process.exitcode})")
            try:
                self._conn.send(("start", target, tuple(wire), len(fds)))
                if fds:
                    sendfds(self._sock, fds)
                while True:
                    message = self._read_one()
                    if message[0] == "started":
                        return message[1], recvfds(self._sock, 1)[0]
            except (EOFError, OSError) as exc:  # it died between our check and its answer
                raise ZygoteError(f"the zygote (pid {self._process.pid}) is gone: {exc!r}") from None

    def request(self, message: tuple, answer: str, fds: list[int] = (), timeout: float | None = None):
        """Send ``message`` (and ``fds``), return the zygote's ``answer`` message; None after ``timeout``."""
        deadline = None if timeout is None else _now() + timeout
        with self._lock:
            if not self._process.is_alive():
                raise ZygoteError(f"the zygote (pid {self._process.pid}) is gone (exit code {self._process.exitcode})")
            self._conn.send(message)
            if fds:
                sendfds(self._sock, list(fds))
            while True:
                if deadline is not None and not self._conn.poll(max(0.0, deadline - _now())):
                    return None
                message = self._read_one()
                if message[0] == answer:
                    return message

    def exitcode(self, pid: int, wait: float) -> int | None:
        """The exit code of ``pid`` (already dead), as soon as the zygote reports it."""
        deadline = None if wait is None else _now() + wait
        while True:
            with self._lock:
                if pid in self._exits:
                    return self._exits.pop(pid)
                remaining = None if deadline is None else deadline - _now()
                if remaining is not None and remaining <= 0:
                    return None
                if self._conn.poll(min(0.05, remaining) if remaining is not None else 0.05):
                    self._read_one()

    def shutdown(self) -> None:
        for process in list(self.live):
            process.kill()
        self._conn.close()
        self._sock.close()
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _now() -> float:
    return time.monotonic()


class Process:
    """A child forked by the zygote, with the part of multiprocessing.Process's interface we use."""

    def __init__(self, zygote_getter, target, args: tuple = (), daemon: bool = True) -> None:
        self._get = zygote_getter
        self.target, self.args, self.daemon = target, tuple(args), daemon
        self.pid: int | None = None
        self._pidfd: int | None = None
        self._exitcode: int | None = None
        self._ended = False

    def start(self) -> None:
        from eos_harness.session import stop_starting

        stop_starting()  # an interrupted command starts no new child
        zygote = self._get()
        self.pid, self._pidfd = zygote.start(self.target, self.args)
        zygote.live.add(self)
        weakref.finalize(self, _close_fd, self._pidfd)

    def _ended_now(self, timeout: float | None) -> bool:
        if self._ended:
            return True
        if self._pidfd is None:
            raise ValueError("process not started")
        if _readable(self._pidfd, timeout):
            self._ended = True
            self._get().live.discard(self)
        return self._ended

    def is_alive(self) -> bool:
        return self._pidfd is not None and not self._ended_now(0)

    def join(self, timeout: float | None = None) -> None:
        if self._ended_now(timeout) and self._exitcode is None:
            self._exitcode = self._get().exitcode(self.pid, EXIT_CODE_WAIT_S)

    @property
    def exitcode(self) -> int | None:
        if self._pidfd is None or not self._ended_now(0):
            return None
        if self._exitcode is None:
            self._exitcode = self._get().exitcode(self.pid, EXIT_CODE_WAIT_S)
        return self._exitcode

    def _signal(self, signum: int) -> None:
        if self._pidfd is not None and not self._ended_now(0):
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        """SIGKILL the child and every process of its process group (what it started and did not move
        to a group of its own), also after the child ended: nothing it started outlives it. (A group's
        id stays taken while a member lives, so it names no other process.)"""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(self.pid, signal.SIGKILL)  # its group's id is its pid (_own_group)
        self._signal(signal.SIGKILL)

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the child (nothing if it has ended)."""
        self._signal(signum)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class ZygoteContext:
    """``Pipe`` and ``Process`` as in a multiprocessing context, the processes forked by the zygote."""

    def __init__(self, preload: list[str]) -> None:
        self._preload = list(preload)
        self._zygote: _Zygote | None = None
        self._lock = threading.Lock()
        self._imported: dict[str, str | None] = {}  # module -> why it failed in the zygote (None: loaded)
        self._output: str | None = None

    def _get(self) -> _Zygote:
        with self._lock:
            if self._zygote is None:
                if not hasattr(os, "pidfd_open"):
                    raise ZygoteError("the store server needs Linux >= 5.3 (os.pidfd_open) for its zygote")
                check_temp_dir()  # the forkserver's Unix socket is made under TMPDIR: TempDirTooLong, naming it
                self._zygote = _Zygote(self._preload)
                self._imported = {}
                atexit.register(self.shutdown)
                if self._output is not None:
                    self._send_output(self._zygote, self._output)
            return self._zygote

    def preload(self, module: str, sys_path: list[str], timeout: float) -> str | None:
        """Import ``module`` into the zygote once (its children then start with it loaded). Returns
        None when it is loaded, else why not (an import that raised, or that took longer than
        ``timeout``: that zygote is then stopped and a fresh one starts on the next request); the
        children then import it themselves, and report what goes wrong as they do for any store."""
        zygote = self._get()
        if module in self._imported:
            return self._imported[module]
        answer = zygote.request(("import", [module], list(sys_path)), "imported", timeout=timeout)
        if answer is None:
            why = f"importing {module!r} took longer than {timeout:g} s"
            self.shutdown()
        else:
            why = answer[1].get(module)
            self._imported[module] = why
        return why

    @property
    def output(self) -> str | None:
        """The file children's stdout and stderr go to (None: the command's own)."""
        return self._output

    def set_output(self, path: str | None) -> None:
        """Send the stdout and stderr of every child started from now on (and of the zygote's imports)
        to the file ``path`` (appended to); None: back to the command's own."""
        self._output = path
        with self._lock:
            zygote = self._zygote
        if zygote is not None:
            self._send_output(zygote, path)

    @staticmethod
    def _send_output(zygote: _Zygote, path: str | None) -> None:
        if path is None:
            zygote.request(("output", False), "output set")
            return
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            zygote.request(("output", True), "output set", [fd])
        finally:
            os.close(fd)

    @staticmethod
    def Pipe(duplex: bool = True):  # noqa: N802 - multiprocessing's name
        return multiprocessing.Pipe(duplex)

    def Process(self, target, args: tuple = (), daemon: bool = True) -> Process:  # noqa: N802
        return Process(self._get, target, args, daemon)

    def discard_dead(self) -> None:
        """Forget a zygote that is gone, so that the next start makes a new one. A long-lived process
        (a pytest session) can outlive the zygote: another command run in it stops multiprocessing's
        forkserver, and the zygote with it. Called where a server starts, never in a running scenario
        (whose dead zygote is an error the scenario must report)."""
        with self._lock:
            if self._zygote is not None and not self._zygote._process.is_alive():
                self._zygote = None

    def shutdown(self) -> None:
        """Kill every live child, then the zygote (also run at exit)."""
        with self._lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.shutdown()


def context(preload: list[str]) -> ZygoteContext:
    return ZygoteContext(preload)
