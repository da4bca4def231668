"""Mutants of the KIP-1035 upgrade and downgrade (harness/stores/migration.py): ``rocksdb-indexed``
with one real mistake in moving offsets between the legacy files and the store. Only the offsets
suite's migration scenarios meet them (no task of a chaos campaign has legacy files to import or
sets ``upgrade_from``): registered with ``suite="offsets"``."""

from __future__ import annotations

from eos_harness.faults.points import crash_point
from eos_harness.stores import StoreSpec, migration, register
from eos_harness.stores.indexed import IndexedRocksStore

__all__ = ["MUTANTS"]


class MigrationDeletesEarly(IndexedRocksStore):
    """Cleans the legacy files up BEFORE the imported offsets are written: a crash in between leaves
    the offsets neither in the files nor in the store."""

    def _migrate(self, legacy: migration.LegacyOffsets) -> None:
        if not legacy.pending:
            return
        crash_point(migration.P_MIGRATE_BEFORE_IMPORT)
        if legacy.checkpoint is not None:
            others = {tp: o for tp, o in legacy.checkpoint.items() if tp not in legacy.own}
            migration.write_offsets_file(legacy.checkpoint_path, others)
        crash_point(migration.P_MIGRATE_AFTER_CHECKPOINT)
        migration.remove_file(legacy.position_path)
        crash_point(migration.P_MIGRATE_AFTER_POSITION)
        self._write_offsets({tp: o for tp, o in legacy.offsets().items() if self.committed_offset(tp) is None})
        crash_point(migration.P_MIGRATE_AFTER_IMPORT)


class MigrationImportsLower(IndexedRocksStore):
    """Imports each offset one lower than the file holds (reads the file as 'last offset written'):
    the record at the file's offset - 1 is replayed twice."""

    def _migrate(self, legacy: migration.LegacyOffsets) -> None:
        migration.import_legacy(legacy, self.committed_offset,
                                lambda offsets: self._write_offsets({tp: o - 1 for tp, o in offsets.items()}))


class DowngradeKeepsOffsets(IndexedRocksStore):
    """Ignores ``upgrade_from`` on close: the offsets stay in the store and no ``.checkpoint`` is
    written, so the older version finds neither."""

    def _downgrade(self) -> None:
        pass


class MigrationTrustsLegacy(IndexedRocksStore):
    """Imports a legacy database whose task has no .checkpoint (it crashed under exactly-once) as if it
    were committed: the uncommitted writes on disk survive the changelog replay."""

    def _refuse_untrusted(self, legacy: migration.LegacyOffsets, database) -> None:
        pass


MUTANTS = (
    ("mutant-offsets-migration-deletes-early", MigrationDeletesEarly, ("migration_keeps_offsets",),
     "upgrade deletes the legacy .checkpoint/.position before the imported offsets are durable"),
    ("mutant-offsets-migration-imports-lower", MigrationImportsLower, ("migration_offset_exact",),
     "upgrade imports each offset one lower than the legacy file holds"),
    ("mutant-offsets-downgrade-keeps-offsets", DowngradeKeepsOffsets, ("downgrade_hands_back_offsets",),
     "downgrade (upgrade_from) leaves the offsets in the store and writes no .checkpoint"),
    ("mutant-offsets-migration-trusts-legacy", MigrationTrustsLegacy, ("migration_refuses_unchecked_legacy",),
     "upgrade imports a legacy database that has no .checkpoint offset (uncommitted writes on disk) as committed"),
)
for name, cls, caught_by, description in MUTANTS:
    register(StoreSpec(name, "mutant", description, cls, caught_by, suite="offsets"))
