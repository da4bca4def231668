"""The changelog partitions of a task's store: one, or several for a global store.

A task's own store logs to one partition of ``[application.id]-[store.name]-changelog`` (the
task's). A global store (a workload with ``changelog_partitions`` > 1, e.g. ``global``) is fed by
every partition of that topic: each store write is appended to the partition of its key
(:func:`eos_harness.models.workloads.changelog_partition`), ``store.commit`` gets the offset of
every partition in one call, the task's ``.checkpoint`` (stores that do not manage offsets) holds
every partition, and a restore replays each partition from that partition's committed offset.

Events keep their one-partition fields (``changelog_position``: with several partitions, the sum of
their positions) and add, with several partitions, the offsets of each in partition order
(``changelog_positions``, ``store_offsets``, ``recovered_offsets``) for the lifecycle checks.
"""

from __future__ import annotations

from collections.abc import Mapping

from eos_harness.models.workloads import changelog_partition
from eos_harness.store import StateStore, TopicPartition

Offsets = dict[TopicPartition, int]


class Changelogs:
    """The partitions ``tps`` (in partition order) of one store's changelog."""

    def __init__(self, tps: tuple[TopicPartition, ...]) -> None:
        self.tps = tps

    @property
    def several(self) -> bool:
        return len(self.tps) > 1

    def of(self, key: bytes) -> TopicPartition:
        """The partition a write of ``key`` goes to."""
        return self.tps[changelog_partition(key, len(self.tps))] if self.several else self.tps[0]

    def stored(self, store: StateStore, checkpoint: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """Each partition's committed offset: the store's own (it manages offsets), else the
        ``.checkpoint`` file's; None for a partition without one."""
        if store.manages_offsets():
            return {tp: store.committed_offset(tp) for tp in self.tps}
        return {tp: checkpoint.get(tp) for tp in self.tps}

    def fields(self, name: str, offsets: Mapping[TopicPartition, int | None], plural: str) -> dict:
        """Event fields for ``offsets``: ``name`` (the one partition's offset; with several, the sum,
        None if any is None) and, with several partitions, ``plural`` (each one's, in order)."""
        values = [offsets.get(tp) for tp in self.tps]
        if not self.several:
            return {name: values[0]}
        total = None if any(v is None for v in values) else sum(values)
        return {name: total, plural: values}

    def positions(self, offsets: Mapping[TopicPartition, int]) -> dict:
        return self.fields("changelog_position", offsets, "changelog_positions")
