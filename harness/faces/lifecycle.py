"""CLI of the EOS task lifecycle suite: ``eos-harness run`` (one scenario), ``demo``, and what its ``chaos``
campaign (:mod:`eos_harness.faces.chaos`) shows besides its tallies."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click
from eos_harness.broker.opening import open_broker
from eos_harness.faces import toolkit
from eos_harness.faces.params import (
    AT_LEAST_ONE,
    POSITIVE_MINUTES,
    BrokerParam,
)
from eos_harness.faces.toolkit import console
from eos_harness.models.workloads import WORKLOADS
from eos_harness.suite import BROKER_FORMS, SUITES
from eos_harness.verdict import ERROR


@click.command("run")
@toolkit.run_options("lifecycle", "run")
@click.option("--store", required=True, help="Built-in store, unsafe variant, or factory module:function.")
@click.option("--workload", type=click.Choice(sorted(WORKLOADS)), default="counter", show_default=True)
@click.option("--crash-at", "crash_at", multiple=True,
              help="Fault schedule, one per task instance: POINT[@n] (n-th time reached), kill@n "
                   "(driver SIGKILL after n events), or on Kafka broker-kill@n, broker-pause@n, "
                   "coordinator-kill@n, txn-timeout@n (see faults/kafka.py). Repeat or comma-separate.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_FORMS)
@click.option("--records", type=AT_LEAST_ONE, default=None, help="Input records (default: the workload's).")
@click.option("--commit-interval", type=AT_LEAST_ONE, default=10, show_default=True,
              help="Records processed between two commits of the task.")
@toolkit.store_timeout_option
@toolkit.allow_option(SUITES["lifecycle"], "Waive CHECK, a difference you know about (repeatable): the verdict names "
                      "the checks waived and how often each fired, and the replay carries --allow.")
@toolkit.starts_store_processes
def run_command(store, workload, crash_at, broker, records, commit_interval, seed, json_path, junit_path, out,
                overwrite, store_timeout, allow, no_report):
    """Run one scenario: an EOS task under a crash schedule, checked against the model."""
    from eos_harness.cluster import ClusterError
    from eos_harness.process.server import held_output
    from eos_harness.runtime import TaskConfig
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.child_probe import store_ref
    from eos_harness.suites.lifecycle import runner
    from eos_harness.suites.lifecycle.schedule import ScheduleError, parse_store_schedule

    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    try:
        # The store's module declares its own crash points: load it before reading the schedule (its
        # output is kept for the run's log, off the terminal).
        with held_output(children=True):  # and a probe's, for a point of the store's own (see below)
            ref = store_ref(TaskConfig.for_store(store, broker="", state_dir="", workload=workload).store, store_timeout)
            runner.check_workload_fits(ref, workload)  # a global workload on a task's store: refused, saying why
            schedule, warning = parse_store_schedule(store, list(crash_at), store_timeout)
        if warning:
            console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
        scenario = runner.Scenario(store, workload, seed, schedule, broker=broker, records=records,
                                   commit_interval=commit_interval, store_timeout=store_timeout,
                                   allow=tuple(dict.fromkeys(allow)))
        out_dir = toolkit.run_outputs(json_path, junit_path, out, "run", seed, overwrite)
        console.print(f"seed: {seed}")  # the input is good: a usage error prints nothing but itself
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            try:
                result = runner.run_scenario(scenario, out_dir, log=runner.CHILDREN_LOG, faults_must_fire=True)
            except (ScheduleError, StoreFactoryError, ValueError):
                raise
            except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                result = runner.error_verdict(scenario, exc, out_dir)
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
    for check in result.get("allowed", []):
        times = result["waived"].get(check, 0)
        console.print(f"waived: {check} (--allow; fired {times} time{'s' if times != 1 else ''})", markup=False,
                      highlight=False)
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


def show_campaign(campaign: dict) -> None:
    """What a lifecycle campaign shows besides its tallies: the checks no scenario exercised on a store that
    ran (:func:`~eos_harness.suites.lifecycle.coverage.not_exercised_note`)."""
    from eos_harness.suites.lifecycle.coverage import not_exercised_note

    note = not_exercised_note(campaign)
    if note:
        console.print(note, soft_wrap=True, highlight=False, markup=False)


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
    from eos_harness.faces.chaos import prepare, run_and_show
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import defaults

    entry = SUITES["lifecycle"]
    values = defaults(entry)
    try:
        running = prepare(entry, values)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    campaign = run_and_show(entry, seed, values, out_dir, minutes=minutes, scenarios=None, workers=entry.workers,
                            running=running)
    sys.exit(toolkit.campaign_exit(campaign))
