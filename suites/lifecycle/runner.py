"""The scenario driver: runs an EOS task in child processes under a fault schedule and records history.

A scenario loads a seeded input, then starts task instances one after another in children forked
from a preloaded server (multiprocessing's forkserver), each with the next fault of the schedule
armed: a crash point (``task.commit.after_eos``, ``store.commit.after_marker``, …, optionally
``@n`` for the n-th time it is reached) or ``kill@n`` (the driver SIGKILLs the child after its
n-th event). On Kafka, the faults of ``faults.kafka``: ``broker-kill@n`` and ``broker-pause@n``
(kill -9 and restart, or SIGSTOP for a while, the task's transaction coordinator after the
instance's n-th event), ``coordinator-kill@n`` (the coordinator killed while the n-th commit is in
flight), which need a cluster this process started (``--broker kafka-local``), and ``txn-timeout@n``
(the instance frozen about to commit, past ``transaction.timeout.ms``). Each is a kind of
``faults.kinds``, whose entry says what it needs and how it is applied. A dead, aborted or
fenced instance is followed by a new one on the same directories until one reaches the end of the
input and closes; then one more instance only recovers, to show the final state.
Every event goes to ``history.jsonl`` with a sequence number, written here, never by the child.
The checkers then judge the history against the lifecycle model.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from eos_harness.broker import connect
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.faults import kinds
from eos_harness.history import History
from eos_harness.models.lifecycle import LifecycleModel
from eos_harness.models.workloads import workload
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import children_output
from eos_harness.process.zombies import zombies
from eos_harness.rundir import claim
from eos_harness.runtime import TaskConfig, create_topics, encode
from eos_harness.runtime.store_duties import metrics_of, warnings_of
from eos_harness.stores import StoreRef
from eos_harness.stores.child_probe import store_ref
from eos_harness.stores.registry import builtin_spec
from eos_harness.suites.lifecycle.checks import broker_failure, check_all, recovery_report
from eos_harness.suites.lifecycle.coverage import exercised, not_applicable
from eos_harness.suites.lifecycle.instance import Instance, _run_instance
from eos_harness.suites.lifecycle.schedule import Fault, ScheduleError
from eos_harness.verdict import PASS, Violation, error_reason, unfired_is_error, verdict_of

__all__ = ["Scenario", "broker_spec", "check_workload_fits", "error_result", "error_verdict", "run_one", "run_scenario",
           "verdict"]


@dataclass(frozen=True)
class Scenario:
    """One scenario. ``broker``: what it runs on, a :class:`BrokerSpec` (its text is accepted and
    parsed): a started ``kafka-local`` is a ``kafka://127.0.0.1:…`` spec whose CLI text, in the
    replay command, stays ``kafka-local``."""

    store: str
    workload: str
    seed: int
    schedule: tuple[Fault, ...] = ()
    broker: BrokerSpec = EMBEDDED
    records: int | None = None
    commit_interval: int = 10
    store_timeout: float = STORE_TIMEOUT_S  # bound on one call into the store (a longer one: store_hang)

    def __post_init__(self) -> None:
        object.__setattr__(self, "broker", parse(self.broker, internal=True))

    def repro(self) -> str:
        from eos_harness.commands import command_line

        words = ["run", "--store", self.store, "--workload", self.workload]
        if self.schedule:
            words += ["--crash-at", ",".join(map(str, self.schedule))]
        if self.broker.is_kafka:
            words += ["--broker", self.broker.cli_text]
        if self.records is not None:
            words += ["--records", self.records]
        if self.commit_interval != 10:
            words += ["--commit-interval", self.commit_interval]
        if self.store_timeout != STORE_TIMEOUT_S:
            words += ["--store-timeout", f"{self.store_timeout:g}"]
        return command_line(*words, "--seed", self.seed)


def _input_records(scenario: Scenario) -> list[tuple[bytes, bytes]]:
    wl = workload(scenario.workload)
    return wl.generate(random.Random(scenario.seed), scenario.records or wl.default_records)


def broker_spec(scenario: Scenario, run_dir: Path) -> BrokerSpec:
    """The broker the scenario's task processes open: on the embedded broker, its own SQLite file."""
    if scenario.broker.kind == "embedded":
        return scenario.broker.at_file(run_dir / "broker.sqlite")
    return scenario.broker


def run_scenario(scenario: Scenario, run_dir: Path, keep: bool = True, log: str | None = None,
                 faults_must_fire: bool = False) -> dict:
    """Run one scenario in ``run_dir`` and return its verdict object. ``run_dir`` is created, or, if
    the harness made it, emptied of earlier results (see :func:`eos_harness.rundir.claim`). ``log``: a
    file name in ``run_dir`` that every child's stdout and stderr go to (the verdict's ``log``), not
    the terminal (``run``; a campaign opens its own, for all its scenarios). ``faults_must_fire``: a
    scheduled fault never reached makes the verdict ``error`` (``run --crash-at``: the user asked for it);
    a campaign's drawn faults are listed in ``not_fired`` only."""
    store_ref(TaskConfig.for_store(scenario.store, broker="", state_dir="", workload=scenario.workload).store,
              scenario.store_timeout)  # resolved at the edge (a usage error there for a bad store)
    scheduled = [kinds.kind_of(f) for f in scenario.schedule]
    _check_needs(scheduled, scenario.broker)
    cluster = None
    if any(kind.needs for kind in scheduled):
        from eos_harness.cluster import cluster_for

        cluster = cluster_for(scenario.broker)
    claim(run_dir)
    if log is None:
        return _run_claimed(scenario, run_dir, keep, scheduled, cluster, faults_must_fire=faults_must_fire)
    with children_output(run_dir / log) as log_file:
        return _run_claimed(scenario, run_dir, keep, scheduled, cluster, log_file, faults_must_fire)


def _run_claimed(scenario: Scenario, run_dir: Path, keep: bool, scheduled: list[kinds.FaultKind], cluster,
                 log: Path | None = None, faults_must_fire: bool = False) -> dict:
    started = time.perf_counter()
    started_at = time.time()
    records = _input_records(scenario)
    spec = broker_spec(scenario, run_dir)
    options = dict(o for kind in scheduled for o in kind.broker_options)
    if options:  # the user's own setting of an option wins
        spec = spec.with_properties({k: v for k, v in options.items() if k not in spec.client_properties})
    # Unique per run: on a shared Kafka cluster topics outlive the run directory.
    app = f"eos-{scenario.seed}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    config = TaskConfig.for_store(
        scenario.store,
        broker=spec.text,
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
                        "application_id": app, "broker": spec.text,
                        "records": len(records)})
        instance = 0
        schedule = list(scenario.schedule)
        ended = None
        with zombies() as frozen:
            for _ in range(len(schedule) + 3):
                instance += 1
                fault = schedule.pop(0) if schedule else None
                current = Instance(config, fault, "run", instance, history, cluster, scenario.store_timeout)
                ended = current.collect()
                if ended == "frozen":
                    # The frozen instance is a zombie: the task moves to another instance (its own
                    # state directory, as on another host) while the zombie still holds its own.
                    frozen.append(current)
                    config = replace(config, state_dir=config.state_dir + "-moved")
                    history.add(0, {"type": "migrated", "state_dir": config.state_dir})
                    continue
                # A fenced instance (its transaction timed out) leaves like a crashed one: the task
                # moves on to a new instance, as Kafka Streams does after a TaskMigratedException.
                if ended in ("done", "error", "hang"):
                    break
            if ended == "done":
                instance += 1
                _run_instance(config, None, "verify", instance, history, scenario.store_timeout)
        output = broker.read_committed(config.output_tp, 0)
        committed = broker.committed_offsets(config.group_id, [config.input_tp]).get(config.input_tp) or 0
        history.add(0, {"type": "output", "committed_position": committed,
                        "records": [[encode(r.key), encode(r.value)] for r in output]})
        history.close()
    finally:
        broker.close()
    model = LifecycleModel(workload(scenario.workload), records, store_ref(config.store, scenario.store_timeout).semantics)
    violations = check_all(history.events, model)
    result = verdict(scenario, history.events, violations, recovery_report(history.events, model),
                     error=broker_failure(history.events))
    if faults_must_fire:
        result = unfired_is_error(result)
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["started_at"] = round(started_at, 3)  # wall clock (Unix time), to line scenarios up with each other
    result["history"] = str(run_dir / "history.jsonl")
    if log is not None:
        result["log"] = str(log)
    (run_dir / "verdict.json").write_text(json.dumps(result, indent=2))
    if not keep and result["verdict"] == PASS:
        shutil.rmtree(run_dir / "state", ignore_errors=True)
    return result


def check_workload_fits(store: StoreRef, workload_name: str) -> None:
    """Refuse (ValueError, a usage error) a workload fed by several changelog partitions (``global``) on a
    store that declares it is a task's store, fed by its own partition only
    (``Capabilities(several_changelog_partitions=False)``, as its reference carries it, asked in a
    child): every commit of such a workload names several partitions, which a task's store refuses, and
    the run would say ``store_raised`` of a store that keeps its declared promise."""
    partitions = workload(workload_name).changelog_partitions
    if partitions > 1 and not getattr(store.capabilities, "several_changelog_partitions", True):
        raise ValueError(f"--workload {workload_name} is a global store fed by {partitions} changelog partitions, and "
                         f"store {store.spec!r} declares it is a task's store, fed by its own changelog partition "
                         "only (Capabilities(several_changelog_partitions=False)): run it with a workload of one "
                         "partition (every other workload)")


def _check_needs(scheduled: list[kinds.FaultKind], broker: BrokerSpec) -> None:
    """Refuse a schedule whose fault kinds need what a run on ``broker`` does not have (for each kind,
    its first need unmet: a kind lists its needs from the broadest)."""
    lacking: dict[kinds.Need, list[str]] = {}
    for kind in scheduled:
        for need in kind.needs_unmet(broker)[:1]:
            if kind.name not in lacking.setdefault(need, []):
                lacking[need].append(kind.name)
    if lacking:
        raise ScheduleError("; ".join(f"{', '.join(names)}: needs {need.what} ({need.how})"
                                      for need, names in lacking.items()) + f"; the broker is {broker.cli_text!r}")


def verdict(scenario: Scenario, events: list[dict], violations: list[Violation], recovery: list[dict],
            error: str | None = None) -> dict:
    """The scenario's verdict object. ``error``: why the scenario could not be run to its end (the
    verdict is then ``error``, with this reason, unless a violation was found before)."""
    hit = [e["point"] if e["type"] == "crash" else kinds.FREEZE.prefix + e["point"]
           for e in events if e["type"] in ("crash", "frozen")]
    hit += [e["fault"] for e in events if e["type"] == "broker_fault" and "error" not in e]
    hit += [e["fault"] for e in events if e["type"] == "stalled"]
    failed = [e for e in events if e["type"] == "broker_fault" and "error" in e]
    # Faults fire in their order, one per task instance: those past the ones that fired (or failed to be
    # injected) were never reached. A scenario cut short (an error) says so itself.
    not_fired = [str(f) for f in scenario.schedule][len(hit) + len(failed):] if error is None else []
    spec = builtin_spec(scenario.store)  # only a built-in (a mutant, an unsafe variant) is expected to fail
    result = {
        "suite": "lifecycle",
        "store": scenario.store,
        "expected": "fail" if spec is not None and spec.expected_to_fail else "pass",  # a mutant must be caught
        "workload": scenario.workload,
        "broker": scenario.broker.text,
        "seed": scenario.seed,
        "schedule": [str(f) for f in scenario.schedule],
        "crash_points": hit,
        # A scheduled fault that the harness failed to inject (e.g. a broker that did not restart).
        "fault_errors": [f"{e['fault']}: {e['error']}" for e in failed],
        "not_fired": not_fired,  # scheduled faults never reached (for `run`, an error: faults_must_fire)
        "verdict": verdict_of(violations, error=error),
        "violations": [v.to_json() for v in violations],
        "recovery": recovery,
        "repro": scenario.repro(),
        "exercised": exercised(events),  # the checks whose condition the history met (suites/lifecycle/coverage.py)
        "not_applicable": not_applicable(events),  # the checks that cannot fire on this store, with why
        "metrics": metrics_of(events),  # KIP-892 commit metrics per store and instance (harness/runtime/metrics.py)
        "warnings": warnings_of(events),
    }
    if error is not None:
        result["error"] = error
    return result


def error_verdict(scenario: Scenario, exc: BaseException, run_dir: Path | None = None) -> dict:
    """The verdict object of a scenario that could not be run to its end (a broker that stopped
    answering, a harness error): verdict ``error``, the reason, the replay command, and the history
    recorded so far when there is one in ``run_dir``."""
    result = verdict(scenario, [], [], [], error=error_reason(exc))
    if run_dir is not None and (run_dir / "history.jsonl").exists():
        result["history"] = str(run_dir / "history.jsonl")
    return result



def run_one(scenario: Scenario, directory: Path) -> dict:
    """One scenario of a campaign (the suite contract): its run directory kept only when it did not pass; a
    scheduled fault that never fired makes it an error (what was planned was not run: the campaign's plan
    draws only faults a scenario reaches, :func:`eos_harness.suites.lifecycle.plan.campaign_plan`)."""
    return run_scenario(scenario, directory, False, faults_must_fire=True)


error_result = error_verdict  # the suite contract's name for it
