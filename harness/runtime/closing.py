"""Closed stores (KIP-892, "Consumer Rebalance Metadata"): the ``.checkpoint`` written on close, the
offsets cache built on start, and the warning for persistent stores that do not manage offsets.

* On close, under EOS, the task's ``.checkpoint`` is written even for a store that manages its own
  offsets, from the store's ``committed_offset`` of each changelog partition: the assignor reads it
  for tasks that are not running here, without opening their stores (:func:`closing_offsets`).
* On start, :class:`OffsetsCache` is built from every task directory on disk: a task with a
  ``.checkpoint`` is read from it; a task without one (it crashed, or never closed) has each of its
  stores opened ONCE to ask ``committed_offset``, then closed. The cache gives per-task offset sums
  and lags against the changelogs' end offsets, and is updated (never by reopening a store) when a
  running task finishes its restore (:data:`LATEST`) and when it closes.
* A persistent store that does not manage its offsets keeps the runtime's ``.checkpoint`` handling,
  and gets one warning at init (:func:`offsets_warning`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.runtime.checkpoint import read_checkpoint
from eos_harness.store import IncompatibleStoreDirectory, StateStore, StoreContext, TopicPartition

__all__ = ["LATEST", "OffsetsCache", "TaskOffsets", "closing_offsets", "offsets_warning", "task_directories"]

LATEST = -2  # Kafka's Task.LATEST_OFFSET: the task runs here and is caught up


def closing_offsets(store: StateStore, changelogs: Iterable[TopicPartition],
                    fallback: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offsets the ``.checkpoint`` written on close holds: a store that manages offsets says them
    itself (``committed_offset``; a partition it never committed is left out); any other store
    gets the runtime's own (``fallback``)."""
    if not store.manages_offsets():
        return dict(fallback)
    offsets = {}
    for tp in changelogs:
        offset = store.committed_offset(tp)
        if offset is not None:
            offsets[tp] = offset
    return offsets


def offsets_warning(store: StateStore, store_name: str, spec: str) -> str | None:
    """KIP-892's WARN at init for a persistent store that does not manage its own offsets; None for
    any other store."""
    if not store.persistent() or store.manages_offsets():
        return None
    return unmanaged_offsets_warning(store_name, spec)


def unmanaged_offsets_warning(store_name: str, spec: str) -> str:
    """The warning's text for a persistent store that does not manage its own offsets."""
    return (f"store {store_name!r} ({spec}) is persistent but does not manage its own offsets: the runtime keeps "
            "them in the task's .checkpoint file (legacy, deprecated by KIP-892), and under EOS a crash wipes the "
            "store and restores it from the changelog; make manages_offsets() return True and store the offsets "
            "given to commit() atomically with the data")


@dataclass
class TaskOffsets:
    """One task's entry of the offsets cache: its changelog offsets (or :data:`LATEST`) and where
    they came from (``checkpoint``, ``store``, ``restored``, ``closed``)."""

    task_id: str
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    source: str = "checkpoint"

    @property
    def offset_sum(self) -> int:
        """Kafka's task offset sum: LATEST for a running, caught-up task, else the sum of offsets."""
        if any(o == LATEST for o in self.offsets.values()):
            return LATEST
        return sum(self.offsets.values())

    def lag(self, end_offsets: Mapping[TopicPartition, int]) -> int:
        """Records behind ``end_offsets`` (the end offsets of the task's changelog partitions; a
        partition without an offset here counts from 0); 0 for a running, caught-up task."""
        if self.offset_sum == LATEST:
            return 0
        return sum(max(end - self.offsets.get(tp, 0), 0) for tp, end in end_offsets.items())


def task_directories(app_dir: Path) -> list[Path]:
    """Every task directory (``[state.dir]/[application.id]/[task.id]``) on disk, sorted."""
    if not app_dir.is_dir():
        return []
    return sorted(p for p in app_dir.iterdir() if p.is_dir() and _is_task_id(p.name))


def _is_task_id(name: str) -> bool:
    group, sep, partition = name.partition("_")
    return bool(sep) and group.isdigit() and partition.isdigit()


Opener = Callable[[StoreContext], StateStore]


class OffsetsCache:
    """Per-task changelog offsets of every task directory on disk (see the module docstring).

    ``open_store(context)`` returns an initialised store; it is called at most once per store
    directory of a task without a ``.checkpoint``, and never for ``skip`` (the tasks about to run
    here, which open their stores themselves and report through :meth:`restored`)."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskOffsets] = {}
        self.opened: list[Path] = []

    @classmethod
    def build(cls, app_dir: Path, application_id: str, open_store: Opener,
              changelogs_of: Callable[[str, str], tuple[TopicPartition, ...]],
              skip: Iterable[str] = ()) -> OffsetsCache:
        """The cache of ``app_dir``; ``changelogs_of(task_id, store_name)`` names a store's changelog
        partitions (Kafka's topology knows them)."""
        cache = cls()
        skipped = set(skip)
        for task_dir in task_directories(app_dir):
            task_id = task_dir.name
            checkpoint = task_dir / ".checkpoint"
            if checkpoint.exists():
                cache.tasks[task_id] = TaskOffsets(task_id, read_checkpoint(checkpoint), "checkpoint")
                continue
            if task_id in skipped:
                continue
            offsets: dict[TopicPartition, int] = {}
            for store_dir in sorted(p for p in (task_dir / "rocksdb").glob("*") if p.is_dir()):
                changelogs = changelogs_of(task_id, store_dir.name)
                context = StoreContext(directory=store_dir, application_id=application_id, task_id=task_id,
                                       store_name=store_dir.name, changelog=changelogs[0], changelogs=changelogs)
                try:
                    store = open_store(context)
                except IncompatibleStoreDirectory:
                    continue  # a directory it cannot open or trust: no offsets; the task wipes it when it runs
                cache.opened.append(store_dir)
                try:
                    if store.persistent() and store.manages_offsets():
                        for tp in changelogs:
                            offset = store.committed_offset(tp)
                            if offset is not None:
                                offsets[tp] = offset
                finally:
                    store.close()
            cache.tasks[task_id] = TaskOffsets(task_id, offsets, "store")
        return cache

    def restored(self, task_id: str, changelogs: Iterable[TopicPartition]) -> None:
        """A task finished its restore here: it is caught up (LATEST) until it closes."""
        self.tasks[task_id] = TaskOffsets(task_id, {tp: LATEST for tp in changelogs}, "restored")

    def closed(self, task_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """A task closed here with these changelog offsets (what its ``.checkpoint`` now holds)."""
        self.tasks[task_id] = TaskOffsets(task_id, dict(offsets), "closed")

    def offset_sums(self) -> dict[str, int]:
        return {task_id: t.offset_sum for task_id, t in sorted(self.tasks.items())}

    def lags(self, end_offsets: Mapping[str, Mapping[TopicPartition, int]]) -> dict[str, int]:
        """Per task, its lag against ``end_offsets[task_id]`` (its changelog partitions' end offsets)."""
        return {task_id: t.lag(end_offsets.get(task_id, {})) for task_id, t in sorted(self.tasks.items())}

    def to_json(self, end_offsets: Mapping[str, Mapping[TopicPartition, int]] | None = None) -> dict[str, dict]:
        report = {}
        for task_id, t in sorted(self.tasks.items()):
            entry = {"source": t.source, "offset_sum": t.offset_sum,
                     "offsets": {str(tp): o for tp, o in sorted(t.offsets.items())}}
            if end_offsets is not None:
                entry["lag"] = t.lag(end_offsets.get(task_id, {}))
            report[task_id] = entry
        return report
