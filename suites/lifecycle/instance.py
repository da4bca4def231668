"""One task instance in a child process, with its fault armed; the driver collects its events.

The fault's kind (:mod:`eos_harness.faults.kinds`) says what happens: the point the child arms, and
the hooks the driver calls before the child starts, after its n-th event and when its armed point
fires. The hooks act through this instance's methods (kill, freeze, broker faults beside it).

The task's store runs guarded (:mod:`eos_harness.process.guard`): a call into it that runs longer than
the store timeout is a ``hang`` event naming the operation, with the child's stack; a call that
raises or returns the wrong type ends the instance with an ``error`` event carrying the finding.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import psutil
from eos_harness.broker import BrokerError
from eos_harness.faults import points
from eos_harness.faults.kafka import (
    STALL_SECONDS,
    TXN_TIMEOUT_MS,
    coordinator_of,
    fault_lock,
)
from eos_harness.faults.kinds import run_broker_fault
from eos_harness.history import History
from eos_harness.process.child_events import held_after, report_fault_firings, run_reporting_child
from eos_harness.process.faulted import FaultedChild
from eos_harness.process.guard import (
    STORE_TIMEOUT_S,
    CallClock,
    StoreFinding,
    attach_clock,
    install_stack_dump,
    stack_and_kill,
)
from eos_harness.process.server import (
    OwnOutput,
    borrow,
    forkserver_context,
    output_to,
    preload_store,
    receive_lent,
)
from eos_harness.runtime import Task, TaskConfig
from eos_harness.stores import LendError
from eos_harness.suites.lifecycle.schedule import Fault

EVENT_TIMEOUT_S = 30.0  # no event for this long, outside any store call: the task hangs
POLL_S = 0.25  # how often the driver looks at the running store call while no event comes
def _child_main(config: TaskConfig, armed: tuple[str, int, str] | None, mode: str, conn, stacks=None,
                clock=None, for_run: bool = False, output: str | None = None, hold: int | None = None,
                lent_in=None, lent_out=None) -> None:
    """Entry point of a task instance (runs in the forked child); ``armed``: (point, hit, action);
    ``stacks``: where to write the stacks on SIGUSR1; ``clock``: the driver's CallClock; ``for_run``:
    the armed point is a store's own that no module declares, declared for the run by the driver;
    ``output``: the file its stdout and stderr go to (its :class:`OwnOutput`), if any; ``hold``: wait after
    this many events for the driver's kill (:func:`~eos_harness.process.child_events.held_after`); ``lent_in``, ``lent_out``: the pipes of
    what the driver lent the task's store (a JVM for Kafka Streams' stores, :func:`~eos_harness.process.server.borrow`)."""
    output_to(output)
    receive_lent(config.store, lent_in, lent_out)
    if stacks is not None:
        install_stack_dump(stacks)
    if clock is not None:
        attach_clock(clock)

    def run_task() -> None:
        report_fault_firings(conn)
        task = Task(config, emit=held_after(conn.send, hold))
        if armed is not None:
            points.load_declarations()
            if for_run:
                points.declare_for_run(armed[0])
            points.arm(*armed)
        if mode == "verify":
            task.start()
            task._abandon()
            conn.send({"type": "verified"})
        else:
            task.run()

    def what_failed(exc: BaseException) -> dict:
        if isinstance(exc, StoreFinding):
            return {"store": exc.to_json()}
        if isinstance(exc, BrokerError):  # the broker failed the task: the environment, not the store
            return {"broker": f"{type(exc).__name__}: {exc}"}
        return {}

    run_reporting_child(conn, run_task, what_failed)


class Instance(FaultedChild):
    """One task instance in a child process; the driver collects its events into the history
    (``collect()``: until it ends: done, verified, fenced, crash, error, hang, or frozen)."""

    endings = ("done", "verified", "fenced", "error")

    def __init__(self, config: TaskConfig, fault: Fault | None, mode: str, number: int, history: History,
                 cluster=None, store_timeout: float = STORE_TIMEOUT_S) -> None:
        preload_store(config.store, store_timeout)  # a user's store module: imported once, into the zygote
        ctx = forkserver_context()
        self.config, self.cluster, self.store_timeout = config, cluster, store_timeout
        self._broker_fault: threading.Thread | None = None
        self.parent, child = ctx.Pipe(duplex=False)
        super().__init__(fault, number, history)
        self.coordinator: int | None = None
        if self.kind is not None and self.kind.before_start is not None:
            self.kind.before_start(self, fault)
        armed = self.kind.armed_in_child(fault) if self.kind is not None else None
        self.stacks, stack_writer = ctx.Pipe(duplex=False)
        self.clock = CallClock()
        self.resumed_ns = 0  # a call running while the instance was frozen counts from its waking
        for_run = armed is not None and points.declared_for_run(armed[0])
        self.output = OwnOutput()  # what this child writes, apart from the other scenarios' children
        # A resource the store's process borrows from the run's shared pool (a JVM already started, for Kafka
        # Streams' stores); none shared: the store's process makes its own.
        try:
            self.lent, self.pool, pipes = borrow(config.store, {}, shared_only=True)
        except LendError:
            self.lent, self.pool, pipes = None, None, None  # the store's own start says why, as an error event
        self.proc = ctx.Process(target=_child_main, args=(config, armed, mode, child, stack_writer, self.clock.handle,
                                                          for_run, self.output.path, self.hold, *(pipes or (None, None))),
                                daemon=True)
        try:
            self.proc.start()
        except BaseException:
            self._end_lent()
            raise
        finally:
            for pipe in pipes or ():
                pipe.close()
        child.close()
        stack_writer.close()
        self.clock.sent()
        history.add(number, {"type": "start", "mode": mode, "fault": str(fault) if fault else None, "pid": self.proc.pid})

    def record(self, event: dict) -> None:
        if event["type"] == "error":  # the first lines the child wrote (to the run's log) may explain it
            event = self._with_output(event)
        super().record(event)
        if event["type"] == "aborted":
            self.fired = "transaction.aborted"

    def _with_output(self, event: dict) -> dict:
        text = self.output.first_lines()
        return {**event, "output": text} if text else event

    def record_crash(self) -> None:
        if self.fired is not None:
            super().record_crash()
            return
        # Died outside any fault (at open, say): what it wrote to the run's log explains it.
        self.history.add(self.number, self._with_output({"type": "crash", "point": "unexpected-exit",
                                                         "exitcode": self.proc.exitcode}))

    def _ended(self) -> None:
        if self._broker_fault is not None:
            self._broker_fault.join()
        self.reap()

    def _wait_for_event(self) -> bool:
        """True when an event is there; False when the instance hangs (recorded, the child killed): a
        store call running longer than the store timeout, or no event for EVENT_TIMEOUT_S (at least
        the store timeout) outside any store call."""
        waited_since = time.monotonic()
        task_timeout = max(EVENT_TIMEOUT_S, self.store_timeout)
        while not self.parent.poll(POLL_S):
            running = self.clock.running(self.resumed_ns)
            if running is not None and running[1] >= self.store_timeout:
                operation = running[0]
            elif running is None and time.monotonic() - waited_since >= task_timeout:
                operation = None
            else:
                continue
            stack = stack_and_kill(self.proc, self.stacks)
            event = {"type": "hang", "seconds": self.store_timeout if operation else task_timeout, "stack": stack}
            if operation is not None:
                event["operation"] = operation
            self.history.add(self.number, event)
            return False
        return True

    def resolve_coordinator(self) -> None:
        """Note the transaction coordinator now: a fault must act on it at once, later."""
        self.coordinator = coordinator_of(self.cluster, self.config.transactional_id)

    def start_broker_fault(self, fault: Fault, node: int | None = None, extra: dict | None = None,
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

    def kill_coordinator(self, fault: Fault) -> None:
        """The instance stopped itself inside commit_transaction (the kind's child action is a freeze, so
        its commit cannot return before the broker dies, whatever the machine's load): SIGKILL the
        coordinator (restart it in the background), then wake the instance. ``in_flight``: the commit
        had not returned when the broker died."""
        self._until_stopped()
        try:
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
            self.start_broker_fault(fault, node, {"in_flight": in_flight, "brokers": len(self.cluster.node_ids()),
                                                   "waited_for_other_fault": round(waited, 3)}, locked=True)
        finally:
            self._wake()

    def stall(self, fault: Fault) -> None:
        """The instance stopped itself about to commit its transaction: keep it stopped past
        ``transaction.timeout.ms``, then wake it."""
        self._until_stopped()
        self.history.add(self.number, {"type": "stalled", "point": self.fired, "fault": fault.point,
                                       "seconds": STALL_SECONDS, "transaction_timeout_ms": TXN_TIMEOUT_MS})
        time.sleep(STALL_SECONDS)
        self.fired = fault.point
        self.resume()

    def resume(self) -> None:
        self._wake()
        self.history.add(self.number, {"type": "resumed"})

    def _until_stopped(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout``) until the instance's process has stopped itself at its armed point."""
        deadline = time.monotonic() + timeout
        while not _stopped_or_gone(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _wake(self) -> None:
        """SIGCONT the instance's process (a call running while it was stopped counts from now)."""
        self.resumed_ns = time.monotonic_ns()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)

    def reap(self) -> None:
        super().reap()
        self._end_lent()
        self.stacks.close()
        self.clock.close()
        self.output.close()  # into the run's log

    def _end_lent(self) -> None:
        """What the store's process borrowed goes back to its pool when the process ended well (exit 0) and
        the resource says its store is closed; else it dies, as with the process (before the next instance
        opens the store's directory)."""
        lent, self.lent = self.lent, None
        if lent is None:
            return
        if self.proc.exitcode == 0 and lent.idle():
            self.pool.give_back(lent)
        else:
            self.pool.kill(lent)


def _stopped_or_gone(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP), or will never run again (a zombie, or reaped)."""
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP,
                                                psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


def _run_instance(config: TaskConfig, fault: Fault | None, mode: str, number: int, history: History,
                  store_timeout: float = STORE_TIMEOUT_S) -> str:
    return Instance(config, fault, mode, number, history, store_timeout=store_timeout).collect()
