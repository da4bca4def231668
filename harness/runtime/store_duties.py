"""The task runtime's KIP-892 duties around its store, kept apart from the lifecycle steps in
``eos_harness.runtime``: the offsets cache on start, the warning and the naming check at init, the
commit metrics, the processor's view of the store and its commit requests, the ``.checkpoint``
written on close, and the check that the store wrote nothing outside its directory.

Each duty reports through the task's ``emit`` as an event the driver records:

* ``offsets_cache`` (on start): per task directory on disk, its offsets, offset sum and lag;
* ``store_warning`` (at the first init of the instance's store, once): see ``runtime.closing``;
* ``store_directory`` (after recover and after close, only when something is wrong): the naming
  problems and the paths the store wrote outside its directory (the lifecycle's
  ``store_directory`` check turns them into violations);
* ``commit_requested`` (when a processor asked for a commit, before the task commits);
* ``metrics`` (on close, and when a fenced or aborted instance leaves): the commit metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from eos_harness.runtime.checkpoint import write_checkpoint
from eos_harness.runtime.closing import OffsetsCache, closing_offsets, offsets_warning
from eos_harness.runtime.metrics import StoreMetrics, metrics_scope
from eos_harness.runtime.names import naming_problems, outside_writes
from eos_harness.runtime.processor import ProcessorContext, ProcessorStore
from eos_harness.store import StateStore, StoreContext, TopicPartition

__all__ = ["StoreDuties", "metrics_of", "store_metrics", "warnings_of"]


class StoreDuties:
    def __init__(self, config, emit: Callable[[dict], None]) -> None:
        self.config = config
        self.emit = emit
        self.context: StoreContext | None = None
        self.metrics: StoreMetrics | None = None
        self.cache = OffsetsCache()
        self.processor_context = ProcessorContext(config.task_id)
        self._view: ProcessorStore | None = None
        self._warned = False

    @property
    def changelogs(self) -> tuple[TopicPartition, ...]:
        if self.context is not None:
            return tuple(getattr(self.context, "changelogs", ())) or (self.context.changelog,)
        return (self.config.changelog_tp,)

    # -- start --------------------------------------------------------------------------
    def on_start(self, broker, factory: Callable[[], StateStore]) -> None:
        """Build the offsets cache from every task directory of the application on disk."""
        config = self.config

        def open_store(context: StoreContext) -> StateStore:
            store = factory()
            store.init(context)
            return store

        def changelogs_of(task_id: str, store_name: str) -> tuple[TopicPartition, ...]:
            """The store's changelog partitions in task ``task_id``: its own partition, or every
            partition of a global store (as many as this task's store is fed by)."""
            topic = f"{config.application_id}-{store_name}-changelog"
            if len(config.changelog_tps) > 1:
                return tuple(TopicPartition(topic, tp.partition) for tp in config.changelog_tps)
            return (TopicPartition(topic, int(task_id.rpartition("_")[2])),)

        app_dir = Path(config.state_dir) / config.application_id
        # This task's own stores are opened by its recover, once: the cache does not open them.
        self.cache = OffsetsCache.build(app_dir, config.application_id, open_store, changelogs_of,
                                        skip=[config.task_id])
        ends: dict[str, dict[TopicPartition, int]] = {}
        for task_id, entry in self.cache.tasks.items():
            # The partitions the task has offsets for (a crashed task without any: its default partition).
            partitions = set(entry.offsets) or set(changelogs_of(task_id, config.store_name))
            ends[task_id] = {tp: broker.end_offset(tp) for tp in sorted(partitions)}
        self.emit({"type": "offsets_cache", "tasks": self.cache.to_json(ends),
                   "opened": [str(p) for p in self.cache.opened]})

    # -- init ---------------------------------------------------------------------------
    def opened(self, store: StateStore, context: StoreContext) -> None:
        """The store was just initialised with ``context``."""
        config = self.config
        self.context = context
        self._view = None
        if self.metrics is None:
            self.metrics = StoreMetrics(metrics_scope(store, config.store), config.store_name, config.task_id,
                                        f"{config.application_id}-StreamThread-1")
        if not self._warned:
            self._warned = True
            warning = offsets_warning(store, config.store_name, config.store)
            if warning:
                self.emit({"type": "store_warning", "message": warning})

    def recovered(self) -> None:
        self.cache.restored(self.config.task_id, self.changelogs)
        self.check_directory()

    # -- processing ---------------------------------------------------------------------
    def processor_view(self, store: StateStore) -> ProcessorStore:
        """The store as the processor reaches it (``commit`` refused, ``context.commit()`` offered)."""
        if self._view is None or self._view._store is not store:
            self._view = ProcessorStore(store, self.processor_context)
        return self._view

    def commit_requested(self, position: int) -> bool:
        """True when the processor asked for a commit since the last one (the request is then taken)."""
        if not self.processor_context.take_request():
            return False
        self.emit({"type": "commit_requested", "input_position": position})
        return True

    def commit(self, store: StateStore, offsets: Mapping[TopicPartition, int]) -> None:
        """``store.commit(offsets)``, measured."""
        if self.metrics is None:
            store.commit(offsets)
        else:
            self.metrics.timed(lambda: store.commit(offsets))

    # -- close --------------------------------------------------------------------------
    def write_closing_checkpoint(self, store: StateStore, runtime_offsets: Mapping[TopicPartition, int]) -> None:
        """Under EOS, the task's ``.checkpoint`` on close: from the store's own committed offsets
        when it manages them (the assignor reads it for a task not running here), else the runtime's."""
        offsets = closing_offsets(store, self.changelogs, runtime_offsets)
        write_checkpoint(self.config.checkpoint_path, offsets)
        self.cache.closed(self.config.task_id, offsets)

    def closed(self) -> None:
        self.check_directory()
        self.report_metrics()

    def report_metrics(self) -> None:
        if self.metrics is not None:
            self.emit({"type": "metrics", "metrics": self.metrics.report()})

    def check_directory(self) -> None:
        config = self.config
        problems = naming_problems(self.context, Path(config.state_dir)) if self.context is not None else []
        outside = outside_writes(config.task_dir, [config.store_dir])
        if problems or outside:
            self.emit({"type": "store_directory", "store": config.store_name, "naming": problems, "outside": outside})


def metrics_of(history: list[dict]) -> list[dict]:
    """The commit metrics every instance reported (``metrics`` events), each tagged with its instance."""
    return [{"instance": e.get("instance"), **m} for e in history if e["type"] == "metrics" for m in e["metrics"]]


def warnings_of(history: list[dict]) -> list[str]:
    """The distinct ``store_warning`` messages of a history, in order (one per store, not per instance)."""
    return list(dict.fromkeys(e["message"] for e in history if e["type"] == "store_warning"))


def store_metrics(results: list[dict]) -> dict[str, dict]:
    """Per store (of scenario results with ``metrics``): commits measured, commit-latency-avg over all
    of them, commit-latency-max, and the mean commit-rate of the instances that committed (ms, 1/s)."""
    by_store: dict[str, dict] = {}
    for result in results:
        per_instance: dict[object, dict[str, dict]] = {}
        for m in result.get("metrics", []):
            per_instance.setdefault(m.get("instance"), {})[m["name"]] = m
        for metrics in per_instance.values():
            count = metrics.get("commit-rate", {}).get("count", 0)
            if not count:
                continue
            entry = by_store.setdefault(result["store"], {"commits": 0, "latency_total_ms": 0.0,
                                                          "commit-latency-max": 0.0, "rates": []})
            entry["commits"] += count
            entry["latency_total_ms"] += metrics["commit-latency-avg"]["value"] * count
            entry["commit-latency-max"] = max(entry["commit-latency-max"], metrics["commit-latency-max"]["value"])
            entry["rates"].append(metrics["commit-rate"]["value"])
    return {store: {"commits": e["commits"],
                    "commit-rate": round(sum(e["rates"]) / len(e["rates"]), 6),
                    "commit-latency-avg": round(e["latency_total_ms"] / e["commits"], 6),
                    "commit-latency-max": e["commit-latency-max"]}
            for store, e in sorted(by_store.items())}
