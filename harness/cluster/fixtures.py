"""pytest fixtures for a real Kafka: ``eos_kafka_cluster``, one single-broker ``LocalKafka`` per test session.

Registered by the harness's pytest plugin, so every suite shares one broker; it is stopped at the
end of the session whatever the tests did (and killed at exit if the session itself dies).
"""

from __future__ import annotations

import pytest
from eos_harness.cluster.local import LocalKafka


@pytest.fixture(scope="session")
def eos_kafka_cluster(tmp_path_factory):
    """A running one-node Kafka (KRaft) on 127.0.0.1, shared by the session's tests."""
    cluster = LocalKafka(brokers=1, directory=tmp_path_factory.mktemp("kafka"))
    with cluster:
        yield cluster
