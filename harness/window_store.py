"""The window store protocol: the Python shape of Kafka's ``WindowStore`` (KIP-428), beside
the key-value protocol of :mod:`eos_harness.store`.

A window store keeps, per ``(key, window_start)``, one value. Keys and values are ``bytes``, window
starts are milliseconds (``int >= 0``). A store implementer codes against :class:`WindowStore` and
nothing else; the lifecycle methods (``init``, ``persistent``, ``transactional``,
``manages_offsets``, ``commit``, ``committed_offset``, ``recover``, ``flush``, ``close``) mean what
they mean for a key-value store (:class:`eos_harness.store.StateStore`).

The rules a window store keeps are the ones its :meth:`WindowStore.window_config` declares
(``semantics``: ``kip428-proposal`` or ``retention-only``, see :mod:`eos_harness.models.windows`):

* observed stream time is the largest window start any put (or restored record) observed;
* a put whose window start is at or before ``stream_time - retention`` is dropped, and under the
  semantics of KIP-428 as first proposed also one at or before ``stream_time - grace``;
* no fetch ever returns a window at or before ``stream_time - retention``;
* a transactional store stages writes (and the stream time they observed) until ``commit``;
  ``read_committed()`` shows the committed records under the committed stream time;
* after a restart, stream time is what the declared design says: a persistent store keeps the
  committed one; a store that is not persistent rebuilds it from the records :meth:`restore` replays.

Construction: a window store factory accepts the keyword arguments ``name``, ``retention_period``,
``window_size`` and ``grace_period`` (each with a default of its own) and validates them as
KIP-428's ``Stores.inMemoryWindowStore`` does, raising with its messages
(:func:`eos_harness.models.windows.validate_window_store`). The conformance suite calls the factory
with invalid combinations and compares the messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from eos_harness.models.windows import (
    KIP428_PROPOSAL,
    RETENTION_ONLY,
    SEMANTICS,
    WindowConfig,
    validate_window_store,
)
from eos_harness.store import Capabilities, StoreContext, TopicPartition
from eos_harness.store_kit import PutAllAndDeleteByPut

__all__ = [
    "KIP428_PROPOSAL",
    "RETENTION_ONLY",
    "SEMANTICS",
    "WindowCapabilities",
    "WindowConfig",
    "WindowRecord",
    "WindowStore",
    "WindowView",
    "WindowedKeyValueStore",
    "split_windowed_key",
    "validate_window_store",
    "window_capabilities_of",
    "windowed_key",
]

WindowRecord = tuple[bytes, int, bytes]  # (key, window_start, value)


@dataclass(frozen=True)
class WindowCapabilities:
    """What a window store offers, declared through an optional ``capabilities()`` method returning
    one of these (a store without the method offers everything). As for key-value stores
    (:class:`eos_harness.store.Capabilities`), a store declares only what it LACKS; what it lacks is
    not checked and the verdict says so.

    * ``backward_fetch``: the ``backward_*`` methods are offered.
    * ``range_fetch``: ``fetch_range``, ``fetch_all`` and ``all`` are offered.
    * ``held_iterators``: an iterator left open across expiry still yields the windows that were
      live when it was opened (Kafka's in-memory store holds expiry back while one is open).
    * ``argument_validation``: the factory validates its arguments as KIP-428's supplier does, with its
      messages. A store whose arguments are another system's declares False (Kafka Streams' own window
      suppliers take no grace period and validate, with their own messages, when their JVM opens them).
    * ``commit_durable``: a commit that returned survives a crash of the store's process. Declared False
      by a store that keeps its commits in memory until it flushes, as Kafka Streams' RocksDB stores do
      (the write-ahead log disabled; the changelog restores the rest, as for
      :class:`eos_harness.store.Capabilities`' ``commit_durable``): after a crash it may hold any commit
      since it was last closed cleanly (or recovered), data, stream time and offsets of one commit
      together, never an uncommitted write; the runtime then restores the changelog after that commit.
      ``committed_durable`` is then not checked; everything else is.
    """

    backward_fetch: bool = True
    range_fetch: bool = True
    held_iterators: bool = True
    argument_validation: bool = True
    commit_durable: bool = True

    def lacking(self) -> list[str]:
        return [name for name, offered in vars(self).items() if not offered]


def window_capabilities_of(store: object) -> WindowCapabilities:
    """The window store's declared capabilities (everything, for a store without ``capabilities()``)."""
    declare = getattr(store, "capabilities", None)
    if declare is None:
        return WindowCapabilities()
    declared = declare()
    if not isinstance(declared, WindowCapabilities):
        raise TypeError(f"{type(store).__name__}.capabilities() returned {type(declared).__name__}; "
                        "return eos_harness.window_store.WindowCapabilities(...)")
    return declared


@runtime_checkable
class WindowView(Protocol):
    """The read side of a window store (``WindowStore.read_committed()`` returns one).

    Every method applies the fetch lower bound ``stream_time - retention + 1`` of the view's stream
    time. Time bounds are inclusive; ``time_from > time_to`` or ``key_from > key_to`` yields nothing.
    Iterators are finite and may be consumed lazily; each has a ``close()`` (call it, or exhaust it).
    """

    def fetch_window(self, key: bytes, window_start: int) -> bytes | None:
        """The value of ``key`` in the window starting at ``window_start``, or None (absent, deleted,
        or expired)."""

    def fetch(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        """``(window_start, value)`` of ``key`` for every window start in the range, ascending."""

    def fetch_range(self, key_from: bytes | None, key_to: bytes | None, time_from: int,
                    time_to: int) -> Iterator[WindowRecord]:
        """``(key, window_start, value)`` with ``key_from <= key <= key_to`` (None: unbounded) and the
        start in the time range, ordered by window start, then key (bytewise)."""

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[WindowRecord]:
        """Every key's windows in the time range, ordered by window start, then key."""

    def all(self) -> Iterator[WindowRecord]:
        """Every live window, ordered by window start, then key."""

    def backward_fetch(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        """``fetch`` in the reverse order."""

    def backward_fetch_range(self, key_from: bytes | None, key_to: bytes | None, time_from: int,
                             time_to: int) -> Iterator[WindowRecord]:
        """``fetch_range`` in the reverse order."""

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[WindowRecord]:
        """``fetch_all`` in the reverse order."""

    def backward_all(self) -> Iterator[WindowRecord]:
        """``all`` in the reverse order."""


@runtime_checkable
class WindowStore(WindowView, Protocol):
    """A window store as KIP-428 specifies it, with the transactional lifecycle of KIP-844/892.

    Must never: return a window at or before ``stream_time - retention``; write a put its declared
    semantics drops; show a staged write through ``read_committed()``; come back from a crash with a
    stream time (or windows) older than the committed state says.
    """

    name: str

    def window_config(self) -> WindowConfig:
        """The name, durations and semantics (``kip428-proposal`` / ``retention-only``) the store was created with."""

    def init(self, context: StoreContext) -> None:
        """Open (creating if needed) the store in ``context.directory``."""

    def persistent(self) -> bool:
        """True if the contents (and the committed stream time) survive a restart."""

    def transactional(self) -> bool:
        """True if writes are staged until :meth:`commit`."""

    def manages_offsets(self) -> bool:
        """True if :meth:`commit` stores the changelog offsets atomically with the data."""

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        """Observe ``window_start`` (stream time = max), then write ``value`` (None deletes) unless the
        declared semantics drops it. Expired windows are removed before the put."""

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        """Apply changelog records while restoring (Kafka's restore callback): each one exactly as
        :meth:`put` would, so that stream time is rebuilt and expired windows stay dropped."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        """Make every write so far durable with its stream time and ``changelog_offsets``, atomically
        for a transactional store."""

    def committed_offset(self, tp: TopicPartition) -> int | None:
        """The offset for ``tp`` of the last successful ``commit`` (None if never, or offsets not managed)."""

    def recover(self, changelog_offset: int | None) -> bool:
        """After a crash: discard staged writes (or finish an interrupted commit); True if the
        contents can be trusted (a persistent non-transactional store returns False)."""

    def read_committed(self) -> WindowView:
        """A read-only view of the committed windows under the committed stream time (the latest
        writes for a non-transactional store)."""

    def flush(self) -> None:
        """Deprecated by KIP-892: a no-op."""

    def close(self) -> None:
        """Release resources; staged writes of a transactional store are discarded."""


# -- windows as key-value records: how a window store runs under the EOS task runtime ---------------

def windowed_key(key: bytes, window_start: int) -> bytes:
    """The changelog key of a window: ``key@window_start`` (13 digits, so that it sorts by time per key)."""
    return b"%s@%013d" % (key, window_start)


def split_windowed_key(windowed: bytes) -> tuple[bytes, int]:
    key, sep, start = windowed.rpartition(b"@")
    if not sep or not start.isdigit():
        raise ValueError(f"not a windowed key: {windowed!r} (expected KEY@WINDOW_START)")
    return key, int(start)


class _WindowedView:
    def __init__(self, view: WindowView) -> None:
        self._view = view

    def get(self, key: bytes) -> bytes | None:
        return self._view.fetch_window(*split_windowed_key(key))

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter([(k, v) for k, v in self.all() if lo <= k <= hi])

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(sorted((windowed_key(k, s), v) for k, s, v in self._view.all()))

    def fetch_window(self, key: bytes, window_start: int) -> bytes | None:
        return self._view.fetch_window(key, window_start)


class WindowedKeyValueStore(PutAllAndDeleteByPut):
    """A window store seen as a key-value store over windowed keys (:func:`windowed_key`), so that
    the EOS task runtime (which logs ``(key, value)`` changelog records and replays them with
    ``put``) runs it unchanged. Puts between ``recover`` and the next ``commit`` are the runtime's
    changelog replay and go to the window store's :meth:`WindowStore.restore`.
    """

    def __init__(self, window_store: WindowStore) -> None:
        self.window_store = window_store
        self.name = window_store.name
        self._restoring = False

    def init(self, context: StoreContext) -> None:
        self.window_store.init(context)
        self._restoring = True  # the runtime's first commit after opening a store ends its restore

    def persistent(self) -> bool:
        return self.window_store.persistent()

    def transactional(self) -> bool:
        return self.window_store.transactional()

    def manages_offsets(self) -> bool:
        return self.window_store.manages_offsets()

    def window_config(self) -> WindowConfig:
        return self.window_store.window_config()

    def capabilities(self) -> Capabilities:
        """The window store's declaration that its commits are durable only once flushed
        (``WindowCapabilities.commit_durable``), passed on: the runtime's ``recover`` events say so, and the
        lifecycle checks allow the commits since the last clean close (the changelog restores the rest)."""
        return Capabilities(commit_durable=window_capabilities_of(self.window_store).commit_durable)

    def get(self, key: bytes) -> bytes | None:
        return self.window_store.fetch_window(*split_windowed_key(key))

    def fetch_window(self, key: bytes, window_start: int) -> bytes | None:
        return self.window_store.fetch_window(key, window_start)

    def put(self, key: bytes, value: bytes | None) -> None:
        plain, start = split_windowed_key(key)
        if self._restoring:
            self.window_store.restore([(plain, start, value)])
        else:
            self.window_store.put(plain, value, start)

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return _WindowedView(self.window_store).range(lo, hi)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return _WindowedView(self.window_store).all()

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self.window_store.commit(changelog_offsets)
        self._restoring = False

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return self.window_store.committed_offset(tp)

    def recover(self, changelog_offset: int | None) -> bool:
        self._restoring = True
        return self.window_store.recover(changelog_offset)

    def read_committed(self) -> _WindowedView:
        return _WindowedView(self.window_store.read_committed())

    def flush(self) -> None:
        self.window_store.flush()

    def close(self) -> None:
        self.window_store.close()
