"""The embedded broker: SQLite (WAL, synchronous=FULL) as a transactional log. Needs nothing installed.

Each process opens its own connection to one database file, so a task in a child process and the
driver see one log. A transaction's records are kept by its producer until it ends, then written
in ONE SQLite transaction together with the consumer offsets it carries: committed records and
offsets become visible together, or (if the process dies first) not at all. An aborted
transaction's records are written too, marked aborted, so they take offsets as in Kafka and show
to ``read_uncommitted`` readers only.

Fencing: ``init_transactions`` bumps the transactional id's epoch; a producer whose epoch is no
longer current gets :class:`ProducerFenced` on its next call, checked inside the same SQLite
transaction as its write, so a zombie can never slip a record in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from eos_harness.broker.port import BrokerError, ProducerFenced, Record
from eos_harness.store import TopicPartition

__all__ = ["EmbeddedBroker", "EmbeddedProducer"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS partitions (topic TEXT, partition INTEGER, next_offset INTEGER,
    PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS records (topic TEXT, partition INTEGER, offset INTEGER, key BLOB, value BLOB,
    aborted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS producers (transactional_id TEXT PRIMARY KEY, epoch INTEGER);
CREATE TABLE IF NOT EXISTS group_offsets (group_id TEXT, topic TEXT, partition INTEGER, position INTEGER,
    PRIMARY KEY (group_id, topic, partition));
"""


class EmbeddedBroker:
    """``with EmbeddedBroker(path) as broker:`` — a transactional log in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.spec = f"embedded:{self.path}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=60000")
        with self._write():
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    self._db.execute(statement)

    # -- plumbing ---------------------------------------------------------------------------
    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb) -> None:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def _write(self) -> EmbeddedBroker._Tx:
        return EmbeddedBroker._Tx(self._db)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # -- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1) -> None:
        if partitions < 1:
            raise BrokerError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO partitions VALUES (?, ?, 0)", [(name, p) for p in range(partitions)]
            )

    def _append(self, db: sqlite3.Connection, topic: str, partition: int,
                records: list[tuple[bytes | None, bytes | None]], aborted: bool) -> int:
        """Append inside an open SQLite transaction; returns the position after the last record."""
        row = db.execute(
            "SELECT next_offset FROM partitions WHERE topic = ? AND partition = ?", (topic, partition)
        ).fetchone()
        if row is None:
            raise BrokerError(
                f"topic partition {topic}-{partition} does not exist; create it first (create_topic)"
            )
        start = row[0]
        db.executemany(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)",
            [(topic, partition, start + i, k, v, int(aborted)) for i, (k, v) in enumerate(records)],
        )
        end = start + len(records)
        db.execute("UPDATE partitions SET next_offset = ? WHERE topic = ? AND partition = ?", (end, topic, partition))
        return end

    def produce(self, topic: str, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        with self._write() as db:
            self._append(db, topic, partition, list(records), aborted=False)

    def producer(self, transactional_id: str) -> EmbeddedProducer:
        return EmbeddedProducer(self, transactional_id)

    # -- reads ------------------------------------------------------------------------------
    def _read(self, tp: TopicPartition, start: int, committed_only: bool) -> list[Record]:
        sql = "SELECT offset, key, value FROM records WHERE topic = ? AND partition = ? AND offset >= ?"
        if committed_only:
            sql += " AND aborted = 0"
        rows = self._db.execute(sql + " ORDER BY offset", (tp.topic, tp.partition, start)).fetchall()
        return [Record(tp.topic, tp.partition, o, k, v) for o, k, v in rows]

    def read_committed(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        return self._read(tp, start, committed_only=True)

    def read_uncommitted(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        return self._read(tp, start, committed_only=False)

    def end_offset(self, tp: TopicPartition) -> int:
        row = self._db.execute(
            "SELECT next_offset FROM partitions WHERE topic = ? AND partition = ?", (tp.topic, tp.partition)
        ).fetchone()
        if row is None:
            raise BrokerError(f"topic partition {tp} does not exist")
        return row[0]

    def committed_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            row = self._db.execute(
                "SELECT position FROM group_offsets WHERE group_id = ? AND topic = ? AND partition = ?",
                (group_id, tp.topic, tp.partition),
            ).fetchone()
            out[tp] = row[0] if row else None
        return out


class EmbeddedProducer:
    """A transactional producer on the embedded log (see the module doc for fencing)."""

    def __init__(self, broker: EmbeddedBroker, transactional_id: str) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self.epoch: int | None = None
        self._fenced = False
        self._open = False
        self._pending: dict[TopicPartition, list[tuple[bytes | None, bytes | None]]] = {}
        self._offsets: dict[tuple[str, TopicPartition], int] = {}

    def init_transactions(self) -> None:
        with self.broker._write() as db:
            row = db.execute(
                "SELECT epoch FROM producers WHERE transactional_id = ?", (self.transactional_id,)
            ).fetchone()
            self.epoch = (row[0] + 1) if row else 0
            db.execute("INSERT OR REPLACE INTO producers VALUES (?, ?)", (self.transactional_id, self.epoch))
        self._open = False
        self._pending.clear()
        self._offsets.clear()

    def _check(self, db: sqlite3.Connection | None = None) -> None:
        if self.epoch is None:
            raise BrokerError(f"producer {self.transactional_id!r}: call init_transactions() first")
        if self._fenced:
            raise ProducerFenced(f"producer {self.transactional_id!r} epoch {self.epoch} was fenced by a newer instance")
        if db is not None:
            row = db.execute(
                "SELECT epoch FROM producers WHERE transactional_id = ?", (self.transactional_id,)
            ).fetchone()
            if row is None or row[0] != self.epoch:
                self._fenced = True
                raise ProducerFenced(
                    f"producer {self.transactional_id!r} epoch {self.epoch} was fenced by epoch {row[0] if row else '?'}"
                )

    def begin_transaction(self) -> None:
        self._check()
        if self._open:
            raise BrokerError(f"producer {self.transactional_id!r}: a transaction is already open")
        self._open = True

    def _require_open(self) -> None:
        self._check()
        if not self._open:
            raise BrokerError(f"producer {self.transactional_id!r}: no open transaction; call begin_transaction()")

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        self._require_open()
        self._pending.setdefault(TopicPartition(topic, partition), []).append((key, value))

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        self._require_open()
        for tp, position in offsets.items():
            self._offsets[(group_id, tp)] = position

    def _finish(self, aborted: bool) -> dict[TopicPartition, int]:
        self._require_open()
        positions: dict[TopicPartition, int] = {}
        with self.broker._write() as db:
            self._check(db)
            for tp, records in self._pending.items():
                positions[tp] = self.broker._append(db, tp.topic, tp.partition, records, aborted)
            if not aborted:
                db.executemany(
                    "INSERT OR REPLACE INTO group_offsets VALUES (?, ?, ?, ?)",
                    [(g, tp.topic, tp.partition, pos) for (g, tp), pos in self._offsets.items()],
                )
        self._pending.clear()
        self._offsets.clear()
        self._open = False
        return positions

    def commit_transaction(self) -> dict[TopicPartition, int]:
        return self._finish(aborted=False)

    def abort_transaction(self) -> None:
        self._finish(aborted=True)

    def close(self) -> None:
        self._pending.clear()
        self._open = False

