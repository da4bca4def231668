"""The promises of the offsets suite: check name -> the promise in one line.

Every scenario module adds its own checks here (one line each); ``eos-harness verify --list-checks``
shows them beside the conformance suite's. A violation's ``check`` is one of these names (or one of
the guard checks about the store's calls themselves, :data:`GUARD_CHECKS`).
"""

from __future__ import annotations

__all__ = ["CAPABILITIES", "GUARD_CHECKS", "PROMISES"]

PROMISES: dict[str, str] = {
    # -- several changelog partitions (partitions.py) --
    "offsets_match_data": "after a crash at any moment, the data and the committed offsets are those of the same "
                          "commit (never data of one commit with offsets of another)",
    "partitions_committed_together": "the offsets of every partition given to one commit are committed together: "
                                     "after a crash, never some partitions at one commit and some at another",
    "partition_offset_exact": "committed_offset(tp) returns, for each partition, the offset of the last commit that "
                              "named it; a commit naming only some partitions leaves the others as they were",
    "partition_offset_survives_reopen": "after close() and a reopen (or a crash and a restart), committed_offset "
                                        "returns every partition's last committed offset: none is forgotten",
    "never_committed_is_none": "committed_offset is None for a partition never committed, for every partition of a "
                               "store that does not manage offsets, and after a restart of one not persistent",
    "flush_is_noop": "flush() commits nothing (KIP-892): no write becomes durable or visible to read_committed(), "
                     "no offset is recorded",
    # -- upgrade and downgrade (migration.py) --
    "migration_keeps_offsets": "opened on a legacy .checkpoint/.position, the store imports their offsets; after a "
                               "crash at any migration step and a restart, no offset is lost (never neither the file "
                               "nor the store)",
    "migration_offset_exact": "an imported offset is exactly the legacy file's: never lower (records replayed twice) "
                              "nor higher (records skipped)",
    "migration_keeps_keys": "every key the store held before the migration is there after it, whatever step a crash hit",
    "migration_cleans_files": "after the migration the .position is gone and the task's .checkpoint keeps only other "
                              "stores' partitions (deleted when none is left)",
    "migration_refuses_unchecked_legacy": "a legacy database with no .checkpoint offset to import (its task crashed "
                                          "under exactly-once: uncommitted writes may be on disk) is not imported: "
                                          "init raises IncompatibleStoreDirectory and the runtime wipes and restores it",
    "malformed_offsets_file": "a malformed .checkpoint or .position stops init with an error naming the file and the "
                              "line; the file and the store's data are left untouched",
    "downgrade_hands_back_offsets": "close() with upgrade_from before 4.3 writes the changelog offsets to the task's "
                                    ".checkpoint and the positions to .position, and keeps no offsets of its own",
    "downgrade_keeps_offsets": "after a crash at any step of the downgrade and a restart, every offset (in the store "
                               "or in the files) and every key is there",
    # -- closed stores, processors, names on disk (closing.py) --
    "checkpoint_on_close": "closing a task writes its .checkpoint from the store's committed_offset of every changelog "
                           "partition, also for a store that manages offsets (the assignor reads it for tasks not "
                           "running here)",
    "offsets_cache_from_disk": "the offsets cache built on start gives every task directory's offset sum and lag: "
                               "from its .checkpoint without opening its store, else from its store, opened once",
    "processor_commit_refused": "a commit through a processor's view of the store is refused (CommitFromProcessorError)"
                                " and commits nothing, nor does flush(); the task commit the processor requests "
                                "through its context commits its writes",
    "store_directory": "the store writes nothing outside [state.dir]/[application.id]/[task.id]/rocksdb/[store.name] "
                       "(the path written is reported)",
}

# About the store's calls themselves (as in the conformance suite): after one, the scenario stops.
GUARD_CHECKS = ("store_raised", "store_return_type", "store_hang", "store_error")

# The optional parts of the protocol some scenarios check (``harness/store.Capabilities`` fields): what
# a store that declares it lacks one is not checked for (the verdict's ``not_checked``), and what a
# store that does not declare it but fails is told to do (a finding's detail ends with it; "": nothing).
CAPABILITIES: dict[str, tuple[str, str]] = {
    "commit_durable": (
        "that the last commit survives a crash (the store declares its commits durable only once flushed; after "
        "a crash it may hold any commit since its last clean close, data and offsets together, and the changelog "
        "restores the rest): committed_durable, and the offsets scenarios that crash right after a commit "
        "(offsets_none, flush_noop, closing_checkpoint)",
        # No hint: these scenarios check other promises; they only need the last commit to survive their crash.
        ""),
    "legacy_offsets_import": (
        "the import of legacy .checkpoint/.position offsets on upgrade (the store declares it has no legacy "
        "offsets files to import): migration_*, malformed_offsets_file",
        "A store that manages offsets imports its offsets from the task's legacy .checkpoint and its .position "
        "when it opens on a directory that still has them, then removes them (KIP-1035, as Kafka's RocksDB "
        "store does; harness/store.py, 'Upgrade and downgrade'). A store that never kept those files (one "
        "written with offset management from the start) declares it: capabilities() returning "
        "Capabilities(legacy_offsets_import=False)."),
    "legacy_downgrade": (
        "the downgrade with upgrade_from (the store declares it has no older format to go back to): "
        "downgrade_*",
        "With StoreContext.upgrade_from before 4.3, close() writes the changelog offsets to the task's "
        ".checkpoint and the positions to .position and keeps none (KIP-1035's downgrade, as Kafka's RocksDB "
        "store does; harness/store.py, 'Upgrade and downgrade'). A store with no older format to go back to "
        "declares it: capabilities() returning Capabilities(legacy_downgrade=False)."),
    "several_changelog_partitions": (
        "several changelog partitions (the store declares it is a task's store, fed by its own changelog "
        "partition only): commits name that partition alone; partitions_committed_together, partitions_one_commit, "
        "commits naming only some partitions (partitions_reopen) and the legacy files of several partitions "
        "(migration_*, malformed_offsets_file, downgrade_*) are not checked",
        "A store may be fed by several changelog partitions (a global store, KIP-1035): commit() takes an offset "
        "for each partition of StoreContext.changelogs and committed_offset() answers for each "
        "(harness/store.py, 'Several changelog partitions'). A task's store, fed by its own changelog partition "
        "only, declares it: capabilities() returning Capabilities(several_changelog_partitions=False)."),
}
