"""The named steps of Kafka Streams' own commit where the kafka-streams suite kills its application, and the
mutants of Streams' code it runs: Byteman rules injected into Kafka Streams 4.4.0's classes.

A point's rule calls ``eosharness.app.StreamsApp$Points.reach(name)``: the point armed for this JVM
(``-Deosharness.arm=NAME@N``) says ``POINT`` at its Nth hit and blocks its thread until the harness
SIGKILLs the JVM, so nothing of Streams after the step runs. Each point is declared as every crash point is
(``eos-harness points`` lists it, with the Java method it sits in). A JVM gets only the rules of its armed
point and of its mutant.

The order of a commit in 4.4.0 (``TaskExecutor.commitTasksAndMaybeUpdateCommittableOffsets``): every task's
``prepareCommit`` (records flushed), then ``commitOffsetsOrTransaction`` (under exactly_once_v2:
``StreamsProducer.commitTransaction``: ``sendOffsetsToTransaction``, then the producer's
``commitTransaction``), then every task's ``postCommit`` → ``AbstractTask.maybeCheckpoint`` →
``ProcessorStateManager.commit`` → each store's ``commit(Map)`` (KIP-892: data and changelog offset
together; with transactional RocksDB stores one ``RocksDB.write`` of the transaction buffer). Under
exactly_once_v2 without transactional stores ``postCommit`` skips the stores' commit (4.4.0's
``StreamTask.postCommit``: ``if (enforceCheckpoint || !eosEnabled || transactionalStateStoresEnabled)``): they
commit only at close, suspension or an enforced checkpoint, so the stores' points are not drawn there.

The order of a clean close in 4.4.0 (``KafkaStreams.close`` → ``TaskManager.shutdown(true)`` →
``closeAndCleanUpTasks`` → ``tryCloseCleanActiveTasks``): every task's ``prepareCommit(true)``, one
``commitOffsetsOrTransaction`` for all of them, every task's ``postCommit(true)`` (the enforced checkpoint:
``maybeCheckpoint`` → ``ProcessorStateManager.commit``, the only commit of the stores under exactly_once_v2
without transactional stores), then per task ``suspend`` and ``closeClean`` → ``StateManagerUtil.closeStateManager``:
``ProcessorStateManager.close`` (each store closed: RocksDB flushes its memtable) and ``StateDirectory.unlock``.
The close points (phase ``close``) are armed when the harness asks the instance to close (``STOP NAME@N``), so
only a close reaches them. In 4.4.0 no ``.checkpoint`` file is written on this path: KIP-1035 keeps the changelog
offsets in the stores (every RocksDB store manages its offsets; in-memory stores are not persistent), and
``OffsetCheckpoint.write`` is called only by ``LegacyCheckpointingStateStore`` (a persistent store that does not
manage its offsets, none of Kafka's own) and by ``ProcessorStateManager.close``'s
``LegacyCheckpointingStateStore.maybeDowngradeOffsets`` (only with ``upgrade.from`` 4.2 or older): the
``upgrade-`` applications run so, and ``streams.checkpoint.before_rename`` sits in that write.
"""

from __future__ import annotations

from dataclasses import dataclass

from eos_harness.faults.points import declare

__all__ = ["APP_MUTANTS", "APP_POINTS", "RANDOM_KILL", "AppMutant", "AppPoint", "rules_text"]

# Not a step: the JVM SIGKILLed a drawn number of milliseconds (its "hit") after it was given its input,
# wherever it then is (processing, inside a transaction, between commits).
RANDOM_KILL = "random"

_INTERNALS = "org.apache.kafka.streams.processor.internals"
_STATE = "org.apache.kafka.streams.state.internals"
_REACH = "eosharness.app.StreamsApp$Points.reach"


@dataclass(frozen=True)
class AppPoint:
    name: str
    cls: str  # fully qualified
    method: str
    location: str  # Byteman's AT/AFTER clause
    meaning: str
    # "commit" (fires while the app processes input), "restore" (while a restarted instance restores), "start"
    # (while a restarted instance's rebalance assigns it its tasks), "close" (while the harness closes the
    # instance cleanly: armed with its STOP)
    phase: str
    exactly_once_only: bool = False  # only where the producer commits a transaction
    transactional_rocksdb_only: bool = False  # only in a transactional RocksDB store's commit
    # in the stores' commit after each transaction: StreamTask.postCommit calls maybeCheckpoint only when the
    # checkpoint is enforced, without exactly-once, or with transactional stores (under exactly_once_v2
    # without them, the stores commit only at close, suspension or the end of a restoration)
    stores_commit: bool = False
    condition: str = "true"  # the rule's IF (a close point: only on the clean close's call)
    # only where the application runs with upgrade.from 4.2 or older (4.4.0 then writes KIP-1035's downgrade
    # .checkpoint file at each task's close)
    upgrade_from_only: bool = False

    @property
    def java(self) -> str:
        words = self.location.split()
        clause = " ".join(w.lower() if i < 2 and w.isupper() else w for i, w in enumerate(words))
        return f"{self.cls.rpartition('.')[2]}.{self.method.partition('(')[0]} ({clause})"

    def applies(self, guarantee: str, store: str, transactional: bool, upgrade_from: str | None = None) -> bool:
        return ((not self.exactly_once_only or guarantee == "exactly_once_v2")
                and (not self.upgrade_from_only or upgrade_from is not None)
                and (not self.transactional_rocksdb_only or (store == "rocksdb" and transactional))
                and (not self.stores_commit or transactional or guarantee != "exactly_once_v2"))


APP_POINTS = (
    AppPoint("streams.commit.enter", f"{_INTERNALS}.TaskExecutor", "commitOffsetsOrTransaction", "AT ENTRY",
             "Streams commits: every task's records are flushed (prepareCommit), neither the input offsets nor the "
             "transaction are committed yet", "commit"),
    AppPoint("streams.commit.before_offsets_in_transaction", f"{_INTERNALS}.StreamsProducer", "commitTransaction",
             "AT ENTRY", "the output and changelog records are in the open transaction; the input offsets are "
             "about to be added to it (sendOffsetsToTransaction)", "commit", exactly_once_only=True),
    AppPoint("streams.commit.before_producer_commit", f"{_INTERNALS}.StreamsProducer", "commitTransaction",
             "AT INVOKE org.apache.kafka.clients.producer.Producer.commitTransaction",
             "the transaction holds the output, the changelog records and the input offsets; the producer is "
             "about to commit it", "commit", exactly_once_only=True),
    AppPoint("streams.commit.after_producer_commit", f"{_INTERNALS}.StreamsProducer", "commitTransaction",
             "AFTER INVOKE org.apache.kafka.clients.producer.Producer.commitTransaction",
             "the producer's transaction is committed; no store has committed yet", "commit",
             exactly_once_only=True),
    AppPoint("streams.commit.before_stores_commit", f"{_INTERNALS}.ProcessorStateManager", "commit", "AT ENTRY",
             "the offsets (or transaction) are committed; the task's stores are about to commit (postCommit → "
             "ProcessorStateManager.commit)", "commit", stores_commit=True),
    AppPoint("streams.store.before_write_batch", f"{_STATE}.RocksDBTransactionBuffer", "flushToBase",
             "AT INVOKE org.rocksdb.RocksDB.write",
             "inside the store's commit: the transaction buffer (data and changelog offset) is about to be written "
             "to RocksDB in one write", "commit", transactional_rocksdb_only=True),
    AppPoint("streams.commit.after_stores_commit", f"{_INTERNALS}.ProcessorStateManager", "commit", "AT EXIT",
             "the task's stores have committed (in RocksDB's memtable: the WAL is off, nothing is flushed)",
             "commit", stores_commit=True),
    AppPoint("streams.rebalance.before_assignment", f"{_INTERNALS}.TaskManager", "handleAssignment", "AT ENTRY",
             "a restarted instance's rebalance hands it its tasks: none of them created yet", "start"),
    AppPoint("streams.rebalance.after_assignment", f"{_INTERNALS}.TaskManager", "handleAssignment", "AT EXIT",
             "a restarted instance's rebalance has created its tasks: their stores not yet opened nor restored",
             "start"),
    AppPoint("streams.restore.after_batch", f"{_INTERNALS}.ProcessorStateManager", "restore", "AT EXIT",
             "a restarted instance restores its store: one batch of changelog records is in it, the restoration "
             "is not finished", "restore"),
    AppPoint("streams.close.before_checkpoint", f"{_INTERNALS}.StreamTask", "postCommit", "AT ENTRY",
             "a clean close: the task's last records are flushed and the close's transaction (output, changelog, "
             "input offsets) is committed; its stores' enforced commit (checkpoint) is not yet done", "close",
             condition="$1"),
    AppPoint("streams.close.before_suspend", f"{_INTERNALS}.StreamTask", "suspend", "AT ENTRY",
             "a clean close: every task's stores have committed (checkpoint: in RocksDB's memtable, not flushed); "
             "this task is about to be suspended and closed", "close"),
    AppPoint("streams.close.before_stores_close", f"{_INTERNALS}.ProcessorStateManager", "close", "AT ENTRY",
             "a clean close: the task is suspended (its processors closed); its stores are about to be closed "
             "(RocksDB flushes its memtable at close)", "close"),
    AppPoint("streams.close.before_unlock", f"{_INTERNALS}.StateManagerUtil", "closeStateManager",
             f"AT INVOKE {_INTERNALS}.StateDirectory.unlock ALL",
             "a clean close: the task's stores are closed; the lock of its task directory is about to be "
             "released", "close", condition="$3"),
    AppPoint("streams.checkpoint.before_rename", f"{_STATE}.OffsetCheckpoint", "write",
             "AT INVOKE org.apache.kafka.common.utils.Utils.atomicMoveWithFallback",
             "a clean close with upgrade.from 4.2 (KIP-1035's downgrade file, written by ProcessorStateManager.close "
             "once the stores are closed): the task's .checkpoint.tmp is written and fsynced, about to replace "
             ".checkpoint", "close", upgrade_from_only=True),
)
POINTS_BY_NAME = {p.name: p for p in APP_POINTS}

for _point in APP_POINTS:
    declare(_point.name, f"{_point.meaning} [Kafka Streams application, in {_point.java}]")


@dataclass(frozen=True)
class AppMutant:
    """A mutant of the application or of Streams' code: its configuration changes (``guarantee``) and its
    Byteman rules (``rules``: (class, method, location, action) each, acting only in the mutant's JVM), the
    check that must catch it, and where it can be caught (``store``/``transactional``: None, any)."""

    name: str
    meaning: str
    caught_by: str
    guarantee: str = "exactly_once_v2"
    rules: tuple[tuple[str, str, str, str], ...] = ()
    points: tuple[str, ...] = ()  # the points its kills arm (empty: any the application reaches)
    condition: str = "true"  # its rules' IF


APP_MUTANTS = {m.name: m for m in (
    AppMutant("at-least-once", "the application runs processing.guarantee=at_least_once instead of "
              "exactly_once_v2: a crash after its output was flushed and before its offsets were committed "
              "repeats the output", "exactly_once_output", guarantee="at_least_once",
              points=("streams.commit.enter",)),
    AppMutant("output-twice", "the sink sends each record twice (SinkNode.process runs again on its record): every "
              "output repeated inside its own transaction", "exactly_once_output",
              rules=((f"{_INTERNALS}.SinkNode", "process", "AT EXIT", "flag($1); $0.process($1)"),),
              condition="!flagged($1)"),
    AppMutant("output-value-altered", "the sink changes each record's value on its way to the producer (a digit "
              "appended to the sum): outputs exactly once, each with a wrong sum", "output_values",
              rules=((f"{_INTERNALS}.SinkNode", "process", "AT ENTRY",
                      "$1 = $1.withValue($1.value().toString() + \"1\")"),)),
    AppMutant("restore-from-zero", "the transactional RocksDB store reports no committed changelog offset "
              "(RocksDBStore.committedOffset returns null): every restart wipes its restoration back to the "
              "changelog's start, the whole changelog restored over the store's own committed state",
              "no_wipe", rules=((f"{_STATE}.RocksDBStore", "committedOffset", "AT ENTRY", "return null"),)),
    AppMutant("restore-skips-record", "the restoration drops the last record of each batch it restores "
              "(ProcessorStateManager.restore given the batch without it): the restored store keeps an older sum "
              "of that record's key", "state", rules=((f"{_INTERNALS}.ProcessorStateManager", "restore", "AT ENTRY",
                                                       "$2 = $2.subList(0, $2.size() - 1)"),),
              points=tuple(p.name for p in APP_POINTS if p.phase == "commit")),
    AppMutant("changelog-write-dropped", "the aggregate's store writes each sum to its local store but drops its "
              "changelog record (ChangeLoggingKeyValueBytesStore.log returns at once for the store sums): the store "
              "and the output stay right while the changelog, the state's durable copy a restoration reads, "
              "falls behind", "state",
              rules=((f"{_STATE}.ChangeLoggingKeyValueBytesStore", "log", "AT ENTRY", "return"),),
              condition="$0.name().equals(\"sums\")"),
    AppMutant("restore-hangs", "the restoration never finishes (ProcessorStateManager.restore blocks): a "
              "restarted instance never reaches RUNNING", "liveness",
              rules=((f"{_INTERNALS}.ProcessorStateManager", "restore", "AT ENTRY",
                      "java.lang.Thread.sleep(3600000L)"),),
              points=tuple(p.name for p in APP_POINTS if p.phase == "commit")),
)}


_ZOMBIE = f"{_INTERNALS}.StreamsProducer"
_POINTS_CLASS = "eosharness.app.StreamsApp$Points"
# What the transaction of a zombie (an instance frozen inside its commit, then let go on) comes to: its
# producer's commitTransaction returns (the zombie committed) or throws (fenced).
ZOMBIE_RULES = (f"RULE zombie.committed\nCLASS {_ZOMBIE}\nMETHOD commitTransaction\n"
                "AFTER INVOKE org.apache.kafka.clients.producer.Producer.commitTransaction\n"
                f"IF {_POINTS_CLASS}.released()\nDO {_POINTS_CLASS}.zombie(\"ZOMBIE_COMMITTED\", \"\")\nENDRULE\n",
                f"RULE zombie.fenced\nCLASS {_ZOMBIE}\nMETHOD commitTransaction\nAT EXCEPTION EXIT\n"
                f"IF {_POINTS_CLASS}.released()\nDO {_POINTS_CLASS}.zombie(\"ZOMBIE_FENCED\", $^)\nENDRULE\n")


def rules_text(point: str | None, mutant: str | None, zombie: bool = False) -> str:
    """The Byteman script of one JVM: the rule of its armed point, its mutant's rules, and a zombie's."""
    rules = list(ZOMBIE_RULES) if zombie else []
    if point is not None:
        p = POINTS_BY_NAME[point]
        rules.append(f"RULE {p.name}\nCLASS {p.cls}\nMETHOD {p.method}\n{p.location}\nIF {p.condition}\n"
                     f"DO {_REACH}(\"{p.name}\")\nENDRULE\n")
    if mutant is not None:
        found = APP_MUTANTS[mutant]
        for number, (cls, method, location, action) in enumerate(found.rules):
            rules.append(f"RULE mutant.{mutant}.{number}\nCLASS {cls}\nMETHOD {method}\n{location}\n"
                         f"IF {found.condition}\nDO {action}\nENDRULE\n")
    return "\n".join(rules)
