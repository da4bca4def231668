"""The Byteman rules of the mutants of Kafka Streams' own code: each re-creates, inside Kafka's classes, a
mistake of the kind Kafka fixed just before 4.4.0 (KIP-892's transaction buffer, KIP-1035's offsets).

A mutant's rules are loaded into every store JVM with the crash points' (:mod:`.points`); each acts only
while the open store was opened as that mutant (``eosharness.StoreServer.mutant(name)``), so one JVM
serves Kafka's stores and their mutants alike. The stores themselves are registered by :mod:`.mutants`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MUTANT_RULES", "MutantRule", "rules_text"]

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

    @property
    def java(self) -> str:
        return f"{self.cls}.{self.method.partition('(')[0]}"


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
)


def rules_text() -> str:
    """The Byteman script of every mutant's rules. Each is interpreted (NOCOMPILE): a rule compiled to
    bytecode cannot reach Kafka's package-private classes (RocksDBStore$DBAccessor); they sit in methods called
    once per putAll, commit or view, not per put."""
    rules = []
    for rule in MUTANT_RULES:
        condition = f'eosharness.StoreServer.mutant("{rule.mistake}")' + (f" && {rule.condition}" if rule.condition else "")
        rules.append(f"RULE mutant.{rule.mistake}\nCLASS {_INTERNALS}.{rule.cls}\nMETHOD {rule.method}\n"
                     f"{rule.location}\nNOCOMPILE\nIF {condition}\nDO {rule.action}\nENDRULE\n")
    return "\n".join(rules)
