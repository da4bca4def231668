"""The store server: the store under test runs in a child process, forked from a preloaded server.

Children are forked by a zygote (``eos_harness.process.zygote``: one preloaded process, itself started from
multiprocessing's forkserver) with the stores already imported, so a restart costs about a
millisecond of fork plus the store's own open, not an interpreter start. The driver talks to a child over a pipe; the child
never writes the history. A crash is an armed crash point firing in the child (the child names
the point on the pipe just before it SIGKILLs itself) or the driver's :meth:`StoreProcess.kill`.

``with StoreServer() as server: store = server.start("rocksdb-indexed", directory)`` — every child
still alive when the block exits is killed and reaped, also when the block raises.

A user's store module (``module:function``) is imported into the zygote once (:func:`preload_store`,
called by :meth:`StoreServer.start`), so its children start with it loaded as they do with ours.
Inside :func:`children_output`, every child's stdout and stderr go to a log file, not the terminal;
a child that dies outside any crash point carries the first lines it wrote (``ChildCrashed.output``).

Every call is bounded (``StoreServer(timeout=…)``, ``--store-timeout``): a store that does not answer
in time is a :class:`StoreHang` carrying the operation and the child's stack; the child runs the
store wrapped by :mod:`eos_harness.process.guard`, so a raise or a wrong return type comes back as a
:class:`StoreCallError` whose ``finding`` names the check (``store_raised``, ``store_return_type``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

from eos_harness.faults import points
from eos_harness.process import zygote
from eos_harness.process.guard import (
    STORE_TIMEOUT_S,
    StoreFinding,
    guarded,
    install_stack_dump,
    stack_and_kill,
)
from eos_harness.verdict import hang_finding

__all__ = ["ChildCrashed", "StoreCallError", "StoreHang", "StoreProcess", "StoreServer", "children_output",
           "OwnOutput", "forkserver_context", "held_output", "output_offset", "output_since", "output_to",
           "own_output_to", "preload_store", "answer_calls", "borrow", "receive_lent"]

PRELOAD = ["eos_harness.stores.catalogue", "eos_harness.runtime", "eos_harness.broker.embedded", "eos_harness.suites.lifecycle.runner",
           "eos_harness.broker.kafka", "eos_harness.metadata.controller", "eos_harness.metadata.reader",
           "rocksdict"]  # (a module that fails to import is skipped)
OUTPUT_LINES = 20  # how many lines of a dead child's output its ChildCrashed carries

_context = None


def forkserver_context():
    """The process-wide context whose ``Process`` forks children from the preloaded zygote."""
    global _context
    if _context is None:
        _context = zygote.context(PRELOAD)
    return _context


def preload_store(spec: str, timeout: float = STORE_TIMEOUT_S) -> str | None:
    """Import the module of a user's store ``module:function`` into the zygote (once per zygote), so
    that its children do not each import it again. Returns why it could not (None when loaded, or
    for a built-in store, which the zygote has already)."""
    from eos_harness.stores.registry import builtin_spec

    if ":" not in spec or builtin_spec(spec) is not None:
        return None
    return forkserver_context().preload(spec.partition(":")[0], list(sys.path), timeout)


_held: list[Path] = []  # the driver's own output, held in temp files until a log file opens


@contextlib.contextmanager
def held_output(children: bool = False) -> Iterator[None]:
    """Within the block, this process's own stdout and stderr (and with ``children``, its children's)
    go to a temp file (in the command's temp root), appended to the log file of the next
    :func:`children_output`: for the driver's import of a user's store module, or a probe of the
    store, before the run directory exists (the module may print or warn)."""
    fd, path = tempfile.mkstemp(prefix="eos-driver-", suffix=".log")
    os.close(fd)
    _held.append(Path(path))
    try:
        with own_output_to(path), (_children_to(path) if children else contextlib.nullcontext()):
            yield
    finally:  # nothing written: nothing to hold (a command that ends before its log opens leaves no file)
        with contextlib.suppress(OSError, ValueError):
            if os.path.getsize(path) == 0:
                _held.remove(Path(path))
                os.unlink(path)


def _append_held(path: str | Path) -> None:
    while _held:
        held = _held.pop(0)
        with contextlib.suppress(OSError):
            with open(held, "rb") as source, open(path, "ab") as log:
                shutil.copyfileobj(source, log)
            held.unlink()


@contextlib.contextmanager
def children_output(path: str | Path) -> Iterator[Path]:
    """Within the block, every child's stdout and stderr (and the zygote's imports') are appended to
    ``path``, not written to the terminal; so is what was written in :func:`held_output` before."""
    _append_held(path)
    with _children_to(path):
        yield Path(path)


@contextlib.contextmanager
def _children_to(path: str | Path) -> Iterator[None]:
    ctx = forkserver_context()
    previous = ctx.output
    ctx.set_output(str(path))
    try:
        yield
    finally:
        with contextlib.suppress(zygote.ZygoteError, OSError):
            ctx.set_output(previous)


@contextlib.contextmanager
def own_output_to(path: str | Path) -> Iterator[None]:
    """Within the block, this process's own stdout and stderr (file descriptors 1 and 2) are appended
    to ``path``: for the driver's own import of a user's store module, which may print or warn."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for each in (fd, *saved):
            os.close(each)


def output_since(offset: int | None, lines: int = OUTPUT_LINES) -> str:
    """The first ``lines`` lines children wrote to the output file from ``offset`` on ("" if none)."""
    path = forkserver_context().output
    if path is None or offset is None:
        return ""
    with contextlib.suppress(OSError), open(path, "rb") as log:
        log.seek(offset)
        text = log.read(64 * 1024).decode("utf-8", "replace")
        return "\n".join(text.splitlines()[:lines])
    return ""


class OwnOutput:
    """One child's stdout and stderr kept apart from the other children's while it runs, when the
    children's output goes to a log file (:func:`children_output`): scenarios run side by side write to
    one log, so the first lines a child wrote are read from its own file (:meth:`first_lines`), not from
    the log from an offset. :meth:`close` (when the child is reaped) appends the file to the log.

    The driver makes one before it starts the child and passes :attr:`path` to it; the child calls
    :func:`output_to` with it first thing. Without a log file, ``path`` is None and nothing changes."""

    def __init__(self) -> None:
        self.log = forkserver_context().output
        self.path: str | None = None
        self.written = b""  # once closed: what the child wrote (its file is gone)
        if self.log is not None:
            fd, self.path = tempfile.mkstemp(prefix="eos-child-", suffix=".log")  # in the command's temp root
            os.close(fd)

    def first_lines(self, lines: int = OUTPUT_LINES) -> str:
        """The first ``lines`` lines the child wrote so far ("" if none, or no log file)."""
        written = self.written[:64 * 1024]
        if self.path is not None:
            with contextlib.suppress(OSError), open(self.path, "rb") as own:
                written = own.read(64 * 1024)
        return "\n".join(written.decode("utf-8", "replace").splitlines()[:lines])

    def close(self) -> None:
        """Append what the child wrote to the log file (once), and remove its own file."""
        if self.path is None:
            return
        path, self.path = self.path, None
        with contextlib.suppress(OSError):
            with open(path, "rb") as own:
                self.written = own.read()
            if self.written:
                with open(self.log, "ab") as log:
                    log.write(self.written)  # one write, appending: not interleaved with another child's
            os.unlink(path)


def output_to(path: str | None) -> None:
    """In a child: point this process's stdout and stderr at ``path`` (its :class:`OwnOutput`), if any."""
    if path is None:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def output_offset() -> int | None:
    path = forkserver_context().output
    if path is None:
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


class ChildCrashed(Exception):
    """The store's process died: at crash point ``point``, or killed by the driver (``point`` None).
    ``output``: for a death outside any crash point, the first lines the child wrote (when its output
    goes to a log file, :func:`children_output`)."""

    def __init__(self, point: str | None, exitcode: int | None, output: str = "") -> None:
        message = f"store process died at {point or 'an unnamed point'} (exit code {exitcode})"
        if output:
            message += f"; it wrote:\n{output}"
        super().__init__(message)
        self.point = point
        self.exitcode = exitcode
        self.output = output


class StoreCallError(Exception):
    """The store raised an exception; ``kind`` is its class name. ``finding``: the guard's finding
    (``check``, ``operation``, ``expected``, ``observed``, ``detail``) when the store broke the protocol."""

    def __init__(self, kind: str, message: str, finding: dict | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.finding = finding


class StoreHang(Exception):
    """A call into the store did not return within the timeout; the child was killed.
    ``finding`` is the ``store_hang`` finding, with the child's stack as ``detail``."""

    def __init__(self, finding: dict) -> None:
        super().__init__(finding["observed"])
        self.finding = finding


def _raised(exc: BaseException, with_traceback: bool = False) -> tuple:
    message = f"{exc}\n{traceback.format_exc()}" if with_traceback else str(exc)
    return (type(exc).__name__, message, exc.to_json() if isinstance(exc, StoreFinding) else None)


_LISTING = {"range", "all", "rc_range", "rc_all"}
_OPERATION = {"rc_get": "read_committed().get", "rc_range": "read_committed().range", "rc_all": "read_committed().all"}


def _serve(spec: str, directory: str, sys_path: list[str], arms: list[tuple[str, int]], conn, stacks=None,
           trace: bool = False, context: dict | None = None, init_arms: list[tuple[str, int]] | None = None,
           lent_in=None, lent_out=None) -> None:
    """Child main loop: open the store, then execute calls until close or EOF. With ``trace``, the
    crash points reached are recorded from the start, and ``close`` answers with them
    (``[(point, declared), …]``). ``context``: further :class:`StoreContext` fields (``changelogs`` …).
    ``lent_in``, ``lent_out``: the pipes to and from what the server lends the store's process (its
    :class:`~eos_harness.stores.Lending`: a JVM for Kafka Streams' stores), handed to the store's kind."""
    if stacks is not None:
        install_stack_dump(stacks)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    from eos_harness.store import StoreContext
    from eos_harness.stores.registry import resolve

    receive_lent(spec, lent_in, lent_out)
    points.set_notifier(lambda name: conn.send(("crash", name)))
    if trace:
        points.start_tracing()
    try:
        store = guarded(resolve(spec))()
        for point, hit in init_arms or []:  # points inside init itself (a migration's steps)
            points.declare_for_run(point)
            points.arm(point, hit)
        store.init(StoreContext(directory=Path(directory), **(context or {})))
        for point, hit in arms:
            points.declare_for_run(point)
            points.arm(point, hit)
        conn.send(("ok", None))
    except BaseException as exc:  # noqa: BLE001 - report, then die
        conn.send(("raise", _raised(exc, with_traceback=True)))
        os._exit(1)

    def answer(method: str, args: tuple):
        if method == "arm":
            points.declare_for_run(args[0])  # a point of the store's own the probe found undeclared
            points.arm(*args)
            result = None
        elif method == "disarm":
            points.disarm_all()
            result = None
        elif method.startswith("rc_"):
            result = getattr(store.read_committed(), method[3:])(*args)
        else:
            result = getattr(store, method)(*args)
        if method in _LISTING:
            result = list(result)
        if method == "close":
            # close returned: say so before the threads' grace, so that the driver's bound on close (the
            # store timeout) covers close alone, never the grace (a verdict that does not hang on load).
            conn.send(("closed", None))
            _no_thread_left()
        if method == "close" and trace:  # each point reached, and whether a module declared it
            known = {p.name for p in points.load_declarations()}
            result = [(name, name in known) for name in points.reached()]
        return result

    answer_calls(conn, answer)


RELEASE_CLOSE_S = 10.0  # the bound on the clean close of a store released at a case's end (StoreProcess.release)
CLOSE_THREADS_GRACE_S = 2.0  # how long threads the store started may take to end after its close
# How long past that grace the driver waits for the child's answer on them (harness code only: a bound
# against a child that is stuck, never one a loaded machine meets).
CLOSE_ANSWER_BOUND_S = 60.0


def _no_thread_left(grace: float = CLOSE_THREADS_GRACE_S) -> None:
    """After ``close``: raise a ``store_error`` finding if a non-daemon thread the store started is
    still running ``grace`` seconds later (it would keep the application's process from exiting)."""
    import threading
    import time

    deadline = time.monotonic() + grace
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in left:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t for t in left if t.is_alive()]
    if left:
        names = ", ".join(repr(t.name) for t in left)
        raise StoreFinding("close", "close ends every thread the store started (or they are daemon threads)",
                           f"close returned, and {grace:g} s later the store's non-daemon thread{'s' if len(left) > 1 else ''} "
                           f"{names} still ran: an application's process with such a thread never exits")


BATCH = "batch"  # a request of several calls (StoreProcess.calls): no store has a method of that name called here


def answer_calls(conn, answer: Callable[[str, tuple], object]) -> NoReturn:
    """A store child's call loop, once its store is open: each ``(method, args)`` the driver sends is
    answered ``("ok", answer(method, args))``, or ``("raise", …)`` with what it raised; the child
    exits after ``close`` or when the driver's end of the pipe is gone. A ``(BATCH, [(method, args), …])``
    is those calls in order, each answered as it returns, none made after one that raised."""
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            os._exit(0)
        if method == BATCH:  # reads sent together (StoreProcess.calls): each answered as it returns
            for each, its_args in args:
                try:
                    conn.send(("ok", answer(each, its_args)))
                except BaseException as exc:  # noqa: BLE001 - as below; the calls after it are not made
                    conn.send(("raise", _raised(exc)))
                    break
            continue
        try:
            conn.send(("ok", answer(method, args)))
        except BaseException as exc:  # noqa: BLE001 - the driver decides what an exception means
            conn.send(("raise", _raised(exc)))
        if method == "close":
            conn.close()
            os._exit(0)


class StoreProcess:
    """A client for one store child. ``call(method, *args)`` mirrors the store protocol; read-committed
    view calls are ``rc_get``, ``rc_range``, ``rc_all``."""

    def __init__(self, process, conn, stacks=None, timeout: float = STORE_TIMEOUT_S,
                 crashes: Counter | None = None, output_offset: int | None = None, lent=None, pool=None) -> None:
        self.process = process
        self.lent, self.pool = lent, pool  # what the server lent the child (a JVM for Kafka Streams' stores), its pool
        self.conn = conn
        self.stacks = stacks  # the pipe the child writes its stack into on SIGUSR1
        self.timeout = timeout
        self.crashes = crashes if crashes is not None else Counter()  # crash point -> times it fired
        self.output_offset = output_offset  # where this child's output starts in the log file

    @property
    def pid(self) -> int:
        return self.process.pid

    def _died(self, point: str | None) -> ChildCrashed:
        self.process.join(10)
        self.process.kill()  # still alive, or what it started (its process group)
        self.process.join()
        self._close_pipes()
        if point is not None:
            self.crashes[point] += 1
        return ChildCrashed(point, self.process.exitcode, "" if point else output_since(self.output_offset))

    def _close_pipes(self) -> None:
        self.conn.close()
        if self.stacks is not None:
            self.stacks.close()
        self._end_lent()

    def _end_lent(self, clean: bool = False) -> None:
        """What was lent dies with the child; after a clean close of its store it goes back to the pool."""
        lent, self.lent = self.lent, None
        if lent is not None:
            self.pool.give_back(lent) if clean else self.pool.kill(lent)

    def _receive(self, operation: str):
        if not self.conn.poll(self.timeout):
            stack = stack_and_kill(self.process, self.stacks) if self.stacks is not None else ""
            self.kill()
            raise StoreHang(hang_finding(operation, self.timeout, stack))
        try:
            kind, value = self.conn.recv()
        except EOFError:
            raise self._died(None) from None
        if kind == "closed":
            # close returned within the timeout; the child now gives the store's threads their grace
            # (CLOSE_THREADS_GRACE_S, its own clock) and answers whether one still runs. Waited for with a
            # bound far past the grace: only the harness's own code runs in the child now, so its answer
            # comes whatever the machine's load (a child that never answers holds the interpreter in a
            # thread of the store's own: a hang of close).
            if not self.conn.poll(CLOSE_THREADS_GRACE_S + CLOSE_ANSWER_BOUND_S):
                stack = stack_and_kill(self.process, self.stacks) if self.stacks is not None else ""
                self.kill()
                raise StoreHang(hang_finding(operation + " (its threads ending)",
                                             CLOSE_THREADS_GRACE_S + CLOSE_ANSWER_BOUND_S, stack))
            try:
                kind, value = self.conn.recv()
            except EOFError:
                raise self._died(None) from None
        if kind == "crash":
            raise self._died(value)
        if kind == "raise":
            raise StoreCallError(*value)
        return value

    def call(self, method: str, *args):
        try:
            self.conn.send((method, args))
        except (BrokenPipeError, OSError):
            raise self._died(None) from None
        result = self._receive(_OPERATION.get(method, method))
        if method == "close":  # the child exits after a clean close: wait, so the directory is free
            self.process.join(10)
            self.process.kill()  # and what it started goes with it (its process group)
            self._end_lent(clean=True)
        return result

    def calls(self, calls: list[tuple[str, tuple]]) -> Iterator:
        """The answers of ``calls`` (``(method, args)``, none of them ``close``), in order, sent in one
        message: the store makes the same calls, each bounded by the timeout as :meth:`call`'s are, and
        none after one that raised; the driver waits for the child once, not once per call (on a loaded
        machine each wait is a wake-up of both processes). Raises as :meth:`call` does, at the call that failed."""
        try:
            self.conn.send((BATCH, calls))
        except (BrokenPipeError, OSError):
            raise self._died(None) from None
        for method, _ in calls:
            yield self._receive(_OPERATION.get(method, method))

    def close(self) -> None:
        """Clean close of the store, then the child exits (waited for)."""
        self.call("close")

    def release(self) -> None:
        """End the child whose store is no longer needed (a case's end). A child holding something lent (a
        store JVM) is disarmed and closes its store cleanly, so that what it holds serves the next store
        instead of dying with the child (a close that fails, or takes over :data:`RELEASE_CLOSE_S`: killed);
        any other child is killed (:meth:`kill`)."""
        if self.lent is not None and self.alive:
            self.timeout = min(self.timeout, RELEASE_CLOSE_S)
            try:
                self.call("disarm")
                self.call("close")
                return
            except (ChildCrashed, StoreCallError, StoreHang, OSError, EOFError):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child (a crash at an arbitrary moment) and what it started, and reap it."""
        self.process.kill()
        self.process.join()
        self._close_pipes()

    @property
    def alive(self) -> bool:
        return self.process.is_alive()


def borrow(spec: str, pools: dict[str, tuple[object, bool]], shared_only: bool = False):
    """What the process of store ``spec`` borrows (its spec's :class:`~eos_harness.stores.Lending`: a JVM
    for Kafka Streams' stores): ``(resource, its pool, its pipes as Connections)`` (the zygote hands them to
    the child), else Nones. ``pools``: family -> (pool, owned), the pools made so far (one added on first
    use). ``shared_only``: borrow only from a pool shared beyond the caller (none: Nones, and the store's
    process makes its own). Raises :class:`~eos_harness.stores.LendError`."""
    from eos_harness.stores.registry import builtin_spec

    builtin = builtin_spec(spec)
    lending = builtin.lending if builtin is not None else None  # a user's module:function borrows nothing
    if lending is None:
        return None, None, None
    from multiprocessing.connection import Connection

    if lending.family not in pools:
        pools[lending.family] = lending.pool(lambda: forkserver_context().output)
    pool, owned = pools[lending.family]
    if owned and shared_only:
        return None, None, None
    lent = pool.take(lending.key)
    to_lent, from_lent = lent.pipes()
    return lent, pool, (Connection(to_lent, readable=False), Connection(from_lent, writable=False))


def receive_lent(spec: str, lent_in, lent_out) -> None:
    """In a store's process: hand the pipes of what was lent to it (:func:`borrow`) to the store's kind."""
    if lent_in is None:
        return
    from eos_harness.stores.registry import builtin_spec

    builtin_spec(spec).lending.receive(os.dup(lent_in.fileno()), os.dup(lent_out.fileno()))
    lent_in.close()
    lent_out.close()


class StoreServer:
    """Starts store children and guarantees none outlives the ``with`` block."""

    def __init__(self, timeout: float = STORE_TIMEOUT_S, crashes: Counter | None = None) -> None:
        self.children: list[StoreProcess] = []
        self.timeout = timeout
        # what is lent to children (Lending: JVMs for Kafka Streams' stores): family -> (pool, owned), made on first use
        self._pools: dict[str, tuple[object, bool]] = {}
        # crash point -> how many times a child died there
        self.crashes: Counter[str] = crashes if crashes is not None else Counter()

    def __enter__(self) -> StoreServer:
        forkserver_context().discard_dead()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def start(self, spec: str, directory: Path, arms: list[tuple[str, int]] | None = None,
              trace: bool = False, context: dict | None = None,
              init_arms: list[tuple[str, int]] | None = None) -> StoreProcess:
        """A child with the store opened (``init``) in ``directory``; raises StoreHang or StoreCallError
        when the store cannot be opened. ``context``: further :class:`~eos_harness.store.StoreContext`
        fields for the store's ``init`` (e.g. ``{"changelogs": (tp0, tp1, tp2)}``). ``init_arms``: points
        armed before ``init`` (``arms`` are armed after it), e.g. a step of the store's migration."""
        preload_store(spec, self.timeout)
        offset = output_offset()
        stacks, stack_writer = forkserver_context().Pipe(duplex=False)
        try:
            return self._launch(_serve, spec, (str(directory), list(sys.path), arms or []),
                                (stack_writer, trace, context, init_arms), stacks, offset, self.crashes)
        finally:
            stack_writer.close()

    def _launch(self, target, spec: str, head: tuple, tail: tuple, stacks=None, offset=None,
                crashes: Counter | None = None) -> StoreProcess:
        """Start ``target(spec, *head, conn, *tail, jvm_in, jvm_out)`` in a child with what the store's
        kind borrows lent to it, and wait for its ``init``."""
        ctx = forkserver_context()
        lent, pool, pipes = self._lend(spec)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=target, args=(spec, *head, child, *tail, *(pipes or (None, None))), daemon=True)
        try:
            proc.start()
        except BaseException:
            if lent is not None:
                pool.kill(lent)
            raise
        finally:
            for pipe in pipes or ():
                pipe.close()
        child.close()
        client = StoreProcess(proc, parent, stacks, self.timeout, crashes, offset, lent, pool)
        self.children = [c for c in self.children if c.alive]
        self.children.append(client)
        client._receive("init")
        return client

    def _lend(self, spec: str):
        """For a store whose kind borrows a resource (its spec's :class:`~eos_harness.stores.Lending`: a
        JVM for Kafka Streams' stores): the resource taken from the server's pool of its family, that pool,
        and the resource's pipes as Connections (the zygote hands them to the child); else Nones."""
        from eos_harness.stores import LendError

        try:
            return borrow(spec, self._pools)
        except LendError as exc:
            raise StoreCallError("StoreError", str(exc)) from None

    def shutdown(self) -> None:
        for child in self.children:
            child.kill()
        self.children.clear()
        pools, self._pools = self._pools, {}
        for pool, owned in pools.values():
            if owned:  # a shared pool outlives this server (its idle resources serve the next)
                pool.shutdown()
