"""The mutants of Kafka Streams' own stores: Kafka's store (4.4.0, transactional: the key-value RocksDB store, or
the in-memory session store, a window mutant judged by the window suite) with one of its classes changed by a
Byteman rule (:mod:`.mutant_rules`) to re-create a real kind of mistake, each expected to be caught by the check
that names it, as the built-in Python mutants are (``caught_by``, the check naming the mistake first). Like Kafka's stores they run only when named (``eos-harness verify NAME``), never in a campaign's
defaults; ``eos-harness stores --json`` lists them (kind ``mutant``, ``system`` ``kafka-streams``).
"""

from __future__ import annotations

from functools import partial

from eos_harness.kafka_streams.catalogue import KAFKA_STORES, KafkaStoreInfo
from eos_harness.kafka_streams.lending import lending
from eos_harness.kafka_streams.mutant_rules import MUTANT_RULES, VERSION
from eos_harness.kafka_streams.store import KafkaStreamsStore
from eos_harness.kafka_streams.window import KafkaStreamsSessionStore
from eos_harness.stores import StoreSpec, register_opt_in

__all__ = ["KAFKA_MUTANTS"]

BASE = (VERSION, True)  # kafka-streams-4.4.0-…-tx: every mistake lies in a transactional store's commit path
# mistake: the checks expected to catch it, the one naming its mistake first (verify --list-checks lists the
# mutant under it; tests/test_kafka_streams_mutants.py holds each to it)
CAUGHT_BY = {
    "putall-skips-buffer": ("read_committed_isolation", "clean_close_durable"),
    "read-committed-sees-staged": ("read_committed_isolation",),
    "offsets-flushed-alone": ("atomic_commit",),
    "commit-records-last-offset": ("committed_offset_durable",),
    "closed-marker-in-buffer": ("clean_close_durable", "recover_trust"),
    "removals-lost-at-commit": ("tombstone_deletes_window",),
}

KAFKA_MUTANTS: dict[str, str] = {}  # store name: mistake
for _rule in MUTANT_RULES:
    _version, _transactional = BASE
    _kind = _rule.store
    _name = f"mutant-kafka-streams-{_version}-{_kind}{'-tx' if _transactional else ''}-{_rule.mistake}"
    _caught_by = CAUGHT_BY[_rule.mistake]
    _what = f"Kafka Streams {_version}'s {_kind} store (transactional), mutated in {_rule.java}: {_rule.meaning}"
    if _kind.endswith("-session"):  # a session store: judged by the window suite (KafkaStreamsSessionStore)
        register_opt_in(StoreSpec(
            _name, "window-mutant", _what, partial(KafkaStreamsSessionStore, _version, _kind.removesuffix("-session"),
                                                   _transactional, mutant=_rule.mistake),
            _caught_by, suite="windows", lending=lending(_version, agent=True)))
    else:
        register_opt_in(StoreSpec(
            _name, "mutant", _what, partial(KafkaStreamsStore, _version, _kind, _transactional, mutant=_rule.mistake),
            _caught_by, suite="conformance", lending=lending(_version, agent=True)))
    KAFKA_STORES[_name] = KafkaStoreInfo(_version, _kind, _transactional)
    KAFKA_MUTANTS[_name] = _rule.mistake
