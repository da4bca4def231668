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
from eos_harness.stores import StoreSpec, register_opt_in, register_prefix

__all__ = ["KAFKA_STORES", "KafkaStoreInfo"]

SYSTEM = "kafka-streams"
_KINDS = {"rocksdb": "Stores.persistentKeyValueStore (RocksDB)", "memory": "Stores.inMemoryKeyValueStore"}


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
            + "; in a JVM, crash points by Byteman")
    register_opt_in(StoreSpec(name, "store", what, partial(KafkaStreamsStore, version, kind, transactional),
                             lending=lending(version)))
    KAFKA_STORES[name] = KafkaStoreInfo(version, kind, transactional)


register_prefix(PREFIX, java_store_spec)  # a user's Java store, jvm:CLASS@PATH
_register("4.4.0", "rocksdb", True)
_register("4.4.0", "rocksdb", False)
_register("4.4.0", "memory", True)
_register("4.4.0", "memory", False)
_register("4.3.1", "rocksdb", False)
_register("4.3.1", "memory", False)
