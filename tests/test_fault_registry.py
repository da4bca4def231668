"""Fault kinds live in one registry (``eos_harness.faults.kinds``): the schedule parser, the
lifecycle driver and the planners read it, so a new kind is one entry. The plans the registry
feeds are the same, seed for seed, as before it existed."""

from __future__ import annotations

import hashlib
import itertools

from eos_harness.suites.lifecycle.plan import plan
from eos_harness.suites.spark.plan import plan as spark_plan

STORES = ["memory", "rocksdb-indexed", "rocksdb-secondary", "mutant-marker-deleted-early", "rocksdb-legacy-nowipe"]
WORKLOADS = ["counter", "tombstones", "range-aggregate", "put-all", "large-values", "many-keys"]
KAFKA_FAULTS = ["broker-kill", "broker-pause", "coordinator-kill", "txn-timeout"]


def fingerprint(scenarios) -> str:
    return hashlib.sha256("\n".join(s.repro() for s in scenarios).encode()).hexdigest()[:16]


def test_the_same_seed_gives_the_same_plan_as_before_the_registry():
    # Computed from the plans before fault kinds moved into the registry (first 300 scenarios'
    # replay commands): a change here changes what every existing seed replays.
    assert fingerprint(itertools.islice(plan(7, STORES, WORKLOADS), 300)) == "fe805f31817036b7"
    on_a_cluster = plan(7, STORES, WORKLOADS, broker="kafka://127.0.0.1:1", broker_faults=KAFKA_FAULTS,
                        repro_broker="kafka-local")
    assert fingerprint(itertools.islice(on_a_cluster, 300)) == "8871250d7b91f07d"
    on_a_remote_kafka = plan(7, STORES, WORKLOADS, broker="kafka://127.0.0.1:1", broker_faults=["txn-timeout"])
    assert fingerprint(itertools.islice(on_a_remote_kafka, 300)) == "e65cc805f9e3e06d"
    assert fingerprint(spark_plan(7, None)) == "2fcc2e13d1ea9880"
