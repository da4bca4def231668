"""``rocksdb-secondary``: a transactional store after KIP-844's secondary-store mechanism.

Uncommitted writes go to a temporary RocksDB beside the main one (a delete is a tombstone value).
Reads look in the temporary store first, ranges merge both. ``commit`` (1) syncs the temporary
store and writes a commit marker holding the offsets, (2) copies the temporary store into the
main store in chunks, the offsets with the last chunk, (3) truncates the temporary store and
(4) deletes the marker. ``recover`` finishes an interrupted commit when the marker exists (the
copy is idempotent), else truncates the temporary store: uncommitted writes are gone.

Upgrade (KIP-1035): a store from before offset management (``rocksdb-legacy``) keeps its database
in ``db/``; this one keeps its main store in ``main/``. Opened on a legacy directory, ``init``
adopts the legacy database as its main store (one atomic rename of ``db/`` to ``main/``, crash
points before and after it), then imports the ``.checkpoint``/``.position`` offsets as every
upgraded store does (:mod:`eos_harness.stores.migration`). A legacy database with no offsets to
import is refused before the rename (the runtime wipes and restores it). The downgrade
(``upgrade_from``) hands the offsets back and drops them as every upgraded store does, then, the
store closed, renames ``main/`` back to ``db/``; a crash before that rename leaves a ``main/`` the
legacy store refuses (the runtime wipes and restores it: slower, nothing lost).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.stores import migration
from eos_harness.stores.indexed import (
    OFFSETS_CF,
    DatabaseView,
    OffsetsColumnFamily,
    merge,
    open_rocksdb,
    scan,
    synced_writes,
)
from rocksdict import WriteBatch

P_AFTER_MARKER = declare("store.commit.after_marker", "secondary store: commit marker written, copy not started")
P_MID_COPY = declare("store.commit.mid_copy", "secondary store: a chunk copied into the main store, more to go")
P_AFTER_COPY = declare("store.commit.after_copy", "secondary store: copy done, temporary store not truncated")
P_AFTER_TRUNCATE = declare("store.commit.after_truncate", "secondary store: temporary store truncated, marker still there")
P_AFTER_MARKER_DELETE = declare("store.commit.after_marker_delete", "secondary store: marker deleted, commit complete")

P_MIGRATE_BEFORE_ADOPT = declare("store.migrate.before_adopt",
                                 "secondary store upgrade: legacy db/ found and trusted, not yet renamed to main/")
P_MIGRATE_AFTER_ADOPT = declare("store.migrate.after_adopt",
                                "secondary store upgrade: legacy db/ renamed to main/ (durably), not yet opened")
ADOPT_POINTS = (P_MIGRATE_BEFORE_ADOPT, P_MIGRATE_AFTER_ADOPT)
P_DOWNGRADE_BEFORE_HANDBACK = declare("store.downgrade.before_handback",
                                      "secondary store downgrade: offsets handed back and dropped, store closed, "
                                      "main/ not yet renamed to db/")
P_DOWNGRADE_AFTER_HANDBACK = declare("store.downgrade.after_handback",
                                     "secondary store downgrade: main/ renamed to db/ (durably), downgrade done")
HANDBACK_POINTS = (P_DOWNGRADE_BEFORE_HANDBACK, P_DOWNGRADE_AFTER_HANDBACK)

PUT, TOMBSTONE = b"P", b"D"


class SecondaryRocksStore(OffsetsColumnFamily):
    """Transactional, persistent, manages its offsets (in the main store's offsets column family);
    uncommitted writes in a temporary RocksDB."""

    def __init__(self, name: str = "store", copy_chunk: int = 1000) -> None:
        if copy_chunk < 1:
            raise ValueError(f"copy_chunk must be >= 1, got {copy_chunk}")
        self.name = name
        self.copy_chunk = copy_chunk
        self._main = self._tmp = None
        self._via_processor = False
        self._write_options = synced_writes()

    def init(self, context: StoreContext) -> None:
        legacy = migration.read_legacy(context)  # a malformed file or upgrade_from stops us before we touch anything
        self._context = context
        self.directory = context.directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.marker = self.directory / "COMMIT"
        self._adopt_legacy(legacy)
        self._main, cfs = open_rocksdb(str(self.directory / "main"), (OFFSETS_CF,))
        self._open_offsets(self._main, cfs)
        self._tmp, _ = open_rocksdb(str(self.directory / "tmp"))
        self._via_processor = context.via_processor
        migration.import_legacy(legacy, self.committed_offset, self._write_offsets)

    def _adopt_legacy(self, legacy: migration.LegacyOffsets) -> None:
        """The upgrade's first step: a legacy database (``db/``, written before offset management)
        becomes the main store, unless it cannot be trusted (no offsets to import: refused)."""
        old, main = self.directory / "db", self.directory / "main"
        if (main / "CURRENT").exists() or not (old / "CURRENT").exists():
            migration.refuse_untrusted(legacy, main, OFFSETS_CF)  # adopted, then a crash before the import
            return
        migration.refuse_untrusted(legacy, old, OFFSETS_CF)
        crash_point(P_MIGRATE_BEFORE_ADOPT)
        if main.exists():
            shutil.rmtree(main)  # an empty main/ a store opened and left without a database
        os.replace(old, main)
        migration.fsync_dir(self.directory)
        crash_point(P_MIGRATE_AFTER_ADOPT)

    def persistent(self) -> bool:
        return True

    def transactional(self) -> bool:
        return True

    # -- writes and reads -----------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None) -> None:
        self._tmp.put(key, TOMBSTONE if value is None else PUT + value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in entries:
            batch.put(key, TOMBSTONE if value is None else PUT + value)
        self._tmp.write(batch)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self.put(key, None)
        return old

    def get(self, key: bytes) -> bytes | None:
        raw = self._tmp.get(key)
        if raw is None:
            return self._main.get(key)
        return None if raw == TOMBSTONE else raw[1:]

    def _pending(self, lo: bytes | None = None, hi: bytes | None = None) -> list[tuple[bytes, bytes | None]]:
        return [(k, None if v == TOMBSTONE else v[1:]) for k, v in scan(self._tmp, lo, hi)]

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(merge(scan(self._main, lo, hi), self._pending(lo, hi))))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(merge(scan(self._main), self._pending())))

    def read_committed(self) -> DatabaseView:
        return DatabaseView(lambda: self._main)

    # -- commit -----------------------------------------------------------------------------------
    def _write_marker(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._tmp.flush_wal(True)  # the uncommitted writes must be durable before the marker says "copy them"
        doc = [[tp.topic, tp.partition, offset] for tp, offset in changelog_offsets.items()]
        tmp = self.marker.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.marker)
        migration.fsync_dir(self.directory)

    def _read_marker(self) -> dict[TopicPartition, int]:
        return {TopicPartition(t, p): o for t, p, o in json.loads(self.marker.read_text())}

    def _delete_marker(self) -> None:
        self.marker.unlink(missing_ok=True)
        migration.fsync_dir(self.directory)

    def _copy(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        pending = self._pending()
        chunks = [pending[i : i + self.copy_chunk] for i in range(0, len(pending), self.copy_chunk)] or [[]]
        for number, chunk in enumerate(chunks):
            batch = WriteBatch(raw_mode=True)
            for key, value in chunk:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            if number == len(chunks) - 1:
                self._add_offsets(batch, changelog_offsets)
            self._main.write(batch, self._write_options)
            if number < len(chunks) - 1:
                crash_point(P_MID_COPY)

    def _truncate(self) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, _ in scan(self._tmp):
            batch.delete(key)
        self._tmp.write(batch, self._write_options)

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores (KIP-892); call context.commit()"
            )
        self._write_marker(changelog_offsets)
        crash_point(P_AFTER_MARKER)
        self._copy(changelog_offsets)
        crash_point(P_AFTER_COPY)
        self._truncate()
        crash_point(P_AFTER_TRUNCATE)
        self._delete_marker()
        crash_point(P_AFTER_MARKER_DELETE)

    def recover(self, changelog_offset: int | None) -> bool:
        if self.marker.exists():
            self._copy(self._read_marker())
            self._truncate()
            self._delete_marker()
        else:
            self._truncate()
        return True

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op. Use commit."""

    def close(self) -> None:
        """Uncommitted writes are discarded."""
        if self._main is None:
            return
        self._truncate()
        downgrade = migration.downgrading(self._context.upgrade_from)
        if downgrade:
            migration.export_offsets(self._context, self.stored_offsets(), self._drop_offsets)
        self._close_offsets()
        self._main.close()
        self._tmp.close()
        self._main = self._tmp = None
        if downgrade:
            self._hand_back()

    def _hand_back(self) -> None:
        """The downgrade's last step: the main store becomes the legacy store's ``db/`` again."""
        crash_point(P_DOWNGRADE_BEFORE_HANDBACK)
        old = self.directory / "db"
        if old.exists():
            shutil.rmtree(old)  # an empty db/ left by a legacy store that refused main/
        os.replace(self.directory / "main", old)
        migration.fsync_dir(self.directory)
        crash_point(P_DOWNGRADE_AFTER_HANDBACK)
