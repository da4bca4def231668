"""A three-broker Kafka cluster (replication factor 3, ``min.insync.replicas=2``, transaction state
log RF 3 / min ISR 2): the transaction coordinator of the task's id is killed while a commit is in
flight and the commit moves to a new coordinator; a task frozen past ``transaction.timeout.ms`` is
fenced when it wakes. EOS holds through both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eos_harness.cluster import LocalKafka
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import parse_schedule

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory):
    with LocalKafka(brokers=3, directory=tmp_path_factory.mktemp("kafka3"), heap="384m") as cluster:
        yield cluster


def passing_history(kafka3: LocalKafka, store: str, records: int, schedule: str, tmp_path: Path) -> list[dict]:
    """Run ``store`` (workload ``counter``) on the three brokers under ``schedule``; the run must pass:
    its history's events."""
    result = run_scenario(Scenario(store, "counter", records, parse_schedule(schedule), broker=kafka3.spec), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    return [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]


def test_three_brokers_replicate_the_transaction_log_with_min_isr_two(kafka3):
    props = (kafka3.node(1).config).read_text()
    for line in ("default.replication.factor=3", "min.insync.replicas=2", "transaction.state.log.replication.factor=3",
                 "transaction.state.log.min.isr=2", "offsets.topic.replication.factor=3"):
        assert line in props
    assert len(kafka3.bootstrap_servers.split(",")) == 3
    assert all(address.startswith("127.0.0.1:") for address in kafka3.bootstrap_servers.split(","))


def test_the_coordinator_killed_mid_commit_hands_the_transaction_to_a_new_coordinator(kafka3, tmp_path):
    events = passing_history(kafka3, "rocksdb-indexed", 4, "coordinator-kill@2", tmp_path)
    fault = next(e for e in events if e["type"] == "broker_fault")
    assert fault["fault"] == "coordinator-kill" and fault["in_flight"] and fault["brokers"] == 3, fault
    # The killed broker is back, and the transactional id is now coordinated by another broker.
    assert kafka3.pid(fault["node"]) is not None
    transactional_id = f"{events[0]['application_id']}-0_0"
    assert kafka3.transaction_coordinator(transactional_id) != fault["node"]
    assert any(e["type"] == "done" for e in events)


def test_a_task_frozen_past_its_transaction_timeout_is_fenced_on_three_brokers(kafka3, tmp_path):
    events = passing_history(kafka3, "rocksdb-secondary", 5, "txn-timeout@3", tmp_path)
    stalled = next(e for e in events if e["type"] == "stalled")
    after = [e["type"] for e in events if e["instance"] == stalled["instance"] and e["seq"] > stalled["seq"]
             and e["type"] in ("fenced", "aborted", "commit")]
    assert after == ["fenced"], after
