"""``rocksdb-legacy``: a non-transactional RocksDB store, as state stores were before KIP-844.

Writes go straight into the database (its write-ahead log), visible to every reader at once, and
they survive a crash of the process whether or not the task committed: the hazard KIP-844 fixes.
``recover`` returns False (the contents cannot be trusted after a crash); the offsets are not the
store's business (KIP-892: the runtime keeps them in the task's ``.checkpoint`` file).

Like Kafka Streams before 4.3, it cannot open a database an upgraded store wrote (KIP-1035: the
offsets column family): ``init`` raises :class:`~eos_harness.store.IncompatibleStoreDirectory`, and the
runtime wipes the directory and restores the store from the changelog. An upgraded store closed with
``upgrade_from`` set dropped that column family, and opens here with its keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import (
    CommitFromProcessorError,
    IncompatibleStoreDirectory,
    StoreContext,
    TopicPartition,
)
from eos_harness.store_kit import PutAllAndDeleteByPut
from eos_harness.stores.indexed import open_rocksdb, scan
from rocksdict import Rdict

P_BEFORE_FLUSH = declare("store.legacy.commit.before_flush", "legacy store: commit called, WAL not yet synced")
P_AFTER_FLUSH = declare("store.legacy.commit.after_flush", "legacy store: WAL synced")


class LegacyRocksStore(PutAllAndDeleteByPut):
    """Persistent, not transactional, does not manage offsets."""

    def __init__(self, name: str = "store") -> None:
        self.name = name
        self._db = None
        self._via_processor = False

    def init(self, context: StoreContext) -> None:
        context.directory.mkdir(parents=True, exist_ok=True)
        path = context.directory / "db"
        if (context.directory / "main" / "CURRENT").exists() and not (path / "CURRENT").exists():
            raise IncompatibleStoreDirectory(
                f"{context.directory / 'main'}: a database written by a store that manages its offsets (KIP-1035, "
                "rocksdb-secondary's main store); this store cannot open it: wipe the directory and restore from "
                "the changelog, or close the newer store with upgrade_from set to downgrade it")
        if (path / "CURRENT").exists():
            unknown = [cf for cf in Rdict.list_cf(str(path)) if cf != "default"]
            if unknown:
                raise IncompatibleStoreDirectory(
                    f"{path}: column families {unknown} were written by a store that manages its offsets "
                    "(KIP-1035); this store cannot open them: wipe the directory and restore from the changelog, "
                    "or close the newer store with upgrade_from set to downgrade it")
        self._db, _ = open_rocksdb(str(path))
        self._via_processor = context.via_processor

    def persistent(self) -> bool:
        return True

    def transactional(self) -> bool:
        return False

    def manages_offsets(self) -> bool:
        return False

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self._db.delete(key)
        else:
            self._db.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self._db.get(key)
        self._db.delete(key)
        return old

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(scan(self._db, lo, hi)))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(scan(self._db)))

    def read_committed(self) -> LegacyRocksStore:
        """Not transactional: the latest writes are all there is (as KIP-844 says for IQ)."""
        return self

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(f"store {self.name!r}: processors must not commit stores")
        crash_point(P_BEFORE_FLUSH)
        self._db.flush_wal(True)
        crash_point(P_AFTER_FLUSH)

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return None

    def recover(self, changelog_offset: int | None) -> bool:
        return False

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op. Use commit."""

    def close(self) -> None:
        if self._db is not None:
            self._db.flush(True)
            self._db.close()
            self._db = None
