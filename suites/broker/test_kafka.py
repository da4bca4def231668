"""The broker contract on the Kafka adapter, against a real broker (``LocalKafka``, one per session)."""

from __future__ import annotations

import pytest
from eos_harness.broker import BrokerError, connect
from eos_harness.suites.broker.contract import *  # noqa: F403
from eos_harness.suites.broker.contract import fresh_topic

pytestmark = pytest.mark.kafka


@pytest.fixture
def broker(eos_kafka_cluster):
    with connect(eos_kafka_cluster.spec) as b:
        yield b


def test_writing_to_a_missing_topic_names_it(broker):
    with pytest.raises(BrokerError, match="nowhere-"):
        broker.read_committed(__import__("eos_harness.store").store.TopicPartition("nowhere-" + fresh_topic(broker), 0))


def test_the_kafka_spec_points_at_the_local_broker(eos_kafka_cluster):
    assert eos_kafka_cluster.bootstrap_servers.startswith("127.0.0.1:")
    assert eos_kafka_cluster.spec == f"kafka://{eos_kafka_cluster.bootstrap_servers}"


def test_the_broker_runs_the_kafka_version_the_harness_picked(eos_kafka_cluster):
    from eos_harness.cluster.local import kafka_version, running_version, version_of

    assert eos_kafka_cluster.kafka_version == running_version() == version_of(eos_kafka_cluster.spec)
    if running_version() == kafka_version():  # the pinned jars ($EOS_KAFKA_VERSION or 4.4.0), not a KAFKA_HOME
        log = eos_kafka_cluster.nodes[0].log.read_text(errors="replace")
        assert f"Kafka version: {kafka_version()} " in log  # what the broker itself says at start
