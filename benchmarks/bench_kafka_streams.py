"""Benchmarks of Kafka Streams' own stores in their JVMs, each against a baseline measured in the same run.

1. The cost of the unarmed Byteman rules: commits per second of ``kafka-streams-4.4.0-rocksdb-tx`` (a put
   and a commit each, over the store's JSON-lines pipe) in a JVM with the Byteman agent and every rule
   loaded, as a ratio to the same JVM without the agent (target >= 0.95: unarmed rules cost nothing
   measurable).
2. Crash-restart-check cycles per second through the store server (write and commit, write uncommitted,
   SIGKILL, restart, check), ``kafka-streams-4.4.0-rocksdb-tx`` against ``rocksdb-indexed``.
3. ``verify`` of ``kafka-streams-4.4.0-rocksdb-tx`` against ``verify`` of ``rocksdb-indexed``, the same
   seed and examples (issue 23's target: at most 3x).

``python -m benchmarks.bench_kafka_streams [--commits 2000] [--cycles 20] [--examples 10]`` (``--examples 0``
leaves out 3).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from eos_harness.kafka_streams.build import ensure_built
from eos_harness.kafka_streams.pool import Jvm
from eos_harness.process.server import StoreServer, children_output
from eos_harness.store import TopicPartition

from benchmarks.common import parse_options, scratch_directory

TP = TopicPartition("bench-store-changelog", 0)
STORE = "kafka-streams-4.4.0-rocksdb-tx"


def commits_per_second(command: list[str], directory: Path, commits: int) -> float:
    jvm = Jvm("4.4.0", command)
    try:
        jvm.wait_ready()
        to_jvm, from_jvm = jvm.process.stdin, jvm.process.stdout

        def call(request: dict) -> None:
            to_jvm.write(json.dumps(request).encode() + b"\n")
            line = b""
            while not line.endswith(b"\n"):
                line += from_jvm.read(1) or b"\n"
            if b'"ok"' not in line:
                raise AssertionError(line)

        call({"op": "open", "kind": "rocksdb", "transactional": True, "state_dir": str(directory)})
        for i in range(200):  # warm up
            call({"op": "put", "key": "YQ==", "value": "YQ=="})
            call({"op": "commit", "offsets": [[TP.topic, 0, i]]})
        started = time.perf_counter()
        for i in range(commits):
            call({"op": "put", "key": "YQ==", "value": "YQ=="})
            call({"op": "commit", "offsets": [[TP.topic, 0, i]]})
        rate = commits / (time.perf_counter() - started)
        call({"op": "close"})
        return rate
    finally:
        jvm.kill()


def crash_restart_cycles(store: str, directory: Path, cycles: int) -> float:
    with StoreServer(timeout=300) as server:
        proc = server.start(store, directory)
        started = time.perf_counter()
        for i in range(cycles):
            proc.call("put", b"committed", b"%d" % i)
            proc.call("commit", {TP: i})
            proc.call("close")  # flushed (Kafka's commits are durable once flushed)
            proc = server.start(store, directory)
            proc.call("put", b"uncommitted", b"%d" % i)
            proc.kill()
            proc = server.start(store, directory)
            proc.call("recover", proc.call("committed_offset", TP))
            contents = dict(proc.call("all"))
            if contents != {b"committed": b"%d" % i}:
                raise AssertionError(f"{store}, cycle {i}: recovered {contents!r}")
        rate = cycles / (time.perf_counter() - started)
        proc.kill()
        return rate


def verify_seconds(store: str, examples: int, log: Path) -> float:
    from eos_harness.suites.verify import verify_store

    result = verify_store(store, 1, examples=examples, log=log)
    if result["verdict"] != "pass":
        raise AssertionError(f"verify {store}: {result['verdict']} {result['violations'][:1]}")
    return result["seconds"]


def main() -> None:
    args = parse_options(__doc__,
                         ("--commits", 2000, "put+commit pairs per measurement"),
                         ("--cycles", 20, "crash-restart-check cycles per store"),
                         ("--examples", 10, "verify's Hypothesis examples (0: no verify comparison)"))
    server = ensure_built("4.4.0")
    with_agent = server.command()
    without_agent = [arg for arg in with_agent if not arg.startswith("-javaagent:")]
    with scratch_directory("kafka-streams") as root, children_output(root / "children.log"):
        rates = {}
        for label, command in (("no agent", without_agent), ("agent", with_agent), ("no agent ", without_agent),
                               ("agent ", with_agent)):  # interleaved, so both see the same machine load
            rates.setdefault(label.strip(), []).append(commits_per_second(command, root / label.replace(" ", "-"),
                                                                          args.commits))
        base, ours = max(rates["no agent"]), max(rates["agent"])
        print(f"{STORE} put+commit/s over its pipe: without Byteman {base:,.0f}, with every rule loaded and "
              f"unarmed {ours:,.0f}: ratio {ours / base:.2f} (target >= 0.95)")
        indexed = crash_restart_cycles("rocksdb-indexed", root / "indexed", args.cycles)
        kafka = crash_restart_cycles(STORE, root / "kafka", args.cycles)
        print(f"crash-restart-check cycles/s: rocksdb-indexed {indexed:.1f}, {STORE} {kafka:.2f} "
              f"(ratio {kafka / indexed:.3f})")
        if args.examples:
            ours_s = verify_seconds(STORE, args.examples, root / "verify-kafka.log")
            base_s = verify_seconds("rocksdb-indexed", args.examples, root / "verify-indexed.log")
            print(f"verify --seed 1 --examples {args.examples}: rocksdb-indexed {base_s:.1f} s, {STORE} {ours_s:.1f} s "
                  f"({ours_s / base_s:.1f}x; target <= 3x)")


if __name__ == "__main__":
    main()
