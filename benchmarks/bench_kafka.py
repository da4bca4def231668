"""Benchmarks of the EOS lifecycle on a real Kafka broker against the embedded one, in one run.

1. EOS commit latency (``send_offsets_to_transaction`` + ``commit_transaction``, which on Kafka
   includes waiting until the records and offsets are readable committed), p50 and p99, on a local
   single-broker Kafka and on the embedded broker, same store, workload and commit interval; the
   ratio Kafka/embedded.
2. Scenarios per second of the chaos driver on Kafka (the Kafka plan, broker faults included) and
   on the embedded broker, each for the same wall time.

``python -m benchmarks bench_kafka [--records 1000] [--interval 10] [--seconds 30]``
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from eos_harness.broker import connect
from eos_harness.runtime import Task, TaskConfig, create_topics

from benchmarks.common import parse_options, scratch_directory


class _TimedProducer:
    """Wraps a transactional producer; records the wall time of each EOS commit."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.samples: list[float] = []
        self._started = 0.0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def send_offsets_to_transaction(self, offsets, group_id):
        self._started = time.perf_counter()
        return self.inner.send_offsets_to_transaction(offsets, group_id)

    def commit_transaction(self):
        positions = self.inner.commit_transaction()
        self.samples.append(time.perf_counter() - self._started)
        return positions


def commit_latencies(spec: str, state_dir: Path, records: int, interval: int, app: str) -> list[float]:
    config = TaskConfig("rocksdb-indexed", spec, str(state_dir), "counter", application_id=app,
                        commit_interval=interval, read_every=0, report_contents=False)
    broker = connect(spec)
    try:
        create_topics(broker, config)
        broker.produce(config.input_topic, 0, [(b"k%04d" % (i % 97), b"1") for i in range(records)])
    finally:
        broker.close()
    task = Task(config)
    task.start()
    timed = _TimedProducer(task.producer)
    task.producer = timed
    task.process_all()
    task.close()
    return timed.samples


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def scenarios_per_second(broker: str, seconds: float, out: Path) -> tuple[int, float, int]:
    from eos_harness.broker.spec import parse
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import defaults, run_suite_campaign

    started = time.monotonic()
    entry, opened = SUITES["lifecycle"], parse(broker, internal=True)  # the cluster this benchmark started
    out.mkdir(parents=True, exist_ok=True)  # a campaign holds its run directory, which must exist
    campaign = run_suite_campaign(entry, 13, {**defaults(entry), "broker": opened.cli_text}, out, minutes=seconds / 60,
                                  running={"opened": opened})
    # Stores expected to pass that failed (a short run need not reach every mutant's catching scenario).
    failed = sum(1 for t in campaign["summary"]["stores"].values() if t["status"] == "FAILED")
    return campaign["summary"]["total"], time.monotonic() - started, failed


def main() -> None:
    args = parse_options(__doc__,
                         ("--records", 1000, "input records of the latency runs"),
                         ("--interval", 10, "commit interval (records)"),
                         ("--seconds", 30.0, "how long each chaos run lasts"))
    from eos_harness.cluster import LocalKafka

    with scratch_directory("kafka") as root:
        with LocalKafka(brokers=1, directory=root / "kafka") as kafka:
            # A first short run warms the broker (topic creation, coordinator loading, JIT).
            commit_latencies(kafka.spec, root / "warm", 50, args.interval, "bench-warm")
            on_kafka = commit_latencies(kafka.spec, root / "kafka-state", args.records, args.interval, "bench-kafka")
            on_embedded = commit_latencies(f"embedded:{root / 'embedded.sqlite'}", root / "embedded-state",
                                           args.records, args.interval, "bench-embedded")
            print(f"EOS commit latency, rocksdb-indexed, counter, commit every {args.interval} records, "
                  f"{len(on_kafka)} commits each:")
            print(f"{'broker':>10} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9}")
            for name, samples in (("kafka", on_kafka), ("embedded", on_embedded)):
                print(f"{name:>10} {percentile(samples, 50) * 1000:>9.2f} {percentile(samples, 99) * 1000:>9.2f} "
                      f"{statistics.fmean(samples) * 1000:>9.2f}")
            print(f"{'ratio':>10} {percentile(on_kafka, 50) / percentile(on_embedded, 50):>9.1f} "
                  f"{percentile(on_kafka, 99) / percentile(on_embedded, 99):>9.1f}   (kafka / embedded)")
            print()
            total, elapsed, bad = scenarios_per_second(kafka.spec, args.seconds, root / "chaos-kafka")
            print(f"chaos on kafka:    {total} scenarios in {elapsed:.1f} s = {total / elapsed:.2f} scenarios/s "
                  f"(broker faults first; stores expected to pass that failed: {bad})")
        total_e, elapsed_e, bad_e = scenarios_per_second("embedded", args.seconds, root / "chaos-embedded")
        print(f"chaos on embedded: {total_e} scenarios in {elapsed_e:.1f} s = {total_e / elapsed_e:.2f} scenarios/s "
              f"(stores expected to pass that failed: {bad_e}); embedded/kafka = {(total_e / elapsed_e) / (total / elapsed):.1f}")


if __name__ == "__main__":
    main()
