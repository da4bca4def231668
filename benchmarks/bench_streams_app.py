"""KIP-892's promised saving, measured on a real Kafka Streams 4.4.0 application (the kafka-streams suite):
the same seeds run with transactional RocksDB stores on (``rocksdb-tx``) and off (``rocksdb``), each killed
at the same steps of its commit (drawn from the seed among those both reach) and restarted, on one local 4.4.0 broker. For each: the verdicts,
the records restored per store partition after a crash (median and max), the restore time per store
partition (the restore listener's, median and max), and where the time goes (topic creation, a JVM's
start to its first state change, to RUNNING, to its input processed), scenarios per minute.

With ``--memtable-kb 64`` (the suite's default) RocksDB flushes within the run, so a commit reaches disk; with
``--memtable-kb 0`` Kafka Streams' own RocksDB settings (a 16 MB write buffer) keep every commit of a small
run in the memtable, lost at a SIGKILL (the WAL is off): with or without transactions everything is restored.

``python -m benchmarks.bench_streams_app [--seeds 3] [--kills 2] [--memtable-kb 64] [--records 60]``
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import replace

from eos_harness.cluster import LocalKafka
from eos_harness.kafka_streams.app_points import APP_POINTS
from eos_harness.suites.kafka_streams.plan import scenario, settings_of
from eos_harness.suites.kafka_streams.runner import run_scenario

from benchmarks.common import parse_options, scratch_directory

APPS = ("rocksdb-tx", "rocksdb")


def common_kills(seed: int, kills: int) -> tuple[tuple[str, int], ...]:
    """The same kills for every application: (point, hit) drawn from ``seed`` among the points each reaches."""
    both = [p.name for p in APP_POINTS if p.phase == "commit" and all(
        p.applies(s.guarantee, s.store, s.transactional) for s in map(settings_of, APPS))]
    rng = random.Random(seed)
    return tuple((rng.choice(both), rng.randint(1, 3)) for _ in range(kills))


def _spread(values: list) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):g} / {max(values)}" if values else "-"


def main() -> None:
    options = parse_options(__doc__, ("--seeds", 3, "seeds (each run by every application)"),
                            ("--kills", 2, "kills per scenario"), ("--memtable-kb", 64, "RocksDB's write buffer"),
                            ("--records", 60, "input records per instance"))
    rows: dict[str, list[dict]] = {app: [] for app in APPS}
    with scratch_directory("streams-app") as root, LocalKafka(brokers=1, directory=root / "kafka", heap="384m") as kafka:
        started = time.monotonic()
        for seed in range(1, options.seeds + 1):
            for app in APPS:
                planned = replace(scenario(app, seed, options.kills, memtable_kb=options.memtable_kb,
                                           records=options.records), kills=common_kills(seed, options.kills))
                result = run_scenario(planned, kafka.bootstrap_servers, root / f"{app}-{seed}")
                rows[app].append(result)
                print(f"  {app:<11} seed {seed}: {result['verdict']:<5} kills {', '.join(result['kills'])}; restored "
                      f"{result['restored_per_crash']} in {result['restore_ms']} ms; {result['seconds']} s", flush=True)
        minutes = (time.monotonic() - started) / 60
    print(f"memtable {options.memtable_kb} KiB, {options.kills} kills per scenario, {options.records} records per instance")
    print(f"{'application':<12} {'verdicts':<14} {'restored/crash med/max':<24} {'restore ms med/max':<20} "
          f"{'JVM start s':<12} {'to RUNNING s':<13} {'caught up s':<12} {'topics s':<9}")
    for app, results in rows.items():
        verdicts = ",".join(sorted({r["verdict"] for r in results}))
        restored = [n for r in results for n in r["restored_per_crash"]]
        ms = [n for r in results for n in r["restore_ms"]]
        timings = [r["timings"] for r in results]
        print(f"{app:<12} {verdicts:<14} {_spread(restored):<24} {_spread(ms):<20} "
              f"{_spread([s for t in timings for s in t['jvm_start_s']]):<12} "
              f"{_spread([s for t in timings for s in t['to_running_s']]):<13} "
              f"{_spread([s for t in timings for s in t['caught_up_s']]):<12} "
              f"{_spread([t['topic_creation_s'] for t in timings]):<9}")
    total = sum(len(r) for r in rows.values())
    print(f"{total} scenarios in {minutes:.1f} min: {total / minutes:.2f} scenarios per minute")


if __name__ == "__main__":
    main()
