"""CLI commands of the EOS lifecycle: ``eos-harness run`` (one scenario), ``chaos`` (a campaign), ``demo``."""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import click
from click.core import ParameterSource
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.extras import needs_kafka
from eos_harness.faces.params import (
    AT_LEAST_ONE,
    POSITIVE_MINUTES,
    STORE_LIST,
    WORKLOAD_LIST,
    BrokerParam,
    require_extra,
)
from eos_harness.faces.report import NO_REPORT_HELP, write_run_report
from eos_harness.models.workloads import DEFAULT_WORKLOADS, WORKLOADS
from eos_harness.outputs import check_outputs
from eos_harness.rundir import run_directory
from eos_harness.verdict import ERROR, EXIT_INCOMPLETE, error_reason, exit_code
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

STORE_TIMEOUT_HELP = "Bound on each call into the store; a call that takes longer is a store_hang finding."


def store_timeout_option(command):
    """``--store-timeout SECONDS`` (run, chaos)."""
    from eos_harness.process.guard import STORE_TIMEOUT_S

    return click.option("--store-timeout", type=click.FloatRange(min=0, min_open=True), default=STORE_TIMEOUT_S,
                        show_default=True, metavar="SECONDS", help=STORE_TIMEOUT_HELP)(command)


BROKER_HELP = ("embedded (SQLite log) | kafka-local (start a local Kafka on 127.0.0.1) | kafka-local:3 "
               "(three brokers) | kafka-quorum[:N] (3 dedicated KRaft controllers and N brokers) | "
               "kafka://HOST:PORT (a running cluster)")

# Logs and CI output are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)


def _seed(seed: int | None) -> int:
    return seed if seed is not None else random.SystemRandom().randrange(2**31)


def _write_json(path: str | Path | None, obj: dict) -> str | None:
    """Write the results JSON (its directory was checked up front); returns why it could not be written."""
    from eos_harness.rundir import write_text

    if not path:
        return None
    try:
        write_text(Path(path), json.dumps(obj, indent=2))
    except OSError as exc:
        return f"could not write {path}: {exc.strerror or exc}"
    return None


def _check_json_path(json_path: str | None, option: str = "--json") -> None:
    from eos_harness.rundir import check_output_file

    if json_path:
        check_output_file(json_path, option)


JUNIT_HELP = ("Write JUnit XML here (for CI): a testsuite per store, a testcase per check, a failure per broken "
              "check with its violations and replay command.")
UNTIL_FAILURE_HELP = ("Stop at the first failure of a store expected to pass (a bug found; a mutant caught is "
                      "expected and does not stop it); when every store is a mutant or unsafe variant, at the first "
                      "failure (caught). Everything that finished is written.")
RESUME_HELP = ("Continue the stopped campaign of RUN_DIR (Ctrl-C, SIGTERM, --until-failure) with its seed and "
               "options, kept there when it started: the same plan, the scenarios that finished are not run again, "
               "a --minutes campaign gets the time it had left; the JSON holds every scenario. --json, --junit, "
               "--workers, --store-timeout and --until-failure may be given anew.")


OVERWRITE_HELP = ("Reuse --out if it holds an earlier run's results (only what the harness wrote there is "
                  "removed; a directory it did not make is never emptied).")


def _violations_table(result: dict) -> Table:
    table = Table(title=f"violations of {result['store']} / {result['workload']}", show_lines=False)
    table.add_column("check", no_wrap=True)
    for col in ("key", "expected", "observed", "event"):
        table.add_column(col, overflow="fold")
    for v in result["violations"][:20]:
        table.add_row(v["check"], str(v["key"]), str(v["expected"]), str(v["observed"]), str(v["event"]))
    if len(result["violations"]) > 20:
        table.add_row("…", f"{len(result['violations']) - 20} more", "", "", "")
    return table


@click.command("run")
@click.option("--suite", type=click.Choice(["lifecycle", "spark", "metadata"]), default="lifecycle", show_default=True,
              expose_value=False,
              help="lifecycle: a store through the EOS task lifecycle; spark: Spark pipelines; metadata: KIP-868 "
                   "metadata transactions (see `eos-harness run --suite spark --help`, `… --suite metadata --help`).")
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
@click.option("--seed", type=int, default=None, help="Seed of the input (printed when not given).")
@click.option("--json", "json_path", default=None, help="Write the verdict JSON here.")
@click.option("--junit", "junit_path", default=None, help=JUNIT_HELP)
@click.option("--out", default=None, help="Run directory (default: a new runs/<UTC time>-run-seed<N>, and runs/latest links to it).")
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@store_timeout_option
@click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP)
def run_command(store, workload, crash_at, broker, records, commit_interval, seed, json_path, junit_path, out,
                overwrite, store_timeout, no_report):
    """Run one scenario: an EOS task under a crash schedule, checked against the model."""
    from eos_harness.cluster import ClusterError
    from eos_harness.process.server import held_output
    from eos_harness.runtime import TaskConfig
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.registry import resolve
    from eos_harness.suites.lifecycle.campaign import CHILDREN_LOG
    from eos_harness.suites.lifecycle.checks import CHECKS
    from eos_harness.suites.lifecycle.runner import Scenario, error_verdict, run_scenario
    from eos_harness.suites.lifecycle.schedule import ScheduleError, parse_store_schedule

    _require_kafka_extra(broker)
    seed = _seed(seed)
    console.print(f"seed: {seed}")
    try:
        # The store's module declares its own crash points: load it before reading the schedule (its
        # output is kept for the run's log, off the terminal).
        with held_output(children=True):  # and a probe's, for a point of the store's own (see below)
            resolve(TaskConfig.for_store(store, broker="", state_dir="", workload=workload).store)
            schedule, warning = parse_store_schedule(store, list(crash_at), store_timeout)
        if warning:
            console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
        scenario = Scenario(store, workload, seed, schedule, broker=broker, records=records,
                            commit_interval=commit_interval, store_timeout=store_timeout)
        check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=out)
        out_dir = run_directory(out, "run", seed, overwrite=overwrite)
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            try:
                result = run_scenario(scenario, out_dir, log=CHILDREN_LOG)
            except (ScheduleError, StoreFactoryError, ValueError):
                raise
            except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                result = error_verdict(scenario, exc, out_dir)
    except (ScheduleError, StoreFactoryError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    json_error = _write_json(json_path, result)
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
        console.print(_violations_table(result))
        for check in sorted({v["check"] for v in result["violations"]}):
            console.print(f"  {check}: {CHECKS.get(check, '')}", markup=False, highlight=False)
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
    if result["verdict"] != "pass" or result["fault_errors"]:
        console.print(f"replay: {result['repro']}", soft_wrap=True)
    if "history" in result:
        console.print(f"history: {result['history']}")
    if "log" in result:
        console.print(f"the store's output: {result['log']}", soft_wrap=True)
    if json_error:
        console.print(f"[red]{json_error}[/] (the verdict is above and in {out_dir / 'verdict.json'})")
    if not no_report:
        write_run_report(out_dir)
    sys.exit(exit_code([result["verdict"]], incomplete=bool(result["fault_errors"] or json_error)))


def _incomplete(exc: Exception) -> click.ClickException:
    """A click error for a run that could not be completed (no broker to run on): exit code 3."""
    error = click.ClickException(str(exc))
    error.exit_code = EXIT_INCOMPLETE
    return error


def _require_kafka_extra(broker: BrokerSpec) -> None:
    if needs_kafka(broker):
        require_extra("kafka", f"--broker {broker.cli_text}")


def chaos_table(campaign: dict) -> Table:
    summary = campaign["summary"]
    table = Table(title=f"chaos campaign, seed {campaign['seed']}: {summary['total']} scenarios")
    for col in ("store", "expected", "scenarios", "failed", "verdict", "checks that fired"):
        table.add_column(col)
    for store, t in summary["stores"].items():
        if not t["scenarios"]:
            continue
        colour = "green" if t["status"] in ("ok", "caught") else "red"
        checks = ", ".join(f"{c}×{n}" for c, n in sorted(t["checks"].items(), key=lambda kv: -kv[1]))
        table.add_row(store, t["expected"], str(t["scenarios"]), str(t["failed"]), f"[{colour}]{t['status']}[/]", checks)
    return table


def run_chaos(seed, stores, workloads, minutes, scenarios, out: Path, json_path, workers,
              broker: BrokerSpec = EMBEDDED, store_timeout=None, junit_path=None, until_failure=False,
              resume=False, report=True) -> dict:
    """Run a campaign in the (prepared) run directory ``out`` (``resume``: continue the stopped one
    there); print its table; write its JSON, JUnit and report."""
    with open_broker(broker, say=console.print) as opened:
        return _run_chaos(seed, stores, workloads, minutes, scenarios, out, json_path, workers, opened.spec,
                          store_timeout, junit_path, until_failure, resume, report)


def _run_chaos(seed, stores, workloads, minutes, scenarios, out, json_path, workers, broker: BrokerSpec,
               store_timeout=None, junit_path=None, until_failure=False, resume=False, report=True) -> dict:
    from eos_harness.campaign import finished_results
    from eos_harness.suites.lifecycle.campaign import run_campaign

    out_dir = out
    console.print(f"seed: {seed}   broker: {broker.cli_text}   results: {out_dir}")
    finished = len(finished_results(out_dir / "results.jsonl")) if resume else 0
    if resume:
        console.print(f"resuming the campaign of {out_dir}: {finished} scenario(s) finished before are kept")
    started = time.monotonic()
    total = scenarios
    outputs = {"json": str(Path(json_path).absolute()) if json_path else None,
               "junit": str(Path(junit_path).absolute()) if junit_path else None}
    with Progress(TextColumn("[bold]chaos"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task("chaos", total=total, completed=finished, status="")
        counts = {"fail": 0, "error": 0}

        def on_result(result: dict) -> None:
            counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
            errors = f", {counts['error']} could not run" if counts["error"] else ""
            # A store's probe (run before its scenarios) is a result, not one of the scenarios asked for.
            progress.update(task, advance=0 if result.get("probe") else 1,
                            status=f"{counts['fail']} failing (mutants included){errors}")

        campaign = run_campaign(seed, out_dir, stores=stores, workloads=workloads, minutes=minutes,
                                scenarios=scenarios, workers=workers, on_result=on_result, broker=broker,
                                until_failure=until_failure, resume=resume, outputs=outputs,
                                **({} if store_timeout is None else {"store_timeout": store_timeout}))
    campaign["seconds"] = round(time.monotonic() - started, 1)
    json_file = Path(json_path) if json_path else out_dir / "chaos.json"
    json_error = _write_json(json_file, campaign)
    junit_error = None
    if junit_path:
        from eos_harness.junit import write_junit
        from eos_harness.suites.lifecycle.junit import campaign_suites

        junit_error = write_junit(junit_path, campaign_suites(campaign), f"eos-harness chaos, seed {seed}")
    # REPORT (issue 17 part 1): the HTML report of the run directory is written here, after the JSON and the
    # JUnit file, whether the campaign ran to its end or was stopped (Ctrl-C, SIGTERM, --until-failure).
    console.print(chaos_table(campaign))
    for warning in campaign.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
    for store, why in campaign.get("left_out", {}).items():
        console.print(f"left out: {store}: {why}, so no scenario of this campaign could catch it",
                      soft_wrap=True, highlight=False, markup=False)
    summary = campaign["summary"]
    console.print(f"{summary['total']} scenarios in {campaign['seconds']} s "
                  f"({summary['total'] / max(campaign['seconds'], 1e-9):.1f}/s); crash points hit: {len(summary['points_hit'])}")
    if summary.get("not_run"):
        # Not judged, so not unexpected: a warning; the exit code is what the stores that ran say.
        console.print(f"[yellow]not run ({'asked for with --stores, ' if stores else ''}not reached before the "
                      f"campaign ended, so not judged): {', '.join(summary['not_run'])}; give more --scenarios "
                      "or --minutes to cover them[/]", soft_wrap=True)
    if summary["unexpected"]:
        console.print(f"[red]unexpected results: {', '.join(summary['unexpected'])}[/]")
        for r in campaign["scenarios"]:
            if r["store"] in summary["unexpected"] and r["verdict"] == "fail":
                console.print(f"  replay: {r['repro']}", soft_wrap=True)
                for v in r["violations"]:  # what its task's process wrote before it failed (from the log)
                    if v["check"] == "task_finishes" and v.get("detail"):
                        console.print(f"  task_finishes: {v['observed']}\n{v['detail']}", markup=False,
                                      highlight=False, soft_wrap=True)
                        break
                break
    if summary.get("fault_errors"):
        console.print(f"[red]{len(summary['fault_errors'])} scheduled fault(s) could not be injected "
                      "(the campaign did not test what it planned):[/]")
        for line in summary["fault_errors"][:5]:
            console.print(f"  {line}", soft_wrap=True)
    if summary.get("errors"):
        console.print(f"[red]{len(summary['errors'])} scenario(s) could not be run to their end "
                      "(verdict \"error\" in the JSON):[/]")
        for line in summary["errors"][:5]:
            console.print(f"  {line}", soft_wrap=True)
    if json_error:
        campaign["json_error"] = json_error
        console.print(f"[red]{json_error}[/]; the scenarios that finished are in {out_dir / 'results.jsonl'} "
                      "as far as it could be written", soft_wrap=True)
    else:
        console.print(f"results: {json_file} (histories under {out_dir}; the stores' output: "
                      f"{campaign.get('log')})", soft_wrap=True)
    if junit_error:
        campaign["junit_error"] = junit_error
        console.print(f"[red]{junit_error}[/]", soft_wrap=True)
    elif junit_path:
        console.print(f"JUnit: {junit_path}")
    if report:
        write_run_report(out_dir, None if json_error else json_file)
    print_stopped(campaign, f"eos-harness chaos --resume {out_dir}")
    return campaign


def _campaign_exit(campaign: dict, campaign_exit_code: Callable[[dict], int] | None = None) -> int:
    """130/143 when interrupted (SIGINT/SIGTERM), else the campaign's exit code from its verdicts
    (``campaign_exit_code``: the suite's; :func:`eos_harness.suites.lifecycle.campaign.campaign_exit_code`
    by default); 3 for a campaign that passed whose JUnit file could not be written."""
    if campaign_exit_code is None:
        from eos_harness.suites.lifecycle.campaign import campaign_exit_code

    interrupted = interrupted_exit_code(campaign)
    if interrupted is not None:
        return interrupted
    code = campaign_exit_code(campaign)
    return EXIT_INCOMPLETE if code == 0 and campaign.get("junit_error") else code


def print_stopped(campaign: dict, resume_command: str) -> None:
    """For a campaign stopped early (Ctrl-C, SIGTERM, --until-failure, a broken environment): why, and
    the command that resumes it. Printed last, where it is seen."""
    stopped = campaign.get("stopped")
    if stopped:
        console.print(f"[red]{stopped['message']}[/]", soft_wrap=True)
        console.print(f"to resume: {resume_command}", soft_wrap=True, markup=False, highlight=False)


def interrupted_exit_code(campaign: dict) -> int | None:
    """130 (SIGINT) or 143 (SIGTERM) for a campaign a signal stopped; None for any other."""
    why = (campaign.get("stopped") or {}).get("why")
    return 128 + int(getattr(signal, why)) if why in ("SIGINT", "SIGTERM") else None


@click.command("chaos")
@click.option("--suite", type=click.Choice(["lifecycle", "spark", "metadata"]), default="lifecycle", show_default=True,
              expose_value=False,
              help="lifecycle: a store through the EOS task lifecycle; spark: Spark pipelines; metadata: KIP-868 "
                   "metadata transactions (see `eos-harness run --suite spark --help`, `… --suite metadata --help`).")
@click.option("--stores", type=STORE_LIST, default=None,
              help="Comma-separated stores (default: every built-in store, mutant and unsafe variant).")
@click.option("--workloads", type=WORKLOAD_LIST, default=None,
              help=f"Comma-separated workloads (default: all of {', '.join(DEFAULT_WORKLOADS)}; "
                   f"{', '.join(sorted(set(WORKLOADS) - set(DEFAULT_WORKLOADS)))} only when named: "
                   "global is a global store fed by 3 changelog partitions).")
@click.option("--minutes", type=POSITIVE_MINUTES, default=None, help="Run for this long (default 1 unless --scenarios).")
@click.option("--scenarios", type=AT_LEAST_ONE, default=None, help="Run exactly this many scenarios.")
@click.option("--seed", type=int, default=None, help="Campaign seed (printed when not given).")
@click.option("--json", "json_path", default=None, help="Write the campaign JSON here (default OUT/chaos.json).")
@click.option("--out", default=None, help="Results directory (default: a new runs/<UTC time>-chaos-seed<N>, and runs/latest links to it).")
@click.option("--workers", type=AT_LEAST_ONE, default=2, show_default=True, help="Scenarios run at once.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP + "; on kafka-local or kafka-quorum the "
              "campaign adds broker faults (broker-kill, broker-pause, coordinator-kill, txn-timeout)")
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@store_timeout_option
@click.option("--junit", "junit_path", default=None, help=JUNIT_HELP + " A mutant caught is an expected failure "
              "(skipped, with its evidence); a mutant not caught is the failure of its testcase 'caught'.")
@click.option("--until-failure", is_flag=True, help=UNTIL_FAILURE_HELP)
@click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR", help=RESUME_HELP)
@click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP)
@click.pass_context
def chaos_command(ctx, stores, workloads, minutes, scenarios, seed, json_path, out, workers, broker, overwrite,
                  store_timeout, junit_path, until_failure, resume_dir, no_report):
    """Run a chaos campaign: random scenarios over stores × workloads × crash schedules."""
    from eos_harness.cluster import ClusterError
    from eos_harness.stores import StoreFactoryError
    from eos_harness.suites.lifecycle.campaign import SUITE

    if resume_dir is not None:
        state = resumed_state(ctx, resume_dir, SUITE, ("stores", "workloads", "minutes", "scenarios", "seed", "out",
                                                       "broker", "overwrite"),
                              " (start a new one, or give a longer one --minutes/--scenarios)")
        seed, stores, workloads = state["seed"], state["stores"], state["workloads"]
        try:
            broker = parse(state["broker"])
        except ValueError as exc:
            raise click.UsageError(f"--resume {resume_dir}: {exc}") from None
        minutes, scenarios = state["minutes"], state["scenarios"]
        # Not the plan: these may be given anew.
        workers = given_or_kept(ctx, state, "workers", workers)
        store_timeout = given_or_kept(ctx, state, "store_timeout", store_timeout)
        until_failure = until_failure or state.get("until_failure", False)
        json_path, junit_path = json_path or state.get("json"), junit_path or state.get("junit")
    _require_kafka_extra(broker)
    seed = _seed(seed)
    try:
        check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=resume_dir or out,
                      run_dir_writes={"--json": "chaos.json"})
        out_dir = Path(resume_dir) if resume_dir is not None else run_directory(out, "chaos", seed, overwrite=overwrite)
        campaign = run_chaos(seed, stores, workloads, minutes, scenarios, out_dir, json_path, workers, broker,
                             store_timeout, junit_path, until_failure, resume=resume_dir is not None,
                             report=not no_report)
    except (StoreFactoryError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    sys.exit(_campaign_exit(campaign))


def resumed_state(ctx: click.Context, resume_dir: str, suite: str, plan_options: tuple[str, ...],
                  finished_hint: str = "") -> dict:
    """The options of the stopped ``suite`` campaign in ``resume_dir``; a usage error when it is not one,
    when one of ``plan_options`` is given anew (:func:`_refuse_with_resume`), or when it ran to its end
    (the message ends with ``finished_hint``)."""
    from eos_harness.campaign import ResumeError, open_for_resume
    from eos_harness.records import OPTION_TYPES

    _refuse_with_resume(ctx, plan_options)
    try:  # held by this command from here on; a damaged line of its results is named (and run again)
        resumed = open_for_resume(resume_dir, suite, [name for name in plan_options if name in OPTION_TYPES])
    except ResumeError as exc:
        raise click.UsageError(str(exc)) from None
    state = resumed.state
    for note in resumed.notes:
        console.print(f"warning: {note}", soft_wrap=True, highlight=False, markup=False)
    if state.get("finished"):
        raise click.UsageError(f"--resume {resume_dir}: that campaign ran to its end; nothing to resume{finished_hint}")
    return state


def given_or_kept(ctx: click.Context, state: dict, name: str, value):
    """A resumed campaign's option that may be given anew: ``value`` when given on the command line,
    else what the campaign kept (``value`` when it kept none)."""
    if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
        return value
    return state.get(name, value)


def _refuse_with_resume(ctx: click.Context, names: tuple[str, ...]) -> None:
    """A usage error when an option that shapes the plan is given with --resume (the campaign keeps its own)."""
    given = [f"--{name.replace('_', '-')}" for name in names
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{', '.join(given)}: a resumed campaign keeps the options it started with "
                               "(the same plan); drop them, or start a new campaign")


@click.command("demo")
@click.option("--out", default="runs/demo", show_default=True)
@click.option("--minutes", type=POSITIVE_MINUTES, default=1.0, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
def demo_command(out, minutes, seed):
    """The main job: a short chaos campaign on the embedded broker, with a verdict table.
    Run again, it replaces its own earlier results in OUT (never a directory it did not make)."""
    from eos_harness.rundir import RunDirError, prepare

    try:
        out_dir = prepare(out, overwrite=True, given=Path(out) != Path("runs/demo"))
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    campaign = run_chaos(seed, None, None, minutes, None, out_dir, None, 2)
    sys.exit(_campaign_exit(campaign))


@click.command("kafka-log")
@click.option("--broker", type=BrokerParam(needs_kafka="the log checker"), default="kafka-local", show_default=True,
              help="kafka-local | kafka-local:3 | kafka-quorum[:N] | kafka://HOST:PORT (the embedded broker is not Kafka)")
@click.option("--seed", type=int, default=None, help="Seed of the workload (printed when not given).")
@click.option("--transactions", type=click.IntRange(1, 100_000), default=60, show_default=True)
@click.option("--partitions", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--abort-ratio", type=click.FloatRange(0, 1), default=0.3, show_default=True)
@click.option("--isolation", type=click.Choice(["read_committed", "read_uncommitted"]), default="read_committed",
              show_default=True, help="The consumer's isolation level (read_uncommitted: a deliberately broken reader).")
@click.option("--json", "json_path", default=None, help="Write the result JSON here.")
def kafka_log_command(broker, seed, transactions, partitions, abort_ratio, isolation, json_path):
    """Check Kafka's own log promises (after Jepsen's Kafka workload): committed records read exactly
    once, no aborted read, one value per offset, no lost write, no hanging transaction."""
    from eos_harness.cluster import ClusterError
    from eos_harness.suites.kafka_log.runner import run_workload

    require_extra("kafka", "kafka-log")
    seed = _seed(seed)
    console.print(f"seed: {seed}")
    try:
        _check_json_path(json_path)
        with open_broker(broker, say=console.print) as opened:
            try:
                result = run_workload(opened.spec, seed,
                                      transactions=transactions, partitions=partitions, abort_ratio=abort_ratio,
                                      isolation=isolation)
            except ValueError:
                raise
            except Exception as exc:  # noqa: BLE001 - the workload could not be run to its end: exit 3
                result, reason = None, error_reason(exc)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    if result is None:
        _write_json(json_path, {"seed": seed, "broker": broker.cli_text, "verdict": ERROR, "error": reason, "violations": []})
        console.print("[red]verdict: error[/]: the workload could not be run to its end:")
        console.print(reason, markup=False, highlight=False)
        sys.exit(exit_code([ERROR]))
    report = {"seed": seed, "broker": broker.cli_text, **result.to_json()}
    json_error = _write_json(json_path, report)
    colour = "green" if report["verdict"] == "pass" else "red"
    console.print(f"{report['transactions']} transactions, {report['records_sent']} records sent, "
                  f"{report['records_read']} read ({isolation}) in {report['seconds']} s")
    console.print(f"[{colour}]verdict: {report['verdict']}[/] {report['summary'] or ''}")
    if report["anomalies"]:
        table = Table(title="anomalies (first 20)")
        for col in ("kind", "partition", "offset", "value", "transaction", "detail"):
            table.add_column(col, overflow="fold")
        for a in report["anomalies"][:20]:
            table.add_row(a["kind"], str(a["partition"]), str(a["offset"]), str(a["value"]), str(a["transaction"]), a["detail"])
        console.print(table)
        console.print(f"replay: eos-harness kafka-log --broker {broker.cli_text} --seed {seed} --transactions {transactions} "
                      f"--partitions {partitions} --abort-ratio {abort_ratio} --isolation {isolation}", soft_wrap=True)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    sys.exit(exit_code([report["verdict"]], incomplete=bool(json_error)))
