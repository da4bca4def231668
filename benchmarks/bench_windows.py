"""Benchmarks of the window stores against the key-value stores doing the same writes, measured in
the same run.

1. Put throughput (puts per second, committed every ``--commit-every`` puts) and fetch throughput
   (single-key fetches of a time range, and fetch_window) of ``memory-window`` and
   ``rocksdb-window-txn``/``rocksdb-window``, next to ``memory`` and ``rocksdb-indexed`` writing the
   same records under ``key@window_start`` keys (and a range scan of one key's windows).
2. Memory per million records of ``memory-window``: tracemalloc's peak-free figure of the live
   segments after ``--memory-records`` puts (retention large enough that nothing expires), scaled
   to one million.

``python -m benchmarks.bench_windows [--records 50000] [--keys 100] [--memory-records 200000]``
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.registry import resolve, resolve_window
from eos_harness.window_store import windowed_key

from benchmarks.common import scratch_directory

TP = StoreContext(directory=Path()).changelog
WINDOW = {"retention_period": 10**9, "window_size": 10, "grace_period": 10**6}


def _records(n: int, keys: int, seed: int = 1) -> list[tuple[bytes, int, bytes]]:
    """Windows of ``keys`` keys, window starts advancing every 10 ms with some out of order."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        start = (i // keys) * 10 - rng.choice((0, 0, 0, 10, 20))
        out.append((b"key%05d" % rng.randrange(keys), max(0, start), b"%08d" % i))
    return out


def _open(factory, directory: Path):
    store = factory()
    store.init(StoreContext(directory=directory, changelog=TopicPartition("bench-changelog", 0)))
    store.recover(None)
    return store


def _measure(name: str, store, records, commit_every: int, fetches: int, put, fetch_range, fetch_point) -> dict:
    """Time ``put(store, key, start, value)`` over ``records`` (committing every ``commit_every``), then
    ``fetches`` of ``fetch_range(store, key, start)`` and of ``fetch_point(store, key, start)`` at
    records picked by one seeded generator; close the store."""
    started = time.perf_counter()
    for i, (key, start, value) in enumerate(records, 1):
        put(store, key, start, value)
        if i % commit_every == 0:
            store.commit({TP: i})
    store.commit({TP: len(records)})
    put_s = time.perf_counter() - started
    rng = random.Random(2)
    started = time.perf_counter()
    for _ in range(fetches):
        key, start, _ = records[rng.randrange(len(records))]
        fetch_range(store, key, start)
    fetch_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(fetches):
        key, start, _ = records[rng.randrange(len(records))]
        fetch_point(store, key, start)
    point_s = time.perf_counter() - started
    store.close()
    return {"store": name, "puts/s": len(records) / put_s, "fetch(range)/s": fetches / fetch_s,
            "fetch_window/s": fetches / point_s}


def bench_window(name: str, records, commit_every: int, fetches: int, directory: Path) -> dict:
    return _measure(name, _open(lambda: resolve_window(name)(**WINDOW), directory), records, commit_every, fetches,
                    put=lambda store, key, start, value: store.put(key, value, start),
                    fetch_range=lambda store, key, start: list(store.fetch(key, start, start + 100)),
                    fetch_point=lambda store, key, start: store.fetch_window(key, start))


def bench_key_value(name: str, records, commit_every: int, fetches: int, directory: Path) -> dict:
    """The same records in a key-value store under ``key@window_start`` keys."""
    return _measure(name, _open(resolve(name), directory), records, commit_every, fetches,
                    put=lambda store, key, start, value: store.put(windowed_key(key, start), value),
                    fetch_range=lambda store, key, start: list(
                        store.range(windowed_key(key, start), windowed_key(key, start + 100))),
                    fetch_point=lambda store, key, start: store.get(windowed_key(key, start)))


def memory_per_million(records: int, keys: int) -> float:
    """Bytes that ``memory-window`` holds per million live records (tracemalloc, keys and values included)."""
    data = _records(records, keys, seed=3)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = resolve_window("memory-window")(**WINDOW)
    store.init(StoreContext(directory=Path(tempfile.gettempdir())))
    for key, start, value in data:
        store.put(key, value, start)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    live = sum(1 for _ in store.all())
    return held / live * 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--commit-every", type=int, default=1_000)
    parser.add_argument("--fetches", type=int, default=5_000)
    parser.add_argument("--memory-records", type=int, default=200_000)
    args = parser.parse_args()
    records = _records(args.records, args.keys)
    rows = []
    with scratch_directory("windows") as root:
        for name in ("memory-window", "rocksdb-window-txn", "rocksdb-window"):
            rows.append(bench_window(name, records, args.commit_every, args.fetches, root / name))
        for name in ("memory", "rocksdb-indexed"):
            rows.append(bench_key_value(name, records, args.commit_every, args.fetches, root / name))
    print(f"{args.records} puts over {args.keys} keys (commit every {args.commit_every}), {args.fetches} fetches each")
    print(f"{'store':22} {'puts/s':>10} {'fetch(range)/s':>15} {'fetch_window/s':>15}")
    for row in rows:
        print(f"{row['store']:22} {row['puts/s']:10.0f} {row['fetch(range)/s']:15.0f} {row['fetch_window/s']:15.0f}")
    base = {r["store"]: r for r in rows}
    for window, kv in (("memory-window", "memory"), ("rocksdb-window-txn", "rocksdb-indexed")):
        w, k = base[window], base[kv]
        print(f"{window} / {kv}: puts x{w['puts/s'] / k['puts/s']:.2f}, fetch(range) "
              f"x{w['fetch(range)/s'] / k['fetch(range)/s']:.2f}, fetch_window x{w['fetch_window/s'] / k['fetch_window/s']:.2f}")
    per_million = memory_per_million(args.memory_records, args.keys * 10)
    print(f"memory-window: {per_million / 2**20:.0f} MiB per million records "
          f"(tracemalloc, {args.memory_records} live records, keys of 8 bytes, values of 8 bytes)")


if __name__ == "__main__":
    main()
