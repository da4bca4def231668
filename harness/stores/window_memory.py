"""``memory-window`` (and ``memory-window-seed``, ``memory-window-txn``): seed 001's in-memory window store.

The store is segmented by window start, one segment per millisecond: a sorted map of window start
→ (a sorted map of key → value), so puts and fetches are O(log n) and range queries by time and by
key are cheap (``sortedcontainers``). Before each put and fetch, every segment at or before
``stream_time - retention`` is removed at once, except those an open iterator still reads: an
iterator registers the earliest window start it may yield, and expiry holds back until it is
closed or exhausted (as Kafka's ``InMemoryWindowStore`` does). Stream time lives in memory only:
a restart starts empty and :meth:`MemoryWindowStore.restore` rebuilds it from the changelog.

The transactional variant stages writes (and the stream time they observed) in an overlay;
``commit`` applies them, ``read_committed()`` reads the segments under the committed stream time.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping

from eos_harness.faults.points import crash_point, declare
from eos_harness.models.windows import NO_TIMESTAMP, RETENTION_ONLY, SEED, WindowConfig
from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from sortedcontainers import SortedDict

__all__ = ["MemoryWindowStore", "memory_window", "memory_window_seed", "memory_window_txn"]

P_MID_APPLY = declare("window.memory.commit.mid_apply", "transactional in-memory window store: half the staged writes applied")

DEFAULTS = {"name": "store", "retention_period": 60, "window_size": 10, "grace_period": 20}


class _HeldIterator:
    """A lazy iterator over the segments of a time range; while open it holds expiry back to
    ``min_time``. Each segment's keys are read when the iterator reaches it."""

    def __init__(self, store: MemoryWindowStore, min_time: int, starts: list[int], key_from: bytes | None,
                 key_to: bytes | None, reverse: bool, single_key: bool) -> None:
        self.min_time = min_time
        self._store = store
        self._items = self._generate(starts, key_from, key_to, reverse, single_key)
        store._open_iterators.add(self)

    def _generate(self, starts, key_from, key_to, reverse, single_key):
        segments = self._store._segments
        for start in (reversed(starts) if reverse else starts):
            segment = segments.get(start)
            if segment is None:
                continue
            if single_key:
                value = segment.get(key_from)
                if value is not None:
                    yield start, value
                continue
            keys = list(segment.irange(key_from, key_to, reverse=reverse))
            for key in keys:
                value = segment.get(key)
                if value is not None:
                    yield key, start, value

    def __iter__(self) -> _HeldIterator:
        return self

    def __next__(self):
        try:
            return next(self._items)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        self._store._open_iterators.discard(self)


class _CommittedView:
    """The committed segments under the committed stream time (the transactional variant's
    read-committed view; the plain store's view is the store itself)."""

    def __init__(self, store: MemoryWindowStore) -> None:
        self._store = store

    def __getattr__(self, method: str):
        reader = getattr(MemoryWindowStore, method)

        def read(*args):
            return reader(self._store, *args, committed=True)
        return read


class MemoryWindowStore:
    """In memory, not persistent; transactional when asked (staged writes until commit)."""

    def __init__(self, config: WindowConfig, transactional: bool = False) -> None:
        self.name = config.name
        self._config = config
        self._transactional = transactional
        self._segments: SortedDict = SortedDict()  # window start -> SortedDict(key -> value)
        self._stream_time = NO_TIMESTAMP  # committed (the only one when not transactional)
        self._staged: dict[tuple[int, bytes], bytes | None] = {}
        self._staged_stream_time = NO_TIMESTAMP
        # Weak: an iterator dropped without close() stops holding expiry back once it is collected.
        self._open_iterators: weakref.WeakSet[_HeldIterator] = weakref.WeakSet()
        self._via_processor = False

    # -- lifecycle --------------------------------------------------------------------------------
    def window_config(self) -> WindowConfig:
        return self._config

    def _drop_reason(self, window_start: int, stream_time: int) -> str | None:
        """Why a put is dropped (the declared semantics' rule); a mutant overrides it."""
        return self._config.drop_reason(window_start, stream_time)

    def _lower_bound(self, stream_time: int) -> int:
        return self._config.lower_bound(stream_time)

    def init(self, context: StoreContext) -> None:
        self._via_processor = context.via_processor

    def persistent(self) -> bool:
        return False

    def transactional(self) -> bool:
        return self._transactional

    def manages_offsets(self) -> bool:
        return False

    # -- expiry -----------------------------------------------------------------------------------
    def _observed(self, committed: bool = False) -> int:
        if self._transactional and not committed:
            return max(self._stream_time, self._staged_stream_time)
        return self._stream_time

    def _remove_expired_segments(self) -> None:
        min_live = max(0, self._lower_bound(self._stream_time))
        for iterator in self._open_iterators:
            min_live = min(min_live, iterator.min_time)
        segments = self._segments
        while segments and segments.peekitem(0)[0] < min_live:
            segments.popitem(0)

    # -- writes -----------------------------------------------------------------------------------
    def _write(self, key: bytes, value: bytes | None, window_start: int) -> None:
        if value is None:
            segment = self._segments.get(window_start)
            if segment is not None:
                segment.pop(key, None)
                if not segment:
                    del self._segments[window_start]
            return
        segment = self._segments.get(window_start)
        if segment is None:
            segment = self._segments[window_start] = SortedDict()
        segment[key] = value

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        self._remove_expired_segments()
        if self._transactional:
            self._staged_stream_time = max(self._observed(), window_start)
            if self._drop_reason(window_start, self._staged_stream_time) is None:
                self._staged[(window_start, key)] = value
            return
        self._stream_time = max(self._stream_time, window_start)
        if self._drop_reason(window_start, self._stream_time) is None:
            self._write(key, value, window_start)

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        transactional, self._transactional = self._transactional, False
        try:
            for key, window_start, value in records:
                self.put(key, value, window_start)
        finally:
            self._transactional = transactional

    # -- reads ------------------------------------------------------------------------------------
    def _lower(self, time_from: int, committed: bool) -> int:
        return max(time_from, self._lower_bound(self._observed(committed)))

    def _merged(self, lo: int, hi: int) -> list[tuple[bytes, int, bytes]]:
        """The writer's view of a transactional store: segments with the staged writes over them."""
        data = {(start, key): value for start in self._segments.irange(lo, hi)
                for key, value in self._segments[start].items()}
        for (start, key), value in self._staged.items():
            if lo <= start <= hi:
                data[(start, key)] = value
        return [(k, s, v) for (s, k), v in sorted(data.items()) if v is not None]

    def _expire_before_read(self) -> None:
        self._remove_expired_segments()

    def _read(self, key_from, key_to, time_from, time_to, reverse, single_key, committed):
        self._expire_before_read()
        lo = self._lower(time_from, committed)
        empty = time_to < lo or (not single_key and key_from is not None and key_to is not None and key_from > key_to)
        if self._transactional and not committed:
            found = [] if empty else [r for r in self._merged(lo, time_to)
                                      if (key_from is None or r[0] >= key_from) and (key_to is None or r[0] <= key_to)]
            if single_key:
                found = [(s, v) for _, s, v in found]
            return iter(found[::-1] if reverse else found)
        starts = [] if empty else list(self._segments.irange(lo, time_to))
        return _HeldIterator(self, lo, starts, key_from, key_to, reverse, single_key)

    def fetch_window(self, key: bytes, window_start: int, committed: bool = False) -> bytes | None:
        self._expire_before_read()
        if window_start < self._lower(window_start, committed):
            return None
        if self._transactional and not committed and (window_start, key) in self._staged:
            return self._staged[(window_start, key)]
        segment = self._segments.get(window_start)
        return None if segment is None else segment.get(key)

    def fetch(self, key: bytes, time_from: int, time_to: int, committed: bool = False):
        return self._read(key, key, time_from, time_to, False, True, committed)

    def backward_fetch(self, key: bytes, time_from: int, time_to: int, committed: bool = False):
        return self._read(key, key, time_from, time_to, True, True, committed)

    def fetch_range(self, key_from, key_to, time_from: int, time_to: int, committed: bool = False):
        return self._read(key_from, key_to, time_from, time_to, False, False, committed)

    def backward_fetch_range(self, key_from, key_to, time_from: int, time_to: int, committed: bool = False):
        return self._read(key_from, key_to, time_from, time_to, True, False, committed)

    def fetch_all(self, time_from: int, time_to: int, committed: bool = False):
        return self._read(None, None, time_from, time_to, False, False, committed)

    def backward_fetch_all(self, time_from: int, time_to: int, committed: bool = False):
        return self._read(None, None, time_from, time_to, True, False, committed)

    def all(self, committed: bool = False):
        return self._read(None, None, 0, 2**62, False, False, committed)

    def backward_all(self, committed: bool = False):
        return self._read(None, None, 0, 2**62, True, False, committed)

    def read_committed(self):
        return _CommittedView(self) if self._transactional else self

    # -- commit -----------------------------------------------------------------------------------
    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores; call context.commit() to request a task commit")
        if not self._transactional:
            return
        staged = sorted(self._staged.items())
        for i, ((start, key), value) in enumerate(staged):
            if i == len(staged) // 2:
                crash_point(P_MID_APPLY)
            self._write(key, value, start)
        self._stream_time = self._observed()
        self._staged = {}
        self._remove_expired_segments()

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return None

    def recover(self, changelog_offset: int | None) -> bool:
        self._staged = {}
        self._staged_stream_time = NO_TIMESTAMP
        return False

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op."""

    def close(self) -> None:
        self._segments.clear()
        self._staged = {}
        self._open_iterators.clear()


def _config(semantics: str, kwargs: dict) -> WindowConfig:
    args = {**DEFAULTS, **kwargs}
    return WindowConfig.of(args["name"], args["retention_period"], args["window_size"], args["grace_period"], semantics)


def memory_window(**kwargs) -> MemoryWindowStore:
    """Kafka's shipped in-memory window store: the store enforces retention only."""
    return MemoryWindowStore(_config(RETENTION_ONLY, kwargs))


def memory_window_seed(**kwargs) -> MemoryWindowStore:
    """Seed 001's store as written: late writes (grace) are dropped by the store."""
    return MemoryWindowStore(_config(SEED, kwargs))


def memory_window_txn(**kwargs) -> MemoryWindowStore:
    """Transactional, seed 001's semantics."""
    return MemoryWindowStore(_config(SEED, kwargs), transactional=True)
