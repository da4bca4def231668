"""The scenario driver: runs an EOS task in child processes under a fault schedule and records history.

A scenario loads a seeded input, then starts task instances one after another in children forked
from a preloaded server (multiprocessing's forkserver), each with the next fault of the schedule
armed: a crash point (``task.commit.after_eos``, ``store.commit.after_marker``, …, optionally
``@n`` for the n-th time it is reached) or ``kill@n`` (the driver SIGKILLs the child after its
n-th event). On Kafka, the faults of ``faults.kafka``: ``broker-kill@n`` and ``broker-pause@n``
(kill -9 and restart, or SIGSTOP for a while, the task's transaction coordinator after the
instance's n-th event), ``coordinator-kill@n`` (the coordinator killed while the n-th commit is in
flight), which need a cluster this process started (``--broker kafka-local``), and ``txn-timeout@n``
(the instance frozen about to commit, past ``transaction.timeout.ms``). A dead, aborted or
fenced instance is followed by a new one on the same directories until one reaches the end of the
input and closes; then one more instance only recovers, to show the final state.
Every event goes to ``history.jsonl`` with a sequence number, written here, never by the child.
The checkers then judge the history against the lifecycle model.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults import points
from faults.kafka import (
    BROKER_FAULTS,
    CLUSTER_FAULTS,
    COMMIT_IN_FLIGHT,
    STALL_SECONDS,
    TXN_TIMEOUT_MS,
    coordinator_of,
    fault_lock,
    run_broker_fault,
)
from harness.broker import connect
from harness.checkers.eos import Violation, check_all, recovery_report
from harness.runtime import Task, TaskConfig, create_topics, encode
from harness.server import forkserver_context
from harness.stores import resolve
from models.lifecycle import LifecycleModel
from models.workloads import workload

__all__ = ["Fault", "History", "Scenario", "ScheduleError", "parse_schedule", "run_scenario"]

EVENT_TIMEOUT_S = 30.0
# Kafka faults the driver runs beside the instance after its n-th event.
DRIVER_SIDE = ("broker-kill", "broker-pause")
# Kafka faults that start at a point the instance reaches: the point and how it is armed there.
CHILD_ARMED = {"coordinator-kill": (COMMIT_IN_FLIGHT, points.NOTIFY), "txn-timeout": (COMMIT_IN_FLIGHT, points.FREEZE)}


class ScheduleError(ValueError):
    """A fault schedule that names an unknown point or is malformed."""


@dataclass(frozen=True)
class Fault:
    """One fault, armed in one task instance."""

    point: str  # a crash point, "kill" (the driver SIGKILLs after ``hit`` events) or a Kafka fault
    hit: int = 1
    action: str = "kill"  # or "freeze": the process SIGSTOPs itself at the point (a zombie)

    def __str__(self) -> str:
        text = self.point if self.hit == 1 else f"{self.point}@{self.hit}"
        return f"freeze:{text}" if self.action == "freeze" else text


def parse_schedule(text: str | list[str] | tuple[str, ...]) -> tuple[Fault, ...]:
    """``"task.commit.after_eos@2,kill@7"`` → faults, checked against the declared points."""
    items = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    faults = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        action = "kill"
        if item.startswith("freeze:"):
            action, item = "freeze", item.removeprefix("freeze:")
        name, _, hit = item.partition("@")
        if hit and not hit.isdigit():
            raise ScheduleError(f"bad fault {item!r}: the part after '@' must be a count, e.g. {name}@2")
        if name != "kill" and name not in BROKER_FAULTS:
            try:
                points.check_known(name)
            except points.UnknownCrashPoint as exc:
                raise ScheduleError(str(exc)) from None
        if (name == "kill" or name in BROKER_FAULTS) and action == "freeze":
            raise ScheduleError(f"freeze: takes a crash point, not {name}")
        faults.append(Fault(name, int(hit or 1), action))
    return tuple(faults)


@dataclass(frozen=True)
class Scenario:
    store: str
    workload: str
    seed: int
    schedule: tuple[Fault, ...] = ()
    broker: str = "embedded"
    records: int | None = None
    commit_interval: int = 10
    repro_broker: str | None = None  # how the CLI names the broker (kafka-local), when not ``broker``

    def repro(self) -> str:
        parts = [f"eos-harness run --store {self.store} --workload {self.workload}"]
        if self.schedule:
            parts.append(f"--crash-at {','.join(map(str, self.schedule))}")
        broker = self.repro_broker or self.broker
        if broker != "embedded":
            parts.append(f"--broker {broker}")
        if self.records is not None:
            parts.append(f"--records {self.records}")
        if self.commit_interval != 10:
            parts.append(f"--commit-interval {self.commit_interval}")
        parts.append(f"--seed {self.seed}")
        return " ".join(parts)


def _child_main(config: TaskConfig, fault: Fault | None, mode: str, conn) -> None:
    """Entry point of a task instance (runs in the forked child)."""
    try:
        points.set_notifier(lambda name: conn.send({"type": "fault_fired", "point": name}))
        task = Task(config, emit=conn.send)
        if fault is not None and fault.point != "kill" and fault.point not in DRIVER_SIDE:
            point, action = CHILD_ARMED.get(fault.point, (fault.point, fault.action))
            if point == COMMIT_IN_FLIGHT:
                import harness.broker.kafka  # noqa: F401 - declares the point
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


@dataclass
class History:
    path: Path
    events: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._file = self.path.open("w")
        self._lock = threading.Lock()  # a broker fault records its event from its own thread

    def add(self, instance: int, event: dict) -> dict:
        with self._lock:
            event = {"seq": len(self.events), "instance": instance, **event}
            self.events.append(event)
            self._file.write(json.dumps(event) + "\n")
        return event

    def close(self) -> None:
        self._file.close()


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


def _input_records(scenario: Scenario) -> list[tuple[bytes, bytes]]:
    wl = workload(scenario.workload)
    return wl.generate(random.Random(scenario.seed), scenario.records or wl.default_records)


def broker_spec(scenario: Scenario, run_dir: Path) -> str:
    if scenario.broker == "embedded":
        return f"embedded:{run_dir / 'broker.sqlite'}"
    return scenario.broker


def run_scenario(scenario: Scenario, run_dir: Path, keep: bool = True) -> dict:
    """Run one scenario in ``run_dir`` (created, emptied first) and return its verdict object."""
    resolve(TaskConfig.for_store(scenario.store, broker="", state_dir="", workload=scenario.workload).store)
    cluster = None
    names = {f.point for f in scenario.schedule}
    if names & set(BROKER_FAULTS) and not scenario.broker.startswith("kafka://"):
        raise ScheduleError(
            f"{', '.join(sorted(names & set(BROKER_FAULTS)))}: Kafka faults need a Kafka broker "
            f"(--broker kafka-local, or kafka://HOST:PORT for txn-timeout); the broker is {scenario.broker!r}"
        )
    if names & set(CLUSTER_FAULTS):
        from harness.cluster import cluster_for

        cluster = cluster_for(scenario.broker)
        if cluster is None:
            raise ScheduleError(
                f"{', '.join(sorted(names & set(CLUSTER_FAULTS)))}: these faults kill or stop broker processes, so "
                f"they need a Kafka cluster this process started (--broker kafka-local); {scenario.broker!r} is not one"
            )
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    started = time.perf_counter()
    started_at = time.time()
    records = _input_records(scenario)
    spec = broker_spec(scenario, run_dir)
    if "txn-timeout" in names and "transaction.timeout.ms" not in spec:
        spec += ("&" if "?" in spec else "?") + f"transaction.timeout.ms={TXN_TIMEOUT_MS}"
    # Unique per run: on a shared Kafka cluster topics outlive the run directory.
    app = f"eos-{scenario.seed}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    config = TaskConfig.for_store(
        scenario.store,
        broker=spec,
        state_dir=str(run_dir / "state"),
        workload=scenario.workload,
        application_id=app,
        commit_interval=scenario.commit_interval,
    )
    broker = connect(spec)
    try:
        create_topics(broker, config)
        broker.produce(config.input_topic, config.partition, records)
        history = History(run_dir / "history.jsonl")
        history.add(0, {"type": "scenario", "store": scenario.store, "workload": scenario.workload,
                        "seed": scenario.seed, "schedule": [str(f) for f in scenario.schedule],
                        "application_id": app, "broker": spec,
                        "records": len(records)})
        instance = 0
        schedule = list(scenario.schedule)
        ended = None
        zombies: list[Instance] = []
        try:
            for _ in range(len(schedule) + 3):
                instance += 1
                fault = schedule.pop(0) if schedule else None
                current = Instance(config, fault, "run", instance, history, cluster)
                ended = current.collect(stop_when_frozen=True)
                if ended == "frozen":
                    # The frozen instance is a zombie: the task moves to another instance (its own
                    # state directory, as on another host) while the zombie still holds its own.
                    zombies.append(current)
                    config = replace(config, state_dir=config.state_dir + "-moved")
                    history.add(0, {"type": "migrated", "state_dir": config.state_dir})
                    continue
                # A fenced instance (its transaction timed out) leaves like a crashed one: the task
                # moves on to a new instance, as Kafka Streams does after a TaskMigratedException.
                if ended in ("done", "error", "hang"):
                    break
            if ended == "done":
                instance += 1
                _run_instance(config, None, "verify", instance, history)
            for zombie in zombies:  # wake the zombies: each must find itself fenced
                zombie.resume()
                zombie.collect()
        finally:
            for zombie in zombies:
                if zombie.proc.is_alive():
                    zombie.proc.kill()
                    zombie.reap()
        output = broker.read_committed(config.output_tp, 0)
        committed = broker.committed_offsets(config.group_id, [config.input_tp]).get(config.input_tp) or 0
        history.add(0, {"type": "output", "committed_position": committed,
                        "records": [[encode(r.key), encode(r.value)] for r in output]})
        history.close()
    finally:
        broker.close()
    model = LifecycleModel(workload(scenario.workload), records)
    violations = check_all(history.events, model)
    result = verdict(scenario, history.events, violations, recovery_report(history.events, model))
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["started_at"] = round(started_at, 3)  # wall clock (Unix time), to line scenarios up with each other
    result["history"] = str(run_dir / "history.jsonl")
    (run_dir / "verdict.json").write_text(json.dumps(result, indent=2))
    if not keep and not violations:
        shutil.rmtree(run_dir / "state", ignore_errors=True)
    return result


def verdict(scenario: Scenario, events: list[dict], violations: list[Violation], recovery: list[dict]) -> dict:
    hit = [e["point"] if e["type"] == "crash" else f"freeze:{e['point']}" for e in events if e["type"] in ("crash", "frozen")]
    hit += [e["fault"] for e in events if e["type"] == "broker_fault" and "error" not in e]
    hit += ["txn-timeout" for e in events if e["type"] == "stalled"]
    return {
        "store": scenario.store,
        "workload": scenario.workload,
        "broker": scenario.broker,
        "seed": scenario.seed,
        "schedule": [str(f) for f in scenario.schedule],
        "crash_points": hit,
        # A scheduled fault that the harness failed to inject (e.g. a broker that did not restart).
        "fault_errors": [f"{e['fault']}: {e['error']}" for e in events if e["type"] == "broker_fault" and "error" in e],
        "verdict": "fail" if violations else "pass",
        "violations": [v.to_json() for v in violations],
        "recovery": recovery,
        "repro": scenario.repro(),
    }

