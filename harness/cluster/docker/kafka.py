"""``DockerKafka``: the ``LocalKafka`` interface on Docker, through testcontainers (host networking).

``with DockerKafka(brokers=1, image=...) as kafka: kafka.bootstrap_servers`` runs each KRaft node
(broker and controller in one) in its own container with ``network_mode=host``; every listener
binds and advertises 127.0.0.1 only, on ports chosen free on the host. The image is configured
the official ``apache/kafka`` way, through ``KAFKA_*`` environment variables (``KAFKA_NODE_ID`` ->
``node.id``, ``KAFKA_TRANSACTION_STATE_LOG_MIN_ISR`` -> ``transaction.state.log.min.isr``, ...)
and ``CLUSTER_ID``; so ``image`` may be the official one (the default, ``DEFAULT_IMAGE``) or
the equivalent built offline here (``LOCAL_IMAGE``, see :mod:`eos_harness.cluster.docker.image`).

Nodes for faults, as on ``LocalKafka``: :meth:`node_ids`, :meth:`pid` (the host pid of the node's
JVM), :meth:`kill_node` (``docker kill -s KILL``: no clean shutdown), :meth:`start_node` (the same
container again, on its own storage), :meth:`pause_node`/:meth:`resume_node` (``docker
pause``/``unpause``: the cgroup freezer), :meth:`transaction_coordinator`. A running cluster is
found by ``eos_harness.cluster.cluster_for(spec)``, so the driver's broker faults work on it too.

Cleanup: leaving the ``with`` block stops and removes every container, also when the block
raises; an ``atexit`` hook does it for a test that crashed; if the runner is SIGKILLed, the
cluster watchdog kills the containers' JVMs (they carry its mark in their environment) and the
next ``DockerKafka`` (or ``python -m eos_harness.cluster.docker cleanup``) removes containers whose
owner process is gone. testcontainers' Ryuk reaper is off (its image would have to be pulled); set
``TESTCONTAINERS_RYUK_DISABLED=false`` to have it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import subprocess
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from eos_harness.cluster.docker.containers import LABEL, OWNER_LABEL, owner, remove_orphans
from eos_harness.cluster.docker.engine import docker_client
from eos_harness.cluster.docker.image import DEFAULT_IMAGE, require_image
from eos_harness.cluster.local import (
    JVM_PERFORMANCE_OPTIONS,
    ClusterError,
    KafkaCluster,
    free_port,
    new_cluster_id,
)
from eos_harness.cluster.local import _tail_text as _tail
from eos_harness.cluster.watchdog import ENV_MARK, start_watchdog, stop_watchdog

__all__ = ["DockerKafka", "kafka_env"]

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15

_LIVE: set[DockerKafka] = set()


def kafka_env(properties: dict[str, str]) -> dict[str, str]:
    """Server properties as the official image's environment variables: ``KAFKA_`` + the name
    upper-cased, '-' -> '___', '_' -> '__', '.' -> '_'."""
    return {
        "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper(): value
        for key, value in properties.items()
    }


@dataclass
class DockerNode:
    node_id: int
    port: int
    controller_port: int
    container: Any = None  # testcontainers' DockerContainer, once created

    @property
    def wrapped(self):
        return self.container.get_wrapped_container() if self.container is not None else None


class DockerKafka(KafkaCluster):
    """A KRaft cluster of ``brokers`` containers (each broker and controller) on 127.0.0.1.

    ``image``: a Kafka image configured through ``KAFKA_*`` variables (default: the official
    ``apache/kafka`` at the pinned version; :data:`LOCAL_IMAGE` is the one built here).
    ``pull``: pull ``image`` when the engine does not have it (off: a missing image is an error
    that says how to build it). ``overrides``: extra server properties. ``heap``: JVM heap.
    """

    def __init__(self, brokers: int = 1, image: str = DEFAULT_IMAGE, overrides: dict[str, str] | None = None,
                 heap: str = "512m", start_timeout: float = START_TIMEOUT_S, pull: bool = False) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.brokers = brokers
        self.image = image
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.start_timeout = start_timeout
        self.pull = pull
        self.cluster_id = new_cluster_id()
        self.name = f"eos-kafka-{uuid.uuid4().hex[:8]}"
        self.nodes: list[DockerNode] = []
        self._version: str | None = None
        self._watchdog: subprocess.Popen | None = None
        self._lock = threading.RLock()

    # -- public interface -----------------------------------------------------------------------
    def start(self) -> None:
        client = docker_client()
        try:
            require_image(client, self.image, self.pull)
            self._version = _image_version(client, self.image)
            remove_orphans(client)
        finally:
            client.close()
        _configure_testcontainers()
        self.nodes = [DockerNode(i + 1, free_port(), free_port()) for i in range(self.brokers)]
        _LIVE.add(self)
        _register_for_faults(self)
        self._watchdog = start_watchdog(self._mark)
        try:
            from testcontainers.core.container import DockerContainer

            for node in self.nodes:
                node.container = (
                    DockerContainer(self.image, docker_client_kw={"timeout": 120})
                    .with_name(f"{self.name}-node-{node.node_id}")
                    .with_envs(**self._env(node))
                    .with_kwargs(network="host", labels={LABEL: self.name, OWNER_LABEL: owner()},
                                 stop_signal="SIGTERM")
                )
                node.container.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every container (SIGTERM, SIGKILL after 15 s) and remove it with its storage."""
        for node in self.nodes:
            wrapped = node.wrapped
            if wrapped is None:
                continue
            with contextlib.suppress(Exception):
                wrapped.reload()
                if wrapped.status == "paused":
                    wrapped.unpause()
            with contextlib.suppress(Exception):
                wrapped.stop(timeout=STOP_TIMEOUT_S)
            with contextlib.suppress(Exception):
                node.container.stop(force=True, delete_volume=True)
        _LIVE.discard(self)
        _unregister_for_faults(self)
        watchdog, self._watchdog = self._watchdog, None
        stop_watchdog(watchdog)

    def kill(self) -> None:
        """SIGKILL every node at once (used at exit)."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.kill_node(node.node_id)

    @property
    def kafka_version(self) -> str | None:
        """The Kafka version its image runs (recorded in every result of a run on it as ``kafka_version``): the
        image's ``org.opencontainers.image.version`` label, else its tag when that is a version; None before
        ``start()`` or when neither says."""
        return self._version

    # -- nodes (for faults) ----------------------------------------------------------------------
    def pid(self, node_id: int) -> int | None:
        """The host pid of the node's main process (its JVM), None when it is not running."""
        wrapped = self.node(node_id).wrapped
        if wrapped is None:
            return None
        wrapped.reload()
        state = wrapped.attrs.get("State", {})
        return (state.get("Pid") or None) if state.get("Running") else None

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start node ``node_id`` again: the same container, on its own storage."""
        with self._lock:
            wrapped = self.node(node_id).wrapped
            if wrapped is None:
                raise ClusterError(f"node {node_id} has no container: start the cluster first")
            wrapped.reload()
            if wrapped.status == "paused":
                wrapped.unpause()
            elif wrapped.status != "running":
                wrapped.start()
        if wait:
            self.wait_ready()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL the node's JVM (``docker kill``): no clean shutdown."""
        with self._lock:
            wrapped = self.node(node_id).wrapped
            if wrapped is None:
                return
            wrapped.reload()
            if wrapped.status == "paused":
                wrapped.unpause()
            if wrapped.status in ("running", "paused"):
                with contextlib.suppress(Exception):  # it may have exited meanwhile
                    wrapped.kill(signal="SIGKILL")
            wrapped.wait(timeout=30)

    def pause_node(self, node_id: int) -> None:
        """Freeze the node (``docker pause``): it holds its connections but answers nothing."""
        with self._lock:
            wrapped = self.node(node_id).wrapped
            if wrapped is not None:
                wrapped.pause()

    def resume_node(self, node_id: int) -> None:
        with self._lock:
            wrapped = self.node(node_id).wrapped
            if wrapped is not None:
                wrapped.reload()
                if wrapped.status == "paused":
                    wrapped.unpause()

    def _running_node_ids(self) -> set[int]:
        expected = set()
        for node in self.nodes:
            if node.wrapped is not None:
                node.wrapped.reload()
                if node.wrapped.status in ("running", "created", "restarting"):
                    expected.add(node.node_id)
        return expected

    def _raise_if_exited(self, node: DockerNode) -> None:
        wrapped = node.wrapped
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            code = wrapped.attrs.get("State", {}).get("ExitCode")
            raise ClusterError(f"Kafka node {node.node_id} (container {wrapped.name}, image {self.image}) exited "
                               f"with code {code} while starting; its log ends:\n{self.log_tail(node.node_id)}")

    def _not_ready_error(self, expected: set[int], timeout: float, why: str = "") -> ClusterError:
        tails = "\n".join(f"--- node {n}:\n{self.log_tail(n)}" for n in sorted(expected))
        because = f" (last seen: {why})" if why else ""
        return ClusterError(f"Kafka ({self.image}) did not come up within {timeout:.0f} s on "
                            f"{self.bootstrap_servers}{because}:\n{tails}")

    def log_tail(self, node_id: int, lines: int = 25) -> str:
        wrapped = self.node(node_id).wrapped
        if wrapped is None:
            return "(no container)"
        try:
            return _tail(wrapped.logs(tail=lines * 4), lines)
        except Exception as exc:  # noqa: BLE001 - the container may be gone
            return f"(no log: {exc})"

    # -- internals -------------------------------------------------------------------------------
    @property
    def _mark(self) -> str:
        return f"docker:{self.name}"

    def _env(self, node: DockerNode) -> dict[str, str]:
        properties = self._combined_properties(node, "/tmp/kraft-combined-logs")
        properties.update(self.overrides)
        return {
            **kafka_env(properties),
            "CLUSTER_ID": self.cluster_id,
            "KAFKA_HEAP_OPTS": f"-Xmx{self.heap} -Xms128m",
            "KAFKA_JVM_PERFORMANCE_OPTS": " ".join(JVM_PERFORMANCE_OPTIONS),
            ENV_MARK: self._mark,
        }


def _configure_testcontainers() -> None:
    from testcontainers.core.config import testcontainers_config

    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True


def _register_for_faults(cluster: DockerKafka) -> None:
    """Make ``eos_harness.cluster.cluster_for(spec)`` find the cluster (the driver's broker faults)."""
    from eos_harness.cluster import local

    live = getattr(local, "_LIVE", None)
    if isinstance(live, set):
        live.add(cluster)


def _unregister_for_faults(cluster: DockerKafka) -> None:
    from eos_harness.cluster import local

    live = getattr(local, "_LIVE", None)
    if isinstance(live, set):
        live.discard(cluster)


@atexit.register
def _remove_leftovers() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


def _image_version(client, image: str) -> str | None:
    labels = client.images.get(image).labels or {}
    version = labels.get("org.opencontainers.image.version", "")
    if re.fullmatch(r"[0-9]+(\.[0-9]+)*", version):
        return version
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    return tag if re.fullmatch(r"[0-9]+(\.[0-9]+)*", tag) else None
