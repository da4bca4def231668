"""Workloads of the EOS task: seeded input generators and the pure processors that consume them.

A processor turns one input record and a read-only view of the store into the store writes and
output records it causes. The same processor runs in the real task (against the real store) and
in the model (against a dict), so the model's expectation is exactly what the task must produce.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from eos_harness.models.windows import WindowSpec, windows_of

Key = bytes
Value = bytes


class ReadView(Protocol):
    def get(self, key: Key) -> Value | None: ...

    def range(self, lo: Key, hi: Key): ...


@dataclass(frozen=True)
class Effects:
    """What processing one record does: writes in order (None deletes) and output records."""

    writes: tuple[tuple[Key, Value | None], ...]
    outputs: tuple[tuple[Key, Value], ...]


Processor = Callable[[Key, Value, ReadView], Effects]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    generate: Callable[[random.Random, int], list[tuple[Key, Value]]]
    process: Processor
    default_records: int = 120
    # The store operations the processor and the task's writer use (a mistake in one of them only
    # shows on a workload that uses it).
    operations: frozenset[str] = frozenset({"get", "put"})
    # A windowed workload runs on a window store created with these arguments (name, retention_period,
    # window_size, grace_period); its store keys are windowed keys ``key@window_start``.
    window_store: dict[str, object] = field(default_factory=dict)
    # The store's changelog partitions: a global store's changelog topic has several, and each write
    # goes to the partition of its key (:func:`changelog_partition`).
    changelog_partitions: int = 1
    # Drawn only when named (``--workloads``): a campaign without workloads runs the others, so the
    # plan for a seed stays what it was before this workload existed.
    opt_in: bool = False

    @property
    def windowed(self) -> bool:
        return bool(self.window_store)


def _counter_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    keys = max(4, n // 6)
    return [(f"k{rng.randrange(keys):04d}".encode(), b"1") for _ in range(n)]


def _counter(key: Key, value: Value, store: ReadView) -> Effects:
    count = int(store.get(key) or b"0") + int(value)
    new = str(count).encode()
    return Effects(((key, new),), ((key, new),))


def _tombstone_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    keys = max(4, n // 8)
    out = []
    for i in range(n):
        key = f"t{rng.randrange(keys):03d}".encode()
        out.append((key, b"DEL" if rng.random() < 0.3 else f"v{i}".encode()))
    return out


def _tombstones(key: Key, value: Value, store: ReadView) -> Effects:
    if value == b"DEL":
        existed = store.get(key) is not None
        return Effects(((key, None),), ((key, b"deleted" if existed else b"absent"),))
    return Effects(((key, value),), ((key, value),))


def _range_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    out = []
    for _ in range(n):
        prefix = rng.choice("abcd")
        out.append((f"{prefix}/{rng.randrange(12):02d}".encode(), str(rng.randrange(1, 9)).encode()))
    return out


def _range_aggregate(key: Key, value: Value, store: ReadView) -> Effects:
    """Keep per-item values under ``p/NN``, and emit the prefix's sum read with a range scan.

    A value of 1 deletes the item: a tombstone the range scan must honour."""
    prefix = key.split(b"/", 1)[0]
    write: Value | None = None if value == b"1" else value
    total = 0
    for k, v in store.range(prefix + b"/", prefix + b"/\xff"):
        if k != key:
            total += int(v)
    if write is not None:
        total += int(write)
    agg = str(total).encode()
    return Effects(((key, write), (b"sum/" + prefix, agg)), ((prefix, agg),))


def _batch_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    return [(f"b{rng.randrange(n // 3 + 2):03d}".encode(), f"{i}".encode()) for i in range(n)]


def _put_all_batch(key: Key, value: Value, store: ReadView) -> Effects:
    """Each record writes four related keys together (the task applies them with put_all)."""
    writes = tuple((key + f"#{j}".encode(), value + f".{j}".encode()) for j in range(4))
    prev = store.get(key + b"#0")
    return Effects(writes, ((key, (prev or b"-") + b"->" + value),))


def _large_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    return [(f"L{rng.randrange(8)}".encode(), f"{i}".encode()) for i in range(n)]


def _large_values(key: Key, value: Value, store: ReadView) -> Effects:
    big = (value + b":") * (16384 // (len(value) + 1))
    prev = store.get(key)
    return Effects(((key, big),), ((key, b"%d" % (len(prev) if prev else 0)),))


def _many_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    return [(f"m{rng.randrange(1 << 30):09d}-{i}".encode(), b"x") for i in range(n)]


def _many_keys(key: Key, value: Value, store: ReadView) -> Effects:
    seen = store.get(key) is not None
    return Effects(((key, b"seen"),), ((key, b"dup" if seen else b"new"),))


def changelog_partition(key: Key, partitions: int) -> int:
    """The changelog partition of a store write of ``key`` (a stable hash of the key, as a Kafka
    producer's default partitioner; every write of one key goes to one partition, in order)."""
    return zlib.crc32(key) % partitions


GLOBAL_PARTITIONS = 3


def _global_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    keys = max(6, n // 5)
    return [(f"g{rng.randrange(keys):03d}".encode(), b"DEL" if rng.random() < 0.15 else b"%d" % rng.randint(1, 9))
            for _ in range(n)]


def _global_counts(key: Key, value: Value, store: ReadView) -> Effects:
    """Per-key sums and a running total: each record writes its key and ``total`` (two writes that
    usually land on two changelog partitions); ``DEL`` deletes the key and takes its sum off the total."""
    old = int(store.get(key) or b"0")
    total = int(store.get(b"total") or b"0")
    if value == b"DEL":
        new_total = str(total - old).encode()
        return Effects(((key, None), (b"total", new_total)), ((key, b"deleted"),))
    new, new_total = str(old + int(value)).encode(), str(total + int(value)).encode()
    return Effects(((key, new), (b"total", new_total)), ((key, new),))


def windowed_key(key: Key, window_start: int) -> Key:
    """A window's key in a key-value view: ``key@window_start`` (the same as ``eos_harness.window_store``'s)."""
    return b"%s@%013d" % (key, window_start)


def _event_times_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    """Event times that mostly advance (2 ms a record), with out-of-order records (up to 15 ms back)
    and late ones (25 to 90 ms back: past the grace, some past the retention)."""
    out, now = [], 0
    for _ in range(n):
        now += rng.randint(0, 4)
        roll = rng.random()
        ts = now - rng.randint(1, 15) if roll < 0.2 else now - rng.randint(25, 90) if roll < 0.3 else now
        out.append((f"w{rng.randrange(4)}".encode(), b"%d" % max(0, ts)))
    return out


def _windowed_count(spec: WindowSpec) -> Processor:
    def process(key: Key, value: Value, store: ReadView) -> Effects:
        """Count the record in each window of its event time (read-modify-write of the window's count);
        the store drops what its semantics says is late or expired, so a late record reads the count
        as the store kept it."""
        writes, outputs = [], []
        for start, _ in windows_of(int(value), spec):
            if start < 0:
                continue  # windows start at 0 (Kafka's TimeWindows.windowsFor)
            windowed = windowed_key(key, start)
            count = str(int(store.get(windowed) or b"0") + 1).encode()
            writes.append((windowed, count))
            outputs.append((windowed, count))
        return Effects(tuple(writes), tuple(outputs))
    return process


TUMBLING = WindowSpec(size=10, advance=10, grace=20, retention=60)
HOPPING = WindowSpec(size=20, advance=5, grace=30, retention=80)


def _window_store_args(spec: WindowSpec) -> dict[str, object]:
    return {"name": "store", "retention_period": spec.retention_ms, "window_size": spec.size, "grace_period": spec.grace}


def _commit_request_gen(rng: random.Random, n: int) -> list[tuple[Key, Value]]:
    keys = max(4, n // 6)
    return [(f"k{rng.randrange(keys):04d}".encode(), b"C" if rng.random() < 0.15 else b"1") for _ in range(n)]


def _counter_requesting_commits(key: Key, value: Value, store: ReadView) -> Effects:
    """The counter; a record with value ``C`` counts 1 and requests a task commit through the processor's
    context (KIP-892's ``ProcessorContext#commit``; the model's view has no context: nothing happens)."""
    if value == b"C":
        context = getattr(store, "context", None)
        if context is not None:
            context.commit()
    return _counter(key, b"1", store)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("counter", "per-key counter (read-modify-write)", _counter_gen, _counter),
        Workload("tombstones", "puts and deletes of a few keys", _tombstone_gen, _tombstones,
                 operations=frozenset({"get", "put", "delete"})),
        Workload("range-aggregate", "per-prefix sums read with range scans, deletes included", _range_gen, _range_aggregate,
                 operations=frozenset({"range", "put_all", "delete"})),
        Workload("put-all", "four related keys per record written with put_all", _batch_gen, _put_all_batch,
                 operations=frozenset({"get", "put_all"})),
        Workload("large-values", "16 KiB values", _large_gen, _large_values, default_records=60),
        Workload("many-keys", "a new key per record", _many_gen, _many_keys),
        Workload("tumbling-count", "window store: counts in 10 ms tumbling windows, out-of-order and late records",
                 _event_times_gen, _windowed_count(TUMBLING), window_store=_window_store_args(TUMBLING)),
        Workload("hopping-count", "window store: counts in 20 ms windows every 5 ms, out-of-order and late records",
                 _event_times_gen, _windowed_count(HOPPING), default_records=80, operations=frozenset({"get", "put_all"}),
                 window_store=_window_store_args(HOPPING)),
        Workload("global", f"a global store fed by {GLOBAL_PARTITIONS} changelog partitions (writes by key): per-key "
                 "sums, a running total, deletes", _global_gen, _global_counts,
                 operations=frozenset({"get", "put_all", "delete"}), changelog_partitions=GLOBAL_PARTITIONS,
                 opt_in=True),
        Workload("commit-request", "per-key counter whose processor requests task commits through its context "
                 "(about 1 record in 7; KIP-892's ProcessorContext#commit)", _commit_request_gen,
                 _counter_requesting_commits, opt_in=True),
    )
}

# What a campaign runs when no workload is named.
DEFAULT_WORKLOADS: list[str] = [name for name, w in WORKLOADS.items() if not w.opt_in]

# What a chaos campaign runs when no workload is named: the defaults and the global store's, so that a
# default campaign meets every lifecycle check's condition (partitions_one_commit needs a crash of a store
# fed by several changelog partitions). A store that declares itself a task's store is not given it.
CAMPAIGN_WORKLOADS: list[str] = [*DEFAULT_WORKLOADS, "global"]


def workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}: choose one of {', '.join(WORKLOADS)}") from None
