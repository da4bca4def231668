"""Every call into a user's store, checked against the protocol and bounded in time.

The store runs in a child process (the store server's, or a task instance's). There it is wrapped
in a :class:`GuardedStore`, which turns what the protocol does not allow into findings the driver
reports with a named check:

- ``store_raised``: the store raised where the protocol allows no exception (the only ones it
  allows are :class:`~eos_harness.store.CommitFromProcessorError` from ``commit``, and
  :class:`~eos_harness.store.IncompatibleStoreDirectory` from ``init``); the finding
  carries the store's own traceback;
- ``store_return_type``: a value of the wrong type (``get returned str, the protocol requires
  bytes or None``);
- ``store_hang``: a call that did not return within the store timeout. The driver knows when a
  call started (the store server's calls are the driver's own; a task instance's guard writes the
  running call and its start time into a :class:`CallClock` shared with the driver), asks the
  child for the stack of every thread (``faulthandler`` on SIGUSR1, written into a pipe), then
  SIGKILLs it: :func:`stack_and_kill`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import mmap
import os
import re
import signal
import struct
import time
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection

from eos_harness.store import Capabilities, CommitFromProcessorError, IncompatibleStoreDirectory
from eos_harness.stores import StoreFactoryError

__all__ = [
    "STORE_TIMEOUT_S",
    "CallClock",
    "attach_clock",
    "GuardedStore",
    "StoreFinding",
    "StoreRaised",
    "StoreReturnType",
    "guarded",
    "install_stack_dump",
    "operation_in",
    "stack_and_kill",
]

STORE_TIMEOUT_S = 60.0  # default bound on one call into a store (``--store-timeout``)
STACK_WAIT_S = 2.0  # how long the driver waits for the child's stack before it kills it anyway


class StoreFinding(Exception):
    """A call into the store broke the protocol; raised in the child, reported as a violation."""

    check = "store_error"

    def __init__(self, operation: str, expected: str, observed: str, detail: str | None = None) -> None:
        super().__init__(observed)
        self.operation, self.expected, self.observed, self.detail = operation, expected, observed, detail

    def to_json(self) -> dict:
        return {"check": self.check, "operation": self.operation, "expected": self.expected,
                "observed": self.observed, "detail": self.detail}


class StoreRaised(StoreFinding):
    """The store raised where the protocol allows no exception; ``detail`` is the store's traceback."""

    check = "store_raised"

    def __init__(self, operation: str, exc: BaseException) -> None:
        tb = exc.__traceback__
        own = tb.tb_next if tb is not None and tb.tb_next is not None else tb  # drop the guard's frame
        super().__init__(operation, f"{operation} does not raise (the protocol allows no exception here)",
                         f"{operation} raised {type(exc).__name__}: {exc}",
                         "".join(traceback.format_exception(type(exc), exc, own)))


class StoreReturnType(StoreFinding):
    """The store returned a value the protocol does not allow."""

    check = "store_return_type"

    def __init__(self, operation: str, what: str, requirement: str, value: object = None) -> None:
        super().__init__(operation, requirement, f"{operation} {what}, the protocol requires {requirement}",
                         f"the value: {_shown(value)}")


def _shown(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + " …"


# -- the wrapped store (in the child) ---------------------------------------------------------------

# Every operation the guard times, in a fixed order (its index is what the CallClock holds).
OPERATIONS = ("factory", "init", "persistent", "transactional", "manages_offsets", "get", "put", "put_all",
              "delete", "range", "all", "commit", "committed_offset", "recover", "read_committed", "flush",
              "close", "read_committed().get", "read_committed().range", "read_committed().all",
              "capabilities", "restore")
_INDEX = {op: i for i, op in enumerate(OPERATIONS)}


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_bytes_or_none(value: object) -> bool:
    return value is None or isinstance(value, bytes)


def _is_offset_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _is_capabilities(value: object) -> bool:
    return isinstance(value, Capabilities)


def _is_view(value: object) -> bool:
    return all(callable(getattr(value, m, None)) for m in ("get", "range", "all"))


# operation -> (check of the value returned, what the protocol requires); listings are checked per item.
_RETURNS: dict[str, tuple[Callable[[object], bool], str]] = {
    "persistent": (_is_bool, "bool"),
    "transactional": (_is_bool, "bool"),
    "manages_offsets": (_is_bool, "bool"),
    "get": (_is_bytes_or_none, "bytes or None"),
    "read_committed().get": (_is_bytes_or_none, "bytes or None"),
    "delete": (_is_bytes_or_none, "bytes or None"),
    "committed_offset": (_is_offset_or_none, "int or None"),
    "recover": (_is_bool, "bool"),
    "read_committed": (_is_view, "a read-only view with get, range and all"),
    "capabilities": (_is_capabilities, "eos_harness.store.Capabilities"),
}
_LISTINGS = {"range", "all", "read_committed().range", "read_committed().all"}
_PAIRS = "an iterator of (bytes, bytes) tuples"

_clock: CallClock | None = None  # set in a task instance's child: the driver reads the running call


def _invoke(operation: str, method: Callable, args: tuple):
    clock = _clock
    if clock is not None:
        clock.begin(operation)
    try:
        result = method(*args)
    except StoreFactoryError:
        raise  # the factory returned no store: a usage error, not a finding
    except BaseException as exc:  # noqa: BLE001 - whatever the store raises is the finding (SystemExit too)
        if operation == "commit" and isinstance(exc, CommitFromProcessorError):
            raise  # the one exception the protocol allows
        if operation == "init" and isinstance(exc, IncompatibleStoreDirectory):
            raise  # the runtime wipes the directory and restores the store
        raise StoreRaised(operation, exc) from None
    finally:
        if clock is not None:
            clock.end()
    if operation in _LISTINGS:
        return _checked_pairs(operation, result)
    rule = _RETURNS.get(operation)
    if rule is not None and not rule[0](result):
        raise StoreReturnType(operation, f"returned {type(result).__name__}", rule[1], result)
    return result


def _checked_pairs(operation: str, result: object) -> Iterator[tuple[bytes, bytes]]:
    try:
        items = iter(result)  # type: ignore[call-overload]
    except TypeError:
        raise StoreReturnType(operation, f"returned {type(result).__name__}", _PAIRS, result) from None
    return _ITERATORS[operation](operation, items)


def _pairs(operation: str, items: Iterator) -> Iterator[tuple[bytes, bytes]]:
    clock = _clock
    while True:
        if clock is not None:
            clock.begin(operation)
        try:
            item = next(items)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - raised by the store's own iterator
            raise StoreRaised(operation, exc) from None
        finally:
            if clock is not None:
                clock.end()
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], bytes)
                and isinstance(item[1], bytes)):
            shown = (f"({type(item[0]).__name__}, {type(item[1]).__name__})"
                     if isinstance(item, tuple) and len(item) == 2 else type(item).__name__)
            raise StoreReturnType(operation, f"yielded {shown}", _PAIRS, item)
        yield item


def _renamed(function: types.FunctionType, operation: str) -> types.FunctionType:
    """A copy of ``function`` whose frames are named ``<store OPERATION>`` in a stack dump."""
    name = f"<store {operation}>"
    code = function.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, function.__globals__, name, function.__defaults__, function.__closure__)


# One copy of the invoker per operation, so that a stack dump names the call the child is in.
_INVOKERS = {op: _renamed(_invoke, op) for op in OPERATIONS}
_ITERATORS = {op: _renamed(_pairs, op) for op in _LISTINGS}
_OPERATION_FRAME = re.compile(r"line \d+ in <store (.+)>\s*$")


def operation_in(stack: str) -> str | None:
    """The store operation a stack dump (faulthandler's, innermost frame first) is inside, if any."""
    for line in stack.splitlines():
        match = _OPERATION_FRAME.search(line)
        if match:
            return match.group(1)
    return None


class GuardedView:
    """``read_committed()`` of a guarded store, guarded in turn."""

    def __init__(self, view) -> None:
        self._view = view

    def get(self, key: bytes) -> bytes | None:
        return _INVOKERS["read_committed().get"]("read_committed().get", self._view.get, (key,))

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return _INVOKERS["read_committed().range"]("read_committed().range", self._view.range, (lo, hi))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return _INVOKERS["read_committed().all"]("read_committed().all", self._view.all, ())


class GuardedStore:
    """A store whose every call is timed (when a clock is attached) and checked against the protocol."""

    def __init__(self, store) -> None:
        self._store = store
        self.name = store.name

    def __getattr__(self, attribute: str):  # anything beyond the protocol: the store's own
        return getattr(self._store, attribute)

    def _call(self, operation: str, *args):
        return _INVOKERS[operation](operation, getattr(self._store, operation), args)

    def init(self, context) -> None:
        self._call("init", context)

    def persistent(self) -> bool:
        return self._call("persistent")

    def transactional(self) -> bool:
        return self._call("transactional")

    def manages_offsets(self) -> bool:
        return self._call("manages_offsets")

    def get(self, key: bytes) -> bytes | None:
        return self._call("get", key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._call("put", key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._call("put_all", entries)

    def delete(self, key: bytes) -> bytes | None:
        return self._call("delete", key)

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._call("range", lo, hi)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._call("all")

    def commit(self, changelog_offsets) -> None:
        self._call("commit", changelog_offsets)

    def committed_offset(self, tp) -> int | None:
        return self._call("committed_offset", tp)

    def recover(self, changelog_offset: int | None) -> bool:
        return self._call("recover", changelog_offset)

    def read_committed(self) -> GuardedView:
        return GuardedView(self._call("read_committed"))

    def flush(self) -> None:
        self._call("flush")

    def close(self) -> None:
        self._call("close")

    def capabilities(self) -> Capabilities:
        """The store's declared capabilities (everything, for a store without ``capabilities()``)."""
        if getattr(self._store, "capabilities", None) is None:
            return Capabilities()
        return self._call("capabilities")

    def offers_restore(self) -> bool:
        """Whether the store has its own ``restore`` (the driver asks before it calls it)."""
        return callable(getattr(self._store, "restore", None))

    @property
    def restore(self):
        """The store's own ``restore(records, end_offset)``, guarded; absent when the store has none."""
        if not callable(getattr(self._store, "restore", None)):
            raise AttributeError(f"{type(self._store).__name__} has no restore()")
        return lambda records, end_offset: self._call("restore", records, end_offset)


def guarded(factory: Callable[[], object]) -> Callable[[], GuardedStore]:
    """A factory whose stores are guarded; a factory that raises is a ``store_raised`` finding."""

    def make() -> GuardedStore:
        return GuardedStore(_INVOKERS["factory"]("factory", factory, ()))

    return make


# -- the call clock (shared memory between a task instance's child and its driver) -------------------

_LAYOUT = struct.Struct("<qq")  # started (monotonic ns, 0 while no call runs), operation index


class CallClock:
    """Which store call a child is in, and since when: 16 bytes of shared memory (a memfd).

    The driver creates it and passes :attr:`handle` to the child (a Connection, so that the
    zygote carries its fd); the child calls :func:`attach_clock`. Writing it costs the child two
    ``struct.pack_into`` per call.
    """

    def __init__(self, fd: int | None = None) -> None:
        own = fd is None
        if own:
            fd = os.memfd_create("eos-store-call-clock", os.MFD_CLOEXEC)
            os.ftruncate(fd, _LAYOUT.size)
        self._map = mmap.mmap(fd, _LAYOUT.size)
        self.handle: Connection | None = Connection(fd) if own else None

    def begin(self, operation: str) -> None:
        _LAYOUT.pack_into(self._map, 0, time.monotonic_ns(), _INDEX[operation])

    def end(self) -> None:
        _LAYOUT.pack_into(self._map, 0, 0, 0)

    def running(self, since_ns: int = 0) -> tuple[str, float] | None:
        """(operation, seconds it has run, counted from ``since_ns`` at the earliest) or None."""
        started, index = _LAYOUT.unpack_from(self._map, 0)
        if not started:
            return None
        return OPERATIONS[index], (time.monotonic_ns() - max(started, since_ns)) / 1e9

    def sent(self) -> None:
        """The child has its copy: the driver's fd is no longer needed (the mapping stays)."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def close(self) -> None:
        self.sent()
        with contextlib.suppress(BufferError):
            self._map.close()


def attach_clock(handle: Connection) -> None:
    """In the child: time every guarded call on the driver's clock."""
    global _clock
    _clock = CallClock(handle.fileno())


# -- stacks -------------------------------------------------------------------------------------------

_stack_pipe: Connection | None = None  # kept open in the child for faulthandler


def install_stack_dump(writer: Connection) -> None:
    """In the child: on SIGUSR1, write the stack of every thread into ``writer`` (and go on)."""
    global _stack_pipe
    _stack_pipe = writer
    faulthandler.register(signal.SIGUSR1, file=writer.fileno(), all_threads=True, chain=False)


def stack_and_kill(process, reader: Connection) -> str:
    """SIGUSR1 the child (it writes its stacks into the pipe ``reader`` reads), SIGKILL it, reap it,
    and return the stacks (empty if it wrote none)."""
    if process.is_alive():
        process.send_signal(signal.SIGUSR1)
        if reader.poll(STACK_WAIT_S):
            time.sleep(0.1)  # faulthandler writes thread after thread: let it finish
    process.kill()
    process.join()
    chunks: list[bytes] = []
    fd = reader.fileno()
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace").strip()
