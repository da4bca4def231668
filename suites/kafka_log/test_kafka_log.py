"""The Kafka log suite's pytest entry (``-m kafka``): the transactional workload against a real broker
(the session's ``eos_kafka_cluster``, one KRaft node on 127.0.0.1), judged by the log checks. The
real read_committed consumer passes; a deliberately broken read_uncommitted one fails with aborted
reads, which shows the checks can fail."""

from __future__ import annotations

import pytest
from eos_harness.suites.kafka_log.runner import run_workload


@pytest.mark.kafka
def test_the_real_read_committed_consumer_passes_on_a_real_broker(eos_kafka_cluster):
    result = run_workload(eos_kafka_cluster.bootstrap_servers, seed=11, transactions=40)
    report = result.to_json()
    assert report["verdict"] == "pass", report["anomalies"][:5]
    # The workload is not trivial: both outcomes, aborted records in the log between committed ones.
    assert report["transactions"].get("committed", 0) > 5 and report["transactions"].get("aborted", 0) > 5
    committed = sum(len(t.records) for t in result.transactions if t.outcome == "committed")
    assert report["records_read"] == committed < report["records_sent"]
    assert all(e["position"] == e["end"] == e["stable"] for e in report["ends"])


@pytest.mark.kafka
def test_a_broken_read_uncommitted_consumer_fails_with_aborted_reads_on_a_real_broker(eos_kafka_cluster):
    result = run_workload(eos_kafka_cluster.bootstrap_servers, seed=11, transactions=40, isolation="read_uncommitted")
    report = result.to_json()
    assert report["verdict"] == "fail"
    aborted = sum(len(t.records) for t in result.transactions if t.outcome == "aborted")
    assert report["summary"] == {"aborted_read": aborted}
