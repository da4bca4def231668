"""Window store mutants: the real window stores, each with ONE mistake window stores really have
(the off-by-ones at the retention and grace edges first). The check named in ``caught_by`` must
catch each (tests/test_window_stores.py)."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping
from typing import Any

from eos_harness.faults.points import crash_point, declare
from eos_harness.models.windows import KIP428_PROPOSAL, RETENTION_ONLY, WindowConfig, validate_window_store
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores import StoreSpec, register
from eos_harness.stores.indexed import encode_offset, offset_key
from eos_harness.stores.window_base import DEFAULTS, window_config_of
from eos_harness.stores.window_memory import MemoryWindowStore
from eos_harness.stores.window_rocksdb import (
    P_AFTER_DROP,
    P_AFTER_WRITE,
    P_BEFORE_WRITE,
    SEGMENT_PREFIX,
    STREAM_TIME,
    RocksWindowStore,
    _split,
)
from rocksdict import WriteBatch


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


class ListsByKey(MemoryWindowStore):
    """Lists every window (``all``, ``fetch_all``) by key, then window start, where KIP-428 orders them by
    window start, then key."""

    def all(self, committed: bool = False):
        return iter(sorted(super().all(committed), key=lambda r: (r[0], r[1])))

    def fetch_all(self, time_from: int, time_to: int, committed: bool = False):
        return iter(sorted(super().fetch_all(time_from, time_to, committed), key=lambda r: (r[0], r[1])))


class FetchExcludesEnd(MemoryWindowStore):
    """``fetch(key, time_from, time_to)`` leaves out the window starting at ``time_to`` (a half-open
    range, where KIP-428's bounds are inclusive)."""

    def fetch(self, key: bytes, time_from: int, time_to: int, committed: bool = False):
        return super().fetch(key, time_from, time_to - 1, committed)


class ReadCommittedIsTheStore(MemoryWindowStore):
    """``read_committed()`` returns the store itself: its staged writes show to every reader."""

    def read_committed(self):
        return self


class OffsetAskedOnce(RocksWindowStore):
    """Keeps the committed offset it was first asked for: ``committed_offset`` answers from that cache,
    which a later commit does not update (right again only after a restart)."""

    def init(self, context: StoreContext) -> None:
        super().init(context)
        self._asked: dict[TopicPartition, Any] = {}

    def committed_offset(self, tp: TopicPartition) -> int | None:
        if tp not in self._asked:
            self._asked[tp] = super().committed_offset(tp)
        return self._asked[tp]


class RecoverTrustsItself(RocksWindowStore):
    """Not transactional, yet ``recover`` says its contents can be trusted after a crash (True): the
    runtime would keep what the crash left instead of wiping and restoring it."""

    def recover(self, changelog_offset: int | None) -> bool:
        super().recover(changelog_offset)
        return True


class RestoreSizesValues(MemoryWindowStore):
    """Its ``restore`` counts each record's bytes (``len(value)``) for its memory accounting: a tombstone
    in the changelog (a value of None) raises TypeError."""

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        records = list(records)
        self._restored_bytes = sum(len(key) + len(value) for key, _, value in records)
        super().restore(records)


P_WINDOWS_WRITTEN = declare("window.rocksdb.commit.between_windows_and_offsets",
                            "window mutant: windows written, stream time and offsets not yet (two writes)")


class SplitWindowsWrite(RocksWindowStore):
    """Writes a commit's windows and its stream time and offsets in two separate writes: a crash between
    them commits the windows without their offsets."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._refuse_commit_from_processor()
        windows = WriteBatch(raw_mode=True)
        for (start, key), value in self._staged.items():
            self._add_write(windows, key, value, start)
        stream_time = self._observed()
        crash_point(P_BEFORE_WRITE)
        self._db.write(windows, self._sync)
        crash_point(P_WINDOWS_WRITTEN)
        meta = WriteBatch(raw_mode=True)
        meta.put(STREAM_TIME, encode_offset(stream_time), self._meta_handle)
        for tp, offset in changelog_offsets.items():
            meta.put(offset_key(tp), encode_offset(offset), self._meta_handle)
        self._db.write(meta, self._sync)
        crash_point(P_AFTER_WRITE)
        self._stream_time, self._staged = stream_time, {}
        self._drop_expired_segments()
        crash_point(P_AFTER_DROP)


class CloseDropsSegments(RocksWindowStore):
    """Takes its segments for a cache the changelog rebuilds: ``close`` drops them, keeping its stream
    time and offsets, so a clean close and reopen loses every committed window (a crash does not)."""

    def close(self) -> None:
        if self._db is not None:
            for segment_id in list(self._segments):
                family, _ = self._segments.pop(segment_id)
                family.close()
                self._db.drop_column_family(f"{SEGMENT_PREFIX}{segment_id:012d}")
        super().close()


class SpillsStagedWindows(RocksWindowStore):
    """Spills a large staged transaction (from ``SPILL_AT`` windows on) to a file in its directory, as a
    store bounding its memory does, and deletes the spill at commit and on close (right); what its
    ``recover`` does with a spill a crash left is each subclass's mistake."""

    SPILL_AT = 3

    def init(self, context: StoreContext) -> None:
        self._spill = context.directory / "staged.spill"
        super().init(context)

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        super().put(key, value, window_start)
        if len(self._staged) >= self.SPILL_AT:
            self._spill.write_bytes(pickle.dumps(self._staged))

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._spill.unlink(missing_ok=True)
        super().commit(changelog_offsets)

    def _spilled(self) -> dict[tuple[int, bytes], bytes | None]:
        """The staged windows a crash left spilled (the spill deleted), else nothing."""
        if not self._spill.exists():
            return {}
        spilled = pickle.loads(self._spill.read_bytes())
        self._spill.unlink()
        return spilled

    def close(self) -> None:
        if self._db is not None:
            self._spill.unlink(missing_ok=True)
        super().close()


class RecoverReplaysStagedSpill(SpillsStagedWindows):
    """``recover`` after a crash writes the spilled windows into their segments, as if they were a log of
    committed writes, instead of discarding them: staged windows survive the crash."""

    def recover(self, changelog_offset: int | None) -> bool:
        trusted = super().recover(changelog_offset)
        batch = WriteBatch(raw_mode=True)
        for (start, key), value in self._spilled().items():
            self._add_write(batch, key, value, start)
        self._db.write(batch, self._sync)
        return trusted


class RecoverDeletesSpilledKeys(SpillsStagedWindows):
    """``recover`` after a crash undoes the spilled transaction by deleting every window of the keys it
    wrote, as if undoing by key (a key-value store's undo): the committed windows of those keys are lost."""

    SPILL_AT = 1

    def recover(self, changelog_offset: int | None) -> bool:
        trusted = super().recover(changelog_offset)
        keys = {key for _, key in self._spilled()}
        batch = WriteBatch(raw_mode=True)
        for family, handle in self._segments.values():
            for stored in list(family.keys()):
                if _split(stored)[0] in keys:
                    batch.delete(stored, handle)
        self._db.write(batch, self._sync)
        return trusted


def validation_accepts_grace_over_retention(**kwargs) -> MemoryWindowStore:
    """Validates everything but ``grace_period > retention_period``."""
    args = {**DEFAULTS, **kwargs}
    name, retention, size, grace = args["name"], args["retention_period"], args["window_size"], args["grace_period"]
    validate_window_store(name, retention, size, grace if retention < 0 or grace <= retention else retention)
    return MemoryWindowStore(WindowConfig(name, retention, size, grace, RETENTION_ONLY))


VERIFY_ONLY = ("mutant-window-lists-by-key", "mutant-window-fetch-excludes-end", "mutant-window-read-committed-is-the-store",
               "mutant-window-offset-asked-once", "mutant-window-recover-trusts-itself",
               "mutant-window-restore-sizes-values", "mutant-window-split-write", "mutant-window-close-drops-segments",
               "mutant-window-recover-replays-spill", "mutant-window-recover-deletes-spilled-keys")

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
    ("mutant-window-lists-by-key", lambda **kw: ListsByKey(window_config_of(RETENTION_ONLY, kw)),
     ("fetch_order",), "all() and fetch_all() list windows by key, then window start"),
    ("mutant-window-fetch-excludes-end", lambda **kw: FetchExcludesEnd(window_config_of(RETENTION_ONLY, kw)),
     ("read_your_own_writes",), "fetch(key, from, to) leaves out the window starting at to"),
    ("mutant-window-read-committed-is-the-store",
     lambda **kw: ReadCommittedIsTheStore(window_config_of(KIP428_PROPOSAL, kw), transactional=True),
     ("read_committed_isolation",), "read_committed() returns the store itself: staged writes show"),
    ("mutant-window-offset-asked-once",
     lambda **kw: OffsetAskedOnce(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("committed_offset_durable",), "committed_offset() answers the offset it was first asked for"),
    ("mutant-window-recover-trusts-itself", lambda **kw: RecoverTrustsItself(window_config_of(RETENTION_ONLY, kw)),
     ("recover_trust",), "a persistent store that is not transactional says recover() True"),
    ("mutant-window-restore-sizes-values", lambda **kw: RestoreSizesValues(window_config_of(RETENTION_ONLY, kw)),
     ("store_error",), "restore() takes len() of every value: a tombstone raises"),
    ("mutant-window-split-write",
     lambda **kw: SplitWindowsWrite(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("atomic_commit",), "a commit writes its windows, then its stream time and offsets, in two writes"),
    ("mutant-window-close-drops-segments",
     lambda **kw: CloseDropsSegments(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("clean_close_durable",), "close() drops the segments (a cache, it thinks), keeping stream time and offsets"),
    ("mutant-window-recover-replays-spill",
     lambda **kw: RecoverReplaysStagedSpill(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("no_uncommitted_survives",), "recover() writes a large transaction's spilled windows instead of discarding them"),
    ("mutant-window-recover-deletes-spilled-keys",
     lambda **kw: RecoverDeletesSpilledKeys(window_config_of(RETENTION_ONLY, kw), transactional=True),
     ("committed_durable",), "recover() undoes a spilled transaction by deleting every window of its keys"),
):
    # A window mutant is caught by its first caught_by check alone (tests/test_window_stores.py); those of
    # the protocol itself are verify's alone (StoreSpec.suite): the chaos campaigns stay as they are.
    register(StoreSpec(name, "window-mutant", description, factory, caught_by, alone=caught_by[0],
                       suite="windows" if name in VERIFY_ONLY else None))
