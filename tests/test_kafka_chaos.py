"""A short chaos campaign on a local Kafka through the CLI: the Kafka faults come first and are all
hit (then the early block: each store's own points and the fault windows, mid-batch by the 17th), the transactional store passes every scenario, the unsafe legacy variant and a mutant are
caught, and the command exits 0."""

from __future__ import annotations

import json

import pytest
from eos_harness.cluster.local import kafka_version

KAFKA_FAULTS = {"broker-kill", "broker-pause", "coordinator-kill", "txn-timeout"}


@pytest.mark.kafka
def test_a_short_chaos_campaign_on_kafka_covers_the_broker_faults_and_judges_every_store(cli, tmp_path):
    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--broker", "kafka-local", "--stores", "rocksdb-indexed,rocksdb-legacy-nowipe,mutant-split-offsets-write",
               "--scenarios", "17", "--seed", "7", "--json", out, "--out", tmp_path / "runs")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    campaign = json.loads(out.read_text())
    summary = campaign["summary"]
    assert campaign["broker"] == "kafka-local" and set(campaign["kafka_faults"]) == KAFKA_FAULTS
    assert summary["total"] == 17 and summary["unexpected"] == []
    assert set(summary["points_hit"]) >= KAFKA_FAULTS
    assert {"task.process.mid_batch", "task.commit.before_eos", "store.commit.between_data_and_offsets"} <= set(
        summary["points_hit"])
    stores = summary["stores"]
    assert stores["rocksdb-indexed"]["status"] == "ok" and stores["rocksdb-indexed"]["failed"] == 0
    assert stores["rocksdb-legacy-nowipe"]["status"] == "caught"
    assert "no_uncommitted_survives" in stores["rocksdb-legacy-nowipe"]["checks"]
    assert stores["mutant-split-offsets-write"]["status"] == "caught"
    # A broker kill or pause hits every client of the cluster: such a scenario ran alone.
    spans = [(s["started_at"], s["started_at"] + s["seconds"], s) for s in campaign["scenarios"]]
    for start, end, scenario in spans:
        if any(f.split("@")[0] in {"broker-kill", "broker-pause", "coordinator-kill"} for f in scenario["schedule"]):
            assert not [o for b, e, o in spans if o is not scenario and b < end and e > start], scenario["schedule"]
    # Every scenario ran on Kafka and replays with --broker kafka-local.
    assert all(s["broker"].startswith("kafka://127.0.0.1:") and "--broker kafka-local" in s["repro"]
               for s in campaign["scenarios"])
    assert {s["kafka_version"] for s in campaign["scenarios"]} == {kafka_version()}  # the brokers' release
