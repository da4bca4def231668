"""Broker faults for a real Kafka cluster: kill -9 and restart a broker, SIGSTOP/SIGCONT one for a
while, kill the transaction coordinator of a transactional id mid-commit, and the constants of the
transaction-timeout fault.

Schedule faults (``eos-harness run --crash-at broker-kill@5``; their entries in
:mod:`eos_harness.faults.kinds` say how the driver applies them):

- ``broker-kill@n``, ``broker-pause@n``: after the task instance's n-th event, kill -9 and restart
  (or SIGSTOP for :data:`PAUSE_SECONDS`) the broker that is the transaction coordinator of the
  task's transactional id, while the task goes on against the cluster.
- ``coordinator-kill@n``: the instance's n-th commit reaches :data:`COMMIT_IN_FLIGHT` (the
  transaction's records are delivered; ``commit_transaction`` is being called) and reports it; the
  driver SIGKILLs the coordinator at once, then restarts it. On three brokers the commit moves to
  the new coordinator (``__transaction_state`` has replication factor 3, min ISR 2).
- ``txn-timeout@n``: the instance freezes itself at its n-th commit, at :data:`COMMIT_IN_FLIGHT`
  (the transaction's records are in the log), and stays stopped past ``transaction.timeout.ms`` (:data:`TXN_TIMEOUT_MS`, set on the
  task's producer for that scenario): the broker aborts the transaction and bumps the producer's
  epoch, so the woken instance must find itself fenced and none of its writes is ever read committed.

Faults know nothing of stores or tasks: they take a cluster handle (anything with ``node_ids()``,
``kill_node(id)``, ``start_node(id)``, ``pause_node(id)``, ``resume_node(id)`` and
``transaction_coordinator(transactional_id)``, as ``eos_harness.cluster.LocalKafka`` has).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol

__all__ = [
    "COMMIT_IN_FLIGHT",
    "STALL_SECONDS",
    "TXN_TIMEOUT_MS",
    "ClusterHandle",
    "fault_lock",
    "kill_and_restart_broker",
    "pause_broker",
]

# Reached by the Kafka adapter inside commit_transaction, after the transaction's records are
# delivered and before the commit (EndTxn) is sent.
COMMIT_IN_FLIGHT = "kafka.commit.in_flight"
PAUSE_SECONDS = 3.0
DOWN_SECONDS = 0.5
TXN_TIMEOUT_MS = 3000
# transaction.timeout.ms, plus the broker's sweep of timed-out transactions (every second) and the
# abort it then writes.
STALL_SECONDS = TXN_TIMEOUT_MS / 1000 + 3.5


class ClusterHandle(Protocol):
    def node_ids(self) -> list[int]: ...
    def kill_node(self, node_id: int) -> None: ...
    def start_node(self, node_id: int, wait: bool = True) -> None: ...
    def pause_node(self, node_id: int) -> None: ...
    def resume_node(self, node_id: int) -> None: ...
    def transaction_coordinator(self, transactional_id: str) -> int: ...


def kill_and_restart_broker(cluster: ClusterHandle, node_id: int, down_seconds: float = DOWN_SECONDS) -> None:
    """kill -9 the broker, keep it down ``down_seconds``, start it again on its own storage and wait
    until the cluster sees it."""
    cluster.kill_node(node_id)
    time.sleep(down_seconds)
    cluster.start_node(node_id, wait=True)


def pause_broker(cluster: ClusterHandle, node_id: int, seconds: float = PAUSE_SECONDS) -> None:
    """SIGSTOP the broker for ``seconds`` (it keeps its sockets but answers nothing), then SIGCONT."""
    cluster.pause_node(node_id)
    try:
        time.sleep(seconds)
    finally:
        cluster.resume_node(node_id)


_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def fault_lock(cluster: ClusterHandle) -> threading.Lock:
    """The cluster's fault lock: broker faults on one cluster run one at a time (a campaign's workers
    share the cluster, and a kill during another fault's restart would fail that restart). Held from
    the kill or pause until the broker is back; a plain Lock, so the thread that restarts the broker
    may release what the driver took."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(cluster)
        if lock is None:
            lock = _LOCKS[cluster] = threading.Lock()
        return lock


def _target(cluster: ClusterHandle, transactional_id: str | None) -> int:
    if transactional_id is not None:
        try:
            return cluster.transaction_coordinator(transactional_id)
        except Exception:  # noqa: BLE001 - no coordinator known yet: any broker will do
            pass
    return cluster.node_ids()[0]


def coordinator_of(cluster: ClusterHandle, transactional_id: str | None) -> int:
    """The node coordinating ``transactional_id`` now (resolved before a fault needs it at once); any
    broker when it has none yet."""
    return _target(cluster, transactional_id)
