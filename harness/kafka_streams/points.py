"""The crash points inside Kafka Streams' own stores, at the steps of a commit.

Each point sits in one of Kafka's methods at a place named as a Byteman rule's location (``AT ENTRY``,
``AT INVOKE``, ``AFTER INVOKE``, ``AT EXIT``): a call of ``eosharness.StoreServer.reach(name)`` woven there
into a copy of Kafka's class when the store server is built (``eosharness.Weave``, with the ASM Byteman
ships: :func:`weave_spec`), so every store JVM starts with every point in place; unarmed, a point is one read
of a flag. While the harness arms or traces points (the Python crash-point registry,
:mod:`eos_harness.faults.points`), each point reached that the request names asks the store's process over
its pipe, which runs :func:`~eos_harness.faults.points.crash_point` there: an armed point kills the store's
process, and with it the JVM, at that step (the JVM waits for the answer, so nothing after the point runs).
So these points are armed, counted, traced and listed as every other point is. (They were Byteman rules
installed when first armed: a rule's install cost each JVM life that armed one 0.17 CPU-s, and every crash
is a JVM life. Byteman still installs the mutants' rules, :mod:`.mutant_rules`.)
"""

from __future__ import annotations

from dataclasses import dataclass

from eos_harness.faults.points import declare
from eos_harness.kafka_streams import (
    mutant_rules,  # the mutants of Kafka's code: their rules act only in them
)

__all__ = ["POINTS", "KafkaPoint", "points_for", "rules_text", "weave_spec"]

_INTERNALS = "org.apache.kafka.streams.state.internals"


@dataclass(frozen=True)
class KafkaPoint:
    name: str
    cls: str  # the class (in Kafka's state.internals package) whose method the rule sits in
    method: str  # Byteman's METHOD (each class has one method of that name)
    location: str  # Byteman's AT/AFTER clause
    meaning: str
    kinds: tuple[str, ...]  # the stores it belongs to: "rocksdb", "memory", "rocksdb-window", "memory-window",
    # "rocksdb-session", "memory-session"
    transactional_only: bool = False  # only where KIP-892's transaction buffer exists (4.4.0, transactions on)
    # only where the store writes its status marker: without KIP-892's transactions (4.3.1; 4.4.0, transactions off)
    non_transactional_only: bool = False

    @property
    def java(self) -> str:
        """Where it sits, as a Java reader names it."""
        return f"{self.cls}.{self.method.partition('(')[0]} ({self.location.lower()})"


POINTS = (
    KafkaPoint("ks.commit.enter", "MeteredKeyValueStore", "commit", "AT ENTRY",
               "Kafka's store is asked to commit (MeteredKeyValueStore.commit entered): nothing of it done yet",
               ("rocksdb", "memory")),
    KafkaPoint("ks.rocksdb.commit.enter", "RocksDBStore", "commit", "AT ENTRY",
               "RocksDBStore.commit entered: the data written since the last commit is not yet in the commit",
               ("rocksdb", "rocksdb-window", "rocksdb-session")),
    KafkaPoint("ks.rocksdb.commit.before_offsets", "AbstractColumnFamilyAccessor",
               "commit", "AT ENTRY",
               "the changelog offsets (and the position) are about to be written to the offsets column family",
               ("rocksdb", "rocksdb-window", "rocksdb-session")),
    KafkaPoint("ks.rocksdb.commit.before_write_batch", "RocksDBTransactionBuffer", "flushToBase",
               "AT INVOKE org.rocksdb.RocksDB.write",
               "the transaction buffer's write batch (the data and the offsets) is about to be written to RocksDB "
               "in one write", ("rocksdb", "rocksdb-window", "rocksdb-session"), transactional_only=True),
    KafkaPoint("ks.rocksdb.commit.after_write_batch", "RocksDBTransactionBuffer", "flushToBase",
               "AFTER INVOKE org.rocksdb.RocksDB.write",
               "the transaction buffer's write batch is written to RocksDB (the memtable; the WAL is off)",
               ("rocksdb", "rocksdb-window", "rocksdb-session"), transactional_only=True),
    KafkaPoint("ks.rocksdb.commit.exit", "RocksDBStore", "commit", "AT EXIT",
               "RocksDBStore.commit is about to return: the commit is in RocksDB's memtable, not flushed to disk",
               ("rocksdb", "rocksdb-window", "rocksdb-session")),
    # The status marker (the offsets column family's "status" key): OPEN at open, CLOSED at close, written
    # only without KIP-892's transactions; opened under exactly-once, a marker not CLOSED on disk makes the
    # store raise TaskCorruptedException. Reached while the store opens or closes, not in a commit: the
    # suites arm them around the open or the close (their names hold ".open." or ".close.").
    KafkaPoint("ks.rocksdb.open.status", "AbstractColumnFamilyAccessor", "open", "AT INVOKE put",
               "the store is opening: its status marker is about to be set OPEN in the offsets column family "
               "(in RocksDB's memtable: on disk at the next flush)", ("rocksdb",), non_transactional_only=True),
    KafkaPoint("ks.rocksdb.close.status", "AbstractColumnFamilyAccessor", "close", "AT INVOKE put",
               "the store is closing: its status marker is about to be set CLOSED in the offsets column family",
               ("rocksdb",), non_transactional_only=True),
    KafkaPoint("ks.rocksdb.close.db", "RocksDBStore", "close", "AT INVOKE org.rocksdb.RocksDB.close()",
               "the store is closing: RocksDB is about to be closed, which flushes its memtables (the WAL is "
               "off: what was written since the last flush, the status marker among it, reaches disk here)",
               ("rocksdb",)),
    # Window stores: a persistent one is a RocksDBStore per segment (the points above fire in each segment's
    # commit), committed one after another by AbstractSegments.commit.
    KafkaPoint("ks.window.commit.enter", "MeteredWindowStore", "commit", "AT ENTRY",
               "Kafka's window store is asked to commit (MeteredWindowStore.commit entered): nothing of it done yet",
               ("rocksdb-window", "memory-window")),
    KafkaPoint("ks.window.rocksdb.after_segment_commit", "AbstractSegments", "commit",
               "AFTER INVOKE org.apache.kafka.streams.state.internals.Segment.commit",
               "one segment's RocksDB has committed (data and offsets); the later segments are not yet committed "
               "(the segments of a persistent window or session store)",
               ("rocksdb-window", "rocksdb-session")),
    KafkaPoint("ks.window.memory.before_flush", "InMemoryWindowTransactionBuffer", "flushToBase", "AT ENTRY",
               "the in-memory window store's transaction buffer is about to move its staged writes into the store",
               ("memory-window",), transactional_only=True),
    # Session stores: a persistent one is a RocksDBSegmentedBytesStore as a window store is (the ks.rocksdb.* points
    # and the segments' point above fire in it); the in-memory one stages its writes in its own buffer.
    KafkaPoint("ks.session.commit.enter", "MeteredSessionStore", "commit", "AT ENTRY",
               "Kafka's session store is asked to commit (MeteredSessionStore.commit entered): nothing of it done yet",
               ("rocksdb-session", "memory-session")),
    KafkaPoint("ks.session.memory.before_flush", "InMemorySessionTransactionBuffer", "flushToBase", "AT ENTRY",
               "the in-memory session store's transaction buffer is about to move its staged sessions into the "
               "store", ("memory-session",), transactional_only=True),
    KafkaPoint("ks.session.memory.after_flush", "InMemorySessionTransactionBuffer", "flushToBase", "AT EXIT",
               "the in-memory session store's transaction buffer has moved its staged sessions into the store; its "
               "commit has not returned", ("memory-session",), transactional_only=True),
)

for _point in POINTS:
    declare(_point.name, f"{_point.meaning} [Kafka Streams, in {_point.java}]")


def points_for(kind: str, transactional: bool) -> list[KafkaPoint]:
    """The points of a store of ``kind`` ("rocksdb", "memory", "rocksdb-window", …), with KIP-892's transactions on
    or off."""
    return [p for p in POINTS if kind in p.kinds and (transactional or not p.transactional_only)
            and not (transactional and p.non_transactional_only)]


def weave_spec() -> str:
    """Where each point is woven into Kafka's classes when the store server is built (``eosharness.Weave``): one
    line per point, its name, class, method and location, tab-separated."""
    return "".join(f"{p.name}\t{_INTERNALS}.{p.cls}\t{p.method}\t{p.location}\n" for p in POINTS)


def rules_text(version: str) -> str:
    """The Byteman script of the rules a store JVM may install: the mutants' (of 4.4.0's classes: their rules
    name its methods, which 4.3.1 would report as type errors); the points are woven, not rules."""
    return mutant_rules.rules_text() if version == mutant_rules.VERSION else ""
