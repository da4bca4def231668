"""A checker of what Kafka itself promises about a transactional log, after Jepsen's Kafka workload.

``check(transactions, reads, ends)`` is a pure function of what producers sent (each transaction's
records, the offsets their delivery reports gave, and whether the transaction committed, aborted,
or ended unknown) and of what a consumer read (partition, offset, value), plus, for each
partition, where the log ended once every transaction had finished. It returns the anomalies:

- ``duplicate``: a record of a committed transaction read more than once (at one offset or several).
- ``aborted_read`` (G1a): a record of an aborted transaction read.
- ``inconsistent_offsets``: one offset holds two values (across the delivery reports and the reads).
- ``lost_write``: a record of a committed transaction never read, though the consumer read past
  its offset.
- ``committed_not_read``: a record of a committed transaction never read, though the consumer
  reached the end of the log.
- ``partial_transaction``: some but not all records of a transaction read (whatever its outcome).
- ``hanging_transaction``: once every transaction finished, the last stable offset (the end of
  what ``read_committed`` can see) stays below the log end, or the consumer's position does.

``run_workload`` produces the workload against a real broker: transactions of two producers
interleaved in the log, some committed, some aborted, then a consumer of the chosen isolation level
reads every partition to its end. ``eos-harness kafka-log`` runs both.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

__all__ = ["ANOMALIES", "Anomaly", "LogEnd", "Read", "Sent", "Transaction", "check", "run_workload"]

ANOMALIES = ("duplicate", "aborted_read", "inconsistent_offsets", "lost_write", "committed_not_read",
             "partial_transaction", "hanging_transaction")
OUTCOMES = ("committed", "aborted", "unknown")


@dataclass(frozen=True)
class Sent:
    partition: int
    value: str
    offset: int | None = None  # from the delivery report; None if none came


@dataclass(frozen=True)
class Transaction:
    id: str
    outcome: str  # committed | aborted | unknown
    records: tuple[Sent, ...]

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"transaction {self.id}: outcome must be one of {OUTCOMES}, got {self.outcome!r}")


@dataclass(frozen=True)
class Read:
    partition: int
    offset: int
    value: str


@dataclass(frozen=True)
class LogEnd:
    """Measured once every transaction finished: the log end (high watermark), the last stable
    offset, and the consumer's position after it read everything."""

    partition: int
    end: int
    stable: int
    position: int


@dataclass(frozen=True)
class Anomaly:
    kind: str
    partition: int | None
    offset: int | None
    value: str | None
    transaction: str | None
    detail: str

    def to_json(self) -> dict:
        return asdict(self)


def check(transactions: Iterable[Transaction], reads: Iterable[Read], ends: Iterable[LogEnd] = ()) -> list[Anomaly]:
    """Every anomaly of the history, in a stable order (by kind, then partition and offset)."""
    transactions, reads, ends = list(transactions), list(reads), list(ends)
    found: list[Anomaly] = []
    owner: dict[str, Transaction] = {}
    sent: dict[str, Sent] = {}
    for txn in transactions:
        for rec in txn.records:
            if rec.value in owner:
                raise ValueError(f"value {rec.value!r} sent twice (transactions {owner[rec.value].id} and {txn.id}); "
                                 "the workload must send unique values")
            owner[rec.value], sent[rec.value] = txn, rec
    times_read = Counter(r.value for r in reads)
    read_at: dict[str, list[Read]] = defaultdict(list)
    for r in reads:
        read_at[r.value].append(r)

    # One offset, one value: delivery reports of records that were committed, and every read.
    at_offset: dict[tuple[int, int], set[str]] = defaultdict(set)
    for value, rec in sent.items():
        if rec.offset is not None and owner[value].outcome == "committed":
            at_offset[(rec.partition, rec.offset)].add(value)
    for r in reads:
        at_offset[(r.partition, r.offset)].add(r.value)
    for (partition, offset), values in sorted(at_offset.items()):
        if len(values) > 1:
            found.append(Anomaly("inconsistent_offsets", partition, offset, None, None,
                                 f"offset holds {len(values)} values: {', '.join(sorted(values))}"))

    highest_read: dict[int, int] = {}
    for r in reads:
        highest_read[r.partition] = max(highest_read.get(r.partition, -1), r.offset)
    reached_end = {e.partition for e in ends if e.position >= e.end}

    for txn in transactions:
        got = [rec for rec in txn.records if times_read[rec.value]]
        if txn.outcome == "aborted":
            for rec in got:
                at = read_at[rec.value][0]
                found.append(Anomaly("aborted_read", at.partition, at.offset, rec.value, txn.id,
                                     "a record of an aborted transaction was read (G1a)"))
            continue
        if got and len(got) < len(txn.records):
            missing = [rec.value for rec in txn.records if not times_read[rec.value]]
            found.append(Anomaly("partial_transaction", None, None, None, txn.id,
                                 f"{txn.outcome} transaction read in part: {len(got)} of {len(txn.records)} records; "
                                 f"never read: {', '.join(missing)}"))
        for rec in txn.records:
            n = times_read[rec.value]
            if txn.outcome == "committed" and n > 1:
                offsets = sorted({r.offset for r in read_at[rec.value]})
                found.append(Anomaly("duplicate", rec.partition, offsets[0], rec.value, txn.id,
                                     f"read {n} times (offsets {offsets})"))
            if txn.outcome != "committed" or n:
                continue
            top = highest_read.get(rec.partition, -1)
            if rec.offset is not None and rec.offset < top:
                found.append(Anomaly("lost_write", rec.partition, rec.offset, rec.value, txn.id,
                                     f"committed at offset {rec.offset}, never read, though offset {top} was"))
            elif rec.partition in reached_end:
                found.append(Anomaly("committed_not_read", rec.partition, rec.offset, rec.value, txn.id,
                                     "committed, never read, though the consumer reached the end of the log"))

    for e in ends:
        if e.stable < e.end:
            found.append(Anomaly("hanging_transaction", e.partition, e.stable, None, None,
                                 f"every transaction finished, but the last stable offset {e.stable} stays below "
                                 f"the log end {e.end}"))
        elif e.position < e.end:
            found.append(Anomaly("hanging_transaction", e.partition, e.position, None, None,
                                 f"the consumer's position {e.position} never reached the log end {e.end}"))
    order = {k: i for i, k in enumerate(ANOMALIES)}
    return sorted(found, key=lambda a: (order[a.kind], a.partition if a.partition is not None else -1,
                                        a.offset if a.offset is not None else -1, a.value or ""))


def summarize(anomalies: Iterable[Anomaly]) -> dict[str, int]:
    return dict(Counter(a.kind for a in anomalies))


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
        outcomes = Counter(t.outcome for t in self.transactions)
        return {
            "topic": self.topic,
            "isolation": self.isolation,
            "transactions": dict(outcomes),
            "records_sent": sum(len(t.records) for t in self.transactions),
            "records_read": len(self.reads),
            "ends": [asdict(e) for e in self.ends],
            "verdict": "fail" if anomalies else "pass",
            "summary": summarize(anomalies),
            "anomalies": [a.to_json() for a in anomalies[:200]],
            "seconds": round(self.seconds, 3),
        }


def run_workload(bootstrap_servers: str, seed: int, transactions: int = 60, partitions: int = 2,
                 abort_ratio: float = 0.3, isolation: str = "read_committed", settle_seconds: float = 15.0) -> WorkloadResult:
    """Produce ``transactions`` transactions (two producers, interleaved in the log; about
    ``abort_ratio`` of them aborted) of 1-4 unique values over ``partitions`` partitions, then read
    every partition from 0 to its end with a consumer of ``isolation``."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka import TopicPartition as KTP
    from confluent_kafka.admin import AdminClient, NewTopic

    if isolation not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"isolation must be read_committed or read_uncommitted, got {isolation!r}")
    if transactions < 1 or partitions < 1 or not 0 <= abort_ratio <= 1:
        raise ValueError("transactions and partitions must be >= 1, abort_ratio within [0, 1]")
    started = time.monotonic()
    rng = random.Random(seed)
    base = {"bootstrap.servers": bootstrap_servers, "log_level": 2}
    topic = f"eos-log-{seed}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(base)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no leader for every partition after 30 s")
        time.sleep(0.05)

    result = WorkloadResult(topic, isolation)
    offsets: dict[str, int] = {}

    def delivered(err, msg) -> None:
        if err is None:
            offsets[msg.value().decode()] = msg.offset()

    producers = [Producer({**base, "transactional.id": f"{topic}-p{i}", "linger.ms": 1, "acks": "all"}) for i in (0, 1)]
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
    probe = Consumer({**base, "group.id": f"{topic}-probe", "isolation.level": "read_committed",
                      "enable.auto.commit": False})
    plain = Consumer({**base, "group.id": f"{topic}-plain", "isolation.level": "read_uncommitted",
                      "enable.auto.commit": False})
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

    reader = Consumer({**base, "group.id": f"{topic}-reader", "isolation.level": isolation,
                       "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest"})
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
