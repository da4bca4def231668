"""Window store mutants: the real window stores, each with ONE mistake window stores really have
(the off-by-ones at the retention and grace edges first). The check named in ``caught_by`` must
catch each (tests/test_window_stores.py)."""

from __future__ import annotations

from collections.abc import Iterable

from eos_harness.models.windows import KIP428_PROPOSAL, RETENTION_ONLY, WindowConfig, validate_window_store
from eos_harness.stores import StoreSpec, register
from eos_harness.stores.window_base import DEFAULTS, window_config_of
from eos_harness.stores.window_memory import MemoryWindowStore
from eos_harness.stores.window_rocksdb import RocksWindowStore


class GraceOffByOne(MemoryWindowStore):
    """Drops a late write only strictly before ``stream_time - grace``: one exactly at the edge lands."""

    def _drop_reason(self, window_start: int, stream_time: int) -> str | None:
        config = self._config
        if window_start <= stream_time - config.retention_period:
            return "expired"
        if window_start < stream_time - config.grace_period:
            return "late"
        return None


class RetentionOffByOne(RocksWindowStore):
    """Keeps (and fetches) the window exactly at ``stream_time - retention``."""

    def _drop_reason(self, window_start: int, stream_time: int) -> str | None:
        return "expired" if window_start < stream_time - self._config.retention_period else None

    def _lower_bound(self, stream_time: int) -> int:
        return stream_time - self._config.retention_period


class ExpiryOnlyOnPut(MemoryWindowStore):
    """Removes expired segments before a put only; a fetch neither expires nor bounds: it returns
    windows that expired since the last put."""

    def _expire_before_read(self) -> None:
        pass

    def _lower(self, time_from: int, committed: bool) -> int:
        return time_from


class StreamTimeNotRebuilt(MemoryWindowStore):
    """Restores changelog records straight into the segments without observing their timestamps:
    after a restart stream time stays unknown and expired windows come back."""

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        for key, window_start, value in records:
            self._write(key, value, window_start)


class TombstoneDeletesWrongWindow(RocksWindowStore):
    """Its commit deletes the key's window one window size earlier than a tombstone's own (the window
    end taken for the start): the tombstoned window stays, its neighbour goes."""

    def _add_write(self, batch, key: bytes, value: bytes | None, window_start: int) -> None:
        super()._add_write(batch, key, value, window_start - self._config.window_size if value is None else window_start)


class LazyIteratorExpiry(MemoryWindowStore):
    """Expiry does not wait for open iterators: an iterator reads its segments lazily, so the windows
    that expire while it is open (a later put or commit moves stream time past them) vanish from it."""

    def _remove_expired_segments(self) -> None:
        min_live = max(0, self._lower_bound(self._stream_time))
        segments = self._segments
        while segments and segments.peekitem(0)[0] < min_live:
            segments.popitem(0)


def validation_accepts_grace_over_retention(**kwargs) -> MemoryWindowStore:
    """Validates everything but ``grace_period > retention_period``."""
    args = {**DEFAULTS, **kwargs}
    name, retention, size, grace = args["name"], args["retention_period"], args["window_size"], args["grace_period"]
    validate_window_store(name, retention, size, grace if retention < 0 or grace <= retention else retention)
    return MemoryWindowStore(WindowConfig(name, retention, size, grace, RETENTION_ONLY))


for name, factory, caught_by, description in (
    ("mutant-window-grace-off-by-one", lambda **kw: GraceOffByOne(window_config_of(KIP428_PROPOSAL, kw)),
     ("late_write_dropped",), "a write exactly at stream time - grace lands (kip428-proposal semantics)"),
    ("mutant-window-retention-off-by-one",
     lambda **kw: RetentionOffByOne(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("expired_write_dropped", "expired_never_fetched"), "the window exactly at stream time - retention is kept"),
    ("mutant-window-expiry-only-on-put", lambda **kw: ExpiryOnlyOnPut(window_config_of(RETENTION_ONLY, kw)),
     ("expired_never_fetched",), "expiry before puts only: a fetch returns an expired window"),
    ("mutant-window-validation-grace", validation_accepts_grace_over_retention,
     ("argument_validation",), "validation accepts a grace period longer than the retention"),
    ("mutant-window-stream-time-not-rebuilt", lambda **kw: StreamTimeNotRebuilt(window_config_of(RETENTION_ONLY, kw)),
     ("stream_time_rebuilt",), "restore does not rebuild observed stream time: expired windows come back"),
    ("mutant-window-tombstone-wrong-window",
     lambda **kw: TombstoneDeletesWrongWindow(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("tombstone_deletes_window",), "a committed tombstone deletes the window one window size earlier, not its own"),
    ("mutant-window-lazy-iterator", lambda **kw: LazyIteratorExpiry(window_config_of(RETENTION_ONLY, kw)),
     ("held_iterator",), "expiry does not wait for open iterators: windows expired while one is open vanish from it"),
):
    register(StoreSpec(name, "window-mutant", description, factory, caught_by))
