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

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from eos_harness.verdict import Violation

__all__ = ["ANOMALIES", "Anomaly", "LogEnd", "Read", "Sent", "Transaction", "check", "summarize"]

# Each kind of anomaly, in report order, with the promise it breaks (the ``expected`` of its Violation).
ANOMALIES = {
    "duplicate": "each record of a committed transaction read once",
    "aborted_read": "no record of an aborted transaction read",
    "inconsistent_offsets": "one value per offset",
    "lost_write": "every record of a committed transaction read",
    "committed_not_read": "every record of a committed transaction read",
    "partial_transaction": "all or none of a transaction's records read",
    "hanging_transaction": "the last stable offset and the consumer's position reach the log end",
}
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
    """One finding of the log checker, where the log shows it (the ``anomalies`` of the report);
    :meth:`violation` says it in the verdict vocabulary every suite shares."""

    kind: str
    partition: int | None
    offset: int | None
    value: str | None
    transaction: str | None
    detail: str

    def to_json(self) -> dict:
        return asdict(self)

    def violation(self) -> Violation:
        """check: the kind; key: where (partition and offset, or the transaction); expected: the
        promise; observed: what was read; detail: the record's value and transaction."""
        if self.partition is not None:
            key = f"partition {self.partition}" + (f" offset {self.offset}" if self.offset is not None else "")
        else:
            key = f"transaction {self.transaction}"
        record = ", ".join(f"{name} {value}" for name, value in (("value", self.value), ("transaction", self.transaction))
                           if value is not None)
        return Violation(self.kind, key, ANOMALIES[self.kind], self.detail, detail=record or None)


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
