"""Registers the built-in window stores and window mutants (kinds ``window-store`` and ``window-mutant``);
:mod:`eos_harness.stores.registry` resolves a window store name or a user's window store factory."""

from __future__ import annotations

from eos_harness.stores import StoreSpec, register
from eos_harness.stores.window_memory import memory_window, memory_window_kip428, memory_window_txn
from eos_harness.stores.window_rocksdb import rocksdb_window, rocksdb_window_txn

__all__ = ["SUITE_ONLY"]

for name, description, factory in (
    ("memory-window", "KIP-428 in-memory window store as Kafka shipped it: a segment per ms, retention only, "
                      "stream time rebuilt on restore", memory_window),
    ("memory-window-kip428", "KIP-428 in-memory window store as first proposed: the store drops late writes (grace)",
     memory_window_kip428),
    ("memory-window-txn", "transactional in-memory window store (kip428-proposal semantics): staged writes, "
                          "read-committed view", memory_window_txn),
    ("rocksdb-window", "persistent RocksDB window store, segments of half the retention dropped whole, not "
                       "transactional", rocksdb_window),
    ("rocksdb-window-txn", "transactional RocksDB window store: data, stream time and offsets in one batch (KIP-892)",
     rocksdb_window_txn),
):
    register(StoreSpec(name, "window-store", description, factory))

# -- window stores under the EOS task runtime ---------------------------------------------------------

# Window mutants whose mistake only the window suite can see: no task ever creates a store with
# invalid arguments, nor deletes a window (the windowed workloads only count), nor holds an iterator
# open across a commit, so a chaos campaign leaves them out.
SUITE_ONLY = ("mutant-window-validation-grace", "mutant-window-tombstone-wrong-window", "mutant-window-lazy-iterator")


from eos_harness.stores import window_mutants  # noqa: E402,F401  (registers the window mutants)
