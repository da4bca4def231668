"""Benchmarks of Kafka Streams' own stores in their JVMs, each against a baseline measured in the same run.

1. The cost of unarmed crash points: commits per second of ``kafka-streams-4.4.0-rocksdb-tx`` (a put
   and a commit each, over the store's JSON-lines pipe) in a JVM whose Kafka classes have every crash point
   woven in (as every store JVM's) but none armed, as a ratio to a JVM with Kafka's classes as they are.
   Target >= 0.95: unarmed points cost nothing measurable.
2. Crash-restart-check cycles per second through the store server (write and commit, write uncommitted,
   SIGKILL, restart, check), ``kafka-streams-4.4.0-rocksdb-tx`` against ``rocksdb-indexed``.
3. ``verify`` of ``kafka-streams-4.4.0-rocksdb-tx`` against ``verify`` of ``rocksdb-indexed``, the same
   seed and examples, the baseline run before and after it (its mean: the machine's load drifts), each as
   the user runs it (``eos-harness verify``, a fresh process). Issue 23's target: at most 3x.
4. ``eos-harness chaos --scenarios N --seed 7`` (the lifecycle suite) on ``kafka-streams-4.4.0-rocksdb-tx``
   against ``rocksdb-indexed``, the baseline run before and after it (its mean), scenarios per second. Issue
   23's target: at least 0.5. N is 48 by default, not 12: a campaign's fixed costs (the command's start, its
   probe of the store, the forkserver, the first store JVM's boot, the end; 0.5-4 s for either store) are a
   third of ``rocksdb-indexed``'s 12 scenarios on an idle machine (1.4-3.5 s in all), and flattered the ratio
   as a nightly campaign never sees it: at load 4-5, 0.40 at 12 scenarios against 0.31 at 48 (interleaved).
5. ``verify`` of Kafka's transactional RocksDB window store and session store (the window suite: its matrix
   and Hypothesis examples) against ``verify`` of the built-in ``rocksdb-window-txn``, the same seed and
   examples, the baseline before and after them (their mean), each with the findings the README reports on
   Kafka's persistent window and session stores waived (``--allow``), so that each runs every case.

``python -m benchmarks.bench_kafka_streams [--commits 2000] [--cycles 20] [--examples 10] [--scenarios 48]
[--window-examples 3]`` (``--examples 0`` leaves out 3, ``--scenarios 0`` leaves out 4, ``--window-examples 0``
leaves out 5).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from eos_harness.kafka_streams.build import JAVA_ENV, ensure_built, store_java
from eos_harness.kafka_streams.pool import Jvm
from eos_harness.process.server import StoreServer, children_output
from eos_harness.store import TopicPartition

from benchmarks.common import parse_options, scratch_directory

TP = TopicPartition("bench-store-changelog", 0)
STORE = "kafka-streams-4.4.0-rocksdb-tx"
BASELINE = "rocksdb-indexed"
# Kafka's window and session stores of item 5, and the built-in window store they are measured against
WINDOW_STORES = ("kafka-streams-4.4.0-rocksdb-window-tx", "kafka-streams-4.4.0-rocksdb-session-tx")
WINDOW_BASELINE = "rocksdb-window-txn"
# what the window suite finds on Kafka's persistent transactional window and session stores (README): waived
WINDOW_FINDINGS = ("read_committed_isolation", "fetch_order", "stream_time_rebuilt")
EOS_BIN = Path(sys.executable).parent / "eos-harness"


def commits_per_second(command: list[str], directory: Path, commits: int) -> float:
    """put+commit pairs per second in a JVM started with ``command`` (no point armed)."""
    jvm = Jvm("4.4.0", command)
    try:
        jvm.wait_ready()
        to_jvm, from_jvm = jvm.process.stdin, jvm.process.stdout

        def read_line() -> bytes:
            line = b""
            while not line.endswith(b"\n"):
                line += from_jvm.read(1) or b"\n"
            return line

        def call(request: dict) -> None:
            to_jvm.write(json.dumps(request).encode() + b"\n")
            line = read_line()
            while line.startswith(b'{"point"'):  # a point reached while reported: go on
                to_jvm.write(b'{"go":true}\n')
                line = read_line()
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


def children_cpu() -> float:
    """CPU seconds of the processes this one started and waited for, and of those they waited for (a command's
    processes: a JVM the harness killed and reaped counts)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def verify_seconds(store: str, examples: int, out: Path, allow: tuple[str, ...] = ()) -> tuple[float, float]:
    """Wall seconds and CPU seconds of ``eos-harness verify STORE --seed 1 --examples N [--allow CHECK ...]`` (it
    must pass): the load on the machine moves the first, not the second."""
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run([str(EOS_BIN), "verify", store, "--seed", "1", "--examples", str(examples),
                           *[arg for check in allow for arg in ("--allow", check)],
                           "--json", str(out / f"verify-{store}.json")], capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    if proc.returncode != 0:
        raise AssertionError(f"verify {store}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds, cpu


def chaos_rate(store: str, scenarios: int, out: Path) -> tuple[float, float]:
    """Scenarios per second of ``eos-harness chaos --stores STORE --scenarios N --seed 7`` (none failing), and
    its CPU seconds per scenario (the load on the machine moves the rate, not this)."""
    cpu = children_cpu()
    proc = subprocess.run([str(EOS_BIN), "chaos", "--stores", store, "--scenarios", str(scenarios), "--seed", "7",
                           "--out", str(out), "--no-report"], capture_output=True, text=True)
    cpu = children_cpu() - cpu
    if proc.returncode != 0:
        raise AssertionError(f"chaos {store}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    campaign = json.loads((out / "chaos.json").read_text())
    return campaign["summary"]["total"] / campaign["seconds"], cpu / campaign["summary"]["total"]


def main() -> None:
    args = parse_options(__doc__,
                         ("--commits", 2000, "put+commit pairs per measurement"),
                         ("--cycles", 20, "crash-restart-check cycles per store"),
                         ("--examples", 10, "verify's Hypothesis examples (0: no verify comparison)"),
                         ("--scenarios", 48, "chaos scenarios per store (0: no chaos comparison)"),
                         ("--window-examples", 3, "the window suite's Hypothesis examples (0: no window comparison)"))
    server = ensure_built("4.4.0")
    java = store_java()
    print(f"store JVMs on {java.path} (Java {java.version or 'of unknown version'}, "
          f"{'its AOT cache' if java.aot else 'the class-data archive'}; {JAVA_ENV} picks another)", flush=True)
    with scratch_directory("kafka-streams") as root, children_output(root / "children.log"):
        rates: dict[bool, list[float]] = {False: [], True: []}
        for i, woven in enumerate((False, True) * 3):  # interleaved, so both see the same machine load; the best of each
            # Neither maps the build's class-data archive: it records the woven classes' jar on the class path,
            # and a JVM without it would load every class from the jars while the other maps them.
            command = [arg for arg in server.command(points=woven)
                       if not arg.startswith(("-XX:SharedArchiveFile=", "-XX:AOTCache="))]
            rates[woven].append(commits_per_second(command, root / f"commits-{i}", args.commits))
        base, ours = max(rates[False]), max(rates[True])
        print(f"{STORE} put+commit/s over its pipe: Kafka's classes as they are {base:,.0f}, every crash point "
              f"woven in and unarmed {ours:,.0f}: ratio {ours / base:.2f} (target >= 0.95)", flush=True)
        indexed = crash_restart_cycles(BASELINE, root / "indexed", args.cycles)
        kafka = crash_restart_cycles(STORE, root / "kafka", args.cycles)
        print(f"crash-restart-check cycles/s: {BASELINE} {indexed:.1f}, {STORE} {kafka:.2f} "
              f"(ratio {kafka / indexed:.3f})", flush=True)
        if args.examples:
            (before, before_cpu), (ours_s, ours_cpu), (after, after_cpu) = (
                verify_seconds(store, args.examples, root) for store in (BASELINE, STORE, BASELINE))
            base_s = (before + after) / 2
            print(f"eos-harness verify --seed 1 --examples {args.examples}: {BASELINE} {before:.1f} s and {after:.1f} s, "
                  f"{STORE} {ours_s:.1f} s ({ours_s / base_s:.1f}x their mean; target <= 3x); CPU-s {before_cpu:.1f} "
                  f"and {after_cpu:.1f}, {ours_cpu:.1f}", flush=True)
        if args.scenarios:
            before, before_cpu = chaos_rate(BASELINE, args.scenarios, root / "chaos-indexed")
            ours_rate, ours_cpu = chaos_rate(STORE, args.scenarios, root / "chaos-kafka")
            after, after_cpu = chaos_rate(BASELINE, args.scenarios, root / "chaos-indexed-after")
            ratio = ours_rate / ((before + after) / 2)
            print(f"eos-harness chaos --scenarios {args.scenarios} --seed 7: {BASELINE} {before:.2f} and {after:.2f} "
                  f"scenarios/s, {STORE} {ours_rate:.2f}/s (ratio {ratio:.2f} to their mean; target >= 0.5: "
                  f"{'met' if ratio >= 0.5 else 'not met'}); CPU-s per scenario {before_cpu:.2f} and {after_cpu:.2f}, "
                  f"{ours_cpu:.2f}", flush=True)
        if args.window_examples:
            before, before_cpu = verify_seconds(WINDOW_BASELINE, args.window_examples, root)
            kafka_s = {store: verify_seconds(store, args.window_examples, root, WINDOW_FINDINGS) for store in WINDOW_STORES}
            after, after_cpu = verify_seconds(WINDOW_BASELINE, args.window_examples, root)
            base_s = (before + after) / 2
            print(f"eos-harness verify --seed 1 --examples {args.window_examples} (the window suite): {WINDOW_BASELINE} "
                  f"{before:.1f} s and {after:.1f} s ({before_cpu:.1f} and {after_cpu:.1f} CPU-s), " + ", ".join(
                      f"{store} {seconds:.1f} s ({seconds / base_s:.1f}x; {cpu:.1f} CPU-s)"
                      for store, (seconds, cpu) in kafka_s.items()), flush=True)


if __name__ == "__main__":
    main()
