"""Kafka on Docker: ``DockerKafka`` (the ``LocalKafka`` interface, one container per node, through
testcontainers with host networking), the Kafka image built offline, and the Docker engine.

One module per job: :mod:`.engine` (a client for the engine, or Debian's ``dockerd`` started for
a block), :mod:`.image` (the offline image build), :mod:`.kafka` (the cluster),
:mod:`.containers` (labels and removal of containers whose runner died), ``__main__`` (the
command line: ``python -m eos_harness.cluster.docker build|cleanup``).
"""

from __future__ import annotations

from eos_harness.cluster.docker.containers import remove_orphans
from eos_harness.cluster.docker.engine import DockerError, docker_client, ensure_dockerd
from eos_harness.cluster.docker.image import (
    BUILD_COMMAND,
    DEFAULT_IMAGE,
    KAFKA_VERSION,
    LOCAL_IMAGE,
    BuildReport,
    build_image,
)
from eos_harness.cluster.docker.kafka import DockerKafka, kafka_env

__all__ = [
    "BUILD_COMMAND",
    "DEFAULT_IMAGE",
    "KAFKA_VERSION",
    "LOCAL_IMAGE",
    "BuildReport",
    "DockerError",
    "DockerKafka",
    "build_image",
    "docker_client",
    "ensure_dockerd",
    "kafka_env",
    "remove_orphans",
]
