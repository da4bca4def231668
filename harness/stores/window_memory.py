"""``memory-window`` (and ``memory-window-kip428``, ``memory-window-txn``): KIP-428's in-memory window store.

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
from eos_harness.models.windows import KIP428_PROPOSAL, RETENTION_ONLY, WindowConfig
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.window_base import WindowStoreBase, in_key_range, window_config_of
from sortedcontainers import SortedDict

__all__ = ["MemoryWindowStore", "memory_window", "memory_window_kip428", "memory_window_txn"]

P_MID_APPLY = declare("window.memory.commit.mid_apply", "transactional in-memory window store: half the staged writes applied")


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


class MemoryWindowStore(WindowStoreBase):
    """In memory, not persistent; transactional when asked (staged writes until commit)."""

    def __init__(self, config: WindowConfig, transactional: bool = False) -> None:
        super().__init__(config, transactional)
        self._segments: SortedDict = SortedDict()  # window start -> SortedDict(key -> value)
        # Weak: an iterator dropped without close() stops holding expiry back once it is collected.
        self._open_iterators: weakref.WeakSet[_HeldIterator] = weakref.WeakSet()

    # -- lifecycle --------------------------------------------------------------------------------
    def init(self, context: StoreContext) -> None:
        self._via_processor = context.via_processor

    def persistent(self) -> bool:
        return False

    def manages_offsets(self) -> bool:
        return False

    # -- expiry -----------------------------------------------------------------------------------
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
            self._stage(key, value, window_start)
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
    def _expire_before_read(self) -> None:
        self._remove_expired_segments()

    def _stored_windows(self, key_from, key_to, lo: int, hi: int, single_key: bool) -> dict:
        return {(start, key): value for start in self._segments.irange(lo, hi)
                for key, value in self._segments[start].items() if in_key_range(key, key_from, key_to)}

    def _iterate_stored(self, key_from, key_to, lo: int, hi: int, reverse: bool, single_key: bool, empty: bool):
        starts = [] if empty else list(self._segments.irange(lo, hi))
        return _HeldIterator(self, lo, starts, key_from, key_to, reverse, single_key)

    def _fetch_stored(self, key: bytes, window_start: int) -> bytes | None:
        segment = self._segments.get(window_start)
        return None if segment is None else segment.get(key)

    # -- commit -----------------------------------------------------------------------------------
    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._refuse_commit_from_processor()
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
        self._discard_staged()
        return False

    def close(self) -> None:
        self._segments.clear()
        self._staged = {}
        self._open_iterators.clear()


def memory_window(**kwargs) -> MemoryWindowStore:
    """Kafka's shipped in-memory window store: the store enforces retention only."""
    return MemoryWindowStore(window_config_of(RETENTION_ONLY, kwargs))


def memory_window_kip428(**kwargs) -> MemoryWindowStore:
    """KIP-428's store as first proposed: late writes (grace) are dropped by the store."""
    return MemoryWindowStore(window_config_of(KIP428_PROPOSAL, kwargs))


def memory_window_txn(**kwargs) -> MemoryWindowStore:
    """Transactional, with the semantics of KIP-428 as first proposed."""
    return MemoryWindowStore(window_config_of(KIP428_PROPOSAL, kwargs), transactional=True)
