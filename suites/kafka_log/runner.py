"""The Kafka log suite's runner: the workload against a real broker (transactions of two producers
interleaved, some committed, some aborted), then a consumer of the chosen isolation level reads every
partition to its end; :mod:`.checks` judges what was sent and read."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eos_harness.broker.spec import BrokerSpec, parse
from eos_harness.cluster.local import version_of
from eos_harness.suites.kafka_log.checks import Anomaly, LogEnd, Read, Sent, Transaction, check, summarize
from eos_harness.verdict import error_result as verdict_error_result
from eos_harness.verdict import verdict_of

__all__ = ["WorkloadResult", "campaign_session", "error_result", "run_one", "run_workload"]


# -- the workload against a real broker ---------------------------------------------------------


@dataclass
class WorkloadResult:
    topic: str
    isolation: str
    transactions: list[Transaction] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    ends: list[LogEnd] = field(default_factory=list)
    seconds: float = 0.0

    def anomalies(self) -> list[Anomaly]:
        return check(self.transactions, self.reads, self.ends)

    def to_json(self) -> dict:
        anomalies = self.anomalies()
        violations = [a.violation() for a in anomalies]
        outcomes = Counter(t.outcome for t in self.transactions)
        return {
            "topic": self.topic,
            "isolation": self.isolation,
            "transactions": dict(outcomes),
            "records_sent": sum(len(t.records) for t in self.transactions),
            "records_read": len(self.reads),
            "ends": [asdict(e) for e in self.ends],
            "verdict": verdict_of(violations),
            "summary": summarize(anomalies),
            "anomalies": [a.to_json() for a in anomalies[:200]],
            "violations": [v.to_json() for v in violations[:200]],
            "seconds": round(self.seconds, 3),
        }


def run_workload(broker: BrokerSpec | str, seed: int, transactions: int = 60, partitions: int = 2,
                 abort_ratio: float = 0.3, isolation: str = "read_committed", settle_seconds: float = 15.0) -> WorkloadResult:
    """Produce ``transactions`` transactions (two producers, interleaved in the log; about
    ``abort_ratio`` of them aborted) of 1-4 unique values over ``partitions`` partitions, then read
    every partition from 0 to its end with a consumer of ``isolation``. ``broker``: a ``kafka://``
    spec or its bootstrap servers."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka import TopicPartition as KTP
    from eos_harness.broker import kafka_client

    if isolation not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"isolation must be read_committed or read_uncommitted, got {isolation!r}")
    if transactions < 1 or partitions < 1 or not 0 <= abort_ratio <= 1:
        raise ValueError("transactions and partitions must be >= 1, abort_ratio within [0, 1]")
    started = time.monotonic()
    rng = random.Random(seed)
    bootstrap = kafka_client.bootstrap_of(broker)
    topic = f"eos-log-{seed}-{uuid.uuid4().hex[:8]}"
    kafka_client.create_topics(kafka_client.admin_client(bootstrap), {topic: partitions})

    result = WorkloadResult(topic, isolation)
    offsets: dict[str, int] = {}

    def delivered(err, msg) -> None:
        if err is None:
            offsets[msg.value().decode()] = msg.offset()

    producers = [kafka_client.producer(bootstrap, **{"transactional.id": f"{topic}-p{i}", "linger.ms": 1, "acks": "all"})
                 for i in (0, 1)]
    for producer in producers:
        producer.init_transactions(30)
    number = 0
    while number < transactions:
        # Both producers open a transaction and write interleaved; then each commits or aborts.
        batch = []
        for producer in producers[: min(2, transactions - number)]:
            producer.begin_transaction()
            batch.append((producer, f"t{number}", [rng.randrange(partitions) for _ in range(rng.randint(1, 4))]))
            number += 1
        for i in range(max(len(parts) for _, _, parts in batch)):
            for producer, name, parts in batch:
                if i < len(parts):
                    producer.produce(topic, value=f"{name}-{i}".encode(), partition=parts[i], on_delivery=delivered)
        for producer, name, parts in batch:
            producer.flush(30)
            abort = rng.random() < abort_ratio
            try:
                (producer.abort_transaction if abort else producer.commit_transaction)(30)
                outcome = "aborted" if abort else "committed"
            except KafkaException:
                outcome = "unknown"
            records = tuple(Sent(p, f"{name}-{i}", offsets.get(f"{name}-{i}")) for i, p in enumerate(parts))
            result.transactions.append(Transaction(name, outcome, records))
    for producer in producers:
        producer.flush(5)

    # Every transaction finished: wait (bounded) for the commit markers, then read everything.
    probe = kafka_client.consumer(bootstrap, f"{topic}-probe", **{"isolation.level": "read_committed"})
    plain = kafka_client.consumer(bootstrap, f"{topic}-plain", **{"isolation.level": "read_uncommitted"})
    tps = [KTP(topic, p) for p in range(partitions)]
    settle = time.monotonic() + settle_seconds
    while True:
        high = {tp.partition: plain.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        stable = {tp.partition: probe.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        if all(stable[p] >= high[p] for p in high) or time.monotonic() > settle:
            break
        time.sleep(0.05)
    probe.close()
    plain.close()

    reader = kafka_client.consumer(bootstrap, f"{topic}-reader", **{
        "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    reader.assign([KTP(topic, p, 0) for p in range(partitions)])
    at_eof: set[int] = set()
    read_deadline = time.monotonic() + 30
    while len(at_eof) < partitions and time.monotonic() < read_deadline:
        for msg in reader.consume(500, timeout=0.2):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            at_eof.discard(msg.partition())
            result.reads.append(Read(msg.partition(), msg.offset(), msg.value().decode()))
    positions = {tp.partition: tp.offset for tp in reader.position(tps)}
    reader.close()
    for p in range(partitions):
        result.ends.append(LogEnd(p, high[p], stable[p], max(positions.get(p, 0), 0)))
    result.seconds = time.monotonic() - started
    return result


# -- a scenario: one workload, one reader ------------------------------------------------------------


def run_one(scenario, directory: Path | None = None) -> dict:
    """One workload read by ``scenario.system`` (:class:`.plan.Scenario`), as a complete result: the
    reader (``system``), its expected result, the verdict, the anomalies, the replay; with ``directory`` (a
    campaign's scenario), its history too (``directory/history.jsonl``, :mod:`.at_scale`: what was sent, read and
    where each log ended), which a campaign on Spark writes as Parquet for ``eos-harness check``."""
    from .at_scale import record_history
    from .plan import expected

    result = run_workload(parse(scenario.opened or scenario.broker), scenario.seed, transactions=scenario.transactions,
                          partitions=scenario.partitions, abort_ratio=scenario.abort_ratio,
                          isolation=scenario.system)
    history = None
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        fields = {"system": scenario.system, "seed": scenario.seed, "topic": result.topic,
                  "transactions": scenario.transactions, "partitions": scenario.partitions,
                  "abort_ratio": scenario.abort_ratio}
        history = str(record_history(Path(directory) / "history.jsonl", fields, result.transactions, result.reads,
                                     result.ends))
    return {"suite": "kafka-log", "system": scenario.system,
            "expected": "fail" if expected(scenario.system)[0] else "pass", "seed": scenario.seed,
            "broker": scenario.broker, "kafka_version": version_of(scenario.opened or scenario.broker),
            "repro": scenario.repro(), **result.to_json(), "history": history}


def error_result(scenario, exc: BaseException) -> dict:
    """The result of a scenario that could not be run to its end."""
    return {"suite": "kafka-log", **verdict_error_result({"system": scenario.system}, scenario.seed,
                                                         scenario.repro(), exc), "broker": scenario.broker,
            "kafka_version": version_of(scenario.opened or scenario.broker)}


@contextlib.contextmanager
def campaign_session(options: Mapping, say: Callable[[str], object] = lambda text: None) -> Iterator[dict]:
    """The campaign's broker, opened once for every scenario (``kafka-local`` started and always stopped)."""
    from eos_harness.broker.opening import open_broker

    with open_broker(options["broker"], say=say) as opened:
        yield {**options, "opened": opened.spec.text}
