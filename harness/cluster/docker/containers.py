"""The harness's Kafka containers on a Docker engine: the labels they carry, and removal of those
whose runner died without removing them (``python -m eos_harness.cluster.docker cleanup``).

Each container is labelled with its owner, ``"<pid>:<process start time>"`` of the process that
started it; a container whose owner is gone (or whose pid now belongs to another process) is an
orphan.
"""

from __future__ import annotations

import contextlib
import os

from eos_harness.cluster.docker.engine import docker_client

__all__ = ["LABEL", "OWNER_LABEL", "owner", "remove_orphans"]

LABEL = "eos-harness.kafka"
OWNER_LABEL = "eos-harness.owner"


def owner(pid: int | None = None) -> str:
    """The owner label of process ``pid`` (default: this one)."""
    import psutil

    pid = pid or os.getpid()
    return f"{pid}:{psutil.Process(pid).create_time():.0f}"


def _owner_alive(label: str) -> bool:
    import psutil

    pid, _, started = label.partition(":")
    try:
        return owner(int(pid)) == f"{pid}:{started}"
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
