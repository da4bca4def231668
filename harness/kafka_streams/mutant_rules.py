"""The Byteman rules of the mutants of Kafka Streams' own code: each re-creates, inside Kafka's classes, a
mistake of the kind Kafka fixed just before 4.4.0 (KIP-892's transaction buffer, KIP-1035's offsets).

A mutant's rules are installed by Byteman in a store JVM when a store is opened as that mutant (the crash
points are woven into Kafka's classes instead, :mod:`.points`); each acts only while the open store was
opened as that mutant (``eosharness.StoreServer.mutant(name)``), so one JVM serves Kafka's stores and their
mutants alike. The stores themselves are registered by :mod:`.mutants`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MUTANT_RULES", "VERSION", "MutantRule", "rules_text"]

VERSION = "4.4.0"  # the Kafka Streams release whose classes the rules change
_INTERNALS = "org.apache.kafka.streams.state.internals"


@dataclass(frozen=True)
class MutantRule:
    mistake: str  # the mutant's short name (its store name ends with it)
    cls: str  # the class in Kafka's state.internals package
    method: str
    location: str
    condition: str  # besides being the open store's mutant ("" for none)
    action: str
    meaning: str
    # further rules of the same mistake: (class, method, location, condition, action) each
    also: tuple[tuple[str, str, str, str, str], ...] = ()
    store: str = "rocksdb"  # the kind of Kafka's store (4.4.0, transactional) the mistake lies in

    @property
    def java(self) -> str:
        methods = [f"{cls}.{method.partition('(')[0]}" for cls, method in ((self.cls, self.method),
                                                                            *((a[0], a[1]) for a in self.also))]
        return " and ".join(methods)


MUTANT_RULES = (
    MutantRule("putall-skips-buffer", "RocksDBStore$TransactionalDBAccessor", "putAll", "AT ENTRY", "",
               "$0.underlying.putAll($1, $2); return",
               "putAll writes its entries straight into RocksDB instead of staging them in the transaction buffer "
               "(put stages them): a read-committed view sees them before any commit, and a clean close keeps them"),
    MutantRule("read-committed-sees-staged", "RocksDBStore$TransactionalDBAccessor", "readOnly", "AT ENTRY",
               "$1 == org.apache.kafka.common.IsolationLevel.READ_COMMITTED", "return $0",
               "readOnly(IsolationLevel.READ_COMMITTED) returns the writer's accessor (the transaction buffer over "
               "RocksDB) instead of RocksDB's committed state: the read-committed view reads staged writes"),
    MutantRule("offsets-flushed-alone", "RocksDBStore", "commit(java.util.Map)", "AT EXIT", "",
               "$0.db.flush($0.fOptions, $0.cfAccessor.offsetsColumnFamily())",
               "after each commit the offsets column family is flushed to disk alone (not atomically with the data "
               "column family): after a crash the offsets of the last commit sit beside older data"),
    MutantRule("commit-records-last-offset", "AbstractColumnFamilyAccessor", "commit", "AT ENTRY", "",
               "$3 = eosharness.StoreServer.lastRecordOffsets($3)",
               "commit writes each changelog offset minus one (the last record's offset, not the next offset to "
               "read): committedOffset answers one less than the commit was given"),
    # Before 4.4.0 a transactional store wrote its status marker as a store without transactions does, and
    # lost the CLOSED one in its transaction buffer (4.4.0 writes none when transactional). The store's
    # accessor is still RocksDB's own at open (the transactional one wraps it after), so OPEN lands in
    # RocksDB; at close the accessor is the transactional one, which stages CLOSED in the buffer that close
    # then discards. On disk after a clean close: OPEN; reopened under exactly-once: TaskCorruptedException.
    MutantRule("closed-marker-in-buffer", "AbstractColumnFamilyAccessor", "open", "AT EXIT", "",
               "$1.put($0.offsetColumnFamilyHandle, $0.statusKey, $0.openState)",
               "the transactional store writes its status marker as one without transactions: OPEN at open "
               "straight into RocksDB, CLOSED at close into the transaction buffer, which close discards: after a "
               "clean close the marker on disk says OPEN, and the store refuses its own directory "
               "(TaskCorruptedException under exactly-once: wiped and restored from the changelog)",
               also=(("AbstractColumnFamilyAccessor", "close", "AT ENTRY", "$0.storeOpen.get()",
                      "$1.put($0.offsetColumnFamilyHandle, $0.statusKey, $0.closedState)"),)),
    # The in-memory session store's transaction buffer keeps a staged removal as an empty Optional, which its
    # flushToBase applies by removing the session from the store: the mutant's flush applies the staged puts
    # only (the kind of mistake of a buffer whose flush was written for puts: a removal staged is lost at commit).
    MutantRule("removals-lost-at-commit", "InMemorySessionTransactionBuffer", "flushToBase", "AT ENTRY", "",
               "eosharness.StoreServer.dropRemovals($0.pendingWrites)",
               "the in-memory session store's commit applies the staged puts and drops the staged removals "
               "(InMemorySessionTransactionBuffer.flushToBase): a session removed in a transaction is back in every "
               "view once it commits", store="memory-session"),
)


def rules_text() -> str:
    """The Byteman script of every mutant's rules. Each is interpreted (NOCOMPILE): a rule compiled to
    bytecode cannot reach Kafka's package-private classes (RocksDBStore$DBAccessor); they sit in methods called
    once per putAll, commit or view, not per put."""
    rules = []
    for rule in MUTANT_RULES:
        parts = ((rule.cls, rule.method, rule.location, rule.condition, rule.action), *rule.also)
        for number, (cls, method, location, extra, action) in enumerate(parts):
            condition = f'eosharness.StoreServer.mutant("{rule.mistake}")' + (f" && {extra}" if extra else "")
            name = f"mutant.{rule.mistake}" + (f".{number + 1}" if number else "")
            rules.append(f"RULE {name}\nCLASS {_INTERNALS}.{cls}\nMETHOD {method}\n"
                         f"{location}\nNOCOMPILE\nIF {condition}\nDO {action}\nENDRULE\n")
    return "\n".join(rules)
