"""The chaos campaign: many seeded scenarios over stores × workloads × fault schedules.

The plan is a pure function of the seed: the same seed yields the same sequence of scenarios
(``--scenarios K`` runs its first K; ``--minutes M`` runs as many as fit). It opens with the stores in
turn, each one's own crash points (at a commit with data in flight) and the lifecycle's fault windows
first (``plan.early``), so that every mutant meets its mistake within its first scenarios (the JSON
says after how many: ``scenarios_to_first_catch``); then each store's coverage of every crash point it
reaches; the rest are random schedules of one to three faults (crash points at a random hit, driver
kills after a random number of events).

On Kafka (``--broker kafka-local``) the plan also holds the Kafka faults of ``faults.kafka``
(broker kill, broker pause, coordinator kill mid-commit, transaction timeout; the ones that act on
broker processes only on a cluster this process started), and it interleaves the stores (each
store's coverage list starting at a different point) so that a short campaign on a slow broker
still reaches every point, every store and every broker fault early.

A real store must pass every scenario. A mutant or an unsafe variant must fail at least one:
one that never fails is a hole in the harness. Either is an unexpected result (exit 1). Only a
store that ran is judged: one the campaign's budget did not reach is "not run", never unexpected.
Else a scenario that could not be run to its end, or a scheduled fault that could not be injected,
means the campaign did not test what it planned (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eos_harness import campaign_summary
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.campaign import UNTIL_FAILURE, KeptCampaign, budget, run_plan
from eos_harness.campaign import until_failure_rule as campaign_until_failure
from eos_harness.commands import command_line
from eos_harness.faults import points
from eos_harness.models.workloads import CAMPAIGN_WORKLOADS, WORKLOADS
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import children_output, held_output
from eos_harness.runtime.store_duties import store_metrics
from eos_harness.stores import StoreFactoryError
from eos_harness.stores.child_probe import store_ref
from eos_harness.stores.probe import probe_store
from eos_harness.stores.registry import base_store
from eos_harness.suites.lifecycle.checks import CHECKS
from eos_harness.suites.lifecycle.coverage import declared_not_applicable
from eos_harness.suites.lifecycle.plan import (
    affects_cluster,
    default_stores,
    expected_to_fail,
    kafka_faults,
    out_of_reach,
)
from eos_harness.suites.lifecycle.plan import campaign as scenarios_of
from eos_harness.suites.lifecycle.runner import Scenario, ScheduleError, error_verdict, run_one, verdict
from eos_harness.verdict import finding_violation

SUITE = "lifecycle"  # how campaign.json names this suite (``--suite lifecycle``)
CHILDREN_LOG = "children.log"  # in the run directory: every child's stdout and stderr (the JSON's ``log``)


def run_campaign(
    seed: int,
    out_dir: Path,
    stores: list[str] | None = None,
    workloads: list[str] | None = None,
    minutes: float | None = None,
    scenarios: int | None = None,
    workers: int = 2,
    on_result: Callable[[dict], None] = lambda r: None,
    broker: BrokerSpec | str = EMBEDDED,
    store_timeout: float = STORE_TIMEOUT_S,
    until_failure: bool = False,
    resume: bool = False,
    outputs: dict | None = None,
) -> dict:
    """Run a campaign; returns the chaos JSON object (``seed``, ``minutes``, ``scenarios``, ``summary``).

    Each store is first probed once in a child (:func:`probe_stores`): a store that hangs, raises or
    returns a wrong type there is a result of its own (verdict ``fail``, ``"probe": true``) and is not
    planned; a crash point it reaches but never declared is declared for the run and planned, with a
    warning (``warnings``). Every child's stdout and stderr go to ``out_dir/children.log`` (``log``).

    The options are kept in ``out_dir`` (:data:`~eos_harness.campaign.STATE_FILE`, with ``outputs``:
    the JSON and JUnit paths) so that a stopped campaign can be resumed: ``resume`` continues the
    campaign of ``out_dir`` (the same options, the same plan) with the scenarios that have no result
    yet, and for ``minutes`` the time it had left; its JSON holds every result. ``until_failure``:
    stop at the first failure :func:`until_failure_rule` looks for."""
    stores = stores or default_stores()
    with held_output(children=True):  # its module's output on import: for the run's log, off the terminal
        # a usage error for a bad store, learned in a child
        refs = {store: store_ref(base_store(store), store_timeout) for store in stores}
    # A task's store (Capabilities(several_changelog_partitions=False)) runs no workload of a global store.
    task_stores = [s for s, ref in refs.items() if not getattr(ref.capabilities, "several_changelog_partitions", True)]
    workloads = workloads or list(CAMPAIGN_WORKLOADS)
    for wl in workloads:
        if wl not in WORKLOADS:
            raise ValueError(f"unknown workload {wl!r}: choose among {', '.join(WORKLOADS)}")
    # A mutant these workloads cannot reach is not run (its "not caught" would say nothing of the harness).
    asked = stores  # kept as asked: a resumed campaign leaves the same stores out, and says so again
    left_out = {s: why for s in stores if (why := out_of_reach(s, workloads, s in task_stores))}
    stores = [s for s in stores if s not in left_out]
    if not stores:
        raise ValueError("no store left to run: " + "; ".join(f"{s}: {why}" for s, why in left_out.items()))
    if minutes is None and scenarios is None:
        minutes = 1.0
    broker = parse(broker, internal=True)
    kept = KeptCampaign.start(out_dir, {"suite": SUITE, "seed": seed, "stores": asked, "workloads": workloads,
                                        "minutes": minutes, "scenarios": scenarios, "broker": broker.cli_text,
                                        "workers": workers, "store_timeout": store_timeout,
                                        "until_failure": until_failure, **(outputs or {})}, resume)
    deadline = kept.started + minutes * 60 - kept.spent if minutes is not None else None
    recorded = kept.recorded(on_result)

    log = out_dir / CHILDREN_LOG
    with children_output(log):  # resumed: appended to
        faults = kafka_faults(broker)
        reached, probed, warnings = probe_stores(stores, seed, store_timeout, broker, workers)
        for result in probed:
            on_result(result)
        stop_after = until_failure_rule(stores) if until_failure else lambda result: None
        # A store expected to pass that broke the protocol in its probe is the failure --until-failure looks for
        # (once: a resumed campaign goes on past it, as past a scenario that failed).
        stopped_by_probe = None if resume else next((r for r in map(stop_after, probed) if r is not None), None)
        planned = [s for s in stores if s in reached]
        options = {"stores": planned, "workloads": workloads, "opened": broker, "reached": reached,
                   "broker_faults": faults, "store_timeout": store_timeout, "task_stores": task_stores}
        source = scenarios_of(seed, options) if planned else iter(())
        if stopped_by_probe is not None:
            source = iter(())

        # A fault that kills or stops a broker hits every scenario on the cluster, not only its own:
        # such a scenario runs alone, after the running ones finish.
        run = run_plan(source, lambda index, scenario: run_one(scenario, out_dir / f"scenario-{index:05d}"),
                       workers=workers, more=budget(scenarios, deadline), run_alone=affects_cluster, on_result=recorded,
                       error_result=error_verdict, results_file=out_dir / "results.jsonl",
                       fatal=(ScheduleError, StoreFactoryError), skip=kept.skip,
                       stop_after=stop_after)
        stop_json = run.stop_json or ({"why": UNTIL_FAILURE, "message": stopped_by_probe} if stopped_by_probe else None)
        kept.end(stopped=stop_json is not None)
        results = kept.results(run)
        campaign = {
            "suite": SUITE,
            "seed": seed,
            "repro": campaign_summary.campaign_repro(kept.state, ("stores", "workloads", "minutes", "scenarios",
                                                                  "seed", "broker", "store_timeout")),
            "broker": broker.cli_text,
            "kafka_faults": faults,
            "minutes": minutes,
            "scenarios": probed + results,
            "summary": summarize(probed + results, stores, {
                s: declared_not_applicable(refs[s].window, s in task_stores) for s in stores}),
            "warnings": list(dict.fromkeys(warnings + [w for r in results for w in r.get("warnings", [])])),
            "metrics": store_metrics(results),  # KIP-892 commit metrics per store, over its scenarios
            "log": str(log),
        }
        if left_out:
            campaign["left_out"] = left_out
        if until_failure:
            campaign["until_failure"] = True
        if stop_json is not None:
            campaign["stopped"] = stop_json
        return campaign


def until_failure_rule(stores: list[str]) -> Callable[[dict], str | None]:
    """What ``--until-failure`` stops at (:func:`eos_harness.campaign.until_failure_rule`): the first
    failure of a store expected to pass; of any store when every one is a mutant or unsafe variant."""
    return campaign_until_failure(stores, expected_to_fail, "store")


def probe_stores(stores: list[str], seed: int, store_timeout: float, broker: BrokerSpec,
                 workers: int) -> tuple[dict[str, list[str]], list[dict], list[str]]:
    """Probe each store once (in children, at most ``workers`` at a time): the crash points of each
    store that can be planned, a result for each store that broke the protocol (``fail``; not
    planned) or could not be probed (``error``; planned with the points found), and the warnings. A
    crash point a store reaches but never declared is declared for the run (here, and in each task
    process that arms it) and planned like a declared one, with a warning that says how to declare it."""
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


def summarize(results: list[dict], stores: list[str], not_applicable: dict[str, dict[str, str]] | None = None) -> dict:
    """The campaign's summary (:func:`eos_harness.campaign_summary.summarize`), a tally per store with the
    scenarios that met each check's condition (:mod:`.coverage`) and the checks that cannot fire on it, with
    why: ``not_applicable`` (per store, what it is or declares: :func:`.coverage.declared_not_applicable`)
    and what its scenarios' stores said they are (:func:`.coverage.not_applicable`)."""
    return campaign_summary.summarize(results, stores, "store", "stores", expected_to_fail, checks=CHECKS,
                                      not_applicable=not_applicable)


def campaign_exit_code(campaign: dict) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`)."""
    return campaign_summary.campaign_exit_code(campaign, "stores")
