"""The promises of KIP-868 (metadata transactions) checked on a real KRaft quorum.

Pure functions of what the runner recorded: what brokers answered, which topic creations were
acknowledged, and each controller's ``__cluster_metadata`` log as Kafka's own decoder prints it
(``kafka.tools.DumpLogSegments --cluster-metadata-decoder``, parsed by :func:`parse_dump`).

The checks, each a :class:`~eos_harness.verdict.Violation` ``check`` name:

- ``topic_never_partial``: no broker's metadata ever shows a topic with fewer partitions than
  were requested (a reader never publishes part of an atomic write).
- ``acknowledged_topic_whole``: once the cluster settled, every topic whose creation was
  acknowledged exists on every broker with all its partitions.
- ``transaction_closed``: every ``BeginTransaction`` in a controller's log is closed by an
  ``EndTransaction`` or an ``AbortTransaction``.
- ``transaction_not_interleaved``: nothing inside a transaction but its own records: no second
  ``Begin`` while one is open, no record written in another leader epoch than its ``Begin``
  (other than the new leader's ``Abort``).
- ``abort_after_failover``: a leader change that cut a transaction is followed by an
  ``AbortTransaction`` as the new leader's first record.
- ``bootstrap_once``: the bootstrap records (``Bootstrap records``) are committed exactly once.
- ``logs_agree``: the controllers' logs hold the same records at the same offsets (up to the
  shortest log).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eos_harness.verdict import Violation

__all__ = ["CHECKS", "LogEntry", "Observation", "check_logs", "check_topics", "parse_dump", "transactions_of"]

CHECKS = {
    "topic_never_partial": "no broker ever shows a topic with fewer partitions than requested",
    "acknowledged_topic_whole": "every acknowledged topic exists whole on every broker once the cluster settled",
    "transaction_closed": "every BeginTransaction is closed by EndTransaction or AbortTransaction",
    "transaction_not_interleaved": "nothing but a transaction's own records between its Begin and its End/Abort",
    "abort_after_failover": "a failover that cut a transaction is followed by AbortTransaction",
    "bootstrap_once": "the bootstrap records are committed exactly once",
    "logs_agree": "every controller's log holds the same records at the same offsets",
}

BEGIN, END, ABORT = "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"
BOOTSTRAP_NAME = "Bootstrap records"


@dataclass(frozen=True)
class Observation:
    """A topic as one broker's metadata showed it: ``partitions`` of ``requested``, at ``at`` seconds."""

    broker: int
    topic: str
    partitions: int
    requested: int
    at: float


@dataclass(frozen=True)
class LogEntry:
    """One record of a ``__cluster_metadata`` log: its offset, the leader epoch of its batch, its
    type (``LEADER_CHANGE`` and other control types are prefixed ``control:``), and its data."""

    offset: int
    epoch: int
    type: str
    data: Mapping

    @property
    def control(self) -> bool:
        return self.type.startswith("control:")

    def text(self) -> str:
        data = json.dumps(dict(self.data), sort_keys=True)
        return f"offset {self.offset} epoch {self.epoch} {self.type} {data if self.data else ''}".rstrip()


_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .*?partitionLeaderEpoch: (-?\d+)")
# A record line. Control records: Kafka 3.9 prints ``controlType: LEADER_CHANGE(2)``; 4.x prints the
# decoded record instead (``LeaderChange: {…}``, ``SnapshotHeader {…}``, ``KRaftVoters {…}``, …, and
# ``endTxnMarker: COMMIT`` for transaction markers), ``controlType: …`` only for a type it does not decode.
_RECORD = re.compile(r"^\| offset: (\d+) .*?(?:payload: (\{.*\})|controlType: (\w+)\(\d+\)"
                     r"| (LeaderChange|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters):? \{"
                     r"| endTxnMarker: (\w+))")
# Kafka 4.x's names of the control records it decodes, as ControlRecordType names them (3.9's form).
_CONTROL_NAMES = {"LeaderChange": "LEADER_CHANGE", "SnapshotHeader": "SNAPSHOT_HEADER",
                  "SnapshotFooter": "SNAPSHOT_FOOTER", "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS"}


def parse_dump(text: str) -> list[LogEntry]:
    """The records of ``DumpLogSegments --cluster-metadata-decoder`` output, in log order.

    Snapshot files and lines this parser does not know are skipped; an unreadable payload is kept
    with type ``UNPARSED``."""
    entries: list[LogEntry] = []
    epoch = -1
    for line in text.splitlines():
        batch = _BATCH.match(line)
        if batch:
            epoch = int(batch.group(3))
            continue
        record = _RECORD.match(line)
        if not record:
            continue
        offset = int(record.group(1))
        control = record.group(3) or _CONTROL_NAMES.get(record.group(4) or "") or record.group(5)
        if control:
            entries.append(LogEntry(offset, epoch, f"control:{control}", {}))
            continue
        try:
            payload = json.loads(record.group(2))
            entries.append(LogEntry(offset, epoch, payload.get("type", "UNKNOWN"), payload.get("data") or {}))
        except ValueError:
            entries.append(LogEntry(offset, epoch, "UNPARSED", {"line": line[:200]}))
    return entries


@dataclass
class Txn:
    """One metadata transaction of a log: its Begin, how it ended (End, Abort or open) and where."""

    begin: LogEntry
    records: int = 0
    end: LogEntry | None = None

    @property
    def outcome(self) -> str:
        return "open" if self.end is None else ("committed" if self.end.type == END else "aborted")

    def to_json(self) -> dict:
        return {"name": self.begin.data.get("name"), "begin_offset": self.begin.offset, "epoch": self.begin.epoch,
                "records": self.records, "outcome": self.outcome,
                "end_offset": None if self.end is None else self.end.offset,
                "end_epoch": None if self.end is None else self.end.epoch,
                "reason": None if self.end is None else self.end.data.get("reason")}


def transactions_of(entries: Iterable[LogEntry]) -> list[Txn]:
    """The log's transactions, in order (a Begin inside an open one starts a new one)."""
    txns: list[Txn] = []
    current: Txn | None = None
    for entry in entries:
        if entry.type == BEGIN:
            current = Txn(entry)
            txns.append(current)
        elif entry.type in (END, ABORT) and current is not None:
            current.end = entry
            current = None
        elif current is not None and not entry.control:
            current.records += 1
    return txns


def _excerpt(entries: list[LogEntry], index: int, before: int = 3, after: int = 3) -> str:
    return "\n".join(e.text() for e in entries[max(0, index - before): index + after + 1])


def check_logs(logs: Mapping[int, list[LogEntry]]) -> list[Violation]:
    """The log checks on each controller's decoded log (``logs``: controller id -> entries)."""
    violations: list[Violation] = []
    for controller, entries in sorted(logs.items()):
        where = f"controller {controller}"
        open_at: int | None = None  # index of the open transaction's Begin
        cut_by: int | None = None  # index of the first record of a new epoch seen while open
        interleaved = False
        for i, entry in enumerate(entries):
            if entry.control:
                continue
            if open_at is not None and entry.epoch != entries[open_at].epoch and cut_by is None:
                cut_by = i
                if entry.type != ABORT:
                    violations.append(Violation(
                        "abort_after_failover", f"{where} offset {entry.offset}",
                        f"AbortTransaction as epoch {entry.epoch}'s first record (a transaction of epoch "
                        f"{entries[open_at].epoch} was open)", entry.type, detail=_excerpt(entries, i)))
            if entry.type == BEGIN:
                if open_at is not None:
                    violations.append(Violation(
                        "transaction_not_interleaved", f"{where} offset {entry.offset}",
                        f"no Begin while the transaction begun at offset {entries[open_at].offset} is open",
                        "BeginTransaction", detail=_excerpt(entries, i)))
                open_at, cut_by, interleaved = i, None, False
            elif entry.type in (END, ABORT):
                if open_at is None:
                    violations.append(Violation(
                        "transaction_closed", f"{where} offset {entry.offset}",
                        "End/Abort only after a Begin", f"{entry.type} with no open transaction",
                        detail=_excerpt(entries, i)))
                elif entry.type == END and cut_by is not None:
                    violations.append(Violation(
                        "transaction_not_interleaved", f"{where} offset {entry.offset}",
                        "a transaction cut by a failover is aborted, never ended",
                        f"EndTransaction in epoch {entry.epoch} of a Begin of epoch {entries[open_at].epoch}",
                        detail=_excerpt(entries, i)))
                open_at, cut_by = None, None
            elif open_at is not None and entry.epoch != entries[open_at].epoch and i != cut_by \
                    and not interleaved:
                interleaved = True  # one finding per transaction, not one per record
                violations.append(Violation(
                    "transaction_not_interleaved", f"{where} offset {entry.offset}",
                    f"only records of epoch {entries[open_at].epoch} inside the transaction begun at "
                    f"offset {entries[open_at].offset}", f"{entry.type} of epoch {entry.epoch}",
                    detail=_excerpt(entries, i)))
        if open_at is not None:
            violations.append(Violation(
                "transaction_closed", f"{where} offset {entries[open_at].offset}",
                "End or Abort once the cluster settled", "the transaction is still open at the log's end",
                detail=_excerpt(entries, open_at, 1, 6)))
        bootstraps = [t for t in transactions_of(entries) if t.begin.data.get("name") == BOOTSTRAP_NAME]
        committed = [t for t in bootstraps if t.outcome == "committed"]
        if entries and len(committed) != 1:
            violations.append(Violation(
                "bootstrap_once", where, "one committed bootstrap transaction",
                f"{len(committed)} committed of {len(bootstraps)}: "
                f"{[t.to_json() for t in bootstraps]}"))
    violations.extend(_disagreements(logs))
    return violations


def _disagreements(logs: Mapping[int, list[LogEntry]]) -> list[Violation]:
    if len(logs) < 2:
        return []
    by_offset = {c: {e.offset: e for e in entries} for c, entries in logs.items()}
    shortest = min((max(m) if m else -1) for m in by_offset.values())
    (first, reference), *others = sorted(by_offset.items())
    found: list[Violation] = []
    for controller, mine in others:
        for offset in range(shortest + 1):
            a, b = reference.get(offset), mine.get(offset)
            if a is None or b is None or a.control or b.control:
                continue
            if (a.epoch, a.type, a.data) != (b.epoch, b.type, b.data):
                found.append(Violation("logs_agree", f"offset {offset}", f"controller {first}: {a.text()}",
                                       f"controller {controller}: {b.text()}"))
                break
    return found


def check_topics(requested: Mapping[str, int], observations: Iterable[Observation], acknowledged: Iterable[str],
                 final: Mapping[int, Mapping[str, int]]) -> list[Violation]:
    """``requested``: topic -> partitions asked for; ``observations``: every partial sighting the
    brokers gave (or all of them); ``final``: broker -> topic -> partitions once settled."""
    violations: list[Violation] = []
    seen: set[tuple[int, str]] = set()
    for obs in observations:
        if obs.partitions < obs.requested and (obs.broker, obs.topic) not in seen:
            seen.add((obs.broker, obs.topic))
            violations.append(Violation(
                "topic_never_partial", f"broker {obs.broker} topic {obs.topic}", f"{obs.requested} partitions",
                f"{obs.partitions} partitions at {obs.at:.3f} s"))
    for topic in sorted(acknowledged):
        for broker, topics in sorted(final.items()):
            got = topics.get(topic, 0)
            if got != requested[topic]:
                violations.append(Violation(
                    "acknowledged_topic_whole", f"broker {broker} topic {topic}", f"{requested[topic]} partitions",
                    "missing" if got == 0 else f"{got} partitions"))
    return violations
