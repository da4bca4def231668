"""Benchmark: the KIP-1035 upgrade of a store whose task ``.checkpoint`` holds 10,000 partitions.

Three timings, medians over ``--rounds``, each on a fresh directory whose database already holds the
store's keys (as a store written before offset management):

* ``read``: reading and validating the ``.checkpoint`` alone (``read_offsets_file``), the floor;
* ``raw batch``: reading it and writing the same offsets in ONE synced raw rocksdict ``WriteBatch``
  into an offsets column family (the cheapest durable import);
* ``migration``: ``rocksdb-indexed``'s ``init`` on that directory: open, read, import durably,
  rewrite the ``.checkpoint`` (the other stores' partitions kept) and delete the ``.position``;
  the open of an upgraded store with no legacy files is subtracted (``open``), so the ratio is the
  migration's own cost.

``python -m benchmarks.bench_migration [--partitions 10000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.indexed import OFFSETS_CF, IndexedRocksStore, encode_offset, offset_key, open_rocksdb
from eos_harness.stores.migration import read_offsets_file, write_offsets_file
from rocksdict import WriteBatch, WriteOptions


def legacy_dir(root: Path, partitions: int) -> StoreContext:
    """A task directory with a store of 1,000 keys, a .checkpoint of ``partitions`` changelog partitions
    of this store plus one of another store, and a .position of one source partition."""
    changelogs = tuple(TopicPartition("app-store-changelog", p) for p in range(partitions))
    ctx = StoreContext(root / "app" / "0_0" / "rocksdb" / "store", changelog=changelogs[0], changelogs=changelogs)
    db, _ = open_rocksdb(str(ctx.directory / "db"))
    for i in range(1000):
        db.put(b"k%06d" % i, b"v")
    db.close()
    write_offsets_file(ctx.checkpoint_path, {**{tp: 1000 + tp.partition for tp in changelogs},
                                             TopicPartition("app-other-changelog", 0): 5})
    write_offsets_file(ctx.position_path, {TopicPartition("app-input", 0): 77})
    return ctx


def timed(partitions: int, what: str) -> float:
    root = Path(tempfile.mkdtemp(prefix="eos-bench-migration-"))
    try:
        ctx = legacy_dir(root, partitions)
        if what == "open":  # an already upgraded store (a legacy database without offsets is refused)
            ctx.checkpoint_path.unlink()
            ctx.position_path.unlink()
            open_rocksdb(str(ctx.directory / "db"), (OFFSETS_CF,))[0].close()
        started = time.perf_counter()
        if what == "read":
            read_offsets_file(ctx.checkpoint_path)
        elif what == "raw batch":
            offsets = read_offsets_file(ctx.checkpoint_path)
            db, cfs = open_rocksdb(str(ctx.directory / "db"), (OFFSETS_CF,))
            batch = WriteBatch(raw_mode=True)
            for tp, offset in offsets.items():
                batch.put(offset_key(tp), encode_offset(offset), cfs[OFFSETS_CF][1])
            sync = WriteOptions()
            sync.sync = True
            db.write(batch, sync)
        else:  # "migration" and "open": the store's own init
            store = IndexedRocksStore()
            store.init(ctx)
        seconds = time.perf_counter() - started
        if what in ("migration", "open"):
            if what == "migration":
                assert store.committed_offset(TopicPartition("app-store-changelog", partitions - 1)) == 999 + partitions
            store.close()
        return seconds
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = {}
    for what in ("read", "raw batch", "open", "migration"):
        results[what] = statistics.median(timed(args.partitions, what) for _ in range(args.rounds))
    own = results["migration"] - results["open"]
    print(f"migration of a .checkpoint with {args.partitions} partitions (median of {args.rounds}):")
    print(f"  read the file alone       {results['read'] * 1000:8.1f} ms   (baseline)")
    print(f"  read + raw WriteBatch     {results['raw batch'] * 1000:8.1f} ms   "
          f"x{results['raw batch'] / results['read']:.1f} of read")
    print(f"  store open, no files      {results['open'] * 1000:8.1f} ms")
    print(f"  store open + migration    {results['migration'] * 1000:8.1f} ms   migration's own "
          f"{own * 1000:.1f} ms: x{own / results['read']:.1f} of read, x{own / results['raw batch']:.2f} of raw batch")


if __name__ == "__main__":
    main()
