"""Benchmarks of the stores and the store server, each against a baseline measured in the same run.

1. ``rocksdb-indexed`` put and commit throughput as a ratio to raw rocksdict doing the same
   writes through a WriteBatch written with the same (synced) write options (target >= 0.7).
2. Crash-restart-check cycles per second of the store server: start a child on a store
   directory, write and commit, write uncommitted, SIGKILL it, start a new child that runs
   ``recover``, read everything back and compare (target >= 50/s).

``python -m benchmarks.bench_stores [--keys 20000] [--rounds 5] [--cycles 200]``
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from eos_harness.process.server import StoreServer
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.registry import resolve
from rocksdict import Options, Rdict

from benchmarks.common import parse_options, raw_batch, scratch_directory, synced

TP = TopicPartition("bench-store-changelog", 0)


def _entries(keys: int, round_number: int) -> list[tuple[bytes, bytes]]:
    value = (b"v%06d" % round_number) * 10
    return [(b"key%08d" % i, value) for i in range(keys)]


def raw_rocksdict(directory: Path, keys: int, rounds: int) -> tuple[float, float]:
    """Seconds spent putting into a WriteBatch and writing it, over ``rounds`` rounds."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(directory), options=options)
    sync = synced()
    put_s = commit_s = 0.0
    try:
        for r in range(rounds):
            entries = _entries(keys, r)
            started = time.perf_counter()
            batch = raw_batch(entries)
            batch.put(b"offset", b"%d" % r)
            put_s += time.perf_counter() - started
            started = time.perf_counter()
            db.write(batch, sync)
            commit_s += time.perf_counter() - started
    finally:
        db.close()
    return put_s, commit_s


def indexed_store(directory: Path, keys: int, rounds: int) -> tuple[float, float]:
    store = resolve("rocksdb-indexed")()
    store.init(StoreContext(directory=directory))
    put_s = commit_s = 0.0
    try:
        for r in range(rounds):
            entries = _entries(keys, r)
            started = time.perf_counter()
            for key, value in entries:
                store.put(key, value)
            put_s += time.perf_counter() - started
            started = time.perf_counter()
            store.commit({TP: r})
            commit_s += time.perf_counter() - started
    finally:
        store.close()
    return put_s, commit_s


def crash_restart_cycles(directory: Path, cycles: int) -> float:
    """Cycles per second of: write+commit, uncommitted write, SIGKILL, restart+recover, check.

    The child restarted by one cycle is the writer of the next, so a cycle is one crash and one
    restart, as in a conformance run."""
    with StoreServer() as server:
        proc = server.start("rocksdb-indexed", directory)
        proc.call("recover", proc.call("committed_offset", TP))
        started = time.perf_counter()
        for i in range(cycles):
            proc.call("put", b"committed", b"%d" % i)
            proc.call("commit", {TP: i})
            proc.call("put", b"uncommitted", b"%d" % i)
            proc.kill()
            proc = server.start("rocksdb-indexed", directory)
            proc.call("recover", proc.call("committed_offset", TP))
            contents = dict(proc.call("all"))
            if contents != {b"committed": b"%d" % i} or proc.call("committed_offset", TP) != i:
                raise AssertionError(f"cycle {i}: recovered {contents!r}")
        rate = cycles / (time.perf_counter() - started)
        proc.kill()
        return rate


def main() -> None:
    args = parse_options(__doc__,
                         ("--keys", 20_000, "writes per commit"),
                         ("--rounds", 5, "commits per measurement"),
                         ("--repeats", 3, "measurements; the median is reported"),
                         ("--cycles", 200, "crash-restart-check cycles"))
    with scratch_directory("stores") as root:
        raw, idx = [], []
        for repeat in range(args.repeats):  # interleaved, so both see the same machine load
            raw.append(raw_rocksdict(root / f"raw-{repeat}", args.keys, args.rounds))
            idx.append(indexed_store(root / f"indexed-{repeat}", args.keys, args.rounds))
        writes = args.keys * args.rounds
        raw_put, raw_commit = (statistics.median(x) for x in zip(*raw, strict=True))
        idx_put, idx_commit = (statistics.median(x) for x in zip(*idx, strict=True))
        print(f"{writes} writes in {args.rounds} commits, median of {args.repeats}:")
        print(f"{'':18} {'raw WriteBatch':>16} {'rocksdb-indexed':>16} {'ratio (target >= 0.7)':>22}")
        for label, base, ours in (("put (writes/s)", raw_put, idx_put), ("commit (writes/s)", raw_commit, idx_commit),
                                  ("put+commit", raw_put + raw_commit, idx_put + idx_commit)):
            print(f"{label:18} {writes / base:>16,.0f} {writes / ours:>16,.0f} {base / ours:>22.2f}")
        rate = crash_restart_cycles(root / "server", args.cycles)
        print(f"store server: {rate:.1f} crash-restart-check cycles/s (target >= 50)")


if __name__ == "__main__":
    main()
