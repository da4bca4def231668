"""The EOS task lifecycle against a real Kafka broker: a crash in every window, the unsafe legacy
variant and a mutant caught, a zombie fenced by Kafka's transaction coordinator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eos_harness.runtime import P_BEFORE_EOS, P_CLOSE_MID
from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault

pytestmark = pytest.mark.kafka


def checks(result: dict) -> set[str]:
    return {v["check"] for v in result["violations"]}


@pytest.mark.parametrize("point", LIFECYCLE_POINTS)
def test_a_transactional_store_keeps_eos_on_kafka_through_a_crash_in_every_window(eos_kafka_cluster, point, tmp_path):
    hit = 1 if point == P_CLOSE_MID else 2
    result = run_scenario(Scenario("rocksdb-indexed", "counter", 3, (Fault(point, hit),), broker=eos_kafka_cluster.spec), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == [point]
    assert result["broker"].startswith("kafka://127.0.0.1:")


def test_the_legacy_store_without_the_wipe_keeps_uncommitted_writes_on_kafka(eos_kafka_cluster, tmp_path):
    result = run_scenario(Scenario("rocksdb-legacy-nowipe", "many-keys", 2, (Fault("task.process.mid_batch", 15),),
                                   broker=eos_kafka_cluster.spec), tmp_path)
    assert result["verdict"] == "fail"
    assert "no_uncommitted_survives" in checks(result)


def test_a_mutant_store_is_caught_on_kafka(eos_kafka_cluster, tmp_path):
    result = run_scenario(Scenario("mutant-split-offsets-write", "counter", 3,
                                   (Fault("store.commit.between_data_and_offsets", 2),), broker=eos_kafka_cluster.spec), tmp_path)
    assert result["verdict"] == "fail"
    assert "atomic_commit" in checks(result)


def test_a_zombie_is_fenced_by_kafka_and_none_of_its_writes_is_read_committed(eos_kafka_cluster, tmp_path):
    result = run_scenario(Scenario("rocksdb-indexed", "counter", 9, (Fault(P_BEFORE_EOS, 2, "freeze"),),
                                   broker=eos_kafka_cluster.spec), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    events = [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]
    zombie = next(e["instance"] for e in events if e["type"] == "frozen")
    fenced = [e for e in events if e["type"] == "fenced" and e["instance"] == zombie]
    assert fenced, "the woken zombie was not fenced"
    # The zombie had processed 20 records past its last commit: their outputs appear once, from the new instance.
    output = next(e for e in events if e["type"] == "output")["records"]
    assert len(output) == 120 and len({tuple(r) for r in output}) == 120
