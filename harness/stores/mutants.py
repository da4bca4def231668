"""Mutants: the real stores, each with ONE mistake people really make. Some check must catch each;
a mutant that survives the suites is a hole in the harness (tests/test_verify.py, tests/test_lifecycle.py)."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import ChangelogRecord, CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.store_kit import LatestView
from eos_harness.stores import StoreSpec, register
from eos_harness.stores.indexed import (
    P_AFTER_WRITE,
    P_BEFORE_WRITE,
    DatabaseView,
    IndexedRocksStore,
    encode_offset,
    offset_key,
    scan,
)
from eos_harness.stores.legacy import LegacyRocksStore
from eos_harness.stores.secondary import (
    P_AFTER_COPY,
    P_AFTER_MARKER,
    P_AFTER_MARKER_DELETE,
    P_AFTER_TRUNCATE,
    SecondaryRocksStore,
)
from rocksdict import WriteBatch

P_BETWEEN = declare("store.commit.between_data_and_offsets", "mutant: data written, offsets not yet (two writes)")


class SplitOffsetsWrite(IndexedRocksStore):
    """Writes the data and the offsets in two separate writes: a crash between them commits the
    data without its offsets."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._check_commit_allowed()
        crash_point(P_BEFORE_WRITE)
        self._db.write(self._data_batch(), self._write_options)
        crash_point(P_BETWEEN)
        offsets = WriteBatch(raw_mode=True)
        self._add_offsets(offsets, changelog_offsets)
        self._db.write(offsets, self._write_options)
        crash_point(P_AFTER_WRITE)
        self._overlay, self._sorted = {}, None


class RecoverKeepsUncommitted(SecondaryRocksStore):
    """``recover`` without a marker forgets to truncate the temporary store."""

    def recover(self, changelog_offset: int | None) -> bool:
        if self.marker.exists():
            return super().recover(changelog_offset)
        return True

    def close(self) -> None:
        if self._main is None:
            return
        self._close_offsets()
        self._main.close()
        self._tmp.close()
        self._main = self._tmp = None


class SpillsLargeTransactions(IndexedRocksStore):
    """Spills a large open transaction (from ``SPILL_AT`` keys on) to a file in its directory, as a store
    bounding its memory does, and deletes the spill at commit and on close (right); what its ``recover``
    does with a spill a crash left is each subclass's mistake."""

    SPILL_AT = 4

    def _spill(self) -> Path:
        return self._context.directory / "uncommitted.spill"

    def put(self, key: bytes, value: bytes | None) -> None:
        super().put(key, value)
        if len(self._overlay) >= self.SPILL_AT:
            self._spill().write_bytes(pickle.dumps(self._overlay))

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._spill().unlink(missing_ok=True)
        super().commit(changelog_offsets)

    def _spilled(self) -> dict[bytes, bytes | None]:
        """The transaction a crash left spilled (deleted), else nothing."""
        if not self._spill().exists():
            return {}
        spilled = pickle.loads(self._spill().read_bytes())
        self._spill().unlink()
        return spilled

    def close(self) -> None:
        if self._db is not None:
            self._spill().unlink(missing_ok=True)
        super().close()


class RecoverReplaysSpill(SpillsLargeTransactions):
    """``recover`` after a crash replays the spill into the database, as if it were a log of committed
    writes, instead of discarding it: a large transaction's uncommitted writes survive the crash."""

    def recover(self, changelog_offset: int | None) -> bool:
        trusted = super().recover(changelog_offset)
        spilled = self._spilled()
        if spilled:
            self._overlay = spilled
            self._db.write(self._data_batch(), self._write_options)
            self._overlay, self._sorted = {}, None
        return trusted


class RecoverUndoesSpillByDeleting(SpillsLargeTransactions):
    """``recover`` after a crash undoes the spilled transaction's puts by deleting their keys from the
    database, as if every put had inserted a new key: a committed value the transaction overwrote is
    lost with it."""

    def recover(self, changelog_offset: int | None) -> bool:
        trusted = super().recover(changelog_offset)
        for key, value in self._spilled().items():
            if value is not None:
                self._db.delete(key)
        return trusted


class PutAllBypassesTransaction(IndexedRocksStore):
    """``put_all`` writes straight into the database, outside the transaction."""

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self._overlay.pop(key, None)
            self._sorted = None
            if value is None:
                self._db.delete(key)
            else:
                self._db.put(key, value)


class ReadCommittedSeesOverlay(IndexedRocksStore):
    """The read-committed view reads through the uncommitted overlay."""

    def read_committed(self) -> LatestView:
        return LatestView(self)  # the overlay's uncommitted writes too


class ReadCommittedRangeSeesOverlay(IndexedRocksStore):
    """The read-committed view's ``range`` merges the uncommitted overlay (``get`` and ``all`` read the
    database, as they should): a range query of interactive queries shows writes not yet committed."""

    def read_committed(self) -> DatabaseView:
        store = self

        class RangeThroughOverlay(DatabaseView):
            def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
                return store.range(lo, hi)

        return RangeThroughOverlay(lambda: self._db)


class MarkerDeletedEarly(SecondaryRocksStore):
    """Deletes the commit marker before the copy: a crash mid-copy leaves half a commit that
    recovery then throws away with the temporary store."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._write_marker(changelog_offsets)
        crash_point(P_AFTER_MARKER)
        self._delete_marker()
        self._copy(changelog_offsets)
        crash_point(P_AFTER_COPY)
        self._truncate()
        crash_point(P_AFTER_TRUNCATE)
        crash_point(P_AFTER_MARKER_DELETE)


class RangeIgnoresTombstones(IndexedRocksStore):
    """Range scans merge the overlay's puts but forget its tombstones."""

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        overlay = {k: v for k, v in self._overlay_range(lo, hi) if v is not None}
        base = dict(scan(self._db, lo, hi))
        base.update(overlay)
        return iter(sorted(base.items()))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.range(b"", b"\xff" * 64)


class CloseWritesOpenTransaction(IndexedRocksStore):
    """``close`` writes the open transaction's writes into the database before closing it (as a
    non-transactional store flushes its memtable), where it must discard them: after a clean close
    and a reopen the store holds writes never committed in place of the committed data."""

    def close(self) -> None:
        if self._db is not None and self._overlay:
            self._db.write(self._data_batch(), self._write_options)
        super().close()


class OffsetsInMemory(IndexedRocksStore):
    """Keeps the committed offsets in memory only: correct until the process restarts."""

    def init(self, context) -> None:
        super().init(context)
        self._memory_offsets: dict[TopicPartition, int] = {}

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._check_commit_allowed()
        crash_point(P_BEFORE_WRITE)
        self._db.write(self._data_batch(), self._write_options)
        crash_point(P_AFTER_WRITE)
        self._memory_offsets.update(changelog_offsets)
        self._overlay, self._sorted = {}, None

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return self._memory_offsets.get(tp)


class EmptyCommitKeepsCachedOffset(IndexedRocksStore):
    """Answers ``committed_offset`` from a cache of the offsets it committed, refreshed only by a commit
    that wrote data: an empty commit records its offsets in the database (a restart or a reopen reads
    them right) but the running store answers the offset of the last commit that had writes."""

    def init(self, context: StoreContext) -> None:
        self._answered: dict[TopicPartition, int | None] = {}
        super().init(context)
        self._answered = {}  # filled from the database as it is asked (init's import of legacy offsets included)

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        wrote = bool(self._overlay)
        super().commit(changelog_offsets)
        if wrote:
            self._answered.update(changelog_offsets)

    def committed_offset(self, tp: TopicPartition) -> int | None:
        if tp not in self._answered:
            self._answered[tp] = super().committed_offset(tp)
        return self._answered[tp]


class OffsetTracksPuts(IndexedRocksStore):
    """Advances the stored changelog offset with every write (each write is one changelog record)
    instead of at commit, so ``committed_offset`` reports the last put, not the last commit: after a
    crash the store claims changelog records whose data it never committed, and a restore skips them."""

    def init(self, context) -> None:
        super().init(context)
        self._changelog = context.changelog

    def put(self, key: bytes, value: bytes | None) -> None:
        super().put(key, value)
        stored = self.committed_offset(self._changelog)
        self._offsets_cf[offset_key(self._changelog)] = encode_offset(1 if stored is None else stored + 1)


class DeleteDropsFromOverlay(IndexedRocksStore):
    """``delete`` removes the key from the overlay instead of writing a tombstone, so the
    committed value shows again."""

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self._overlay.pop(key, None)
        self._sorted = None
        return old

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.delete(key)
        else:
            super().put(key, value)


class GetIndexesTheDatabase(IndexedRocksStore):
    """Reads a key it does not hold in its overlay with ``db[key]``, which raises KeyError for a key
    never written, where the protocol says ``get`` returns None."""

    def get(self, key: bytes) -> bytes | None:
        if key in self._overlay:
            return self._overlay[key]
        return self._db[key]


class GetReturnsBytearray(IndexedRocksStore):
    """Hands out a mutable copy of the value (a bytearray), where the protocol requires bytes."""

    def get(self, key: bytes) -> bytes | None:
        value = super().get(key)
        return None if value is None else bytearray(value)


class EmptyCommitWaitsForSync(IndexedRocksStore):
    """An empty commit waits for the write-ahead log's sync of its batch, which never comes for a batch
    with nothing in it: the call never returns."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if not self._overlay:
            threading.Event().wait()
        super().commit(changelog_offsets)


class SecondCommitRefused(IndexedRocksStore):
    """Marks itself as reached through a processor once it committed (the flag set in ``commit``, not
    where a processor gets the store): every later commit of the instance is refused with
    CommitFromProcessorError, though the runtime commits it."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if getattr(self, "_committed_once", False):
            raise CommitFromProcessorError(f"store {self.name!r}: processors must not commit stores (KIP-892)")
        super().commit(changelog_offsets)
        self._committed_once = True


class RestoreRecordsLastOffset(IndexedRocksStore):
    """Its own ``restore`` records the offset of the last record restored, not ``end_offset`` (the next
    one to read): the runtime then restores that record a second time."""

    def init(self, context: StoreContext) -> None:
        super().init(context)
        self._changelog = context.changelog

    def restore(self, records: Sequence[ChangelogRecord], end_offset: int) -> None:
        self.put_all([(record.key, record.value) for record in records])
        self.commit({self._changelog: records[-1].offset if records else end_offset})


class LegacyTrustsItself(LegacyRocksStore):
    """Not transactional, yet ``recover`` says its contents can be trusted after a crash (True): the
    runtime would keep what the crash left (uncommitted writes included) instead of wiping it."""

    def recover(self, changelog_offset: int | None) -> bool:
        super().recover(changelog_offset)
        return True


# The store operations a mutant's mistake lies in (the others' lie in commit and recovery, used by all).
MISTAKE_IN = {
    "mutant-put-all-bypasses-txn": frozenset({"put_all"}),
    "mutant-range-ignores-tombstones": frozenset({"range"}),
    "mutant-delete-drops-from-overlay": frozenset({"delete"}),
}

# The mutants verify catches by one check alone, no other firing (measured; tests/test_verify.py holds
# each to it): verify --list-checks names each as the mutant that check alone catches.
CAUGHT_ALONE = {"mutant-range-ignores-tombstones": "read_your_own_writes", "mutant-marker-deleted-early": "atomic_commit",
                "mutant-get-indexes-database": "store_raised", "mutant-get-returns-bytearray": "store_return_type",
                "mutant-empty-commit-waits": "store_hang", "mutant-second-commit-refused": "store_error",
                "mutant-restore-records-last-offset": "offset_convention", "mutant-legacy-trusts-itself": "recover_trust",
                "mutant-read-committed-range-sees-overlay": "read_committed_isolation",
                "mutant-empty-commit-keeps-cached-offset": "committed_offset_durable",
                "mutant-close-writes-open-transaction": "clean_close_durable",
                "mutant-recover-replays-spill": "no_uncommitted_survives",
                "mutant-recover-deletes-spilled-keys": "committed_durable"}
# Mutants of the protocol itself, caught by verify (each by its one check alone): left out of the chaos
# campaigns (StoreSpec.suite), whose plans and timings stay as they are.
VERIFY_ONLY = ("mutant-get-indexes-database", "mutant-get-returns-bytearray", "mutant-empty-commit-waits",
               "mutant-second-commit-refused", "mutant-restore-records-last-offset", "mutant-legacy-trusts-itself",
               "mutant-read-committed-range-sees-overlay", "mutant-empty-commit-keeps-cached-offset",
               "mutant-close-writes-open-transaction", "mutant-recover-replays-spill",
               "mutant-recover-deletes-spilled-keys")

for name, cls, caught_by, description in (
    ("mutant-split-offsets-write", SplitOffsetsWrite, ("atomic_commit", "no_wipe"),
     "data and offsets in two separate writes"),
    ("mutant-recover-keeps-uncommitted", RecoverKeepsUncommitted, ("no_uncommitted_survives",),
     "recover() keeps the temporary store's uncommitted writes"),
    ("mutant-recover-replays-spill", RecoverReplaysSpill, ("no_uncommitted_survives",),
     "recover() replays a large transaction's spill file into the database instead of discarding it"),
    ("mutant-recover-deletes-spilled-keys", RecoverUndoesSpillByDeleting, ("committed_durable",),
     "recover() undoes a large transaction's puts by deleting their keys, committed values included"),
    ("mutant-put-all-bypasses-txn", PutAllBypassesTransaction, ("read_committed_isolation", "no_uncommitted_survives"),
     "put_all() writes straight into the database"),
    ("mutant-read-committed-sees-overlay", ReadCommittedSeesOverlay, ("read_committed_isolation",),
     "the read-committed view reads uncommitted writes"),
    ("mutant-read-committed-range-sees-overlay", ReadCommittedRangeSeesOverlay, ("read_committed_isolation",),
     "the read-committed view's range() shows uncommitted writes"),
    ("mutant-marker-deleted-early", MarkerDeletedEarly, ("atomic_commit", "committed_rolls_forward"),
     "secondary store deletes its commit marker before the copy"),
    ("mutant-range-ignores-tombstones", RangeIgnoresTombstones, ("read_your_own_writes",),
     "range scans ignore the overlay's tombstones"),
    ("mutant-close-writes-open-transaction", CloseWritesOpenTransaction, ("clean_close_durable",),
     "close() writes the open transaction's uncommitted writes into the database"),
    ("mutant-offsets-in-memory", OffsetsInMemory, ("committed_offset_durable", "no_wipe"),
     "committed offsets kept in memory, lost on restart"),
    ("mutant-offset-tracks-puts", OffsetTracksPuts, ("committed_offset_durable", "committed_rolls_forward"),
     "committed_offset() reports the last put, not the last commit"),
    ("mutant-empty-commit-keeps-cached-offset", EmptyCommitKeepsCachedOffset, ("committed_offset_durable",),
     "committed_offset() answers from a cache that a commit without writes does not refresh"),
    ("mutant-delete-drops-from-overlay", DeleteDropsFromOverlay, ("read_your_own_writes",),
     "delete() drops the overlay entry instead of writing a tombstone"),
    ("mutant-get-indexes-database", GetIndexesTheDatabase, ("store_raised",),
     "get() reads the database with db[key]: KeyError for a key never written"),
    ("mutant-get-returns-bytearray", GetReturnsBytearray, ("store_return_type",),
     "get() returns a bytearray, not bytes"),
    ("mutant-empty-commit-waits", EmptyCommitWaitsForSync, ("store_hang",),
     "an empty commit waits forever for a write-ahead-log sync"),
    ("mutant-second-commit-refused", SecondCommitRefused, ("store_error",),
     "after its first commit the store refuses every commit as if from a processor"),
    ("mutant-restore-records-last-offset", RestoreRecordsLastOffset, ("offset_convention",),
     "its own restore() records the last restored record's offset, not end_offset"),
    ("mutant-legacy-trusts-itself", LegacyTrustsItself, ("recover_trust",),
     "a persistent store that is not transactional says recover() True"),
):
    factory = cls if not issubclass(cls, SecondaryRocksStore) else (lambda c=cls: c(copy_chunk=4))
    register(StoreSpec(name, "mutant", description, factory, caught_by, operations=MISTAKE_IN.get(name, frozenset()),
                       alone=CAUGHT_ALONE.get(name), suite="conformance" if name in VERIFY_ONLY else None))
