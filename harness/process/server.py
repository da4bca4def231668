"""The store server: the store under test runs in a child process, forked from a preloaded server.

Children are forked by a zygote (``harness.zygote``: one preloaded process, itself started from
multiprocessing's forkserver) with the stores already imported, so a restart costs about a
millisecond of fork plus the store's own open, not an interpreter start. The driver talks to a child over a pipe; the child
never writes the history. A crash is an armed crash point firing in the child (the child names
the point on the pipe just before it SIGKILLs itself) or the driver's :meth:`StoreProcess.kill`.

``with StoreServer() as server: store = server.start("rocksdb-indexed", directory)`` — every child
still alive when the block exits is killed and reaped, also when the block raises.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from eos_harness.faults import points
from eos_harness.process import zygote

__all__ = ["ChildCrashed", "StoreCallError", "StoreProcess", "StoreServer", "forkserver_context"]

PRELOAD = ["eos_harness.stores.catalogue", "eos_harness.runtime", "eos_harness.broker.embedded", "eos_harness.suites.lifecycle.runner",
           "eos_harness.broker.kafka", "rocksdict"]  # (a module that fails to import is skipped)
CALL_TIMEOUT_S = 60.0

_context = None


def forkserver_context():
    """The process-wide context whose ``Process`` forks children from the preloaded zygote."""
    global _context
    if _context is None:
        _context = zygote.context(PRELOAD)
    return _context


class ChildCrashed(Exception):
    """The store's process died: at crash point ``point``, or killed by the driver (``point`` None)."""

    def __init__(self, point: str | None, exitcode: int | None) -> None:
        super().__init__(f"store process died at {point or 'an unnamed point'} (exit code {exitcode})")
        self.point = point
        self.exitcode = exitcode


class StoreCallError(Exception):
    """The store raised an exception; ``kind`` is its class name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


_LISTING = {"range", "all", "rc_range", "rc_all"}


def _serve(spec: str, directory: str, sys_path: list[str], arms: list[tuple[str, int]], conn) -> None:
    """Child main loop: open the store, then execute calls until close or EOF."""
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    from eos_harness.store import StoreContext
    from eos_harness.stores import resolve

    points.set_notifier(lambda name: conn.send(("crash", name)))
    try:
        store = resolve(spec)()
        store.init(StoreContext(directory=Path(directory)))
        for point, hit in arms:
            points.arm(point, hit)
        conn.send(("ok", None))
    except BaseException as exc:  # noqa: BLE001 - report, then die
        conn.send(("raise", (type(exc).__name__, f"{exc}\n{traceback.format_exc()}")))
        os._exit(1)
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            os._exit(0)
        try:
            if method == "arm":
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
            conn.send(("ok", result))
        except BaseException as exc:  # noqa: BLE001 - the driver decides what an exception means
            conn.send(("raise", (type(exc).__name__, str(exc))))
        if method == "close":
            conn.close()
            os._exit(0)


class StoreProcess:
    """A client for one store child. ``call(method, *args)`` mirrors the store protocol; read-committed
    view calls are ``rc_get``, ``rc_range``, ``rc_all``."""

    def __init__(self, process, conn) -> None:
        self.process = process
        self.conn = conn

    @property
    def pid(self) -> int:
        return self.process.pid

    def _died(self, point: str | None) -> ChildCrashed:
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()
        return ChildCrashed(point, self.process.exitcode)

    def _receive(self):
        if not self.conn.poll(CALL_TIMEOUT_S):
            self.kill()
            raise TimeoutError(f"store process {self.pid} did not answer within {CALL_TIMEOUT_S} s")
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
        result = self._receive()
        if method == "close":  # the child exits after a clean close: wait, so the directory is free
            self.process.join(10)
        return result

    def close(self) -> None:
        """Clean close of the store, then the child exits (waited for)."""
        self.call("close")

    def kill(self) -> None:
        """SIGKILL the child (a crash at an arbitrary moment) and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()

    @property
    def alive(self) -> bool:
        return self.process.is_alive()


class StoreServer:
    """Starts store children and guarantees none outlives the ``with`` block."""

    def __init__(self) -> None:
        self.children: list[StoreProcess] = []

    def __enter__(self) -> StoreServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def start(self, spec: str, directory: Path, arms: list[tuple[str, int]] | None = None) -> StoreProcess:
        ctx = forkserver_context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(spec, str(directory), list(sys.path), arms or [], child), daemon=True)
        proc.start()
        child.close()
        client = StoreProcess(proc, parent)
        self.children = [c for c in self.children if c.alive]
        self.children.append(client)
        client._receive()
        return client

    def shutdown(self) -> None:
        for child in self.children:
            child.kill()
        self.children.clear()
