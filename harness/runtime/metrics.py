"""Per-store commit metrics (KIP-892): ``commit-rate``, ``commit-latency-avg``, ``commit-latency-max``.

The runtime measures every call it makes to ``store.commit`` around the call, as Kafka's metered
store layer does, and nothing else: ``flush()`` is a deprecated no-op and is not counted, and a
store restored through its own ``restore`` is not committed by the runtime. Each metric carries
KIP-892's tags: ``type=stream-state-metrics``, ``thread-id``, ``task-id`` and ``[store type]-state-id``
(the store's name), where the store type is the store's metrics scope (Kafka's
``StoreSupplier#metricsScope``): a store's optional ``metrics_scope`` attribute, else ``rocksdb`` for
the built-in RocksDB stores, ``in-memory`` for a store that is not persistent, and the store's class
name otherwise. Latencies are in milliseconds; the rate is commits per second of the store's life.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["GROUP", "StoreMetrics", "metrics_scope"]

GROUP = "stream-state-metrics"
NAMES = ("commit-rate", "commit-latency-avg", "commit-latency-max")


def metrics_scope(store: object, spec: str) -> str:
    """The ``[store type]`` of the ``[store type]-state-id`` tag."""
    declared = getattr(store, "metrics_scope", None)
    if isinstance(declared, str) and declared:
        return declared
    if spec.startswith("rocksdb-") or spec.startswith("mutant-"):
        return "rocksdb"
    persistent = getattr(store, "persistent", None)
    if callable(persistent) and not persistent():
        return "in-memory"
    return type(store).__name__


@dataclass
class StoreMetrics:
    """The commit metrics of one store of one task, as a running instance records them."""

    scope: str
    store_name: str
    task_id: str
    thread_id: str
    clock: Callable[[], float] = time.perf_counter
    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    opened: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.opened = self.clock()

    def timed(self, call: Callable[[], None]) -> None:
        """Run ``call`` (a ``store.commit``) and record its latency; a call that raises is not counted."""
        started = self.clock()
        call()
        took = self.clock() - started
        self.count += 1
        self.total_s += took
        self.max_s = max(self.max_s, took)

    @property
    def tags(self) -> dict[str, str]:
        return {"type": GROUP, "thread-id": self.thread_id, "task-id": self.task_id,
                f"{self.scope}-state-id": self.store_name}

    def report(self) -> list[dict]:
        """Each metric as ``{"name", "group", "tags", "value"}`` (latencies in ms, rate per second)."""
        lived = max(self.clock() - self.opened, 1e-9)
        values = {
            "commit-rate": self.count / lived,
            "commit-latency-avg": (self.total_s / self.count * 1000) if self.count else 0.0,
            "commit-latency-max": self.max_s * 1000,
        }
        return [{"name": name, "group": GROUP, "tags": self.tags, "value": round(values[name], 6),
                 "count": self.count} for name in NAMES]
