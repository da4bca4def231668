"""Offsets mutants (issue 15): ``rocksdb-indexed`` with ONE real mistake in how it keeps changelog
offsets for several partitions. Only the offsets suite can see them (``StoreSpec.suite``): each is
caught by the check that names its mistake (``tests/test_offsets_suite.py``), and ``eos-harness
verify`` reports it; the lifecycle campaigns' default stores leave them out."""

from __future__ import annotations

from collections.abc import Mapping

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores import StoreSpec, register
from eos_harness.stores.indexed import (
    P_AFTER_WRITE,
    P_BEFORE_WRITE,
    IndexedRocksStore,
    encode_offset,
    offset_key,
)
from rocksdict import WriteBatch

P_OFFSETS_BEFORE_DATA = declare("store.commit.between_offsets_and_data",
                                "mutant: offsets written, data not yet (two writes, offsets first)")
P_BETWEEN_PARTITIONS = declare("store.commit.between_partitions",
                               "mutant: data and one partition's offset written, another partition's not yet")


class OffsetsBeforeData(IndexedRocksStore):
    """Writes the offsets first and the data in a second write: a crash between them records offsets
    for data the store never got (a restore then skips those records)."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._check_commit_allowed()
        crash_point(P_BEFORE_WRITE)
        offsets = WriteBatch(raw_mode=True)
        self._add_offsets(offsets, changelog_offsets)
        self._db.write(offsets, self._write_options)
        crash_point(P_OFFSETS_BEFORE_DATA)
        self._db.write(self._data_batch(), self._write_options)
        crash_point(P_AFTER_WRITE)
        self._overlay, self._sorted = {}, None


class PartitionApart(IndexedRocksStore):
    """Writes the data with the first partition's offset, then each other partition's offset in a
    write of its own: a crash between them leaves the partitions at different commits."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        self._check_commit_allowed()
        items = list(changelog_offsets.items())
        batch = self._data_batch()
        self._add_offsets(batch, dict(items[:1]))
        crash_point(P_BEFORE_WRITE)
        self._db.write(batch, self._write_options)
        for tp, offset in items[1:]:
            crash_point(P_BETWEEN_PARTITIONS)
            own = WriteBatch(raw_mode=True)
            own.put(offset_key(tp), encode_offset(offset), self._offsets_handle)
            self._db.write(own, self._write_options)
        crash_point(P_AFTER_WRITE)
        self._overlay, self._sorted = {}, None


class FirstPartitionOnly(IndexedRocksStore):
    """Persists the offset of its own changelog partition (``context.changelog``) only and keeps the
    others in memory: right after a commit every partition answers, after a reopen only the first."""

    def init(self, context: StoreContext) -> None:
        self._own = context.changelog  # before the base init: its import of legacy offsets asks for them
        self._others: dict[TopicPartition, int] = {}
        super().init(context)

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        own = {tp: o for tp, o in changelog_offsets.items() if tp == self._own}
        super().commit(own)
        self._others.update({tp: o for tp, o in changelog_offsets.items() if tp != self._own})

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return self._others[tp] if tp in self._others else super().committed_offset(tp)


class FlushCommits(IndexedRocksStore):
    """``flush()`` still writes the uncommitted writes to the database, as before KIP-892 (without
    offsets): a flush from a processor commits half a task."""

    def flush(self) -> None:
        self._db.write(self._data_batch(), self._write_options)
        self._overlay, self._sorted = {}, None


for name, cls, caught_by, description in (
    ("mutant-offsets-before-data", OffsetsBeforeData, ("offsets_match_data",),
     "offsets written first, the data in a second write"),
    ("mutant-offsets-partition-apart", PartitionApart, ("partitions_committed_together",),
     "each partition's offset after the first written in a write of its own"),
    ("mutant-offsets-first-partition-only", FirstPartitionOnly, ("partition_offset_survives_reopen",),
     "committed_offset forgets every partition but the first after a reopen"),
    ("mutant-offsets-flush-commits", FlushCommits, ("flush_is_noop",),
     "flush() writes the uncommitted writes to the database"),
):
    register(StoreSpec(name, "mutant", description, cls, caught_by, suite="offsets"))
