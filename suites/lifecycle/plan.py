"""The lifecycle suite's plan: a pure function of the seed, the scenarios of a campaign in order.

:func:`plan` is the plan every earlier seed replays (pinned, scenario for scenario, by
tests/test_fault_registry.py). A campaign runs :func:`campaign_plan`: a short early block first
(:func:`early`: the stores in turn, each one's own crash points and the fault windows where the
lifecycle's checks meet their conditions, the least-drawn first), then the whole of :func:`plan`
unchanged, so that a campaign meets every store's likely mistakes within its first scenarios.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import replace

from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.faults import kinds, points
from eos_harness.models.workloads import CAMPAIGN_WORKLOADS, DEFAULT_WORKLOADS, WORKLOADS
from eos_harness.runtime import (
    P_AFTER_CHECKPOINT,
    P_AFTER_EOS,
    P_AFTER_STORE,
    P_BEFORE_EOS,
    P_CLOSE_MID,
    P_MID_BATCH,
    P_MID_REPLAY,
)
from eos_harness.stores import StoreRef
from eos_harness.stores.probe import reached_points
from eos_harness.stores.registry import base_store, builtin_spec, builtin_specs
from eos_harness.suites.conformance.driver import step_of
from eos_harness.suites.lifecycle.scenario import Scenario
from eos_harness.suites.lifecycle.schedule import Fault

LIFECYCLE_POINTS = (P_MID_BATCH, P_BEFORE_EOS, P_AFTER_EOS, P_AFTER_STORE, P_AFTER_CHECKPOINT, P_CLOSE_MID)
# Points whose hit count the plan draws by a rule of its own (rng, commit interval), not by the crash
# point kind's: one reached per record is hit within three commits' worth; one reached once per
# instance, the first time.
POINT_HITS = {P_MID_BATCH: lambda rng, commit_interval: rng.randint(1, 3 * commit_interval),
              P_CLOSE_MID: lambda rng, commit_interval: 1}


def default_stores() -> list[str]:
    from eos_harness.stores.window_catalogue import SUITE_ONLY

    return [s.name for s in builtin_specs() if s.name not in SUITE_ONLY and s.suite is None]


def workloads_for(store: str, workloads: list[str]) -> list[str]:
    """The workloads of ``workloads`` that ``store`` runs: the windowed ones on a window store, the
    others on a key-value store (every one of its kind when ``workloads`` has none of them)."""
    from eos_harness.stores.child_probe import store_ref

    window = store_ref(base_store(store)).window  # resolved at the edge: a user's window store too
    mine = [w for w in workloads if WORKLOADS[w].windowed == window]
    return mine or [name for name in DEFAULT_WORKLOADS if WORKLOADS[name].windowed == window]


def out_of_reach(store: str, workloads: list[str], task_store: bool = False) -> str | None:
    """Why ``store`` cannot be run usefully by a campaign over ``workloads``: a mutant whose mistake lies in
    store operations that none of its workloads uses; a task's store (``task_store``: it declares
    ``Capabilities(several_changelog_partitions=False)``) whose workloads all feed a global store from
    several changelog partitions (None: within reach)."""
    mine = workloads_for(store, workloads)
    if task_store and all(WORKLOADS[w].changelog_partitions > 1 for w in mine):
        return (f"it declares it is a task's store, fed by its own changelog partition only "
                f"(Capabilities(several_changelog_partitions=False)), and the workloads {', '.join(mine)} feed a "
                "global store from several changelog partitions")
    spec = builtin_spec(base_store(store))
    if spec is None or not spec.operations:
        return None
    mine = workloads_for(store, workloads)
    if any(spec.operations & WORKLOADS[w].operations for w in mine):
        return None
    return (f"its mistake is in {', '.join(sorted(spec.operations))}, which none of the workloads "
            f"{', '.join(mine)} uses")


def expected_to_fail(store: str) -> bool:
    spec = builtin_spec(store)
    return spec is not None and spec.expected_to_fail


def kafka_faults(broker: BrokerSpec | str) -> list[str]:
    """The fault kinds with needs that a campaign on ``broker`` meets (today Kafka's: none off Kafka,
    ``txn-timeout`` on any Kafka, the broker-process faults too on a cluster this process started).
    The plan gives each one scenario early; the kinds that need nothing (``kill``) it draws anyway."""
    broker = parse(broker, internal=True)
    return [k.name for k in _drawn_kinds() if k.needs and not k.needs_unmet(broker)]


def affects_cluster(scenario: Scenario) -> bool:
    """Whether the scenario's schedule kills or stops broker processes (every client of the cluster sees it)."""
    return any(kinds.kind_of(f).stops_broker for f in scenario.schedule)


def _drawn_kinds() -> list[kinds.FaultKind]:
    """The lifecycle kinds a planner draws by name (crash points it draws from the stores' points)."""
    return [k for k in kinds.kinds(kinds.LIFECYCLE) if k.draw_hit is not None and not k.at_point]


def once_per_instance(point: str) -> bool:
    """A point an instance reaches once: the task's close, a store's own point of its open or close (its
    name holds ".open." or ".close.": Kafka Streams' status marker, its database close). Its hit is 1 (a
    later hit is never reached: the scenario would not run)."""
    return point == P_CLOSE_MID or step_of(point) != "commit"


def _hit(rng: random.Random, name: str, commit_interval: int) -> int:
    """A hit count for a crash point or a fault kind's name, by the rule of its kind (or of the point)."""
    if name in POINT_HITS:
        return POINT_HITS[name](rng, commit_interval)
    kind = kinds.named(name) or kinds.CRASH_POINT
    hit = kind.draw_hit(rng, name, commit_interval)  # drawn all the same: the plan's later draws stay as they were
    return 1 if once_per_instance(name) else hit


def plan(seed: int, stores: list[str], workloads: list[str], commit_interval: int = 10,
         broker: BrokerSpec | str = EMBEDDED, broker_faults: list[str] | tuple[str, ...] = (),
         reached: dict[str, list[str]] | None = None) -> Iterator[Scenario]:
    """The campaign's scenarios, in order, forever (the caller stops). ``reached``: each store's
    crash points, when the caller has probed the stores already (else they are probed here)."""
    broker = parse(broker, internal=True)
    if broker == EMBEDDED and not broker_faults:
        yield from _plan(seed, stores, workloads, commit_interval, reached=reached)
        return
    for scenario in _plan(seed, stores, workloads, commit_interval, list(broker_faults), interleave=True,
                          reached=reached):
        yield replace(scenario, broker=broker)


def _interleave(lists: list[list[Scenario]]) -> list[Scenario]:
    """Round-robin over the lists."""
    rotated = [lst for lst in lists if lst]
    out: list[Scenario] = []
    for round_ in range(max((len(lst) for lst in rotated), default=0)):
        out.extend(lst[round_] for lst in rotated if round_ < len(lst))
    return out


def _plan(seed: int, stores: list[str], workloads: list[str], commit_interval: int = 10,
          broker_faults: list[str] | None = None, interleave: bool = False,
          reached: dict[str, list[str]] | None = None) -> Iterator[Scenario]:
    rng = random.Random(seed)
    broker_faults = broker_faults or []
    anywhere = [k.name for k in _drawn_kinds() if not k.needs]  # kinds the random tail draws on any broker
    per_store_points = {s: reached[s] if reached is not None else reached_points(base_store(s))
                        for s in stores}
    # Coverage first: every (store, point) once, with a workload rotating through all.
    coverage: list[Scenario] = []
    per_store: list[list[Scenario]] = []
    for store in stores:
        first = len(coverage)
        runs = workloads_for(store, workloads)
        for point in list(LIFECYCLE_POINTS) + per_store_points[store]:
            wl = runs[len(coverage) % len(runs)]  # one step per scenario: every workload in turn
            hit = {P_MID_BATCH: rng.randint(1, 3 * commit_interval), P_CLOSE_MID: 1}.get(point, rng.randint(1, 3))
            hit = 1 if once_per_instance(point) else hit
            coverage.append(Scenario(store, wl, rng.randrange(2**31), (Fault(point, hit),), commit_interval=commit_interval))
        # Recovery interrupted: roll-forward needed, then a crash in the middle of the replay.
        wl = runs[len(coverage) % len(runs)]
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
            Scenario(passing[i % len(passing)], _nth(workloads_for(passing[i % len(passing)], workloads), i),
                     rng.randrange(2**31),
                     (Fault(fault, _hit(rng, fault, commit_interval)),), commit_interval=commit_interval)
            for i, fault in enumerate(broker_faults)
        ]
        # Each store's scenarios rotate through every workload (some bugs show on one workload only):
        # a store expected to fail starts with the workloads that use the most store operations, so
        # that a short campaign (a few scenarios per store on Kafka) still reaches its mistake.
        def richest_first(store: str) -> list[str]:
            return sorted(workloads_for(store, workloads), key=lambda name: -len(WORKLOADS[name].operations))
        per_store = [[replace(sc, workload=_nth(richest_first(sc.store), k) if expected_to_fail(sc.store)
                              else _nth(workloads_for(sc.store, workloads), j + k)) for k, sc in enumerate(lst)]
                     for j, lst in enumerate(per_store)]
        coverage = faulted + _interleave(per_store)
    yield from coverage
    while True:
        store = rng.choice(stores)
        choices = list(LIFECYCLE_POINTS) + per_store_points[store] + [P_MID_REPLAY] + anywhere + broker_faults
        schedule = []
        for _ in range(rng.randint(1, 3)):
            point = rng.choice(choices)
            schedule.append(Fault(point, _hit(rng, point, commit_interval)))
        yield Scenario(store, rng.choice(workloads_for(store, workloads)), rng.randrange(2**31), tuple(schedule),
                       commit_interval=commit_interval)


# The fault windows of the early block, in the order each store meets them: the crash with uncommitted
# writes in the store (no_uncommitted_survives, a wipe), the one between the EOS commit and the store
# commit (committed_rolls_forward, no_wipe), mid-batch, after the store commit, after the checkpoint,
# during close; then a crash during recovery (recovery_idempotent).
EARLY_WINDOWS = (P_BEFORE_EOS, P_AFTER_EOS, P_MID_BATCH, P_AFTER_STORE, P_AFTER_CHECKPOINT, P_CLOSE_MID)
# The first store commit of every instance is the empty one that ends its restore: a store's own
# crash point is drawn at a later commit, where data is in flight.
FIRST_COMMIT_WITH_DATA = 2


def campaign_plan(seed: int, stores: list[str], workloads: list[str], commit_interval: int = 10,
                  broker: BrokerSpec | str = EMBEDDED, broker_faults: list[str] | tuple[str, ...] = (),
                  reached: dict[str, list[str]] | None = None,
                  task_stores: frozenset[str] | set[str] = frozenset()) -> Iterator[Scenario]:
    """A campaign's scenarios, in order, forever: :func:`early`, then :func:`plan` (the same scenarios,
    in the same order, as a plan of this seed gave before the early block existed). With Kafka faults,
    the plan's first scenarios (each Kafka fault once) come before the early block. ``task_stores``: the
    stores that declare themselves a task's (the early block gives them no workload of a global store).

    Every scenario holds only faults it can reach (:func:`eos_harness.suites.lifecycle.reach.fireable`):
    :func:`plan`, pinned seed for seed, draws some that never fire (``task.restore.mid_replay@3``, reached
    once per instance at most; a commit point after ``task.close.mid``, when no input is left; ``kill@19``
    in an instance with nothing left to do), and a scheduled fault that never fired makes the scenario an
    ``error``. Those faults are left out here (a scenario left with none is not run); :func:`plan` itself
    stays as pinned."""
    from eos_harness.suites.lifecycle.reach import fireable

    broker = parse(broker, internal=True)
    reached = reached if reached is not None else {s: reached_points(base_store(s)) for s in stores}
    planned = plan(seed, stores, workloads, commit_interval, broker, broker_faults, reached)
    # On a cluster the plan opens with every Kafka fault once (a short campaign hits each): they stay
    # first, before the early block.
    opening = itertools.islice(planned, len(broker_faults))
    block = (replace(scenario, broker=broker) if broker != EMBEDDED else scenario
             for scenario in early(seed, stores, workloads, commit_interval, reached, task_stores))
    for scenario in itertools.chain(opening, block, planned):
        kept = fireable(scenario)
        if kept is not None:
            yield kept


def early(seed: int, stores: list[str], workloads: list[str], commit_interval: int,
          reached: dict[str, list[str]], task_stores: frozenset[str] | set[str] = frozenset()) -> list[Scenario]:
    """The early block of a campaign: the stores in turn (round-robin), each scenario of a store a crash
    in a fault window of :data:`EARLY_WINDOWS` followed, in the next instance, by one at a crash point
    of the store's own (at a commit with data in flight; with the crash in close, the store's point first:
    after it no commit is left): two checks' conditions per scenario, until
    every window and point was drawn once; its third scenario a crash during recovery (on a workload of a
    global store, fed by several changelog partitions, when the campaign runs one and the store is not one of
    the ``task_stores``), its fourth an instance frozen at a commit (a zombie the next one must fence). The
    least-hit first: a
    point only this store of the campaign reaches comes first (where a mutant's mistake sits); stores
    that share points start at different ones (each the one the stores before it drew least first); a
    store expected to fail meets the window with uncommitted writes first, the others a different window
    each. Workloads rotate, those that use a mutant's faulty operations first, then the ones using the
    most store operations. Drawn from an RNG of its own, so that :func:`plan` is untouched."""
    rng = random.Random(f"eos-early-{seed}")
    reaching = Counter(p for s in stores for p in dict.fromkeys(reached.get(s, [])))
    first_drawn: Counter = Counter()  # how many stores before drew each point first
    lists: list[list[Scenario]] = []
    for number, store in enumerate(stores):
        declared = list(dict.fromkeys(p for p in reached.get(store, []) if p not in LIFECYCLE_POINTS))
        own = sorted(declared, key=lambda p: (reaching[p] > 1, first_drawn[p]))  # stable among equals
        if own:
            first_drawn[own[0]] += 1
        turn = 0 if expected_to_fail(store) else number % len(EARLY_WINDOWS)
        windows = EARLY_WINDOWS[turn:] + EARLY_WINDOWS[:turn]
        schedules = []
        for k in range(max(len(own), len(windows))):
            pair = []
            if k < len(windows):
                point = windows[k]
                pair.append(Fault(point, _hit(rng, point, commit_interval) if point in POINT_HITS else rng.randint(1, 3)))
            if k < len(own):
                hit = rng.randint(FIRST_COMMIT_WITH_DATA, FIRST_COMMIT_WITH_DATA + 1)
                pair.append(Fault(own[k], 1 if once_per_instance(own[k]) else hit))
            if pair[0].point == P_CLOSE_MID:
                pair.reverse()  # after a crash in close no input is left, nor a commit to reach the store's point
            schedules.append(tuple(pair))
        schedules.insert(2, (Fault(P_AFTER_EOS, 2), Fault(P_MID_REPLAY)))
        runs = _workload_order(store, workloads, number)
        if store in task_stores:  # a task's store is given no workload of a global store
            runs = [w for w in runs if WORKLOADS[w].changelog_partitions < 2] or runs
        mine = [Scenario(store, runs[k % len(runs)], rng.randrange(2**31), schedule,
                         commit_interval=commit_interval) for k, schedule in enumerate(schedules)]
        # The crash during recovery runs, when the campaign runs a workload of a global store (fed by several
        # changelog partitions) and the store is not a task's, on that workload: its crash between the EOS
        # commit and the store commit is partitions_one_commit's condition too (no scenario of its own, so
        # that the windows after it come as early as without it).
        several = [w for w in runs if WORKLOADS[w].changelog_partitions > 1]
        if several and store not in task_stores:
            mine[2] = replace(mine[2], workload=several[0])
        # Then, for zombie_fenced, an instance frozen at a commit while the next one takes over.
        mine.insert(3, Scenario(store, runs[3 % len(runs)], rng.randrange(2**31),
                                (Fault(P_BEFORE_EOS, rng.randint(FIRST_COMMIT_WITH_DATA, FIRST_COMMIT_WITH_DATA + 1),
                                       points.FREEZE),), commit_interval=commit_interval))
        lists.append(mine)
    return _interleave(lists)


def _workload_order(store: str, workloads: list[str], number: int) -> list[str]:
    """The order a store's early scenarios take its workloads in: for a mutant, the workloads that use
    its faulty operations first, then those using the most store operations; for a store expected to
    pass, every workload in turn from a different one per store."""
    runs = workloads_for(store, workloads)
    if not expected_to_fail(store):
        turn = number % len(runs)
        return runs[turn:] + runs[:turn]
    spec = builtin_spec(base_store(store))
    faulty = spec.operations if spec is not None else frozenset()
    return sorted(runs, key=lambda name: (not faulty & WORKLOADS[name].operations, -len(WORKLOADS[name].operations)))


def _nth(items: list[str], n: int) -> str:
    return items[n % len(items)]


# -- the suite contract (:mod:`eos_harness.suite`) ------------------------------------------------------


def known_subjects() -> list[str]:
    return [s.name for s in builtin_specs()]


def subjects(given: list[str] | None) -> list[str]:
    """The stores given, or the default ones (:func:`default_stores`)."""
    return list(given) if given else default_stores()


def expected(store: str) -> tuple[bool, tuple[str, ...]]:
    """A mutant or unsafe variant must fail (caught by any check)."""
    return expected_to_fail(store), ()


def declared_task_stores(refs: Mapping[str, StoreRef]) -> list[str]:
    """The stores that declare themselves a task's (``Capabilities(several_changelog_partitions=False)``)."""
    return [s for s, ref in refs.items() if not getattr(ref.capabilities, "several_changelog_partitions", True)]


def left_out(stores: list[str], workloads: list[str], refs: Mapping[str, StoreRef]) -> dict[str, str]:
    """The stores none of whose scenarios on ``workloads`` could catch what they are expected to fail on
    (a mutant whose mistake is in an operation none of them uses), with why: not run, not judged."""
    tasks = declared_task_stores(refs)
    return {s: why for s in stores if (why := out_of_reach(s, workloads, s in tasks))}


def check_options(options: Mapping) -> None:
    """A ValueError when none of the campaign's stores can be run (each left out: :func:`left_out`);
    ``refs``: its stores, resolved at the edge."""
    refs = options["refs"]
    outside = left_out(list(options["stores"]), list(options["workloads"]), refs)
    if len(outside) == len(options["stores"]):
        raise ValueError("no store left to run: " + "; ".join(f"{s}: {why}" for s, why in outside.items()))


runs_alone = affects_cluster  # the suite contract's name for it


def engine_problem(options: Mapping, master: str) -> str | None:
    """Why ``chaos --engine spark --master MASTER`` cannot run this campaign's scenarios (a Kafka broker its
    executors do not reach), or None. On the embedded broker each scenario has its own log; on Kafka each is a
    client of the campaign's broker (:func:`needs_this_process` says which run in the driver)."""
    from eos_harness.engine import kafka_reached

    return kafka_reached("lifecycle", options.get("broker"), master)


def needs_this_process(scenario: Scenario) -> bool:
    """A scenario whose faults kill or stop a broker process (``broker-kill``, ``broker-pause``,
    ``coordinator-kill``: they need the cluster this command started, which only its process holds): an engine
    that runs scenarios elsewhere runs it here, in the driver, as the local pool does (it runs alone anyway)."""
    return any(kinds.CLUSTER in kinds.kind_of(f).needs for f in scenario.schedule)


def campaign(seed: int, options: Mapping) -> Iterator[Scenario]:
    """:func:`campaign_plan` of the campaign's ``stores`` and ``workloads`` on its broker (``opened``: the
    broker opened for it; ``reached``: the crash points each store's probe reached, else probed here), with
    its Kafka faults (``broker_faults``, else those its broker meets), its ``store_timeout`` and ``allow``; the
    ``task_stores`` (each declares ``Capabilities(several_changelog_partitions=False)``) without a workload of
    a global store."""
    broker = parse(options.get("opened") or options.get("broker") or EMBEDDED, internal=True)
    faults = options["broker_faults"] if "broker_faults" in options else kafka_faults(broker)
    if not options["stores"]:
        return iter(())
    tasks = set(options.get("task_stores") or ())
    planned = campaign_plan(seed, list(options["stores"]), list(options.get("workloads") or CAMPAIGN_WORKLOADS),
                            broker=broker, broker_faults=faults, reached=options.get("reached"),
                            task_stores=tasks)
    if tasks:  # a task's store runs no workload of a global store (several changelog partitions)
        planned = (s for s in planned if s.store not in tasks or WORKLOADS[s.workload].changelog_partitions < 2)
    timeout, allow = options.get("store_timeout"), tuple(options.get("allow") or ())
    if allow:  # --allow: every scenario waives them, and its replay says so
        planned = (replace(scenario, allow=allow) for scenario in planned)
    return planned if timeout is None else (replace(scenario, store_timeout=timeout) for scenario in planned)
