"""``commit`` latency by the number of changelog partitions per commit (KIP-892/KIP-1035, issue 15).

For 1, 10 and 100 partitions per commit (a global store fed by several partitions commits them
all at once): ``rocksdb-indexed``'s ``commit`` of a few uncommitted writes and one offset per
partition, against a baseline measured in the same run: raw rocksdict writing the SAME data and
offsets (the offsets in their own column family, keyed as the store keys them) in one WriteBatch
with the same synced write options. Reported: the median and the p99 latency of one commit in
milliseconds, and the ratio baseline / store (1.0: the store adds nothing; target >= 0.7).

``python -m benchmarks.bench_commit [--commits 200] [--writes 10] [--repeats 3]``
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.indexed import OFFSETS_CF, encode_offset, offset_key, open_rocksdb
from eos_harness.stores.registry import resolve

from benchmarks.common import parse_options, raw_batch, scratch_directory, synced

PARTITIONS = (1, 10, 100)


def _partitions(count: int) -> list[TopicPartition]:
    return [TopicPartition("bench-global-changelog", p) for p in range(count)]


def _writes(commit: int, writes: int) -> list[tuple[bytes, bytes]]:
    return [(b"key%06d" % ((commit * writes + i) % 5000), b"value%08d" % commit) for i in range(writes)]


def raw_batches(directory: Path, partitions: int, commits: int, writes: int) -> list[float]:
    """Seconds of each synced WriteBatch holding ``writes`` puts and one offset per partition."""
    db, cfs = open_rocksdb(str(directory), (OFFSETS_CF,))
    offsets_handle = cfs[OFFSETS_CF][1]
    sync = synced()
    tps = _partitions(partitions)
    took = []
    try:
        for c in range(commits):
            entries = _writes(c, writes)
            started = time.perf_counter()
            batch = raw_batch(entries)
            for tp in tps:
                batch.put(offset_key(tp), encode_offset(c + 1), offsets_handle)
            db.write(batch, sync)
            took.append(time.perf_counter() - started)
    finally:
        cfs[OFFSETS_CF][0].close()
        db.close()
    return took


def indexed_commits(directory: Path, partitions: int, commits: int, writes: int) -> list[float]:
    """Seconds of each ``rocksdb-indexed`` ``commit`` of ``writes`` uncommitted puts and ``partitions`` offsets."""
    tps = _partitions(partitions)
    store = resolve("rocksdb-indexed")()
    store.init(StoreContext(directory=directory, changelog=tps[0]))
    took = []
    try:
        for c in range(commits):
            for key, value in _writes(c, writes):
                store.put(key, value)
            offsets = {tp: c + 1 for tp in tps}
            started = time.perf_counter()
            store.commit(offsets)
            took.append(time.perf_counter() - started)
        if any(store.committed_offset(tp) != commits for tp in tps):
            raise AssertionError("rocksdb-indexed lost a partition's offset")
    finally:
        store.close()
    return took


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    args = parse_options(__doc__,
                         ("--commits", 200, "commits per measurement"),
                         ("--writes", 10, "uncommitted writes per commit"),
                         ("--repeats", 3, "measurements per size; all commits pooled"))
    with scratch_directory("commit") as root:
        print(f"commit latency, {args.writes} writes + N partition offsets per commit, synced, "
              f"{args.commits} commits x {args.repeats}:")
        print(f"{'partitions':>10} {'raw median ms':>14} {'raw p99 ms':>11} {'indexed median ms':>18} "
              f"{'indexed p99 ms':>15} {'ratio (target >= 0.7)':>22}")
        for partitions in PARTITIONS:
            raw: list[float] = []
            idx: list[float] = []
            for repeat in range(args.repeats):  # interleaved, so both see the same machine load
                raw += raw_batches(root / f"raw-{partitions}-{repeat}", partitions, args.commits, args.writes)
                idx += indexed_commits(root / f"idx-{partitions}-{repeat}", partitions, args.commits, args.writes)
            raw_med, idx_med = statistics.median(raw), statistics.median(idx)
            print(f"{partitions:>10} {raw_med * 1000:>14.3f} {_p99(raw) * 1000:>11.3f} {idx_med * 1000:>18.3f} "
                  f"{_p99(idx) * 1000:>15.3f} {raw_med / idx_med:>22.2f}")


if __name__ == "__main__":
    main()
