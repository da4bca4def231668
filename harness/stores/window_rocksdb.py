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
from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.stores.indexed import decode_offset, encode_offset, offset_key
from rocksdict import AccessType, Options, Rdict, WriteBatch, WriteOptions

__all__ = ["RocksWindowStore", "rocksdb_window", "rocksdb_window_txn"]

P_BEFORE_WRITE = declare("window.rocksdb.commit.before_write", "RocksDB window store: commit batch built, not written")
P_AFTER_WRITE = declare("window.rocksdb.commit.after_write",
                        "RocksDB window store: data, stream time and offsets written; expired segments not yet dropped")
P_AFTER_DROP = declare("window.rocksdb.commit.after_segment_drop", "RocksDB window store: expired segments dropped")

META_CF = "meta"
STREAM_TIME = b"\x00stream_time"
SEGMENT_PREFIX = "seg-"
DEFAULTS = {"name": "store", "retention_period": 60, "window_size": 10, "grace_period": 20}
TOP = 2**62


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


class _CommittedView:
    def __init__(self, store: RocksWindowStore) -> None:
        self._store = store

    def __getattr__(self, method: str):
        reader = getattr(RocksWindowStore, method)

        def read(*args):
            return reader(self._store, *args, committed=True)
        return read


class RocksWindowStore:
    """Persistent; transactional when asked; a transactional one manages its offsets."""

    def __init__(self, config: WindowConfig, transactional: bool = False, segment_interval: int | None = None) -> None:
        if segment_interval is None:  # Kafka's rule, scaled to milliseconds: half the retention
            segment_interval = max(config.retention_period // 2, 1)
        if segment_interval <= 0:
            raise ValueError(f"segment_interval must be positive, got {segment_interval}")
        self.name = config.name
        self._config = config
        self._transactional = transactional
        self._interval = segment_interval
        self._db: Rdict | None = None
        self._segments: dict[int, tuple[Rdict, object]] = {}
        self._stream_time = NO_TIMESTAMP
        self._staged: dict[tuple[int, bytes], bytes | None] = {}
        self._staged_stream_time = NO_TIMESTAMP
        self._via_processor = False
        self._sync = WriteOptions()
        self._sync.sync = True

    # -- lifecycle --------------------------------------------------------------------------------
    def window_config(self) -> WindowConfig:
        return self._config

    def _drop_reason(self, window_start: int, stream_time: int) -> str | None:
        """Why a put is dropped (the declared semantics' rule); a mutant overrides it."""
        return self._config.drop_reason(window_start, stream_time)

    def _lower_bound(self, stream_time: int) -> int:
        return self._config.lower_bound(stream_time)

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
        self._staged, self._staged_stream_time = {}, NO_TIMESTAMP
        self._via_processor = context.via_processor
        self._drop_expired_segments()

    def persistent(self) -> bool:
        return True

    def transactional(self) -> bool:
        return self._transactional

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
    def _observed(self, committed: bool = False) -> int:
        if self._transactional and not committed:
            return max(self._stream_time, self._staged_stream_time)
        return self._stream_time

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        if self._transactional:
            self._staged_stream_time = max(self._observed(), window_start)
            if self._drop_reason(window_start, self._staged_stream_time) is None:
                self._staged[(window_start, key)] = value
            return
        self._drop_expired_segments()
        batch = WriteBatch(raw_mode=True)
        if window_start > self._stream_time:
            self._stream_time = window_start
            batch.put(STREAM_TIME, encode_offset(window_start), self._meta_handle)
        if self._drop_reason(window_start, self._stream_time) is None:
            _, handle = self._segment(window_start)
            if value is None:
                batch.delete(storage_key(key, window_start), handle)
            else:
                batch.put(storage_key(key, window_start), value, handle)
        self._db.write(batch)

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
                if lo <= start <= hi and (key_from is None or key >= key_from) and (key_to is None or key <= key_to):
                    found[(start, key)] = it.value()
                it.next()
            del it
        return found

    def _read(self, key_from, key_to, time_from, time_to, reverse, single_key, committed):
        if not self._transactional:
            self._drop_expired_segments()
        lo = max(time_from, self._lower_bound(self._observed(committed)))
        if time_to < lo or (not single_key and key_from is not None and key_to is not None and key_from > key_to):
            return iter([])
        data = self._scan(key_from, key_to, lo, time_to, single_key)
        if self._transactional and not committed:
            for (start, key), value in self._staged.items():
                if lo <= start <= time_to and (key_from is None or key >= key_from) and (key_to is None or key <= key_to):
                    data[(start, key)] = value
        rows = [(k, s, v) for (s, k), v in sorted(data.items(), reverse=reverse) if v is not None]
        if single_key:
            return iter([(s, v) for _, s, v in rows])
        return iter(rows)

    def fetch_window(self, key: bytes, window_start: int, committed: bool = False) -> bytes | None:
        if not self._transactional:
            self._drop_expired_segments()
        if window_start < self._lower_bound(self._observed(committed)):
            return None
        if self._transactional and not committed and (window_start, key) in self._staged:
            return self._staged[(window_start, key)]
        found = self._segments.get(window_start // self._interval)
        return None if found is None else found[0].get(storage_key(key, window_start))

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
        return self._read(None, None, 0, TOP, False, False, committed)

    def backward_all(self, committed: bool = False):
        return self._read(None, None, 0, TOP, True, False, committed)

    def read_committed(self):
        return _CommittedView(self) if self._transactional else self

    # -- commit -----------------------------------------------------------------------------------
    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores (KIP-892); call context.commit() instead")
        if not self._transactional:
            self._db.flush_wal(True)
            return
        batch = WriteBatch(raw_mode=True)
        for (start, key), value in self._staged.items():
            _, handle = self._segment(start)
            if value is None:
                batch.delete(storage_key(key, start), handle)
            else:
                batch.put(storage_key(key, start), value, handle)
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
        self._staged, self._staged_stream_time = {}, NO_TIMESTAMP
        return self._transactional

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op."""

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


def _config(semantics: str, kwargs: dict) -> WindowConfig:
    args = {**DEFAULTS, **kwargs}
    return WindowConfig.of(args["name"], args["retention_period"], args["window_size"], args["grace_period"], semantics)


def rocksdb_window(segment_interval: int | None = None, **kwargs) -> RocksWindowStore:
    """Not transactional, retention-only (as Kafka's RocksDB window store, grace left to the processor)."""
    return RocksWindowStore(_config(RETENTION_ONLY, kwargs), segment_interval=segment_interval)


def rocksdb_window_txn(segment_interval: int | None = None, **kwargs) -> RocksWindowStore:
    """Transactional (KIP-892: data, stream time and offsets in one batch), retention-only."""
    return RocksWindowStore(_config(RETENTION_ONLY, kwargs), transactional=True, segment_interval=segment_interval)
