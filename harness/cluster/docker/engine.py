"""The Docker engine: a client for the one running, or Debian's ``dockerd`` started for a block.

``docker_client()`` answers or raises :class:`DockerError` saying how to get an engine;
``with ensure_dockerd():`` starts Debian's ``dockerd`` when no engine answers, and stops it (and
its containerd) when the block ends, also when it raises or this process is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

from eos_harness.cluster.local import ClusterError
from eos_harness.cluster.local import _tail_text as _tail
from eos_harness.cluster.watchdog import ENV_MARK, start_watchdog, stop_watchdog
from eos_harness.process.wait import WaitTimeout, wait_until

__all__ = ["CLI", "DockerError", "docker_cache", "docker_client", "ensure_dockerd", "stop_dockerd"]

CLI = "python -m eos_harness.cluster.docker"
DOCKERD_TIMEOUT_S = 60.0
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


class DockerError(ClusterError):
    """Docker is missing, its engine is not running, or the image is not there; the message says
    what to do."""


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
            f"no Docker engine answers at {os.environ.get('DOCKER_HOST', DEFAULT_SOCKET)} ({exc}). "
            "Start one (as root: dockerd, from Debian's docker.io package: apt-get install docker.io), or let the "
            f"harness start and stop it: {CLI} build --start-dockerd (docker/build.sh), or the docker tests: "
            "pytest -m docker tests/test_docker_kafka.py"
        ) from None
    return client


def _engine_answers() -> bool:
    try:
        docker_client(timeout=5).close()
    except DockerError:
        return False
    return True


def docker_cache() -> Path:
    """``.cache/docker``: the dockerd log and pid file, the Debian rootfs, the build context."""
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
    if host not in ("", DEFAULT_SOCKET):
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
    log_path = docker_cache() / "dockerd.log"
    mark = f"dockerd:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [dockerd, "--host", DEFAULT_SOCKET, "--pidfile", str(docker_cache() / "dockerd.pid"),
         "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, ENV_MARK: mark})
    log.close()
    # If this process is SIGKILLed, the cluster watchdog kills the engine (and its containerd).
    watchdog = start_watchdog(mark)
    try:
        def answers() -> bool:
            if proc.poll() is not None:
                raise DockerError(f"dockerd ({dockerd}) did not start (exit {proc.returncode}); its log "
                                  f"({log_path}) ends:\n{_tail(log_path.read_bytes()[-8000:])}")
            return _engine_answers()

        try:
            wait_until(answers, timeout, 0.5, f"dockerd ({dockerd}) to answer")
        except WaitTimeout:
            raise DockerError(f"dockerd ({dockerd}) did not start within {timeout:.0f} s; its log ({log_path}) "
                              f"ends:\n{_tail(log_path.read_bytes()[-8000:])}") from None
        yield proc
    finally:
        stop_dockerd(proc)
        stop_watchdog(watchdog)


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
