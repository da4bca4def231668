"""CLI of the EOS task lifecycle suite: ``eos-harness run`` (one scenario), ``chaos`` (a campaign), ``demo``."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import click
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.faces import toolkit
from eos_harness.faces.params import (
    AT_LEAST_ONE,
    POSITIVE_MINUTES,
    STORE_LIST,
    WORKLOAD_LIST,
    BrokerParam,
)
from eos_harness.faces.toolkit import console
from eos_harness.models.workloads import CAMPAIGN_WORKLOADS, WORKLOADS
from eos_harness.verdict import ERROR

BROKER_HELP = ("embedded (SQLite log) | kafka-local (start a local Kafka on 127.0.0.1) | kafka-local:3 "
               "(three brokers) | kafka-quorum[:N] (3 dedicated KRaft controllers and N brokers) | "
               "kafka://HOST:PORT (a running cluster)")

UNTIL_FAILURE_HELP = ("Stop at the first failure of a store expected to pass (a bug found; a mutant caught is "
                      "expected and does not stop it); when every store is a mutant or unsafe variant, at the first "
                      "failure (caught). Everything that finished is written.")
RESUME_HELP = ("Continue the stopped campaign of RUN_DIR (Ctrl-C, SIGTERM, --until-failure) with its seed and "
               "options, kept there when it started: the same plan, the scenarios that finished are not run again, "
               "a --minutes campaign gets the time it had left; the JSON holds every scenario. --json, --junit, "
               "--workers, --store-timeout and --until-failure may be given anew.")


@click.command("run")
@toolkit.run_options("lifecycle", "run")
@click.option("--store", required=True, help="Built-in store, unsafe variant, or factory module:function.")
@click.option("--workload", type=click.Choice(sorted(WORKLOADS)), default="counter", show_default=True)
@click.option("--crash-at", "crash_at", multiple=True,
              help="Fault schedule, one per task instance: POINT[@n] (n-th time reached), kill@n "
                   "(driver SIGKILL after n events), or on Kafka broker-kill@n, broker-pause@n, "
                   "coordinator-kill@n, txn-timeout@n (see faults/kafka.py). Repeat or comma-separate.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@click.option("--records", type=AT_LEAST_ONE, default=None, help="Input records (default: the workload's).")
@click.option("--commit-interval", type=AT_LEAST_ONE, default=10, show_default=True,
              help="Records processed between two commits of the task.")
@toolkit.store_timeout_option
@toolkit.starts_store_processes
def run_command(store, workload, crash_at, broker, records, commit_interval, seed, json_path, junit_path, out,
                overwrite, store_timeout, no_report):
    """Run one scenario: an EOS task under a crash schedule, checked against the model."""
    from eos_harness.cluster import ClusterError
    from eos_harness.process.server import held_output
    from eos_harness.runtime import TaskConfig
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.child_probe import store_ref
    from eos_harness.suites.lifecycle.campaign import CHILDREN_LOG
    from eos_harness.suites.lifecycle.runner import Scenario, check_workload_fits, error_verdict, run_scenario
    from eos_harness.suites.lifecycle.schedule import ScheduleError, parse_store_schedule

    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    console.print(f"seed: {seed}")
    try:
        # The store's module declares its own crash points: load it before reading the schedule (its
        # output is kept for the run's log, off the terminal).
        with held_output(children=True):  # and a probe's, for a point of the store's own (see below)
            ref = store_ref(TaskConfig.for_store(store, broker="", state_dir="", workload=workload).store, store_timeout)
            check_workload_fits(ref, workload)  # a global workload on a task's store: refused, saying why
            schedule, warning = parse_store_schedule(store, list(crash_at), store_timeout)
        if warning:
            console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
        scenario = Scenario(store, workload, seed, schedule, broker=broker, records=records,
                            commit_interval=commit_interval, store_timeout=store_timeout)
        out_dir = toolkit.run_outputs(json_path, junit_path, out, "run", seed, overwrite)
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            try:
                result = run_scenario(scenario, out_dir, log=CHILDREN_LOG, faults_must_fire=True)
            except (ScheduleError, StoreFactoryError, ValueError):
                raise
            except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                result = error_verdict(scenario, exc, out_dir)
    except (ScheduleError, StoreFactoryError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise toolkit.incomplete(exc) from None
    json_error = toolkit.write_json(json_path, result)
    if junit_path:
        from eos_harness.junit import write_junit
        from eos_harness.suites.lifecycle.junit import run_suites

        json_error = json_error or write_junit(junit_path, run_suites(result), f"eos-harness run, seed {seed}")
    colour = "green" if result["verdict"] == "pass" else "red"
    took = f" ({result['seconds']} s)" if "seconds" in result else ""
    console.print(f"[{colour}]verdict: {result['verdict']}[/]{took}; crash points hit: "
                  f"{', '.join(result['crash_points']) or 'none'}")
    if result["verdict"] == ERROR:
        console.print(f"the scenario could not be run to its end: {result['error']}", markup=False, highlight=False)
    for warning in result.get("warnings", []):  # e.g. KIP-892's: a persistent store that does not manage offsets
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
    for line in result["fault_errors"]:
        console.print(f"[red]a scheduled fault could not be injected:[/] {line}", soft_wrap=True)
    for rec in result["recovery"]:
        console.print(f"  recovery of instance {rec['instance']}: replayed {rec['replayed_records']} changelog records "
                      f"(uncommitted tail {rec['uncommitted_tail']}, changelog length {rec['changelog_length']}, "
                      f"wiped: {rec['wiped']}, {rec['seconds'] * 1000:.1f} ms)")
    if result["violations"]:
        toolkit.print_violations(result, f"violations of {result['store']} / {result['workload']}")
        for v in result["violations"]:  # the store's own traceback, or its stack when it hung
            if v["check"].startswith("store_") and v.get("detail"):
                what = "stack when it was killed" if v["check"] == "store_hang" else "own traceback"
                console.print(f"{v['check']} in the store's {v['key']}: {v['observed']}\nthe store's {what}:\n"
                              f"{v['detail']}", markup=False, highlight=False)
                break
        for v in result["violations"]:  # what the task's process wrote before it failed (from the log)
            if v["check"] == "task_finishes" and v.get("detail"):
                console.print(f"task_finishes: {v['observed']}\n{v['detail']}", markup=False, highlight=False)
                break
    toolkit.finish_run(result, out_dir, json_error, not no_report, ("log", "the store's output"))


def run_chaos(seed, stores, workloads, minutes, scenarios, out: Path, json_path, workers,
              broker: BrokerSpec = EMBEDDED, store_timeout=None, junit_path=None, until_failure=False,
              resume=False, report=True) -> dict:
    """Run a campaign in the (prepared) run directory ``out`` (``resume``: continue the stopped one
    there); print its table; write its JSON, JUnit and report."""
    with open_broker(broker, say=console.print) as opened:
        return _run_chaos(seed, stores, workloads, minutes, scenarios, out, json_path, workers, opened.spec,
                          store_timeout, junit_path, until_failure, resume, report)


def _run_chaos(seed, stores, workloads, minutes, scenarios, out_dir, json_path, workers, broker: BrokerSpec,
               store_timeout=None, junit_path=None, until_failure=False, resume=False, report=True) -> dict:
    from eos_harness.suites.lifecycle.campaign import run_campaign
    from eos_harness.suites.lifecycle.junit import campaign_suites

    console.print(f"seed: {seed}   broker: {broker.cli_text}   results: {out_dir}")
    started = time.monotonic()
    with toolkit.campaign_progress(out_dir, scenarios, resume) as on_result:
        campaign = run_campaign(seed, out_dir, stores=stores, workloads=workloads, minutes=minutes,
                                scenarios=scenarios, workers=workers, on_result=on_result, broker=broker,
                                until_failure=until_failure, resume=resume,
                                outputs=toolkit.kept_outputs(json_path, junit_path),
                                **({} if store_timeout is None else {"store_timeout": store_timeout}))
    campaign["seconds"] = round(time.monotonic() - started, 1)
    toolkit.finish_campaign(campaign, out_dir, json_path, junit_path, report, campaign_suites, _show_chaos,
                            outputs="the stores' output", asked="--stores" if stores else None)
    return campaign


def _show_chaos(campaign: dict) -> None:
    console.print(toolkit.tallies_table(campaign))
    for warning in campaign.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
    for store, why in campaign.get("left_out", {}).items():
        console.print(f"left out: {store}: {why}, so no scenario of this campaign could catch it",
                      soft_wrap=True, highlight=False, markup=False)
    summary = campaign["summary"]
    console.print(f"{summary['total']} scenarios in {campaign['seconds']} s "
                  f"({summary['total'] / max(campaign['seconds'], 1e-9):.1f}/s); crash points hit: {len(summary['points_hit'])}")
    unexercised: dict[str, list[str]] = {}  # check -> the stores none of whose scenarios met its condition
    for store, tally in summary["stores"].items():
        for check in tally.get("not_exercised", []):
            unexercised.setdefault(check, []).append(store)
    if unexercised:
        from eos_harness.suites.lifecycle.coverage import CONDITIONS

        ran = [s for s, t in summary["stores"].items() if t["scenarios"]]
        # No scenario of the campaign ran a global store's workload (--workloads without global): say how to plan one.
        several = any(WORKLOADS[r["workload"]].changelog_partitions > 1
                      for r in campaign["scenarios"] if r.get("workload") in WORKLOADS)
        hint = {} if several else {"partitions_one_commit": "; no scenario ran a global store's workload: it needs "
                                                            "global in --workloads and a store's third scenario "
                                                            "(its crash during recovery)"}
        console.print("not exercised (no scenario met the check's condition: not passed): " + "; ".join(
            f"{check} ({CONDITIONS[check][0]}{hint.get(check, '')}) on "
            f"{'every store' if set(on) >= set(ran) else ', '.join(on)}"
            for check, on in unexercised.items()), soft_wrap=True, highlight=False, markup=False)


@click.command("chaos")
@toolkit.campaign_options("lifecycle", "chaos", "A mutant caught is an expected failure (skipped, with its "
                          "evidence); a mutant not caught is the failure of its testcase 'caught'.",
                          UNTIL_FAILURE_HELP, RESUME_HELP)
@click.option("--stores", type=STORE_LIST, default=None,
              help="Comma-separated stores (default: every built-in store, mutant and unsafe variant).")
@click.option("--workloads", type=WORKLOAD_LIST, default=None,
              help=f"Comma-separated workloads (default: all of {', '.join(CAMPAIGN_WORKLOADS)}, global not on a "
                   f"store that declares itself a task's; {', '.join(sorted(set(WORKLOADS) - set(CAMPAIGN_WORKLOADS)))} "
                   "only when named: global is a global store fed by 3 changelog partitions).")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP + "; on kafka-local or kafka-quorum the "
              "campaign adds broker faults (broker-kill, broker-pause, coordinator-kill, txn-timeout)")
@toolkit.store_timeout_option
@toolkit.starts_store_processes
def chaos_command(ctx, stores, workloads, minutes, scenarios, seed, json_path, out, workers, broker, overwrite,
                  store_timeout, junit_path, until_failure, resume_dir, no_report):
    """Run a chaos campaign: random scenarios over stores × workloads × crash schedules."""
    from eos_harness.cluster import ClusterError
    from eos_harness.stores import StoreFactoryError
    from eos_harness.suites.lifecycle.campaign import SUITE

    if resume_dir is not None:
        state = toolkit.resumed_state(ctx, resume_dir, SUITE, ("stores", "workloads", "minutes", "scenarios", "seed",
                                                               "out", "broker", "overwrite"),
                                      " (start a new one, or give a longer one --minutes/--scenarios)")
        seed, stores, workloads = state["seed"], state["stores"], state["workloads"]
        try:
            broker = parse(state["broker"])
        except ValueError as exc:
            raise click.UsageError(f"--resume {resume_dir}: {exc}") from None
        minutes, scenarios = state["minutes"], state["scenarios"]
        # Not the plan: these may be given anew.
        workers = toolkit.given_or_kept(ctx, state, "workers", workers)
        store_timeout = toolkit.given_or_kept(ctx, state, "store_timeout", store_timeout)
        until_failure = until_failure or state.get("until_failure", False)
        json_path, junit_path = json_path or state.get("json"), junit_path or state.get("junit")
    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    try:
        out_dir = toolkit.campaign_outputs(json_path, junit_path, out, resume_dir, "chaos", seed, overwrite)
        campaign = run_chaos(seed, stores, workloads, minutes, scenarios, out_dir, json_path, workers, broker,
                             store_timeout, junit_path, until_failure, resume=resume_dir is not None,
                             report=not no_report)
    except (StoreFactoryError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise toolkit.incomplete(exc) from None
    sys.exit(toolkit.campaign_exit(campaign))


@click.command("demo")
@click.option("--out", default="runs/demo", show_default=True)
@click.option("--minutes", type=POSITIVE_MINUTES, default=1.0, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@toolkit.starts_store_processes
def demo_command(out, minutes, seed):
    """The main job: a short chaos campaign on the embedded broker, with a verdict table.
    Run again, it replaces its own earlier results in OUT (never a directory it did not make)."""
    from eos_harness.rundir import RunDirError, prepare

    try:
        out_dir = prepare(out, overwrite=True, given=Path(out) != Path("runs/demo"))
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    campaign = run_chaos(seed, None, None, minutes, None, out_dir, None, 2)
    sys.exit(toolkit.campaign_exit(campaign))
