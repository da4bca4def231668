"""``KafkaQuorum``: a KRaft cluster with dedicated controllers, for controller failover tests.

``with KafkaQuorum(controllers=3, brokers=3) as quorum:`` starts ``controllers`` nodes with
``process.roles=controller`` (ids 1, 2, 3, …) and ``brokers`` nodes with ``process.roles=broker``
(ids 101, 102, …), all from the pinned jars on 127.0.0.1. It is a :class:`LocalKafka` with other
nodes: the same jars, java lookup, storage formatting, process groups, watchdog (for a SIGKILLed
runner) and ``stop`` on leaving the block.

What a controller failover test needs on top: :meth:`active_controller` (read from the
controllers' own ``quorum-state`` files: the node that wrote itself as leader of the highest
epoch), :meth:`kill_node` / :meth:`start_node` (kill -9, restart on the same storage),
:meth:`metadata_segments` (each controller's ``__cluster_metadata-0`` log segments, to decode
with Kafka's own ``DumpLogSegments``, see :func:`decode_metadata_log`) and
``start(wait=False)`` + :meth:`start_node` for a fresh quorum whose bootstrap is to be cut.

As a suite's broker (``--broker kafka-quorum[:N]``, opened by
:func:`eos_harness.broker.opening.open_broker` through :func:`suite_quorum`) it is what the broker
faults of ``faults.kafka`` act on: :meth:`node_ids` names its brokers only, so a fault that kills
"a broker" or the transaction coordinator never hits a controller.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eos_harness.cluster.local import (
    SMALL_HEAP_PROPERTIES,
    ClusterError,
    LocalKafka,
    Node,
    _classpath,
    _java,
    _listening,
    dump_log_class,
    free_port,
    log_options,
    running_version,
)
from eos_harness.process.wait import WaitTimeout, wait_until

__all__ = ["BROKER_ID_BASE", "KafkaQuorum", "QuorumNode", "decode_metadata_log", "decode_metadata_logs",
           "suite_quorum"]

BROKER_ID_BASE = 100
METADATA_PARTITION = "__cluster_metadata-0"
SUITE_HEAP = "256m"  # a suite's topics are small; 4 to 8 JVMs share the machine


@dataclass
class QuorumNode(Node):
    role: str = "broker"  # "controller" or "broker"

    @property
    def metadata_dir(self) -> Path:
        return self.directory / "data" / METADATA_PARTITION


class KafkaQuorum(LocalKafka):
    """``controllers`` dedicated KRaft controllers and ``brokers`` brokers on 127.0.0.1.

    ``replication_factor`` is the brokers' default for new topics (1 keeps a 1,000-partition
    topic cheap on a small machine); ``overrides`` apply to every node, ``controller_overrides``
    and ``broker_overrides`` to one kind. ``bootstrap_servers`` names the brokers only.
    """

    def __init__(self, controllers: int = 3, brokers: int = 3, directory: str | Path | None = None,
                 keep: bool = False, heap: str = "384m", replication_factor: int = 1,
                 overrides: dict[str, str] | None = None, controller_overrides: dict[str, str] | None = None,
                 broker_overrides: dict[str, str] | None = None, start_timeout: float = 120.0) -> None:
        if controllers < 1:
            raise ValueError(f"controllers must be >= 1, got {controllers}")
        if brokers < 0 or (brokers and not 1 <= replication_factor <= brokers):
            raise ValueError(f"brokers must be >= 0 and replication_factor within [1, brokers], got "
                             f"brokers={brokers}, replication_factor={replication_factor}")
        super().__init__(brokers=max(brokers, 1), directory=directory, keep=keep, overrides=overrides, heap=heap,
                         start_timeout=start_timeout)
        self.brokers = brokers  # 0: a quorum of controllers only
        self.controllers = controllers
        self.replication_factor = replication_factor
        self.controller_overrides = dict(controller_overrides or {})
        self.broker_overrides = dict(broker_overrides or {})
        self.nodes: list[QuorumNode] = []
        self._start_nodes = True

    # -- nodes ----------------------------------------------------------------------------------
    def _new_nodes(self) -> list[QuorumNode]:
        nodes = []
        for i in range(1, self.controllers + 1):
            port = free_port()
            nodes.append(QuorumNode(i, port, port, self.directory / f"controller-{i}", role="controller"))
        for i in range(BROKER_ID_BASE + 1, BROKER_ID_BASE + 1 + self.brokers):
            nodes.append(QuorumNode(i, free_port(), 0, self.directory / f"broker-{i}", role="broker"))
        return nodes

    def controller_nodes(self) -> list[QuorumNode]:
        return [n for n in self.nodes if n.role == "controller"]

    def broker_nodes(self) -> list[QuorumNode]:
        return [n for n in self.nodes if n.role == "broker"]

    def _stop_order(self) -> list[list[QuorumNode]]:
        """Brokers first (their controlled shutdown needs an active controller), then the controllers."""
        return [self.broker_nodes(), self.controller_nodes()]

    def node_ids(self) -> list[int]:
        """The brokers' ids: the nodes a broker fault may kill, pause or look up as a transaction
        coordinator (the controllers are :meth:`controller_nodes`)."""
        return [n.node_id for n in self.broker_nodes()]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.broker_nodes())

    def broker_address(self, node_id: int) -> str:
        node = self.node(node_id)
        if node.role != "broker":
            raise ClusterError(f"node {node_id} is a controller; brokers are {[n.node_id for n in self.broker_nodes()]}")
        return f"127.0.0.1:{node.port}"

    def alive(self, node_id: int) -> bool:
        return self.pid(node_id) is not None

    # -- starting -------------------------------------------------------------------------------
    def start(self, wait: bool = True) -> None:
        """Format every node and start them; ``wait=False``: format only and start nothing (the
        caller starts nodes with :meth:`start_node` and watches, e.g. to cut the bootstrap)."""
        self._start_nodes = wait
        try:
            super().start()
        finally:
            self._start_nodes = True

    def _start_node(self, node_id: int) -> None:
        if self._start_nodes:
            super()._start_node(node_id)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until a controller leads and every live broker is registered (or raise with log tails)."""
        if not self._start_nodes:
            return
        from confluent_kafka.admin import AdminClient

        timeout = timeout or self.start_timeout
        brokers = [n for n in self.broker_nodes() if self.alive(n.node_id)]
        admin = AdminClient({"bootstrap.servers": ",".join(f"127.0.0.1:{n.port}" for n in brokers) or "127.0.0.1:1",
                             "socket.timeout.ms": 2000, "log_level": 0})

        def ready() -> bool:
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise ClusterError(f"Kafka node {node.node_id} ({node.role}) exited with code "
                                       f"{node.process.returncode}; its log ({node.log}) ends:\n"
                                       f"{self.log_tail(node.node_id)}")
            if self.active_controller() is None:
                return False
            if not brokers:
                return True
            try:
                return all(_listening(n.port) for n in brokers) and \
                    {n.node_id for n in brokers} <= set(admin.list_topics(timeout=2).brokers)
            except Exception:  # noqa: BLE001 - not up yet
                return False

        try:
            wait_until(ready, timeout, 0.25, "a KRaft leader and every broker registered")
        except WaitTimeout:
            tails = "\n".join(f"--- {n.role} {n.node_id} ({n.log}):\n{self.log_tail(n.node_id)}" for n in self.nodes)
            raise ClusterError(f"the KRaft quorum did not come up within {timeout:.0f} s:\n{tails}") from None

    # -- the quorum -----------------------------------------------------------------------------
    def quorum_state(self, node_id: int) -> dict | None:
        """The node's persisted Raft election state (``quorum-state``: leaderId, leaderEpoch, votedId),
        or None before it wrote one."""
        path = self.node(node_id).metadata_dir / "quorum-state"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def active_controller(self) -> int | None:
        """The live controller that wrote itself as leader of the highest epoch any live controller
        knows, or None while there is none (an election is running, or the leader is dead)."""
        states = {n.node_id: self.quorum_state(n.node_id) for n in self.controller_nodes() if self.alive(n.node_id)}
        states = {k: v for k, v in states.items() if v is not None}
        if not states:
            return None
        top = max(s.get("leaderEpoch", -1) for s in states.values())
        for node_id, state in states.items():
            if state.get("leaderEpoch") == top and state.get("leaderId") == node_id:
                return node_id
        return None

    def wait_active_controller(self, timeout: float = 60.0, other_than: int | None = None) -> int:
        """Block until a live controller (not ``other_than``) leads; its id."""
        def leader() -> int | None:
            found = self.active_controller()
            return found if found is not None and found != other_than else None

        try:
            return wait_until(leader, timeout, 0.05, "an active KRaft controller")
        except WaitTimeout:
            tails = "\n".join(f"--- controller {n.node_id}:\n{self.log_tail(n.node_id, 10)}"
                              for n in self.controller_nodes())
            raise ClusterError(f"no active controller after {timeout:.0f} s:\n{tails}") from None

    def metadata_segments(self, node_id: int) -> list[Path]:
        """The node's ``__cluster_metadata-0`` log segments, oldest first."""
        return sorted(self.node(node_id).metadata_dir.glob("*.log"))

    # -- configuration --------------------------------------------------------------------------
    def _properties(self, node: QuorumNode) -> str:  # type: ignore[override]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.controller_nodes())
        common = {
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            "socket.request.max.bytes": str(64 * 1024 * 1024),
        }
        if node.role == "controller":
            props = {
                **common,
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{node.controller_port}",
                "broker.session.timeout.ms": "6000",
            }
        else:
            rf = str(self.replication_factor)
            props = {
                **common,
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "num.partitions": "1",
                "default.replication.factor": rf,
                "min.insync.replicas": "1",
                "offsets.topic.replication.factor": rf,
                "offsets.topic.num.partitions": "4",
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": "1",
                "transaction.state.log.num.partitions": "4",
                "broker.heartbeat.interval.ms": "500",
                "auto.create.topics.enable": "false",
                # Thousands of partitions per broker: small segments' indexes (each is an mmap).
                "log.segment.bytes": str(1024 * 1024),
                "log.index.size.max.bytes": "4096",
                "num.replica.fetchers": "1",
                "unclean.leader.election.enable": "false",
                **SMALL_HEAP_PROPERTIES,
            }
        props.update(self.overrides)
        props.update(self.controller_overrides if node.role == "controller" else self.broker_overrides)
        return "".join(f"{k}={v}\n" for k, v in props.items())


def suite_quorum(brokers: int, controllers: int = 3, heap: str = SUITE_HEAP) -> KafkaQuorum:
    """The quorum behind ``--broker kafka-quorum:N``: ``controllers`` dedicated controllers and
    ``brokers`` brokers whose settings match ``kafka-local:N``'s where the suites and their faults rely
    on them (replication factor and min ISR, the one-second sweep of timed-out transactions that
    ``txn-timeout`` waits for, no initial rebalance delay, a 3 s broker session)."""
    replicas = min(3, brokers)
    min_isr = "2" if brokers >= 3 else "1"
    return KafkaQuorum(
        controllers=controllers, brokers=brokers, heap=heap, replication_factor=replicas,
        controller_overrides={"broker.session.timeout.ms": "3000"},
        broker_overrides={
            "min.insync.replicas": min_isr,
            "transaction.state.log.min.isr": min_isr,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "transaction.max.timeout.ms": "900000",
            "group.initial.rebalance.delay.ms": "0",
            "controlled.shutdown.enable": "true",
        },
    )


def decode_metadata_log(segments: list[Path], timeout: float = 120.0) -> str:
    """The text Kafka's own decoder prints for these ``__cluster_metadata`` segments
    (``kafka-dump-log.sh --cluster-metadata-decoder``: ``org.apache.kafka.tools.DumpLogSegments`` from
    Kafka 4.3, ``kafka.tools.DumpLogSegments`` before), of the version the harness starts."""
    return decode_metadata_logs({0: segments}, timeout)[0]


def decode_metadata_logs(logs: dict, timeout: float = 120.0) -> dict:
    """:func:`decode_metadata_log` of several logs (key -> segments) in one run of the decoder."""
    owner = {str(segment): key for key, segments in logs.items() for segment in segments}
    texts: dict = {key: [] for key in logs}
    if not owner:
        return {key: "" for key in logs}
    version = running_version()
    command = [_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", *log_options(version, None),
               "-cp", _classpath(), dump_log_class(version), "--cluster-metadata-decoder",
               "--files", ",".join(owner)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise ClusterError(f"Kafka's DumpLogSegments failed (exit {done.returncode}) on {list(owner)}:\n"
                           f"{done.stderr.strip()[-2000:]}")
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("Dumping "):
            current = owner.get(line.removeprefix("Dumping ").strip())
        elif current is not None:
            texts[current].append(line)
    return {key: "\n".join(lines) for key, lines in texts.items()}
