"""One task instance in a child process, with its fault armed; the driver collects its events."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from pathlib import Path

from eos_harness.faults import points
from eos_harness.faults.kafka import (
    COMMIT_IN_FLIGHT,
    STALL_SECONDS,
    TXN_TIMEOUT_MS,
    coordinator_of,
    fault_lock,
    run_broker_fault,
)
from eos_harness.history import History
from eos_harness.process.server import forkserver_context
from eos_harness.runtime import Task, TaskConfig
from eos_harness.suites.lifecycle.schedule import Fault

EVENT_TIMEOUT_S = 30.0


# Kafka faults the driver runs beside the instance after its n-th event.
DRIVER_SIDE = ("broker-kill", "broker-pause")


# Kafka faults that start at a point the instance reaches: the point and how it is armed there.
CHILD_ARMED = {"coordinator-kill": (COMMIT_IN_FLIGHT, points.NOTIFY), "txn-timeout": (COMMIT_IN_FLIGHT, points.FREEZE)}


def _child_main(config: TaskConfig, fault: Fault | None, mode: str, conn) -> None:
    """Entry point of a task instance (runs in the forked child)."""
    try:
        points.set_notifier(lambda name: conn.send({"type": "fault_fired", "point": name}))
        task = Task(config, emit=conn.send)
        if fault is not None and fault.point != "kill" and fault.point not in DRIVER_SIDE:
            point, action = CHILD_ARMED.get(fault.point, (fault.point, fault.action))
            if point == COMMIT_IN_FLIGHT:
                import eos_harness.broker.kafka  # noqa: F401 - declares the point
            points.arm(point, fault.hit, action)
        if mode == "verify":
            task.start()
            task._abandon()
            conn.send({"type": "verified"})
        else:
            task.run()
    except BaseException:  # noqa: BLE001 - everything the child hits is reported as an event
        with contextlib.suppress(Exception):
            conn.send({"type": "error", "error": traceback.format_exc()})
        os._exit(1)
    conn.close()
    os._exit(0)


class Instance:
    """One task instance in a child process; the driver collects its events into the history."""

    def __init__(self, config: TaskConfig, fault: Fault | None, mode: str, number: int, history: History,
                 cluster=None) -> None:
        ctx = forkserver_context()
        self.config, self.cluster = config, cluster
        self._broker_fault: threading.Thread | None = None
        self.parent, child = ctx.Pipe(duplex=False)
        self.fault, self.number, self.history = fault, number, history
        # What a fault must act on at once is resolved before the instance runs.
        self.coordinator: int | None = None
        if fault is not None and fault.point == "coordinator-kill":
            self.coordinator = coordinator_of(cluster, config.transactional_id)
        self.proc = ctx.Process(target=_child_main, args=(config, fault, mode, child), daemon=True)
        self.proc.start()
        child.close()
        history.add(number, {"type": "start", "mode": mode, "fault": str(fault) if fault else None, "pid": self.proc.pid})
        self.seen = 0
        self.fired: str | None = None

    def collect(self, stop_when_frozen: bool = False) -> str:
        """Record events until the child ends: done, verified, fenced, crash, error, hang (or frozen)."""
        outcome = "crash"
        fault, history = self.fault, self.history
        while True:
            if not self.parent.poll(EVENT_TIMEOUT_S):
                self.proc.kill()
                history.add(self.number, {"type": "hang", "seconds": EVENT_TIMEOUT_S})
                outcome = "hang"
                break
            try:
                event = self.parent.recv()
            except (EOFError, OSError):  # the child died, perhaps in the middle of a message
                break
            if event["type"] == "fault_fired":
                self.fired = event["point"]
                if fault is not None and fault.point == "coordinator-kill":
                    self._kill_coordinator(fault)
                    continue
                if fault is not None and fault.point == "txn-timeout":
                    self._stall(fault)
                    continue
                if stop_when_frozen and fault is not None and fault.action == "freeze":
                    history.add(self.number, {"type": "frozen", "point": self.fired})
                    return "frozen"
                continue
            history.add(self.number, event)
            self.seen += 1
            if event["type"] in ("done", "verified", "fenced"):
                outcome = event["type"]
            elif event["type"] == "error":
                outcome = "error"
            if fault is not None and fault.point == "kill" and self.seen == fault.hit:
                self.proc.kill()
                self.fired = "kill"
            if fault is not None and fault.point in DRIVER_SIDE and self.seen == fault.hit:
                self._start_broker_fault(fault)
            if event["type"] == "aborted":
                self.fired = "transaction.aborted"
        if self._broker_fault is not None:
            self._broker_fault.join()
        self.reap()
        if outcome == "crash":
            history.add(self.number, {"type": "crash", "point": self.fired or "unexpected-exit", "exitcode": self.proc.exitcode})
        return outcome

    def _start_broker_fault(self, fault: Fault, node: int | None = None, extra: dict | None = None,
                            locked: bool = False) -> None:
        """Run a broker fault beside the instance (it blocks on the broker meanwhile)."""

        def inject() -> None:
            try:
                done = run_broker_fault(self.cluster, fault.point, self.config.transactional_id, node, locked)
                self.history.add(0, {"type": "broker_fault", **done, **(extra or {})})
            except Exception as exc:  # noqa: BLE001 - recorded; the checkers judge what follows
                self.history.add(0, {"type": "broker_fault", "fault": fault.point, "error": repr(exc)})

        self.fired = fault.point
        self._broker_fault = threading.Thread(target=inject, name=f"broker-fault-{fault.point}", daemon=True)
        self._broker_fault.start()

    def _kill_coordinator(self, fault: Fault) -> None:
        """The instance is inside commit_transaction: SIGKILL the coordinator now (restart it in the
        background). ``in_flight``: the commit had not returned when the broker died."""
        node = self.coordinator
        lock = fault_lock(self.cluster)  # no other scenario's broker fault meanwhile
        started = time.monotonic()
        lock.acquire()
        waited = time.monotonic() - started
        try:
            self.cluster.kill_node(node)
        except BaseException:
            lock.release()
            raise
        in_flight = not self.parent.poll(0)
        self._start_broker_fault(fault, node, {"in_flight": in_flight, "brokers": len(self.cluster.node_ids()),
                                               "waited_for_other_fault": round(waited, 3)}, locked=True)

    def _stall(self, fault: Fault) -> None:
        """The instance stopped itself about to commit its transaction: keep it stopped past
        ``transaction.timeout.ms``, then wake it."""
        deadline = time.monotonic() + 5
        while _state(self.proc.pid) not in ("T", "t", None) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.history.add(self.number, {"type": "stalled", "point": self.fired, "seconds": STALL_SECONDS,
                                       "transaction_timeout_ms": TXN_TIMEOUT_MS})
        time.sleep(STALL_SECONDS)
        self.fired = fault.point
        self.resume()

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.history.add(self.number, {"type": "resumed"})

    def reap(self) -> None:
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.parent.close()


def _state(pid: int) -> str | None:
    """The process state letter from /proc (``T``: stopped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _run_instance(config: TaskConfig, fault: Fault | None, mode: str, number: int, history: History) -> str:
    return Instance(config, fault, mode, number, history).collect()
