"""Kafka Streams' own stores under their public names (``kafka-streams-4.4.0-rocksdb-tx`` …).

They are stores like the built-in ones (``verify NAME`` runs every store suite on them), kept out of the
campaigns' default store lists (a JVM per store process): name them to run them.
"""

from __future__ import annotations

from functools import partial

from eos_harness.kafka_streams import points  # noqa: F401  (declares the crash points inside Kafka's code)
from eos_harness.kafka_streams.lending import lending
from eos_harness.kafka_streams.store import KafkaStreamsStore
from eos_harness.kafka_streams.user import PREFIX, java_store_spec
from eos_harness.kafka_streams.window import KafkaStreamsSessionStore, KafkaStreamsWindowStore
from eos_harness.stores import StoreSpec, register_opt_in, register_prefix

__all__ = ["KAFKA_STORES", "KafkaStoreInfo"]

SYSTEM = "kafka-streams"
_KINDS = {"rocksdb": "Stores.persistentKeyValueStore (RocksDB)", "memory": "Stores.inMemoryKeyValueStore",
          "rocksdb-window": "Stores.persistentWindowStore (RocksDB, a database per segment)",
          "memory-window": "Stores.inMemoryWindowStore",
          "rocksdb-session": "Stores.persistentSessionStore (RocksDB, a database per segment; judged through "
                             "zero-length sessions)",
          "memory-session": "Stores.inMemorySessionStore (judged through zero-length sessions)"}


class KafkaStoreInfo:
    """What ``stores --json`` says of a Kafka Streams store beyond every store's fields."""

    def __init__(self, version: str, kind: str, transactional: bool) -> None:
        self.system, self.version, self.store_kind, self.transactional = SYSTEM, version, kind, transactional


KAFKA_STORES: dict[str, KafkaStoreInfo] = {}


def _register(version: str, kind: str, transactional: bool) -> None:
    name = f"kafka-streams-{version}-{kind}{'-tx' if transactional else ''}"
    what = (f"Kafka Streams {version}'s own {_KINDS[kind]}, "
            + ("enable.transactional.statestores=true (KIP-892)" if transactional
               else "enable.transactional.statestores=false" if version >= "4.4" else "before KIP-892 (KIP-1035 offsets)")
            + "; in a JVM, crash points woven into Kafka's commit")
    if kind.endswith("-window"):  # a window store (its factory takes the window's arguments)
        factory, spec_kind = partial(KafkaStreamsWindowStore, version, kind.removesuffix("-window"), transactional), "window-store"
    elif kind.endswith("-session"):  # a session store, judged by the window suite (KafkaStreamsSessionStore)
        factory, spec_kind = partial(KafkaStreamsSessionStore, version, kind.removesuffix("-session"), transactional), "window-store"
    else:
        factory, spec_kind = partial(KafkaStreamsStore, version, kind, transactional), "store"
    register_opt_in(StoreSpec(name, spec_kind, what, factory, lending=lending(version)))
    KAFKA_STORES[name] = KafkaStoreInfo(version, kind, transactional)


register_prefix(PREFIX, java_store_spec)  # a user's Java store, jvm:CLASS@PATH
_register("4.4.0", "rocksdb", True)
_register("4.4.0", "rocksdb", False)
_register("4.4.0", "memory", True)
_register("4.4.0", "memory", False)
_register("4.3.1", "rocksdb", False)
_register("4.3.1", "memory", False)
for _version, _transactional in (("4.4.0", True), ("4.4.0", False), ("4.3.1", False)):
    for _kind in ("rocksdb-window", "memory-window", "rocksdb-session", "memory-session"):
        _register(_version, _kind, _transactional)
