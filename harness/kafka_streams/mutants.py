"""The mutants of Kafka Streams' own stores: Kafka's store with one of its classes changed by a Byteman
rule (:mod:`.mutant_rules`) to re-create a real kind of mistake, each expected to be caught by the check
that names it, as the built-in Python mutants are (``caught_by``, the check naming the mistake first). Like Kafka's stores they run only when named (``eos-harness verify NAME``), never in a campaign's
defaults; ``eos-harness stores --json`` lists them (kind ``mutant``, ``system`` ``kafka-streams``).
"""

from __future__ import annotations

from functools import partial

from eos_harness.kafka_streams.catalogue import KAFKA_STORES, KafkaStoreInfo
from eos_harness.kafka_streams.lending import lending
from eos_harness.kafka_streams.mutant_rules import MUTANT_RULES, VERSION
from eos_harness.kafka_streams.store import KafkaStreamsStore
from eos_harness.stores import StoreSpec, register_opt_in

__all__ = ["KAFKA_MUTANTS"]

BASE = (VERSION, "rocksdb", True)  # kafka-streams-4.4.0-rocksdb-tx: every mistake lies in its commit path
# mistake: the checks expected to catch it, the one naming its mistake first (verify --list-checks lists the
# mutant under it; tests/test_kafka_streams_mutants.py holds each to it)
CAUGHT_BY = {
    "putall-skips-buffer": ("read_committed_isolation", "clean_close_durable"),
    "read-committed-sees-staged": ("read_committed_isolation",),
    "offsets-flushed-alone": ("atomic_commit",),
    "commit-records-last-offset": ("committed_offset_durable",),
    "closed-marker-in-buffer": ("clean_close_durable", "recover_trust"),
}

KAFKA_MUTANTS: dict[str, str] = {}  # store name: mistake
for _rule in MUTANT_RULES:
    _version, _kind, _transactional = BASE
    _name = f"mutant-kafka-streams-{_version}-{_kind}{'-tx' if _transactional else ''}-{_rule.mistake}"
    _caught_by = CAUGHT_BY[_rule.mistake]
    register_opt_in(StoreSpec(
        _name, "mutant", f"Kafka Streams {_version}'s {_kind} store (transactional), mutated in {_rule.java}: "
                         f"{_rule.meaning}",
        partial(KafkaStreamsStore, _version, _kind, _transactional, mutant=_rule.mistake), _caught_by,
        suite="conformance", lending=lending(_version, agent=True)))
    KAFKA_STORES[_name] = KafkaStoreInfo(_version, _kind, _transactional)
    KAFKA_MUTANTS[_name] = _rule.mistake
