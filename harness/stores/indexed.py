"""``rocksdb-indexed``: a transactional RocksDB store after KIP-892's indexed-batch mechanism.

Uncommitted writes live in an in-memory overlay (rocksdict has no WriteBatchWithIndex): a dict of
key → value (``None`` is a tombstone), with a sorted key list built only when a range is asked.
Reads merge the overlay over the database. ``commit`` applies the data AND the changelog offsets
(kept in their own column family) in ONE atomic, synced WriteBatch, so a crash leaves all of it
or none of it. ``recover`` simply drops the overlay: the database holds exactly the last commit.
"""

from __future__ import annotations

import bisect
import heapq
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.store_kit import PutAllAndDeleteByPut
from eos_harness.stores import migration
from rocksdict import AccessType, Options, Rdict, WriteBatch, WriteOptions

P_BEFORE_WRITE = declare("store.commit.before_write", "indexed store: batch built, not yet written")
P_AFTER_WRITE = declare("store.commit.after_write", "indexed store: data+offsets batch written and synced")

OFFSETS_CF = "offsets"
WRITE_BUFFER_BYTES = 4 << 20
_MISSING = object()


def offset_key(tp: TopicPartition) -> bytes:
    return tp.topic.encode() + b"\0" + str(tp.partition).encode()


def decode_offset_key(raw: bytes) -> TopicPartition:
    topic, _, partition = raw.rpartition(b"\0")
    return TopicPartition(topic.decode(), int(partition))


def encode_offset(offset: int) -> bytes:
    return struct.pack(">q", offset)


def decode_offset(raw: bytes) -> int:
    return struct.unpack(">q", raw)[0]


def open_rocksdb(path: str, column_families: tuple[str, ...] = ()) -> tuple[Rdict, dict]:
    """Open (creating) a raw-bytes RocksDB with the given extra column families; returns the
    database and, per family, (its Rdict for reads, its handle for write batches)."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    # Bound the write-ahead log that an open after a crash replays: memtables flush to SST files
    # every few MB, so recovery time stays flat in the size of the state (KIP-892's goal).
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.create_missing_column_families(True)
    cfs = {name: Options(raw_mode=True) for name in column_families}
    db = Rdict(path, options=options, column_families=cfs or None, access_type=AccessType.read_write())
    return db, {name: (db.get_column_family(name), db.get_column_family_handle(name)) for name in column_families}


def synced_writes() -> WriteOptions:
    """Write options that sync the write-ahead log before the write returns (a commit's)."""
    options = WriteOptions()
    options.sync = True
    return options


def scan(db: Rdict, lo: bytes | None = None, hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
    """Sorted (key, value) of ``db`` with lo <= key <= hi (bounds optional)."""
    it = db.iter()
    if lo is None:
        it.seek_to_first()
    else:
        it.seek(lo)
    while it.valid():
        key = it.key()
        if hi is not None and key > hi:
            break
        yield key, it.value()
        it.next()


def merge(base: Iterable[tuple[bytes, bytes]], overlay: list[tuple[bytes, bytes | None]]) -> Iterator[tuple[bytes, bytes]]:
    """Merge a sorted overlay (None = tombstone) over a sorted base; the overlay wins."""
    overlay_keys = {k for k, _ in overlay}
    merged = heapq.merge(((k, v) for k, v in base if k not in overlay_keys), overlay)
    return ((key, value) for key, value in merged if value is not None)


class DatabaseView:
    """The read-only view of what a RocksDB database holds: a transactional store's committed data
    (its ``read_committed()``), uncommitted writes being kept elsewhere. ``database()`` gives the
    database each time, so a view follows the store when it reopens."""

    def __init__(self, database: Callable[[], Rdict]) -> None:
        self._database = database

    def get(self, key: bytes) -> bytes | None:
        return self._database().get(key)

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(scan(self._database(), lo, hi)))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(scan(self._database())))


class OffsetsColumnFamily:
    """The changelog offsets (and KIP-796 positions) a RocksDB store keeps in the ``offsets`` column
    family of its database (KIP-1035), for ``rocksdb-indexed`` and ``rocksdb-secondary`` alike: such
    a store manages its offsets. The store opens the database with :data:`OFFSETS_CF` and hands it
    over (:meth:`_open_offsets`); its ``_write_options`` are synced."""

    _write_options: WriteOptions
    _offsets_db: Rdict | None = None
    _offsets_cf = None
    _offsets_handle = None

    def manages_offsets(self) -> bool:
        return True

    def _open_offsets(self, db: Rdict, column_families: dict) -> None:
        self._offsets_db = db
        self._offsets_cf, self._offsets_handle = column_families[OFFSETS_CF]

    def _add_offsets(self, batch: WriteBatch, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in changelog_offsets.items():
            batch.put(offset_key(tp), encode_offset(offset), self._offsets_handle)

    def _write_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Write ``offsets`` into the offsets column family, synced (the upgrade's import)."""
        batch = WriteBatch(raw_mode=True)
        self._add_offsets(batch, offsets)
        self._offsets_db.write(batch, self._write_options)

    def committed_offset(self, tp: TopicPartition) -> int | None:
        raw = self._offsets_cf.get(offset_key(tp))
        return None if raw is None else decode_offset(raw)

    def stored_offsets(self) -> dict[TopicPartition, int]:
        """Every offset the store holds (changelog offsets and positions)."""
        return {decode_offset_key(k): decode_offset(v) for k, v in scan(self._offsets_cf)}

    def _drop_offsets(self) -> None:
        """Drop the offsets column family (the downgrade's last step): an older store opens the database."""
        self._offsets_cf.close()
        self._offsets_cf = self._offsets_handle = None
        self._offsets_db.drop_column_family(OFFSETS_CF)

    def _close_offsets(self) -> None:
        if self._offsets_cf is not None:
            self._offsets_cf.close()
        self._offsets_cf = self._offsets_handle = None


class IndexedRocksStore(OffsetsColumnFamily, PutAllAndDeleteByPut):
    """Transactional, persistent, manages its offsets (KIP-892)."""

    def __init__(self, name: str = "store") -> None:
        self.name = name
        self._db: Rdict | None = None
        self._overlay: dict[bytes, bytes | None] = {}
        self._sorted: list[bytes] | None = None
        self._via_processor = False
        self._write_options = synced_writes()

    # -- lifecycle --------------------------------------------------------------------------------
    def init(self, context: StoreContext) -> None:
        legacy = migration.read_legacy(context)  # a malformed file or upgrade_from stops us before we touch anything
        context.directory.mkdir(parents=True, exist_ok=True)
        self._refuse_untrusted(legacy, context.directory / "db")
        self._db, cfs = open_rocksdb(str(context.directory / "db"), (OFFSETS_CF,))
        self._open_offsets(self._db, cfs)
        self._context = context
        self._via_processor = context.via_processor
        self._overlay = {}
        self._sorted = None
        self._migrate(legacy)

    def _refuse_untrusted(self, legacy: migration.LegacyOffsets, database) -> None:
        """A legacy database with no .checkpoint offset to import is not trusted: the runtime wipes it."""
        migration.refuse_untrusted(legacy, database, OFFSETS_CF)

    def _migrate(self, legacy: migration.LegacyOffsets) -> None:
        """The upgrade: import the legacy files' offsets durably, then clean the files up."""
        migration.import_legacy(legacy, self.committed_offset, self._write_offsets)

    def _downgrade(self) -> None:
        """``close()`` with ``upgrade_from`` before 4.3: hand the offsets back to the legacy files."""
        migration.export_offsets(self._context, self.stored_offsets(), self._drop_offsets)

    def persistent(self) -> bool:
        return True

    def transactional(self) -> bool:
        return True

    # -- writes -----------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None) -> None:
        if key not in self._overlay:
            self._sorted = None
        self._overlay[key] = value

    # -- reads ------------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            return self._db.get(key)
        return value  # type: ignore[return-value]

    def _overlay_range(self, lo: bytes | None, hi: bytes | None) -> list[tuple[bytes, bytes | None]]:
        if self._sorted is None:
            self._sorted = sorted(self._overlay)
        keys = self._sorted
        start = 0 if lo is None else bisect.bisect_left(keys, lo)
        end = len(keys) if hi is None else bisect.bisect_right(keys, hi)
        return [(k, self._overlay[k]) for k in keys[start:end]]

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(merge(scan(self._db, lo, hi), self._overlay_range(lo, hi))))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(merge(scan(self._db), self._overlay_range(None, None))))

    def read_committed(self) -> DatabaseView:
        return DatabaseView(lambda: self._db)

    # -- commit -----------------------------------------------------------------------------------
    def _check_commit_allowed(self) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores (KIP-892); "
                "call context.commit() to request a task commit"
            )

    def _data_batch(self) -> WriteBatch:
        batch = WriteBatch(raw_mode=True)
        for key, value in self._overlay.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        return batch

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._check_commit_allowed()
        batch = self._data_batch()
        self._add_offsets(batch, changelog_offsets)
        crash_point(P_BEFORE_WRITE)
        self._db.write(batch, self._write_options)
        crash_point(P_AFTER_WRITE)
        self._overlay = {}
        self._sorted = None

    def recover(self, changelog_offset: int | None) -> bool:
        self._overlay = {}
        self._sorted = None
        return True

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op. Use commit."""

    def close(self) -> None:
        self._overlay = {}
        if self._db is not None:
            if migration.downgrading(self._context.upgrade_from):
                self._downgrade()
            self._close_offsets()
            self._db.close()
            self._db = None
