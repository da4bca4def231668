"""Real Apache Kafka clusters for the harness: local JVM brokers in KRaft mode (``LocalKafka``).

:mod:`.local` registers a jar bundle per Kafka release it starts (``kafka-4.4.0``, the default
:data:`KAFKA_VERSION`, and ``kafka-3.9.1``, picked with ``EOS_KAFKA_VERSION=3.9.1``), fetched once from
Maven Central by ``python -m eos_harness.jars``. ``KAFKA_HOME`` (an installed distribution) is used
instead when set.
"""

from __future__ import annotations

from eos_harness.cluster.local import KAFKA_BUNDLE, KAFKA_VERSION, ClusterError, LocalKafka, cluster_for

__all__ = ["KAFKA_BUNDLE", "KAFKA_VERSION", "ClusterError", "LocalKafka", "cluster_for"]


def __getattr__(name: str):  # DockerKafka (eos_harness.cluster.docker), imported on first use
    if name == "DockerKafka":
        from eos_harness.cluster.docker import DockerKafka

        return DockerKafka
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
