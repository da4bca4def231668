"""The settings a Kafka node is started with, on local JVMs (``LocalKafka``) and in containers
(``DockerKafka``): both clusters give their combined broker+controller nodes the same settings the
suites and their faults rely on. Nothing is started: no Java, no Docker."""

from __future__ import annotations

from pathlib import Path

import pytest
from eos_harness.cluster.docker.kafka import DockerKafka, DockerNode, kafka_env
from eos_harness.cluster.local import JVM_PERFORMANCE_OPTIONS, LocalKafka, Node


def _local(brokers: int, tmp_path: Path, overrides: dict[str, str] | None = None) -> LocalKafka:
    cluster = LocalKafka(brokers=brokers, directory=tmp_path, overrides=overrides)
    cluster.nodes = [Node(i + 1, 9000 + i, 9100 + i, tmp_path / f"node-{i + 1}") for i in range(brokers)]
    return cluster


def _docker(brokers: int, overrides: dict[str, str] | None = None) -> DockerKafka:
    cluster = DockerKafka(brokers=brokers, overrides=overrides)
    cluster.nodes = [DockerNode(i + 1, 9000 + i, 9100 + i) for i in range(brokers)]
    return cluster


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize(("brokers", "replicas", "min_isr"), [(1, "1", "1"), (2, "2", "1"), (3, "3", "2"), (5, "3", "2")])
def test_both_clusters_give_a_node_the_same_replication_and_transaction_settings(tmp_path, brokers, replicas, min_isr):
    local, docker = _local(brokers, tmp_path), _docker(brokers)
    for node_id in range(1, brokers + 1):
        on_jvm = _properties(local._properties(local.node(node_id)))
        in_container = docker._env(docker.node(node_id))
        shared = {k: v for k, v in on_jvm.items() if kafka_env({k: v}).keys() <= in_container.keys()}
        the_same = {k: v for k, v in shared.items() if k != "log.dirs"}
        assert kafka_env(the_same) == {k: v for k, v in in_container.items() if k in kafka_env(the_same)}
        assert len(the_same) >= 25
        assert on_jvm.keys() - shared.keys() == {  # what only a node on a local JVM is given
            "log.segment.bytes", "log.retention.hours", "num.recovery.threads.per.data.dir",
            "socket.request.max.bytes", "controlled.shutdown.enable"}
        assert shared["log.dirs"] == str(tmp_path / f"node-{node_id}" / "data")
        assert in_container["KAFKA_LOG_DIRS"] == "/tmp/kraft-combined-logs"
        for key in ("default.replication.factor", "offsets.topic.replication.factor",
                    "transaction.state.log.replication.factor"):
            assert on_jvm[key] == replicas
        assert on_jvm["min.insync.replicas"] == on_jvm["transaction.state.log.min.isr"] == min_isr
        assert on_jvm["node.id"] == str(node_id) and on_jvm["process.roles"] == "broker,controller"
        assert on_jvm["listeners"] == f"PLAINTEXT://127.0.0.1:{8999 + node_id},CONTROLLER://127.0.0.1:{9099 + node_id}"
        assert on_jvm["controller.quorum.voters"] == ",".join(
            f"{i}@127.0.0.1:{9099 + i}" for i in range(1, brokers + 1))
        assert on_jvm["transaction.abort.timed.out.transaction.cleanup.interval.ms"] == "1000"


def test_overrides_win_on_both_clusters(tmp_path):
    overrides = {"num.io.threads": "8", "log.retention.hours": "1", "message.max.bytes": "2048"}
    on_jvm = _properties(_local(1, tmp_path, overrides)._properties(Node(1, 9000, 9100, tmp_path / "node-1")))
    docker = _docker(1, overrides)
    in_container = docker._env(docker.node(1))
    for key, value in overrides.items():
        assert on_jvm[key] == value
    assert in_container["KAFKA_NUM_IO_THREADS"] == "8" and in_container["KAFKA_MESSAGE_MAX_BYTES"] == "2048"


def test_a_container_runs_its_jvm_with_the_local_nodes_flags_and_heap():
    docker = _docker(1)
    docker.heap = "384m"
    env = docker._env(docker.node(1))
    assert env["KAFKA_HEAP_OPTS"] == "-Xmx384m -Xms128m"
    assert env["KAFKA_JVM_PERFORMANCE_OPTS"].split() == list(JVM_PERFORMANCE_OPTIONS)
    assert env["CLUSTER_ID"] == docker.cluster_id
