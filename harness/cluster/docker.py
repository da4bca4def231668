"""``DockerKafka``: the ``LocalKafka`` interface on Docker, through testcontainers (host networking).

``with DockerKafka(brokers=1, image=...) as kafka: kafka.bootstrap_servers`` runs each KRaft node
(broker and controller in one) in its own container with ``network_mode=host``; every listener
binds and advertises 127.0.0.1 only, on ports chosen free on the host. The image is configured
the official ``apache/kafka`` way, through ``KAFKA_*`` environment variables (``KAFKA_NODE_ID`` ->
``node.id``, ``KAFKA_TRANSACTION_STATE_LOG_MIN_ISR`` -> ``transaction.state.log.min.isr``, ...)
and ``CLUSTER_ID``; so ``image`` may be the official one (the default, :data:`DEFAULT_IMAGE`) or
the equivalent built offline here from Debian packages and the cached jars (:data:`LOCAL_IMAGE`,
``python -m harness.cluster.docker build``; see ``docker/``).

Nodes for faults, as on ``LocalKafka``: :meth:`node_ids`, :meth:`pid` (the host pid of the node's
JVM), :meth:`kill_node` (``docker kill -s KILL``: no clean shutdown), :meth:`start_node` (the same
container again, on its own storage), :meth:`pause_node`/:meth:`resume_node` (``docker
pause``/``unpause``: the cgroup freezer), :meth:`transaction_coordinator`. A running cluster is
found by ``harness.cluster.cluster_for(spec)``, so the driver's broker faults work on it too.

Cleanup: leaving the ``with`` block stops and removes every container, also when the block
raises; an ``atexit`` hook does it for a test that crashed; if the runner is SIGKILLed, the
cluster watchdog (``harness.cluster.watchdog``) kills the containers' JVMs (they carry its mark
in their environment) and the next ``DockerKafka`` (or ``python -m harness.cluster.docker
cleanup``) removes containers whose owner process is gone. testcontainers' Ryuk reaper is off (its
image would have to be pulled); set ``TESTCONTAINERS_RYUK_DISABLED=false`` to have it.

``ensure_dockerd()`` starts Debian's ``dockerd`` when no Docker engine answers, and stops it at
the end; ``build_image()`` builds :data:`LOCAL_IMAGE` offline.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eos_harness.cluster import KAFKA_VERSION
from eos_harness.cluster.local import (
    TRANSACTION_STATE_PARTITIONS,
    ClusterError,
    KafkaCluster,
    _listening,
    free_port,
    new_cluster_id,
)
from eos_harness.cluster.local import _tail_text as _tail

__all__ = [
    "BUILD_COMMAND",
    "DEFAULT_IMAGE",
    "LOCAL_IMAGE",
    "DockerError",
    "DockerKafka",
    "build_image",
    "docker_client",
    "ensure_dockerd",
    "kafka_env",
]

DEFAULT_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
LOCAL_IMAGE = f"eos-harness/kafka:{KAFKA_VERSION}"
BUILD_COMMAND = "python -m harness.cluster.docker build"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("EOS_HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("openjdk-17-jre-headless",)
BASE_IMAGE = f"eos-harness/debian-jre17:{DEBIAN_SUITE}"
DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15
DOCKERD_TIMEOUT_S = 60.0
ENV_MARK = "EOS_HARNESS_KAFKA"  # the mark harness.cluster.watchdog kills by
LABEL = "eos-harness.kafka"
OWNER_LABEL = "eos-harness.owner"  # "<pid>:<process start time>" of the process that started it

_LIVE: set[DockerKafka] = set()


class DockerError(ClusterError):
    """Docker is missing, its engine is not running, or the image is not there; the message says
    what to do."""


# -- the Docker engine ---------------------------------------------------------------------------
def docker_client(timeout: int = 120):
    """A docker SDK client for the engine at ``DOCKER_HOST`` (default: the local socket)."""
    try:
        import docker
    except ImportError:
        raise DockerError(
            "the Docker SDK for Python is not installed: pip install -e '.[docker]' (testcontainers)"
        ) from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine
        raise DockerError(
            f"no Docker engine answers at {os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')} ({exc}). "
            "Start one (as root: dockerd, from Debian's docker.io package: apt-get install docker.io), or let the "
            f"harness start and stop it: {BUILD_COMMAND} --start-dockerd (docker/build.sh), or the docker tests: "
            "pytest -m docker tests/test_docker_kafka.py"
        ) from None
    return client


def _engine_answers() -> bool:
    try:
        docker_client(timeout=5).close()
    except DockerError:
        return False
    return True


def _cache() -> Path:
    from eos_harness.jars import cache_dir

    path = cache_dir() / "docker"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def ensure_dockerd(timeout: float = DOCKERD_TIMEOUT_S) -> Iterator[subprocess.Popen | None]:
    """A Docker engine for the block: the one running, or Debian's ``dockerd`` started here (as
    root, on the default socket and /var/lib/docker, with no bridge and no iptables rules: the
    harness only uses host networking) and stopped when the block ends, also when it raises.
    Yields the dockerd process it started, or None when an engine was already running."""
    if _engine_answers():
        yield None
        return
    host = os.environ.get("DOCKER_HOST", "")
    if host not in ("", "unix:///var/run/docker.sock"):
        raise DockerError(f"no Docker engine answers at DOCKER_HOST={host}; start that engine, or unset DOCKER_HOST "
                          "to have the harness start Debian's dockerd on the local socket")
    dockerd = shutil.which("dockerd") or next(
        (p for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd") if os.access(p, os.X_OK)), None)
    if dockerd is None:
        raise DockerError(
            "Docker is not installed: no 'dockerd' found. Install Debian's engine (as root: apt-get update && "
            "apt-get install -y docker.io), or point DOCKER_HOST at a running engine."
        )
    if os.geteuid() != 0:
        raise DockerError(f"no Docker engine is running and {dockerd} needs root to start: run it as root, "
                          "or point DOCKER_HOST at a running engine")
    log_path = _cache() / "dockerd.log"
    mark = f"dockerd:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [dockerd, "--host", "unix:///var/run/docker.sock", "--pidfile", str(_cache() / "dockerd.pid"),
         "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, ENV_MARK: mark})
    log.close()
    # If this process is SIGKILLed, the cluster watchdog kills the engine (and its containerd).
    watchdog = subprocess.Popen([sys.executable, "-m", "eos_harness.cluster.watchdog", str(os.getpid()), mark],
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    try:
        deadline = time.monotonic() + timeout
        while not _engine_answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DockerError(
                    f"dockerd ({dockerd}) did not start"
                    + (f" (exit {proc.returncode})" if proc.poll() is not None else f" within {timeout:.0f} s")
                    + f"; its log ({log_path}) ends:\n{_tail(log_path.read_bytes()[-8000:])}"
                )
            time.sleep(0.5)
        yield proc
    finally:
        stop_dockerd(proc)
        watchdog.kill()
        watchdog.wait()


def stop_dockerd(proc: subprocess.Popen) -> None:
    """SIGTERM the dockerd this process started (it stops its containers and its containerd),
    SIGKILL its process group if it has not exited within 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    # containerd and its shims run in dockerd's session: nothing of it may outlive it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


# -- the image ---------------------------------------------------------------------------------
def image_present(client, image: str) -> bool:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def _require_image(client, image: str, pull: bool) -> None:
    if image_present(client, image):
        return
    if pull:
        try:
            client.images.pull(image)
            return
        except Exception as exc:  # noqa: BLE001 - no registry, no such tag, ...
            reason = f"pulling it failed ({exc})"
    else:
        reason = "pulling is off (DockerKafka(pull=True) pulls it from its registry)"
    raise DockerError(
        f"the Docker image {image} is not on this engine; {reason}. Build the equivalent image offline "
        f"(Debian packages and the cached Kafka jars): {BUILD_COMMAND} (or make docker-image), then use "
        f"DockerKafka(image={LOCAL_IMAGE!r})"
    )


@dataclass
class BuildReport:
    image: str
    base: str
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def build_image(tag: str = LOCAL_IMAGE, rebuild_base: bool = False,
                log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> BuildReport:
    """Build the Kafka image ``tag`` offline: a base imported from a Debian rootfs (debootstrap,
    with a Java 17 runtime; the rootfs tarball is cached in ``.cache/docker``), then
    ``docker/Dockerfile`` on it with the pinned Kafka jars. Nothing is pulled from a registry."""
    from eos_harness.jars import JarFetchError, ensure

    report = BuildReport(tag, BASE_IMAGE)
    client = docker_client(timeout=1800)
    try:
        started = time.perf_counter()
        try:
            jars = ensure("kafka")
        except JarFetchError as exc:
            raise DockerError(f"cannot build {tag}: {exc}") from None
        report.seconds["jars"] = time.perf_counter() - started
        if rebuild_base or not image_present(client, BASE_IMAGE):
            rootfs = _cache() / f"rootfs-{DEBIAN_SUITE}-jre17.tar"
            if rebuild_base or not rootfs.exists():
                started = time.perf_counter()
                _debootstrap(rootfs, log)
                report.seconds["debootstrap"] = time.perf_counter() - started
            started = time.perf_counter()
            log(f"importing {rootfs} as {BASE_IMAGE}")
            repository, _, base_tag = BASE_IMAGE.rpartition(":")
            client.api.import_image_from_file(str(rootfs), repository=repository, tag=base_tag)
            if not image_present(client, BASE_IMAGE):
                raise DockerError(f"docker import of {rootfs} did not produce {BASE_IMAGE}")
            report.seconds["import"] = time.perf_counter() - started
        started = time.perf_counter()
        _docker_build(client, tag, jars, log)
        report.seconds["docker build"] = time.perf_counter() - started
    finally:
        client.close()
    log(f"built {tag} in {report.total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()) + ")")
    return report


def _debootstrap(rootfs: Path, log: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK)
                                                  else None)
    if debootstrap is None:
        raise DockerError("cannot build the base image: debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise DockerError("cannot build the base image: debootstrap needs root")
    target = rootfs.with_suffix(".d")
    _remove_tree(target)
    command = [debootstrap, "--variant=minbase", "--components=main", f"--include={','.join(BASE_PACKAGES)}",
               DEBIAN_SUITE, str(target), DEBIAN_MIRROR]
    log("$ " + " ".join(command))
    try:
        proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise DockerError(f"debootstrap failed (exit {proc.returncode}) from {DEBIAN_MIRROR} "
                              f"(EOS_HARNESS_DEBIAN_MIRROR sets the mirror):\n{_tail(proc.stdout)}")
        if not (target / "usr" / "bin" / "java").exists():
            raise DockerError(f"debootstrap made {target} without /usr/bin/java:\n{_tail(proc.stdout)}")
        # What an image does not need: package caches and lists, documentation.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info"):
            for entry in (target / sub).glob("*"):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        partial = rootfs.with_suffix(".tar.part")
        tar = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(target), "-cf", str(partial), "."],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if tar.returncode != 0:
            partial.unlink(missing_ok=True)
            raise DockerError(f"packing the rootfs {target} failed (tar exit {tar.returncode}): {tar.stderr[-2000:]}")
        partial.rename(rootfs)
        log(f"rootfs cached in {rootfs} ({rootfs.stat().st_size / 2**20:.0f} MiB)")
    finally:
        _remove_tree(target)


def _remove_tree(target: Path) -> None:
    """Remove a debootstrap target, unmounting first whatever a failed run left mounted in it."""
    if not target.exists():
        return
    prefix = str(target.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    shutil.rmtree(target, ignore_errors=True)


def _docker_build(client, tag: str, jars: list[Path], log: Callable[[str], None]) -> None:
    context = _cache() / "context"
    shutil.rmtree(context, ignore_errors=True)
    (context / "libs").mkdir(parents=True)
    try:
        for name in ("Dockerfile", "run", "log4j.properties", "tools-log4j.properties"):
            shutil.copy2(DOCKER_DIR / name, context / name)
        (context / "run").chmod(0o755)
        for jar in jars:
            shutil.copy2(jar, context / "libs" / jar.name)
        log(f"docker build -t {tag} (FROM {BASE_IMAGE}, {len(jars)} jars)")
        stream = client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True,
                                  network_mode="host", pull=False,
                                  buildargs={"BASE": BASE_IMAGE, "KAFKA_VERSION": KAFKA_VERSION},
                                  labels={LABEL + ".version": KAFKA_VERSION})
        lines: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise DockerError(f"docker build of {tag} failed: {chunk['error'].strip()}\n" + "\n".join(lines[-15:]))
            text = chunk.get("stream", "").rstrip()
            if text:
                lines.append(text)
        if not image_present(client, tag):
            raise DockerError(f"docker build did not produce {tag}:\n" + "\n".join(lines[-15:]))
    finally:
        shutil.rmtree(context, ignore_errors=True)


# -- the cluster -------------------------------------------------------------------------------
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
        self._watchdog: subprocess.Popen | None = None
        self._lock = threading.RLock()

    # -- public interface -----------------------------------------------------------------------
    def start(self) -> None:
        client = docker_client()
        try:
            _require_image(client, self.image, self.pull)
            remove_orphans(client)
        finally:
            client.close()
        _configure_testcontainers()
        self.nodes = [DockerNode(i + 1, free_port(), free_port()) for i in range(self.brokers)]
        _LIVE.add(self)
        _register_for_faults(self)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "eos_harness.cluster.watchdog", str(os.getpid()), self._mark],
            stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        try:
            from testcontainers.core.container import DockerContainer

            for node in self.nodes:
                node.container = (
                    DockerContainer(self.image, docker_client_kw={"timeout": 120})
                    .with_name(f"{self.name}-node-{node.node_id}")
                    .with_envs(**self._env(node))
                    .with_kwargs(network="host", labels={LABEL: self.name, OWNER_LABEL: _owner()},
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
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()

    def kill(self) -> None:
        """SIGKILL every node at once (used at exit)."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.kill_node(node.node_id)

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

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until every running node is registered with the cluster, or raise with the logs."""
        from confluent_kafka.admin import AdminClient

        timeout = timeout or self.start_timeout
        deadline = time.monotonic() + timeout
        expected = set()
        for node in self.nodes:
            if node.wrapped is not None:
                node.wrapped.reload()
                if node.wrapped.status in ("running", "created", "restarting"):
                    expected.add(node.node_id)
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 2000, "log_level": 0})
        while True:
            for node_id in expected:
                wrapped = self.node(node_id).wrapped
                wrapped.reload()
                if wrapped.status in ("exited", "dead"):
                    code = wrapped.attrs.get("State", {}).get("ExitCode")
                    raise ClusterError(f"Kafka node {node_id} (container {wrapped.name}, image {self.image}) exited "
                                       f"with code {code} while starting; its log ends:\n{self.log_tail(node_id)}")
            try:
                if all(_listening(self.node(n).port) for n in expected) \
                        and expected <= set(admin.list_topics(timeout=2).brokers):
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {n}:\n{self.log_tail(n)}" for n in sorted(expected))
                raise ClusterError(f"Kafka ({self.image}) did not come up within {timeout:.0f} s on "
                                   f"{self.bootstrap_servers}:\n{tails}")
            time.sleep(0.25)

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
        replicas = min(3, self.brokers)
        min_isr = "2" if self.brokers >= 3 else "1"
        properties = {
            "node.id": str(node.node_id),
            "process.roles": "broker,controller",
            "controller.quorum.voters": ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes),
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": "/tmp/kraft-combined-logs",
            "num.partitions": "1",
            "default.replication.factor": str(replicas),
            "min.insync.replicas": min_isr,
            # Without these three a single broker never completes a transaction.
            "offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
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
        }
        properties.update(self.overrides)
        return {
            **kafka_env(properties),
            "CLUSTER_ID": self.cluster_id,
            "KAFKA_HEAP_OPTS": f"-Xmx{self.heap} -Xms128m",
            "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1 "
                                          "-Djava.awt.headless=true -Djava.net.preferIPv4Stack=true",
            ENV_MARK: self._mark,
        }


def _configure_testcontainers() -> None:
    from testcontainers.core.config import testcontainers_config

    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True


def _register_for_faults(cluster: DockerKafka) -> None:
    """Make ``harness.cluster.cluster_for(spec)`` find the cluster (the driver's broker faults)."""
    from eos_harness.cluster import local

    live = getattr(local, "_LIVE", None)
    if isinstance(live, set):
        live.add(cluster)


def _unregister_for_faults(cluster: DockerKafka) -> None:
    from eos_harness.cluster import local

    live = getattr(local, "_LIVE", None)
    if isinstance(live, set):
        live.discard(cluster)


def _owner(pid: int | None = None) -> str:
    import psutil

    pid = pid or os.getpid()
    return f"{pid}:{psutil.Process(pid).create_time():.0f}"


def _owner_alive(owner: str) -> bool:
    import psutil

    pid, _, started = owner.partition(":")
    try:
        return _owner(int(pid)) == f"{pid}:{started}"
    except (psutil.Error, ValueError):
        return False


def remove_orphans(client=None) -> list[str]:
    """Remove the Kafka containers of runners that died without removing them; their names."""
    own = client is None
    client = client or docker_client()
    removed = []
    try:
        for container in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
            if not _owner_alive(container.labels.get(OWNER_LABEL, "")):
                with contextlib.suppress(Exception):
                    container.remove(force=True, v=True)
                    removed.append(container.name)
    finally:
        if own:
            client.close()
    return removed


@atexit.register
def _remove_leftovers() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.cluster.docker",
                                     description="The Kafka image built offline, and Docker housekeeping.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help=f"build {LOCAL_IMAGE} offline (Debian packages + the cached jars)")
    build.add_argument("--tag", default=LOCAL_IMAGE)
    build.add_argument("--rebuild-base", action="store_true", help="debootstrap the Debian rootfs again")
    build.add_argument("--start-dockerd", action="store_true",
                       help="start Debian's dockerd for the build if no engine runs (stopped after)")
    sub.add_parser("cleanup", help="remove Kafka containers whose runner died")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            with ensure_dockerd() if args.start_dockerd else contextlib.nullcontext():
                report = build_image(args.tag, rebuild_base=args.rebuild_base)
            print(f"{report.image}: built in {report.total:.1f} s")
        else:
            print("\n".join(remove_orphans()) or "nothing to remove")
    except DockerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from eos_harness.cluster.docker import main as _main

    sys.exit(_main(sys.argv[1:]))
