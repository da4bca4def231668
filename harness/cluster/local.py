"""``LocalKafka``: a real Apache Kafka cluster in KRaft mode, run as local JVM processes.

``with LocalKafka(brokers=1) as kafka: kafka.bootstrap_servers`` starts ``brokers`` combined
broker+controller nodes from the pinned jars of Kafka :func:`kafka_version` (4.4.0, or
``$EOS_KAFKA_VERSION``: bundles ``kafka-4.4.0`` and ``kafka-3.9.1``) or from ``$KAFKA_HOME/libs`` when set. Storage is formatted per run with Kafka's ``StorageTool`` in the
cluster's own directory; every port is a free one on 127.0.0.1, and every listener (broker and
controller) binds and advertises 127.0.0.1 only.

Each node runs in its own process group (its own session), marked with ``EOS_HARNESS_KAFKA=<dir>``
in its environment. Leaving the ``with`` block stops every node (SIGTERM, then SIGKILL), also when
the block raises; an ``atexit`` hook kills whatever a crashed test left behind.

For faults (``faults.kafka``) a cluster exposes its nodes: :meth:`pid`, :meth:`kill_node`,
:meth:`start_node`, :meth:`pause_node`, :meth:`resume_node`, :meth:`transaction_coordinator`.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from eos_harness.broker.spec import BrokerSpec

from eos_harness.class_archive import JvmOptions, archive_options, fingerprint, supported
from eos_harness.cluster.watchdog import start_watchdog, stop_watchdog
from eos_harness.faults.kinds import register_cluster_lookup
from eos_harness.jars import Bundle, register
from eos_harness.kafka_versions import (
    KAFKA_VERSION,
    KAFKA_VERSIONS,
    VERSION_ENV,
    chosen_version,
    unknown_version,
)
from eos_harness.process.wait import WaitTimeout, wait_until

__all__ = ["KAFKA_BUNDLE", "KAFKA_BUNDLES", "KAFKA_VERSION", "KAFKA_VERSIONS", "VERSION_ENV", "ClusterError",
           "KafkaCluster", "LocalKafka", "cluster_for", "dump_log_class", "free_port", "java_hash_code", "kafka_version",
           "log_options", "running_version", "version_of"]



def _broker_bundle(version: str, extra: tuple[str, ...], **exclusions: tuple[str, ...]) -> Bundle:
    return register(Bundle(
        f"kafka-{version}", version, (f"org.apache.kafka:kafka_2.13:{version}", *extra),
        description=f"the Apache Kafka {version} broker (KRaft), its tools and their runtime dependencies",
        cache_folder=f"kafka-{version}", **exclusions,
    ))


KAFKA_BUNDLES = {
    # 4.x logs through Log4j 2 (its jars are runtime dependencies of kafka_2.13); DumpLogSegments
    # lives in kafka-tools from 4.3.0 on.
    "4.4.0": _broker_bundle(
        "4.4.0", ("org.apache.kafka:kafka-tools:4.4.0", "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5"),
        # kafka-tools depends on Kafka Connect (MirrorMaker) and its web server: not what a broker,
        # StorageTool or DumpLogSegments loads.
        exclude_groups=("org.eclipse.jetty", "org.glassfish", "jakarta.", "io.swagger", "org.javassist",
                        "com.fasterxml.jackson.jakarta", "com.fasterxml.jackson.module", "javax.activation",
                        "javax.xml.bind", "org.apache.maven", "org.codehaus.plexus", "org.reflections",
                        "io.github.classgraph", "com.github.classgraph"),
        exclude_artifacts=("connect-runtime", "connect-json", "connect-transforms", "connect-api",
                           "jackson-module-jakarta-xmlbind-annotations", "jackson-dataformat-yaml", "snakeyaml",
                           "activation", "osgi-resource-locator", "aopalliance-repackaged", "swagger-annotations",
                           "jaxb-api", "javax.activation-api", "classgraph", "maven-artifact", "plexus-utils"),
    ),
    "3.9.1": _broker_bundle("3.9.1", ("org.slf4j:slf4j-reload4j:1.7.36",)),
}
KAFKA_BUNDLE = KAFKA_BUNDLES[KAFKA_VERSION]
assert tuple(KAFKA_BUNDLES) == KAFKA_VERSIONS, "eos_harness.kafka_versions names the releases pinned here"


def kafka_version() -> str:
    """The Kafka version the harness starts: ``$EOS_KAFKA_VERSION`` if set, else :data:`KAFKA_VERSION`.
    A version without pinned jars raises :class:`ClusterError` naming the ones there are."""
    problem = unknown_version()  # the versions of KAFKA_BUNDLES (eos_harness.kafka_versions)
    if problem is not None:
        raise ClusterError(problem)
    return chosen_version()


START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
STRAGGLER_S = 1.0  # how long the other nodes stopped with one get once it has exited (LocalKafka._reap_group)
ENV_MARK = "EOS_HARNESS_KAFKA"
TRANSACTION_STATE_PARTITIONS = 4
# The JVM flags of every Kafka node after its heap (-Xmx, -Xms128m): a short-lived test broker.
JVM_PERFORMANCE_OPTIONS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:TieredStopAtLevel=1",
                           "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true")

# A broker's log cleaner allocates its whole dedupe buffer (``log.cleaner.dedupe.buffer.size``,
# 128 MiB by default) as one array when the broker starts its LogManager. On a 256 MiB G1 heap that
# is a humongous allocation of 128 contiguous regions, which fails now and then (seen: CI, a KRaft
# quorum's broker exited with ``OutOfMemoryError: Java heap space`` in ``SkimpyOffsetMap.<init>``).
# The suites' compacted topics (``__consumer_offsets``, ``__transaction_state``) are small: 16 MiB
# holds about 600,000 keys per cleaning.
SMALL_HEAP_PROPERTIES = {"log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024)}

_LIVE: set[LocalKafka] = set()


class ClusterError(RuntimeError):
    """The cluster could not be started or used; the message says why and what to do."""


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def java_hash_code(text: str) -> int:
    """Java's ``String.hashCode`` (for the partition of ``__transaction_state`` an id maps to)."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ClusterError(
            "cannot start Kafka: Java is not installed (no 'java' on PATH and no JAVA_HOME). "
            "Install a JRE 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
        )
    return found


def _home_version(libs: Path) -> str | None:
    """The version of the Kafka distribution in ``libs`` (from its ``kafka_2.13-<version>.jar``)."""
    for jar in sorted(libs.glob("kafka_*.jar")):
        stem = jar.stem.split("-", 1)
        if len(stem) == 2 and stem[1][:1].isdigit() and not stem[1].endswith(("sources", "javadoc", "test")):
            return stem[1]
    return None


def _classpath(version: str | None = None) -> str:
    """The classpath of Kafka ``version`` (default :func:`kafka_version`): ``$KAFKA_HOME/libs`` when
    set, else the pinned jars (fetched on first use)."""
    home = os.environ.get("KAFKA_HOME")
    if home:
        libs = Path(home) / "libs"
        if not any(libs.glob("kafka_*.jar")):
            raise ClusterError(f"KAFKA_HOME={home} holds no Kafka distribution (no {libs}/kafka_*.jar)")
        return str(libs / "*")
    from eos_harness.jars import JarFetchError, ensure

    try:
        jars = ensure(KAFKA_BUNDLES[version or kafka_version()].name)
    except JarFetchError as exc:
        raise ClusterError(f"cannot start Kafka: {exc}") from None
    return os.pathsep.join(str(j) for j in jars)


# A Kafka node's JVM starts from a class archive (eos_harness.class_archive) made by the first node of
# its Java and class path that stops cleanly: a SIGTERMed JVM exits with 143 after its shutdown hooks.
# Start to ready about 2.5x faster (one broker: 6.3-8.0 s -> 2.7-3.2 s, its CPU 3.6 s -> 2.5 s).
# EOS_HARNESS_KAFKA_JVM=plain turns it off (for comparing).
JVM_ENV = "EOS_HARNESS_KAFKA_JVM"
ARCHIVE_EXIT_S = 60.0  # more time to stop for the node that writes the archive (seconds at load 8, more under load)
CLEAN_EXITS = (0, 128 + signal.SIGTERM)


def node_jvm_options(java: str, classpath: str, make: bool = True) -> JvmOptions:
    """The class-archive options of a Kafka JVM about to start on ``classpath``; ``make=False``: a
    short tool run that uses an archive but makes none."""
    if os.environ.get(JVM_ENV) == "plain" or not supported(java):
        return JvmOptions([])
    from eos_harness.jars import cache_dir

    return archive_options(cache_dir() / "kafka-cds" / f"node-{fingerprint(java, classpath)}.jsa", make,
                           CLEAN_EXITS)


def running_version(version: str | None = None) -> str:
    """The version the harness's Kafka processes run: ``$KAFKA_HOME``'s distribution when set (its
    ``kafka_2.13-<version>.jar``), else ``version`` or :func:`kafka_version`."""
    home = os.environ.get("KAFKA_HOME")
    if home:
        return _home_version(Path(home) / "libs") or "unknown"
    return version or kafka_version()


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 4  # an unknown KAFKA_HOME: the current releases


def log_options(version: str, config: Path | None) -> list[str]:
    """The JVM options that point Kafka ``version``'s logging at ``config`` (written by
    :func:`write_log_config`), or switch it off (``None``): Log4j 1 (reload4j) up to 3.9, Log4j 2 from 4.0."""
    if _major(version) >= 4:
        return [f"-Dlog4j2.configurationFile=file:{config}"] if config else ["-Dlog4j2.level=OFF"]
    return [f"-Dlog4j.configuration=file:{config or '/dev/null'}"]


def write_log_config(version: str, directory: Path) -> Path:
    """The node's logging configuration in ``directory``, in the format of Kafka ``version``."""
    if _major(version) >= 4:
        path = directory / "log4j2.properties"
        path.write_text(LOG4J2)
    else:
        path = directory / "log4j.properties"
        path.write_text(LOG4J)
    return path


def dump_log_class(version: str) -> str:
    """Kafka's ``DumpLogSegments`` (``kafka-dump-log.sh``): in the kafka-tools jar from 4.3.0 on."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:2]] + [0, 0]
    if version == "unknown" or tuple(parts[:2]) >= (4, 3):
        return "org.apache.kafka.tools.DumpLogSegments"
    return "kafka.tools.DumpLogSegments"


LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""

# The same for Log4j 2 (Kafka 4.x).
LOG4J2 = """rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.request.name=kafka.request.logger
logger.request.level=WARN
logger.state.name=state.change.logger
logger.state.level=WARN
"""


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen | None = None
    jvm: JvmOptions | None = None  # its class archive's options (eos_harness.class_archive), finished when it exits

    @property
    def log(self) -> Path:
        return self.directory / "kafka.log"

    @property
    def config(self) -> Path:
        return self.directory / "server.properties"


class KafkaCluster:
    """What every cluster of the harness shares (:class:`LocalKafka`, ``DockerKafka``): its nodes'
    listeners on 127.0.0.1, the broker spec, the context manager (``start``/``stop``), node lookup,
    the combined broker+controller nodes' settings, waiting until the nodes are ready, and the
    transaction coordinator (found through the admin client, so any cluster will do)."""

    nodes: list
    brokers: int
    start_timeout: float

    def start(self) -> None:  # pragma: no cover - each cluster starts its own way
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover
        raise NotImplementedError

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def spec(self) -> str:
        """The broker spec for ``eos_harness.broker.connect``."""
        return f"kafka://{self.bootstrap_servers}"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def node(self, node_id: int):
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no node {node_id}; nodes are {[n.node_id for n in self.nodes]}")

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until every running node is registered with the cluster, or raise with the log tails."""
        from eos_harness.broker import kafka_client

        timeout = timeout or self.start_timeout
        expected = self._running_node_ids()
        admin = kafka_client.admin_client(self.bootstrap_servers, **{"socket.timeout.ms": 2000, "log_level": 0})

        last = {"why": "not checked yet"}

        def registered() -> bool:
            for node in self.nodes:
                if node.node_id in expected:
                    self._raise_if_exited(node)
            # Listening (a restarted node is still in the metadata until its session expires)
            # and registered with the cluster.
            silent = [n for n in sorted(expected) if not _listening(self.node(n).port)]
            if silent:
                last["why"] = f"node(s) {silent} not listening"
                return False
            try:
                brokers = kafka_client.registered_brokers(admin)
            except Exception as exc:  # noqa: BLE001 - not up yet
                states = ", ".join(f"node {n}: {process_state(self.pid(n))}" for n in sorted(expected))
                last["why"] = f"the metadata request failed: {exc} ({states})"
                return False
            if not expected <= brokers:
                last["why"] = f"registered brokers {sorted(brokers)}, waiting for {sorted(expected - brokers)}"
                return False
            return True

        try:
            wait_until(registered, timeout, 0.25, f"Kafka nodes {sorted(expected)} to register")
        except WaitTimeout:
            raise self._not_ready_error(expected, timeout, last["why"]) from None

    def _running_node_ids(self) -> set[int]:  # pragma: no cover - each cluster runs its nodes its own way
        """The nodes :meth:`wait_ready` waits for."""
        raise NotImplementedError

    def _raise_if_exited(self, node) -> None:  # pragma: no cover
        """Raise :class:`ClusterError` (with its log) if ``node`` exited while starting."""
        raise NotImplementedError

    def _not_ready_error(self, expected: set[int], timeout: float,
                         why: str = "") -> ClusterError:  # pragma: no cover
        raise NotImplementedError

    def _combined_properties(self, node, log_dirs: str) -> dict[str, str]:
        """The server properties of ``node``, a combined broker+controller of this cluster, storing
        its logs in ``log_dirs``: listeners on 127.0.0.1, replication to at most 3 nodes, and what
        the suites and their faults rely on (a one-second sweep of timed-out transactions, no
        initial rebalance delay, a 3 s broker session, no topic created by a client)."""
        replicas = str(min(3, self.brokers))
        min_isr = "2" if self.brokers >= 3 else "1"
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes),
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": log_dirs,
            "num.partitions": "1",
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            # Without these three a single broker never completes a transaction.
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": str(TRANSACTION_STATE_PARTITIONS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "transaction.max.timeout.ms": "900000",
            "group.initial.rebalance.delay.ms": "0",
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "auto.create.topics.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "unclean.leader.election.enable": "false",
            **SMALL_HEAP_PROPERTIES,
        }

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node that leads ``transactional_id``'s partition of ``__transaction_state``."""
        from eos_harness.broker import kafka_client

        partition = _java_abs(java_hash_code(transactional_id)) % TRANSACTION_STATE_PARTITIONS
        admin = kafka_client.admin_client(self.bootstrap_servers)
        seen: list = []

        def led_partition():
            topic = admin.list_topics("__transaction_state", timeout=10).topics.get("__transaction_state")
            if topic is not None and topic.error is None and partition in topic.partitions \
                    and topic.partitions[partition].leader >= 0:
                return topic.partitions[partition]
            if not seen:
                # The broker creates __transaction_state when a first transactional producer starts.
                self._probe_transactions()
            seen.append(topic)
            return None

        try:
            return wait_until(led_partition, 30, 0.1, f"a leader of __transaction_state partition {partition}").leader
        except WaitTimeout:
            raise ClusterError(f"__transaction_state partition {partition} has no leader after 30 s: "
                               f"{seen[-1] and seen[-1].error}") from None

    def _probe_transactions(self) -> None:
        from eos_harness.broker import kafka_client

        producer = kafka_client.producer(self.bootstrap_servers, **{"transactional.id": "eos-harness-probe"})
        producer.init_transactions(30)


class LocalKafka(KafkaCluster):
    """A KRaft cluster of ``brokers`` local JVM nodes (each broker and controller) on 127.0.0.1.

    ``directory``: where storage, configs and logs go (default: a fresh temporary directory,
    removed on exit unless ``keep``). ``overrides``: extra broker properties. ``heap``: JVM heap.
    """

    def __init__(self, brokers: int = 1, directory: str | Path | None = None, keep: bool = False,
                 overrides: dict[str, str] | None = None, heap: str = "512m",
                 start_timeout: float = START_TIMEOUT_S) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.brokers = brokers
        self._own_dir = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="eos-kafka-"))
        self.keep = keep
        self._watchdog: subprocess.Popen | None = None
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.start_timeout = start_timeout
        self.cluster_id = new_cluster_id()
        self.version = kafka_version()  # the pinned jars' version ($EOS_KAFKA_VERSION or the default)
        self.nodes: list[Node] = []
        self._classpath: str | None = None
        # Faults of concurrent scenarios may kill, start or pause the same node at once.
        self._lock = threading.RLock()

    # -- public interface -----------------------------------------------------------------------
    def start(self) -> None:
        java = _java()
        self._classpath = _classpath(self.version)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.nodes = self._new_nodes()
        _LIVE.add(self)
        # If this process is SIGKILLed (no atexit), the watchdog kills the nodes it leaves behind.
        self._watchdog = start_watchdog(str(self.directory))
        try:
            for node in self.nodes:
                node.directory.mkdir(parents=True, exist_ok=True)
                node.config.write_text(self._properties(node))
                write_log_config(self.kafka_version, node.directory)
            formats = [self._format(java, node) for node in self.nodes]
            for node, proc in zip(self.nodes, formats, strict=True):
                out, _ = proc.communicate(timeout=120)
                if proc.returncode != 0:
                    raise ClusterError(
                        f"Kafka's StorageTool could not format node {node.node_id} (exit {proc.returncode}):\n"
                        + _tail_text(out)
                    )
            for node in self.nodes:
                self.start_node(node.node_id, wait=False)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _new_nodes(self) -> list[Node]:
        """The cluster's nodes, each with free ports and its own directory (a subclass plans others)."""
        return [Node(i + 1, free_port(), free_port(), self.directory / f"node-{i + 1}") for i in range(self.brokers)]

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL of its process group) and remove the directory.
        The nodes go in :meth:`_stop_order`: a broker's controlled shutdown asks the controllers, so
        brokers without a controller of their own stop while the controllers still answer."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for group in self._stop_order():
            for node in group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if node.process is not None and node.process.poll() is None:
                        os.killpg(node.process.pid, signal.SIGCONT)
                        os.killpg(node.process.pid, signal.SIGTERM)
            self._reap_group(group, deadline)
        _LIVE.discard(self)
        watchdog, self._watchdog = self._watchdog, None
        stop_watchdog(watchdog)
        if self._own_dir and not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _reap_group(self, group: list[Node], deadline: float) -> None:
        """Wait for the SIGTERMed ``group`` until ``deadline``, then SIGKILL what is left. Unless the cluster
        is kept: once one of them has exited, the others get :data:`STRAGGLER_S` more. Three controllers
        stopped together leave one of them a candidate of a vote no one answers any more, waiting
        KRaft's graceful shutdown out (5 s) for nothing. A node writing the class archive at its exit
        gets the time that takes (:data:`ARCHIVE_EXIT_S`)."""
        first_exit: float | None = None
        left = [node for node in group if node.process is not None]
        while left:
            now = time.monotonic()
            for node in [n for n in left if n.process.poll() is not None]:
                self._reap(node, 0.1)
                left.remove(node)
                first_exit = now if first_exit is None else first_exit
            bound = deadline if first_exit is None or self.keep else min(deadline, first_exit + STRAGGLER_S)
            if left and now >= bound:
                for node in left:
                    self._reap(node, ARCHIVE_EXIT_S if node.jvm is not None and node.jvm.making else 0.1)
                return
            time.sleep(0.02)

    def _stop_order(self) -> list[list[Node]]:
        """The groups of nodes :meth:`stop` stops one after the other (here one: every node is its own controller)."""
        return [list(self.nodes)]

    def kill(self) -> None:
        """SIGKILL every node at once (used at exit)."""
        for node in self.nodes:
            self.kill_node(node.node_id)

    # -- nodes (for faults) ----------------------------------------------------------------------
    def pid(self, node_id: int) -> int | None:
        proc = self.node(node_id).process
        return proc.pid if proc is not None and proc.poll() is None else None

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start (or restart, on its existing storage) node ``node_id``."""
        with self._lock:
            self._start_node(node_id)
        if wait:
            self.wait_ready()

    def _start_node(self, node_id: int) -> None:
        node = self.node(node_id)
        if node.process is not None and node.process.poll() is None:
            return
        assert self._classpath is not None
        env = {**os.environ, ENV_MARK: str(self.directory), "KAFKA_HEAP_OPTS": f"-Xmx{self.heap}"}
        java = _java()
        node.jvm = node_jvm_options(java, self._classpath)
        command = [
            java, f"-Xmx{self.heap}", "-Xms128m", *JVM_PERFORMANCE_OPTIONS, *node.jvm.arguments,
            *self._log_options(node), f"-Dkafka.logs.dir={node.directory / 'logs'}",
            "-cp", self._classpath, "kafka.Kafka", str(node.config),
        ]
        log = node.log.open("ab")
        node.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, start_new_session=True, cwd=node.directory)
        log.close()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL the node's process group (kill -9): no clean shutdown."""
        with self._lock:
            node = self.node(node_id)
            if node.process is None:
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(node.process.pid, signal.SIGKILL)
            self._reap(node, 10)

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP the node: it holds its connections but answers nothing."""
        with self._lock:
            pid = self.pid(node_id)
            if pid is not None:
                os.killpg(pid, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        """SIGCONT the node, and make sure it runs again (a stopped broker still accepts connections,
        so a resume that did not take would look like a broker that hangs)."""
        with self._lock:
            pid = self.pid(node_id)
            if pid is None:
                return
            for _ in range(20):
                os.killpg(pid, signal.SIGCONT)
                if process_state(pid) != "stopped":
                    return
                time.sleep(0.05)

    def _running_node_ids(self) -> set[int]:
        return {n.node_id for n in self.nodes if n.process is not None and n.process.poll() is None}

    def _raise_if_exited(self, node: Node) -> None:
        if node.process is not None and node.process.poll() is not None:
            raise ClusterError(
                f"Kafka node {node.node_id} exited with code {node.process.returncode} while starting; "
                f"its log ({node.log}) ends:\n{self.log_tail(node.node_id)}"
            )

    def _not_ready_error(self, expected: set[int], timeout: float, why: str = "") -> ClusterError:
        tails = "\n".join(
            f"--- node {n.node_id} ({n.log}; process {process_state(self.pid(n.node_id))}):\n"
            f"{self.log_tail(n.node_id)}" for n in self.nodes)
        # Each JVM still running appends its threads to its log (SIGQUIT), so a broker that listens
        # but never answers shows there where it is stuck.
        for node in self.nodes:
            pid = self.pid(node.node_id)
            if pid is not None and process_state(pid) == "running":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGQUIT)
                tails += f"\n(node {node.node_id}'s threads were dumped at the end of {node.log})"
        because = f" (last seen: {why})" if why else ""
        return ClusterError(
            f"Kafka did not come up within {timeout:.0f} s on {self.bootstrap_servers}{because}:\n{tails}")

    def log_tail(self, node_id: int, lines: int = 25) -> str:
        path = self.node(node_id).log
        if not path.exists():
            return "(no log)"
        return _tail_text(path.read_bytes()[-20000:], lines)

    # -- internals -------------------------------------------------------------------------------
    @property
    def kafka_version(self) -> str:
        """The version the nodes run (``$KAFKA_HOME``'s distribution when set, else the pinned jars')."""
        return running_version(self.version)

    def _log_options(self, node: Node) -> list[str]:
        name = "log4j2.properties" if _major(self.kafka_version) >= 4 else "log4j.properties"
        return log_options(self.kafka_version, node.directory / name)

    def _properties(self, node: Node) -> str:
        props = {
            **self._combined_properties(node, str(node.directory / "data")),
            "log.segment.bytes": str(16 * 1024 * 1024),
            "log.retention.hours": "168",
            "num.recovery.threads.per.data.dir": "1",
            "socket.request.max.bytes": str(32 * 1024 * 1024),
            "controlled.shutdown.enable": "true",
        }
        props.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _format(self, java: str, node: Node) -> subprocess.Popen:
        assert self._classpath is not None
        command = [
            java, "-Xmx256m", "-XX:TieredStopAtLevel=1", *node_jvm_options(java, self._classpath, make=False).arguments,
            *self._log_options(node), "-cp", self._classpath, "kafka.tools.StorageTool", "format",
            f"--cluster-id={self.cluster_id}", "-c", str(node.config), "--ignore-formatted",
        ]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, ENV_MARK: str(self.directory)})

    def _reap(self, node: Node, timeout: float) -> None:
        proc = node.process
        if proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        # Whatever is left of the group (the JVM, or anything it started) goes with SIGKILL.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if node.jvm is not None:
            node.jvm.finish(proc.returncode)


def cluster_for(spec: BrokerSpec | str) -> LocalKafka | None:
    """The running cluster this process started at the address of ``spec`` (a ``kafka://`` spec or
    its text); None for any other broker."""
    from eos_harness.broker.spec import parse

    spec = parse(spec, internal=True)
    if spec.kind != "kafka":
        return None
    address = spec.bootstrap_servers
    for cluster in list(_LIVE):
        if cluster.nodes and cluster.bootstrap_servers == address:
            return cluster
    return None


def version_of(broker: BrokerSpec | str | None) -> str | None:
    """The Kafka version behind ``broker``, for a result's ``"kafka_version"``: of a cluster the harness
    starts (``kafka-local``, ``kafka-quorum``, or the address of one this process started), the version
    its nodes run; None for the embedded broker and for a ``kafka://`` cluster someone else runs (the
    harness does not ask it)."""
    from eos_harness.broker.spec import STARTED_HERE, parse

    if broker is None:
        return None
    try:
        spec = parse(broker, internal=True)
    except ValueError:
        return None
    if spec.kind in STARTED_HERE or spec.cli_text.startswith(STARTED_HERE):
        try:
            return running_version()
        except ClusterError:
            return None
    cluster = cluster_for(spec) if spec.kind == "kafka" else None
    return cluster.kafka_version if cluster is not None else None


register_cluster_lookup(cluster_for)  # the faults that kill or stop a broker find the clusters started here


def process_state(pid: int | None) -> str:
    """What Linux says of process ``pid``: "running", "stopped" (SIGSTOP), "zombie" or "gone"."""
    if pid is None:
        return "gone"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    state = stat.rpartition(")")[2].split()[0]
    return {"T": "stopped", "t": "stopped", "Z": "zombie", "X": "gone"}.get(state, "running")


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def new_cluster_id() -> str:
    """A random Kafka cluster id: a base64url UUID that, as Kafka's ``Uuid.randomUuid`` ensures,
    does not start with '-' (the storage tool would read it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _java_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def _tail_text(data: bytes | str, lines: int = 25) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return "\n".join(text.strip().splitlines()[-lines:])


@atexit.register
def _kill_leftovers() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.kill()
            cluster.stop()
