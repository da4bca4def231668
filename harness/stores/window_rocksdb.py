"""``rocksdb-window`` and ``rocksdb-window-txn``: persistent window stores on RocksDB, segmented as
Kafka's ``RocksDBWindowStore`` is.

Windows are grouped into segments of ``segment_interval`` milliseconds of window start (by default
half the retention, as Kafka's ``max(retention / 2, 60 s)`` scaled down), each its own
column family (``seg-<id>``) keyed by ``key + window_start`` (8 bytes, big-endian), so a fetch of one
key is a seek and a short scan per segment. A segment is dropped whole, at once, when its last
window start is expired; until then its expired windows are hidden by the fetch lower bound.
Observed stream time and the changelog offsets live in the ``meta`` column family.

* ``rocksdb-window`` (not transactional, like a store before KIP-844): every put goes straight to
  the database with the stream time; after a crash ``recover`` returns False and the runtime wipes
  it and restores it from the changelog; after a clean close everything is there.
* ``rocksdb-window-txn`` (KIP-892): puts are staged in memory with the stream time they observe;
  ``commit`` writes the data, the stream time and the offsets in ONE synced WriteBatch, then drops
  the segments that expired. Both semantics keep the committed stream time across a restart.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

from eos_harness.faults.points import crash_point, declare
from eos_harness.models.windows import NO_TIMESTAMP, RETENTION_ONLY, WindowConfig
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.indexed import decode_offset, encode_offset, offset_key
from eos_harness.stores.window_base import WindowStoreBase, in_key_range, window_config_of, window_rows
from rocksdict import AccessType, Options, Rdict, WriteBatch, WriteOptions

__all__ = ["RocksWindowStore", "rocksdb_window", "rocksdb_window_txn"]

P_BEFORE_WRITE = declare("window.rocksdb.commit.before_write", "RocksDB window store: commit batch built, not written")
P_AFTER_WRITE = declare("window.rocksdb.commit.after_write",
                        "RocksDB window store: data, stream time and offsets written; expired segments not yet dropped")
P_AFTER_DROP = declare("window.rocksdb.commit.after_segment_drop", "RocksDB window store: expired segments dropped")

META_CF = "meta"
STREAM_TIME = b"\x00stream_time"
SEGMENT_PREFIX = "seg-"


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_write_buffer_size(4 << 20)
    return options


def storage_key(key: bytes, window_start: int) -> bytes:
    return key + struct.pack(">q", window_start)


def _split(stored: bytes) -> tuple[bytes, int]:
    return stored[:-8], struct.unpack(">q", stored[-8:])[0]


class RocksWindowStore(WindowStoreBase):
    """Persistent; transactional when asked; a transactional one manages its offsets."""

    _commit_from_processor_hint = " (KIP-892); call context.commit() instead"

    def __init__(self, config: WindowConfig, transactional: bool = False, segment_interval: int | None = None) -> None:
        if segment_interval is None:  # Kafka's rule, scaled to milliseconds: half the retention
            segment_interval = max(config.retention_period // 2, 1)
        if segment_interval <= 0:
            raise ValueError(f"segment_interval must be positive, got {segment_interval}")
        super().__init__(config, transactional)
        self._interval = segment_interval
        self._db: Rdict | None = None
        self._segments: dict[int, tuple[Rdict, object]] = {}
        self._sync = WriteOptions()
        self._sync.sync = True

    # -- lifecycle --------------------------------------------------------------------------------
    def init(self, context: StoreContext) -> None:
        context.directory.mkdir(parents=True, exist_ok=True)
        path = str(context.directory / "db")
        existing = Rdict.list_cf(path, Options(raw_mode=True)) if Path(path, "CURRENT").exists() else []
        families = {name: Options(raw_mode=True) for name in existing if name != "default"}
        families.setdefault(META_CF, Options(raw_mode=True))
        self._db = Rdict(path, options=_options(), column_families=families, access_type=AccessType.read_write())
        self._meta = self._db.get_column_family(META_CF)
        self._meta_handle = self._db.get_column_family_handle(META_CF)
        self._segments = {int(name[len(SEGMENT_PREFIX):]): (self._db.get_column_family(name),
                                                            self._db.get_column_family_handle(name))
                          for name in families if name.startswith(SEGMENT_PREFIX)}
        raw = self._meta.get(STREAM_TIME)
        self._stream_time = NO_TIMESTAMP if raw is None else decode_offset(raw)
        self._discard_staged()
        self._via_processor = context.via_processor
        self._drop_expired_segments()

    def persistent(self) -> bool:
        return True

    def manages_offsets(self) -> bool:
        return self._transactional

    # -- segments ---------------------------------------------------------------------------------
    def _segment(self, window_start: int) -> tuple[Rdict, object]:
        segment_id = window_start // self._interval
        found = self._segments.get(segment_id)
        if found is None:
            name = f"{SEGMENT_PREFIX}{segment_id:012d}"
            family = self._db.create_column_family(name, Options(raw_mode=True))
            found = self._segments[segment_id] = (family, self._db.get_column_family_handle(name))
        return found

    def _drop_expired_segments(self) -> None:
        bound = self._lower_bound(self._stream_time)
        if not self._segments or (min(self._segments) + 1) * self._interval > bound:
            return
        for segment_id in sorted(self._segments):
            if (segment_id + 1) * self._interval > bound:
                break
            family, _ = self._segments.pop(segment_id)
            family.close()
            self._db.drop_column_family(f"{SEGMENT_PREFIX}{segment_id:012d}")

    # -- writes -----------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        if self._transactional:
            self._stage(key, value, window_start)
            return
        self._drop_expired_segments()
        batch = WriteBatch(raw_mode=True)
        if window_start > self._stream_time:
            self._stream_time = window_start
            batch.put(STREAM_TIME, encode_offset(window_start), self._meta_handle)
        if self._drop_reason(window_start, self._stream_time) is None:
            self._add_write(batch, key, value, window_start)
        self._db.write(batch)

    def _add_write(self, batch: WriteBatch, key: bytes, value: bytes | None, window_start: int) -> None:
        """Add the write (None: a delete) of the window to ``batch``, in its segment (created if new)."""
        _, handle = self._segment(window_start)
        if value is None:
            batch.delete(storage_key(key, window_start), handle)
        else:
            batch.put(storage_key(key, window_start), value, handle)

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        for key, window_start, value in records:
            self.put(key, value, window_start)

    # -- reads ------------------------------------------------------------------------------------
    def _scan(self, key_from, key_to, lo: int, hi: int, single_key: bool) -> dict[tuple[int, bytes], bytes]:
        found: dict[tuple[int, bytes], bytes] = {}
        first, last = lo // self._interval, hi // self._interval
        for segment_id in sorted(self._segments):
            if not first <= segment_id <= last:
                continue
            family, _ = self._segments[segment_id]
            it = family.iter()
            if single_key:
                it.seek(storage_key(key_from, max(lo, 0)))
                end = storage_key(key_from, hi)
            elif key_from is not None:
                it.seek(key_from)
                end = None
            else:
                it.seek_to_first()
                end = None
            while it.valid():
                stored = it.key()
                if end is not None and stored > end:
                    break
                key, start = _split(stored)
                if lo <= start <= hi and in_key_range(key, key_from, key_to):
                    found[(start, key)] = it.value()
                it.next()
            del it
        return found

    def _expire_before_read(self) -> None:
        if not self._transactional:  # a transactional store drops segments when it commits
            self._drop_expired_segments()

    def _stored_windows(self, key_from, key_to, lo: int, hi: int, single_key: bool) -> dict:
        return self._scan(key_from, key_to, lo, hi, single_key)

    def _iterate_stored(self, key_from, key_to, lo: int, hi: int, reverse: bool, single_key: bool, empty: bool):
        return iter([]) if empty else window_rows(self._scan(key_from, key_to, lo, hi, single_key), reverse, single_key)

    def _fetch_stored(self, key: bytes, window_start: int) -> bytes | None:
        found = self._segments.get(window_start // self._interval)
        return None if found is None else found[0].get(storage_key(key, window_start))

    # -- commit -----------------------------------------------------------------------------------
    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._refuse_commit_from_processor()
        if not self._transactional:
            self._db.flush_wal(True)
            return
        batch = WriteBatch(raw_mode=True)
        for (start, key), value in self._staged.items():
            self._add_write(batch, key, value, start)
        stream_time = self._observed()
        batch.put(STREAM_TIME, encode_offset(stream_time), self._meta_handle)
        for tp, offset in changelog_offsets.items():
            batch.put(offset_key(tp), encode_offset(offset), self._meta_handle)
        crash_point(P_BEFORE_WRITE)
        self._db.write(batch, self._sync)
        crash_point(P_AFTER_WRITE)
        self._stream_time, self._staged = stream_time, {}
        self._drop_expired_segments()
        crash_point(P_AFTER_DROP)

    def committed_offset(self, tp: TopicPartition) -> int | None:
        if not self._transactional:
            return None
        raw = self._meta.get(offset_key(tp))
        return None if raw is None else decode_offset(raw)

    def recover(self, changelog_offset: int | None) -> bool:
        self._discard_staged()
        return self._transactional

    def close(self) -> None:
        if self._db is None:
            return
        self._staged = {}
        for family, _ in self._segments.values():
            family.close()
        self._segments = {}
        self._meta.close()
        self._meta = self._meta_handle = None  # a column family handle keeps the database open
        self._db.close()
        self._db = None


def rocksdb_window(segment_interval: int | None = None, **kwargs) -> RocksWindowStore:
    """Not transactional, retention-only (as Kafka's RocksDB window store, grace left to the processor)."""
    return RocksWindowStore(window_config_of(RETENTION_ONLY, kwargs), segment_interval=segment_interval)


def rocksdb_window_txn(segment_interval: int | None = None, **kwargs) -> RocksWindowStore:
    """Transactional (KIP-892: data, stream time and offsets in one batch), retention-only."""
    return RocksWindowStore(window_config_of(RETENTION_ONLY, kwargs), transactional=True, segment_interval=segment_interval)
