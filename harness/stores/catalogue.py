"""Registers every built-in store, mutant and unsafe runtime variant under its public name."""

from __future__ import annotations

from functools import partial

from eos_harness.stores import StoreSpec, register
from eos_harness.stores.indexed import IndexedRocksStore
from eos_harness.stores.legacy import LegacyRocksStore
from eos_harness.stores.memory import MemoryStore
from eos_harness.stores.secondary import SecondaryRocksStore

register(StoreSpec("memory", "store", "in-memory, not persistent (restored from the changelog)", MemoryStore))
register(StoreSpec("rocksdb-indexed", "store",
                   "KIP-892: uncommitted writes in an in-memory overlay; data+offsets in one atomic batch",
                   IndexedRocksStore))
register(StoreSpec("rocksdb-secondary", "store",
                   "KIP-844: uncommitted writes in a temporary RocksDB, commit marker, chunked copy (4 per chunk)",
                   partial(SecondaryRocksStore, copy_chunk=4)))
register(StoreSpec("rocksdb-legacy", "store",
                   "non-transactional RocksDB (before KIP-844); offsets in the task's .checkpoint",
                   LegacyRocksStore))
register(StoreSpec("rocksdb-legacy-nowipe", "unsafe-runtime",
                   "legacy store under EOS that trusts its contents after a crash instead of wiping them (unsafe)",
                   LegacyRocksStore, base="rocksdb-legacy", runtime={"legacy_wipe": False}))

from eos_harness.kafka_streams import catalogue as _kafka_streams  # noqa: E402,F401  (Kafka Streams' own stores)
from eos_harness.kafka_streams import mutants as _kafka_streams_mutants  # noqa: E402,F401  (their mutants)
from eos_harness.stores import (  # noqa: E402,F401  (registers the mutants, window stores and window mutants)
                   migration_mutants,  # noqa: E402,F401  (the KIP-1035 upgrade/downgrade mutants)
                   mutants,
                   offsets_mutants,  # noqa: E402,F401  (the KIP-1035 several-partitions and flush mutants)
                   window_catalogue,
)
