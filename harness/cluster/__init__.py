"""Real Apache Kafka clusters for the harness: local JVM brokers in KRaft mode (``LocalKafka``).

:mod:`.local` registers the ``kafka`` jar bundle (the broker at :data:`KAFKA_VERSION`), fetched once
from Maven Central by ``python -m eos_harness.jars``. ``KAFKA_HOME`` (an installed distribution) is
used instead when set.
"""

from __future__ import annotations

from eos_harness.cluster.local import KAFKA_BUNDLE, KAFKA_VERSION, ClusterError, LocalKafka, cluster_for

__all__ = ["KAFKA_BUNDLE", "KAFKA_VERSION", "ClusterError", "LocalKafka", "cluster_for"]


def __getattr__(name: str):  # DockerKafka (eos_harness.cluster.docker), imported on first use
    if name == "DockerKafka":
        from eos_harness.cluster.docker import DockerKafka

        return DockerKafka
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
