"""The chaos campaign: many seeded scenarios over stores × workloads × fault schedules.

The plan is a pure function of the seed: the same seed yields the same sequence of scenarios
(``--scenarios K`` runs its first K; ``--minutes M`` runs as many as fit). The first scenarios of
each store cover every crash point it reaches; the rest are random schedules of one to three
faults (crash points at a random hit, driver kills after a random number of events).

On Kafka (``--broker kafka-local``) the plan also holds the Kafka faults of ``faults.kafka``
(broker kill, broker pause, coordinator kill mid-commit, transaction timeout; the ones that act on
broker processes only on a cluster this process started), and it interleaves the stores (each
store's coverage list starting at a different point) so that a short campaign on a slow broker
still reaches every point, every store and every broker fault early.

A real store must pass every scenario. A mutant or an unsafe variant must fail at least one:
one that never fails is a hole in the harness. Either is an unexpected result (exit 1).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.kafka import CLUSTER_FAULTS
from harness.driver import Fault, Scenario, ScheduleError, run_scenario, verdict
from harness.runtime import (
    P_AFTER_CHECKPOINT,
    P_AFTER_EOS,
    P_AFTER_STORE,
    P_BEFORE_EOS,
    P_CLOSE_MID,
    P_MID_BATCH,
    P_MID_REPLAY,
    UNSAFE_VARIANTS,
)
from harness.stores import BUILTIN, StoreFactoryError, builtin_specs, reached_points, resolve
from models.workloads import WORKLOADS

LIFECYCLE_POINTS = (P_MID_BATCH, P_BEFORE_EOS, P_AFTER_EOS, P_AFTER_STORE, P_AFTER_CHECKPOINT, P_CLOSE_MID)


def default_stores() -> list[str]:
    return [s.name for s in builtin_specs()] + list(UNSAFE_VARIANTS)


def expected_to_fail(store: str) -> bool:
    spec = BUILTIN.get(store)
    return store in UNSAFE_VARIANTS or (spec is not None and spec.kind == "mutant")


def kafka_faults(broker: str) -> list[str]:
    """The Kafka faults a campaign on ``broker`` can run: none off Kafka, ``txn-timeout`` on any
    Kafka, and the broker-process faults too on a cluster this process started."""
    if not broker.startswith("kafka://"):
        return []
    from harness.cluster import cluster_for

    return [*CLUSTER_FAULTS, "txn-timeout"] if cluster_for(broker) is not None else ["txn-timeout"]


def affects_cluster(scenario: Scenario) -> bool:
    """Whether the scenario's schedule kills or stops broker processes (every client of the cluster sees it)."""
    return any(f.point in CLUSTER_FAULTS for f in scenario.schedule)


def _fault_hit(rng: random.Random, fault: str, commit_interval: int) -> int:
    if fault in ("broker-kill", "broker-pause"):
        return rng.randint(3, 40)  # events of the instance
    return rng.randint(1, 4)  # commits (coordinator-kill, txn-timeout)


def plan(seed: int, stores: list[str], workloads: list[str], commit_interval: int = 10, broker: str = "embedded",
         broker_faults: list[str] | tuple[str, ...] = (), repro_broker: str | None = None) -> Iterator[Scenario]:
    """The campaign's scenarios, in order, forever (the caller stops)."""
    if broker == "embedded" and not broker_faults:
        yield from _plan(seed, stores, workloads, commit_interval)
        return
    for scenario in _plan(seed, stores, workloads, commit_interval, list(broker_faults), interleave=True):
        yield replace(scenario, broker=broker, repro_broker=repro_broker)


def _interleave(lists: list[list[Scenario]]) -> list[Scenario]:
    """Round-robin over the lists."""
    rotated = [lst for lst in lists if lst]
    out: list[Scenario] = []
    for round_ in range(max((len(lst) for lst in rotated), default=0)):
        out.extend(lst[round_] for lst in rotated if round_ < len(lst))
    return out


def _plan(seed: int, stores: list[str], workloads: list[str], commit_interval: int = 10,
          broker_faults: list[str] | None = None, interleave: bool = False) -> Iterator[Scenario]:
    rng = random.Random(seed)
    broker_faults = broker_faults or []
    per_store_points = {s: reached_points(UNSAFE_VARIANTS.get(s, (s,))[0]) for s in stores}
    # Coverage first: every (store, point) once, with a workload rotating through all.
    coverage: list[Scenario] = []
    per_store: list[list[Scenario]] = []
    for store in stores:
        first = len(coverage)
        for point in list(LIFECYCLE_POINTS) + per_store_points[store]:
            wl = workloads[len(coverage) % len(workloads)]  # one step per scenario: every workload in turn
            hit = {P_MID_BATCH: rng.randint(1, 3 * commit_interval), P_CLOSE_MID: 1}.get(point, rng.randint(1, 3))
            coverage.append(Scenario(store, wl, rng.randrange(2**31), (Fault(point, hit),), commit_interval=commit_interval))
        # Recovery interrupted: roll-forward needed, then a crash in the middle of the replay.
        wl = workloads[len(coverage) % len(workloads)]
        coverage.append(
            Scenario(store, wl, rng.randrange(2**31), (Fault(P_AFTER_EOS, 2), Fault(P_MID_REPLAY)), commit_interval=commit_interval)
        )
        mine = coverage[first:]
        lifecycle, own, replay = mine[:len(LIFECYCLE_POINTS)], mine[len(LIFECYCLE_POINTS):-1], mine[-1:]
        # Interleaved: a store's own points first (where mutants show), then the lifecycle windows;
        # for a store expected to fail, the windows with uncommitted writes first; for the others,
        # starting at a different window each, so that every window comes early.
        turn = 0 if expected_to_fail(store) else (2 * sum(not expected_to_fail(x) for x in stores[:stores.index(store)])) % len(lifecycle)
        windows = lifecycle[turn:] + lifecycle[:turn]
        per_store.append(own[:2] + windows[:2] + replay + own[2:] + windows[2:])
    if interleave:
        passing = [s for s in stores if not expected_to_fail(s)] or stores[:1]
        # Every Kafka fault once, on the stores expected to pass in turn, first; then the stores'
        # coverage lists, interleaved.
        faulted = [
            Scenario(passing[i % len(passing)], workloads[i % len(workloads)], rng.randrange(2**31),
                     (Fault(fault, _fault_hit(rng, fault, commit_interval)),), commit_interval=commit_interval)
            for i, fault in enumerate(broker_faults)
        ]
        # Each store's scenarios rotate through every workload (some bugs show on one workload only):
        # a store expected to fail starts with the workloads that use the most store operations, so
        # that a short campaign (a few scenarios per store on Kafka) still reaches its mistake.
        richest_first = sorted(workloads, key=lambda name: -len(WORKLOADS[name].operations))
        per_store = [[replace(sc, workload=richest_first[k % len(workloads)] if expected_to_fail(sc.store)
                              else workloads[(j + k) % len(workloads)]) for k, sc in enumerate(lst)]
                     for j, lst in enumerate(per_store)]
        coverage = faulted + _interleave(per_store)
    yield from coverage
    while True:
        store = rng.choice(stores)
        choices = list(LIFECYCLE_POINTS) + per_store_points[store] + [P_MID_REPLAY, "kill"] + broker_faults
        schedule = []
        for _ in range(rng.randint(1, 3)):
            point = rng.choice(choices)
            if point == "kill":
                hit = rng.randint(1, 25)
            elif point == P_MID_BATCH:
                hit = rng.randint(1, 3 * commit_interval)
            elif point == P_CLOSE_MID:
                hit = 1
            elif point in broker_faults:
                hit = _fault_hit(rng, point, commit_interval)
            else:
                hit = rng.randint(1, 4)
            schedule.append(Fault(point, hit))
        yield Scenario(store, rng.choice(workloads), rng.randrange(2**31), tuple(schedule), commit_interval=commit_interval)


@dataclass
class StoreTally:
    store: str
    expected_fail: bool
    total: int = 0
    failed: int = 0
    errors: int = 0  # scenarios that could not be run to their end
    checks: dict[str, int] = field(default_factory=dict)

    @property
    def unexpected(self) -> bool:
        return (self.failed > 0) != self.expected_fail

    @property
    def status(self) -> str:
        if self.expected_fail:
            return "caught" if self.failed else "ERROR" if self.errors else "NOT CAUGHT"
        return "FAILED" if self.failed else "ERROR" if self.errors else "ok"


def run_campaign(
    seed: int,
    out_dir: Path,
    stores: list[str] | None = None,
    workloads: list[str] | None = None,
    minutes: float | None = None,
    scenarios: int | None = None,
    workers: int = 2,
    on_result: Callable[[dict], None] = lambda r: None,
    broker: str = "embedded",
    repro_broker: str | None = None,
) -> dict:
    """Run a campaign; returns the chaos JSON object (``seed``, ``minutes``, ``scenarios``, ``summary``)."""
    stores = stores or default_stores()
    for store in stores:
        if store not in UNSAFE_VARIANTS:
            resolve(store)
    workloads = workloads or list(WORKLOADS)
    for wl in workloads:
        if wl not in WORKLOADS:
            raise ValueError(f"unknown workload {wl!r}: choose among {', '.join(WORKLOADS)}")
    if minutes is None and scenarios is None:
        minutes = 1.0
    deadline = time.monotonic() + minutes * 60 if minutes is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    faults = kafka_faults(broker)
    source = plan(seed, stores, workloads, broker=broker, broker_faults=faults, repro_broker=repro_broker)
    results: list[dict | None] = []

    def more() -> bool:
        if scenarios is not None and len(results) >= scenarios:
            return False
        return deadline is None or time.monotonic() < deadline

    pending: Scenario | None = None  # drawn, waiting for the cluster to itself

    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict = {}  # future -> (index, scenario)
        while more() or running:
            while more() and len(running) < workers and not any(affects_cluster(sc) for _, sc in running.values()):
                scenario = pending or next(source)
                # A fault that kills or stops a broker hits every scenario on the cluster, not only
                # its own: such a scenario runs alone, after the running ones finish.
                if affects_cluster(scenario) and running:
                    pending = scenario
                    break
                pending = None
                index = len(results)
                results.append(None)
                run_dir = out_dir / f"scenario-{index:05d}"
                running[pool.submit(run_scenario, scenario, run_dir, False)] = (index, scenario)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                index, scenario = running.pop(future)
                result = _result_or_error(future, scenario)
                result["index"] = index
                results[index] = result
                on_result(result)
    finished = [r for r in results if r is not None]
    return {
        "seed": seed,
        "broker": repro_broker or broker,
        "kafka_faults": faults,
        "minutes": minutes,
        "scenarios": finished,
        "summary": summarize(finished, stores),
    }


def _result_or_error(future, scenario: Scenario) -> dict:
    """The scenario's verdict object; when the scenario could not be run to its end (a broker that
    stopped answering, a harness error), an ``error`` verdict carrying the message and the replay
    command, so that the campaign goes on and keeps every other result."""
    try:
        return future.result()
    except (ScheduleError, StoreFactoryError):
        raise  # the campaign's own input is wrong: every scenario would fail the same way
    except Exception as exc:  # noqa: BLE001 - reported in the verdict, and the campaign exits 1
        return {**verdict(scenario, [], [], []), "verdict": "error", "error": f"{type(exc).__name__}: {exc}"}


def summarize(results: list[dict], stores: list[str]) -> dict:
    tallies = {s: StoreTally(s, expected_to_fail(s)) for s in stores}
    points_hit: list[str] = []
    fault_errors: list[str] = []
    errors: list[str] = []
    for r in results:
        tally = tallies[r["store"]]
        tally.total += 1
        if r["verdict"] == "error":
            tally.errors += 1
            errors.append(f"scenario {r.get('index', '?')} ({r['store']}): {r['error']}; replay: {r['repro']}")
        if r["verdict"] == "fail":
            tally.failed += 1
            for v in r["violations"]:
                tally.checks[v["check"]] = tally.checks.get(v["check"], 0) + 1
        fault_errors.extend(f"scenario {r.get('index', '?')}: {e}" for e in r.get("fault_errors", []))
        for p in r["crash_points"]:
            if p not in points_hit:
                points_hit.append(p)
    return {
        "total": len(results),
        "failed": sum(1 for r in results if r["verdict"] == "fail"),
        "points_hit": sorted(points_hit),
        "fault_errors": fault_errors,
        # Scenarios that could not be run to their end: the campaign did not test them.
        "errors": errors,
        "stores": {
            s: {"expected": "fail" if t.expected_fail else "pass", "scenarios": t.total, "failed": t.failed,
                "errors": t.errors, "status": t.status, "checks": t.checks}
            for s, t in tallies.items()
        },
        "unexpected": sorted(s for s, t in tallies.items() if t.unexpected),
    }
