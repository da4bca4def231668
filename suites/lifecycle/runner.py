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

import contextlib
import json
import os
import random
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from eos_harness.broker import connect
from eos_harness.broker.spec import BrokerSpec
from eos_harness.cluster.local import version_of
from eos_harness.commands import command_line
from eos_harness.faults import kinds
from eos_harness.history import History
from eos_harness.kafka_streams.pool import shared
from eos_harness.models.lifecycle import LifecycleModel
from eos_harness.models.workloads import workload
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import children_output, forkserver_context
from eos_harness.process.zombies import zombies
from eos_harness.rundir import claim
from eos_harness.runtime import TaskConfig, create_topics, encode
from eos_harness.runtime.store_duties import metrics_of, store_metrics, warnings_of
from eos_harness.stores import StoreFactoryError, StoreRef
from eos_harness.stores.child_probe import store_ref
from eos_harness.stores.probe import probe_store
from eos_harness.stores.registry import base_store, builtin_spec
from eos_harness.suite import CampaignSession
from eos_harness.suites.lifecycle import plan
from eos_harness.suites.lifecycle.checks import broker_failure, check_all, recovery_report
from eos_harness.suites.lifecycle.coverage import declared_not_applicable, exercised, not_applicable
from eos_harness.suites.lifecycle.instance import Instance, _run_instance
from eos_harness.suites.lifecycle.scenario import Scenario
from eos_harness.suites.lifecycle.schedule import ScheduleError
from eos_harness.verdict import PASS, Violation, error_reason, finding_violation, unfired_is_error, verdict_of

__all__ = ["CHILDREN_LOG", "FATAL", "Scenario", "broker_spec", "campaign_fields", "campaign_session",
           "check_workload_fits", "error_result", "error_verdict", "probe_stores", "run_one", "run_scenario", "verdict"]


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
    # One pool of store JVMs (Kafka Streams' stores) for the scenario's task instances, and for a campaign's
    # scenarios running at once: each instance's store borrows one already started (the pool keeps one booted
    # ahead for each scenario running), and one whose store closed cleanly serves the next instance.
    with shared(lambda: forkserver_context().output, spare=1):
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
    waived = Counter(v.check for v in violations if v.check in scenario.allow)  # --allow: counted, not judged
    violations = [v for v in violations if v.check not in scenario.allow]
    result = verdict(scenario, history.events, violations, recovery_report(history.events, model),
                     error=broker_failure(history.events), waived=waived)
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
            error: str | None = None, waived: Mapping[str, int] | None = None) -> dict:
    """The scenario's verdict object. ``error``: why the scenario could not be run to its end (the
    verdict is then ``error``, with this reason, unless a violation was found before); ``waived``: the
    violations of the scenario's allowed checks (``--allow``), counted per check (named with ``allowed``)."""
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
    if scenario.allow:
        result["allowed"] = list(scenario.allow)
        result["waived"] = {check: (waived or {})[check] for check in scenario.allow if (waived or {}).get(check)}
    if scenario.broker.is_kafka:
        result["kafka_version"] = version_of(scenario.broker)  # the broker's Kafka release (None: not ours to ask)
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


# -- a campaign (the suite contract, :mod:`eos_harness.suite_campaign`) ---------------------------------------

CHILDREN_LOG = "children.log"  # in the run directory: every child's stdout and stderr (the JSON's ``log``)
FATAL = (ScheduleError, StoreFactoryError)  # a campaign whose schedule or store cannot be read stops: its input is wrong


@contextlib.contextmanager
def campaign_session(options: Mapping, say: Callable[[str], object] = lambda text: None) -> Iterator[CampaignSession]:
    """The campaign's broker, opened once for every scenario (``opened`` when the caller opened it), and each
    store probed once in a child (:func:`probe_stores`) before the plan: a store that hangs, raises or returns
    a wrong type there is a result of its own (``"probe": true``) and is not planned; a crash point it
    reaches but never declared is declared for the run and planned, with a warning (``warnings``). A store
    these workloads cannot catch is left out (:func:`.plan.left_out`); a task's store gets no workload of a global
    store. ``refs``: the stores resolved at the edge (else resolved here)."""
    from eos_harness.broker.opening import open_broker
    from eos_harness.process.server import held_output

    timeout, workloads = options.get("store_timeout") or STORE_TIMEOUT_S, list(options["workloads"])
    given = options.get("refs") or {}
    with held_output(children=True):  # its module's output on import: for the run's log, off the terminal
        refs = {s: store_ref(given.get(s) or base_store(s), timeout) for s in options["stores"]}
    task_stores = plan.declared_task_stores(refs)
    outside = plan.left_out(list(refs), workloads, refs)
    stores = [s for s in refs if s not in outside]
    if not stores:
        raise ValueError("no store left to run: " + "; ".join(f"{s}: {why}" for s, why in outside.items()))
    with contextlib.ExitStack() as stack:
        broker = options.get("opened") or stack.enter_context(open_broker(options["broker"], say=say)).spec
        faults = plan.kafka_faults(broker)
        reached, probed, warnings = probe_stores(stores, options["seed"], timeout, broker, options["workers"])
        yield CampaignSession(
            {"stores": [s for s in stores if s in reached], "workloads": workloads, "opened": broker,
             "reached": reached, "broker_faults": faults, "store_timeout": timeout, "task_stores": task_stores,
             **({"allow": options["allow"]} if options.get("allow") else {})},
            results=probed, left_out=outside, fields={"kafka_faults": faults, "warnings": warnings},
            not_applicable={s: declared_not_applicable(refs[s].window, s in task_stores) for s in stores})


def campaign_fields(campaign: dict) -> dict:
    """What a campaign's JSON says besides: the warnings of its probes and scenarios (once each), and each
    store's KIP-892 commit metrics over its scenarios (``metrics``)."""
    results = [r for r in campaign["scenarios"] if not r.get("probe")]
    return {"warnings": list(dict.fromkeys(campaign.get("warnings", []) + [w for r in results
                                                                          for w in r.get("warnings", [])])),
            "metrics": store_metrics(results)}


def probe_stores(stores: list[str], seed: int, store_timeout: float, broker: BrokerSpec,
                 workers: int) -> tuple[dict[str, list[str]], list[dict], list[str]]:
    """Probe each store once (in children, at most ``workers`` at a time): the crash points of each
    store that can be planned, a result for each store that broke the protocol (``fail``; not
    planned) or could not be probed (``error``; planned with the points found), and the warnings. A
    crash point a store reaches but never declared is declared for the run (here, and in each task
    process that arms it) and planned like a declared one, with a warning that says how to declare it."""
    from eos_harness.faults import points

    specs = {s: base_store(s) for s in stores}
    unique = sorted(set(specs.values()))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        probes = dict(zip(unique, pool.map(lambda spec: probe_store(spec, store_timeout), unique), strict=True))
    reached: dict[str, list[str]] = {}
    results: list[dict] = []
    warnings = [w for spec in unique if (w := probes[spec].undeclared_warning(spec))]
    for name in (p for spec in unique for p in probes[spec].undeclared):
        points.declare_for_run(name)
    for store, spec in specs.items():
        probe = probes[spec]
        base = {**verdict(Scenario(store, "-", seed, broker=broker), [], [], []), "workload": None, "probe": True,
                "index": "probe", "repro": command_line("verify", spec, "--store-timeout", f"{store_timeout:g}")}
        if probe.finding is not None:
            results.append({**base, "verdict": "fail", "violations": [finding_violation(probe.finding).to_json()]})
            continue
        reached[store] = [*probe.points, *probe.undeclared]
        if probe.error:
            results.append({**base, "verdict": "error", "error": probe.error})
    return reached, results, warnings
