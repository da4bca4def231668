"""CLI of the metadata suite (KIP-868): ``eos-harness run --suite metadata …`` (one scenario) and
``eos-harness chaos --suite metadata …`` (a campaign). The CLI's group sends ``run``/``chaos``
with ``--suite metadata`` here (:data:`eos_harness.faces.spark.SUITE_COMMANDS`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import BrokerSpec, parse
from eos_harness.faces.lifecycle import (
    JUNIT_HELP,
    OVERWRITE_HELP,
    _campaign_exit,
    _incomplete,
    _require_kafka_extra,
    _seed,
    _write_json,
    console,
    given_or_kept,
    print_stopped,
    resumed_state,
)
from eos_harness.faces.params import AT_LEAST_ONE, POSITIVE_MINUTES, BrokerParam, NameList
from eos_harness.faces.report import NO_REPORT_HELP, write_run_report
from eos_harness.outputs import check_outputs
from eos_harness.rundir import run_directory
from eos_harness.verdict import ERROR, exit_code
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

UNTIL_FAILURE_HELP = ("Stop at the first failure of the real controller (a bug found; a mutant caught is expected "
                      "and does not stop it); when only mutants run, at the first failure (caught). Everything that "
                      "finished is written.")
RESUME_HELP = ("Continue the stopped campaign of RUN_DIR (Ctrl-C, SIGTERM, --until-failure) with its seed and "
               "options, kept there when it started: the same plan, the scenarios that finished are not run again, "
               "a --minutes campaign gets the time it had left; the JSON holds every scenario. --json, --junit, "
               "--workers and --until-failure may be given anew.")
BROKER_HELP = ("Where the metadata log lives: embedded (a topic of the SQLite log) | kafka-local (start a local "
               "Kafka on 127.0.0.1) | kafka-quorum[:N] (start 3 dedicated KRaft controllers and N brokers) | "
               "kafka://HOST:PORT (a running cluster).")


def _systems() -> list[str]:
    from eos_harness.suites.metadata.runner import SYSTEMS

    return list(SYSTEMS)


SYSTEM_LIST = NameList("system", _systems)


def _check_broker(broker: BrokerSpec) -> None:
    if broker.kind == "kafka-local" and broker.brokers != 1:
        raise ValueError(f"--broker {broker.cli_text!r}: the metadata suite runs on embedded, kafka-local, "
                         "kafka-quorum[:N] or kafka://HOST:PORT")


def _violations_table(result: dict) -> Table:
    table = Table(title=f"violations of {result['system']}")
    table.add_column("check", no_wrap=True)
    for col in ("key", "expected", "observed", "where"):
        table.add_column(col, overflow="fold")
    for v in result["violations"][:20]:
        table.add_row(v["check"], str(v["key"]), str(v["expected"]), str(v["observed"]), str(v.get("detail") or ""))
    return table


@click.command("run")
@click.option("--suite", type=click.Choice(["lifecycle", "spark", "metadata"]), default="metadata", expose_value=False)
@click.option("--system", type=click.Choice(_systems()), default="controller", show_default=True,
              help="controller (the real controller and readers) or a mutant (a deliberate mistake).")
@click.option("--crash-at", "crash_at", multiple=True,
              help="Fault schedule, one per controller: POINT[@n] (a metadata.controller.* crash point, the n-th "
                   "time reached), freeze:POINT[@n] (a zombie controller), kill@n. Repeat or comma-separate.")
@click.option("--max-batch-bytes", type=click.IntRange(min=256), default=8192, show_default=True,
              help="The largest batch the controller appends (KRaft's: 8 KiB).")
@click.option("--commands", type=AT_LEAST_ONE, default=10, show_default=True, help="Controller commands to run.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@click.option("--seed", type=int, default=None, help="Seed of the commands (printed when not given).")
@click.option("--json", "json_path", default=None, help="Write the verdict JSON here.")
@click.option("--junit", "junit_path", default=None, help=JUNIT_HELP)
@click.option("--out", default=None, help="Run directory (default: a new runs/<UTC time>-metadata-run-seed<N>; runs/latest links to it).")
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP)
def metadata_run_command(system, crash_at, max_batch_bytes, commands, broker, seed, json_path, junit_path, out,
                         overwrite, no_report):
    """Run one metadata scenario: controllers writing metadata transactions under a crash schedule,
    readers following the log, checked against the KIP-868 model."""
    from dataclasses import replace

    from eos_harness.cluster import ClusterError
    from eos_harness.process.server import children_output
    from eos_harness.suites.metadata.campaign import CHILDREN_LOG
    from eos_harness.suites.metadata.checks import CHECKS
    from eos_harness.suites.metadata.runner import (
        Scenario,
        ScheduleError,
        error_verdict,
        parse_metadata_schedule,
        run_scenario,
    )

    _require_kafka_extra(broker)
    seed = _seed(seed)
    console.print(f"seed: {seed}")
    try:
        _check_broker(broker)
        scenario = Scenario(system, seed, parse_metadata_schedule(list(crash_at)), max_batch_bytes, commands)
        check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=out)
        out_dir = run_directory(out, "metadata-run", seed, overwrite=overwrite)
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            # The controllers' and readers' output (a fenced zombie's Kafka client logs) is kept in the run
            # directory, not written to the terminal.
            with children_output(out_dir / CHILDREN_LOG) as children_log:
                try:
                    result = run_scenario(scenario, out_dir)
                except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                    result = error_verdict(scenario, exc)
            if children_log.is_file():  # named only when a child wrote something
                result["children_log"] = str(children_log)
    except (ScheduleError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    json_error = _write_json(json_path, result)
    if junit_path:
        from eos_harness.junit import write_junit
        from eos_harness.suites.metadata.junit import run_suites

        json_error = json_error or write_junit(junit_path, run_suites(result),
                                               f"eos-harness run --suite metadata, seed {seed}")
    colour = "green" if result["verdict"] == "pass" else "red"
    log = result.get("log", {})
    console.print(f"[{colour}]verdict: {result['verdict']}[/] ({result.get('seconds', '?')} s); crash points hit: "
                  f"{', '.join(result['crash_points']) or 'none'}")
    if log:
        console.print(f"log: {log['entries']} entries in {log['batches']} batches, {log['transactions']} "
                      f"transactions ({log['ended']} ended), aborts at offsets {log['aborts'] or 'none'}")
    if result["verdict"] == ERROR:
        console.print(f"the scenario could not be run to its end: {result['error']}", markup=False, highlight=False)
    if result["violations"]:
        console.print(_violations_table(result))
        for check in sorted({v["check"] for v in result["violations"]}):
            console.print(f"  {check}: {CHECKS.get(check, '')}", markup=False, highlight=False)
    if result["verdict"] != "pass":
        console.print(f"replay: {result['repro']}", soft_wrap=True)
    if "history" in result:
        console.print(f"history: {result['history']}")
    if "children_log" in result:
        console.print(f"the controllers' and readers' output: {result['children_log']}", soft_wrap=True)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    if not no_report:
        write_run_report(out_dir)
    sys.exit(exit_code([result["verdict"]], incomplete=bool(json_error)))


def chaos_table(campaign: dict) -> Table:
    summary = campaign["summary"]
    table = Table(title=f"metadata chaos campaign, seed {campaign['seed']}: {summary['total']} scenarios")
    for col in ("system", "expected", "scenarios", "failed", "verdict", "caught by", "checks that fired"):
        table.add_column(col)
    for system, t in summary["systems"].items():
        if not t["scenarios"]:
            continue
        colour = "green" if t["status"] in ("ok", "caught") else "red"
        checks = ", ".join(f"{c}×{n}" for c, n in sorted(t["checks"].items(), key=lambda kv: -kv[1]))
        caught = f"{t['caught_by']}×{t['caught_by_its_check']}" if t["caught_by"] else "-"
        table.add_row(system, t["expected"], str(t["scenarios"]), str(t["failed"]), f"[{colour}]{t['status']}[/]",
                      caught, checks)
    return table


@click.command("chaos")
@click.option("--suite", type=click.Choice(["lifecycle", "spark", "metadata"]), default="metadata", expose_value=False)
@click.option("--systems", type=SYSTEM_LIST, default=None,
              help="Comma-separated systems (default: the real controller and every mutant).")
@click.option("--minutes", type=POSITIVE_MINUTES, default=None, help="Run for this long (default 1 unless --scenarios).")
@click.option("--scenarios", type=AT_LEAST_ONE, default=None, help="Run exactly this many scenarios.")
@click.option("--seed", type=int, default=None, help="Campaign seed (printed when not given).")
@click.option("--json", "json_path", default=None, help="Write the campaign JSON here (default OUT/chaos.json).")
@click.option("--out", default=None, help="Results directory (default: a new runs/<UTC time>-metadata-chaos-seed<N>; runs/latest links to it).")
@click.option("--workers", type=AT_LEAST_ONE, default=2, show_default=True, help="Scenarios run at once.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@click.option("--junit", "junit_path", default=None, help=JUNIT_HELP + " A mutant caught by the check that names its "
              "mistake is an expected failure (skipped, with its evidence); one not caught so is the failure of its "
              "testcase 'caught'.")
@click.option("--until-failure", is_flag=True, help=UNTIL_FAILURE_HELP)
@click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR", help=RESUME_HELP)
@click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP)
@click.pass_context
def metadata_chaos_command(ctx, systems, minutes, scenarios, seed, json_path, out, workers, broker, overwrite,
                           junit_path, until_failure, resume_dir, no_report):
    """Run a metadata chaos campaign: the real controller under every crash window, and every mutant,
    which must be caught by the check that names its mistake."""
    from eos_harness.cluster import ClusterError
    from eos_harness.suites.metadata.campaign import SUITE, campaign_exit_code

    if resume_dir is not None:
        state = resumed_state(ctx, resume_dir, SUITE, ("systems", "minutes", "scenarios", "seed", "out", "broker",
                                                       "overwrite"),
                              " (start a new one, or give a longer one --minutes/--scenarios)")
        seed, systems, minutes, scenarios = state["seed"], state["systems"], state["minutes"], state["scenarios"]
        try:
            broker = parse(state["broker"])
        except ValueError as exc:
            raise click.UsageError(f"--resume {resume_dir}: {exc}") from None
        workers = given_or_kept(ctx, state, "workers", workers)  # not the plan: these may be given anew
        until_failure = until_failure or state.get("until_failure", False)
        json_path, junit_path = json_path or state.get("json"), junit_path or state.get("junit")
    _require_kafka_extra(broker)
    seed = _seed(seed)
    try:
        _check_broker(broker)
        check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=resume_dir or out,
                      run_dir_writes={"--json": "chaos.json"})
        out_dir = (Path(resume_dir) if resume_dir is not None
                   else run_directory(out, "metadata-chaos", seed, overwrite=overwrite))
        with open_broker(broker, say=console.print) as opened:
            campaign = _run_chaos(seed, systems, minutes, scenarios, out_dir, workers, opened.spec, until_failure,
                                  resume_dir is not None, json_path, junit_path)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    _finish(campaign, out_dir, json_path, junit_path, not no_report)
    sys.exit(_campaign_exit(campaign, campaign_exit_code))


def _run_chaos(seed, systems, minutes, scenarios, out_dir: Path, workers, broker: BrokerSpec, until_failure, resume,
               json_path, junit_path) -> dict:
    from eos_harness.campaign import finished_results
    from eos_harness.suites.metadata.campaign import run_campaign

    console.print(f"seed: {seed}   broker: {broker.cli_text}   results: {out_dir}")
    finished = len(finished_results(out_dir / "results.jsonl")) if resume else 0
    if resume:
        console.print(f"resuming the campaign of {out_dir}: {finished} scenario(s) finished before are kept")
    outputs = {"json": str(Path(json_path).absolute()) if json_path else None,
               "junit": str(Path(junit_path).absolute()) if junit_path else None}
    with Progress(TextColumn("[bold]chaos"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("chaos", total=scenarios, completed=finished, status="")
        counts = {"fail": 0, "error": 0}

        def on_result(result: dict) -> None:
            counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
            errors = f", {counts['error']} could not run" if counts["error"] else ""
            progress.update(task, advance=1, status=f"{counts['fail']} failing (mutants included){errors}")

        return run_campaign(seed, out_dir, minutes, scenarios, workers, on_result, broker,
                            tuple(systems) if systems else None, until_failure=until_failure, resume=resume,
                            outputs=outputs)


def _finish(campaign: dict, out_dir: Path, json_path, junit_path, report: bool) -> None:
    """Write the campaign's JSON, JUnit file and report (whether it ran to its end or was stopped) and
    print its table; last, for a campaign stopped early, how to resume it."""
    json_file = Path(json_path) if json_path else out_dir / "chaos.json"
    json_error = _write_json(json_file, campaign)
    junit_error = None
    if junit_path:
        from eos_harness.junit import write_junit
        from eos_harness.suites.metadata.junit import campaign_suites

        junit_error = write_junit(junit_path, campaign_suites(campaign),
                                  f"eos-harness chaos --suite metadata, seed {campaign['seed']}")
    summary = campaign["summary"]
    console.print(chaos_table(campaign))
    console.print(f"{summary['total']} scenarios in {campaign['seconds']} s; crash points hit: "
                  f"{', '.join(summary['points_hit']) or 'none'}", soft_wrap=True)
    if summary["not_run"]:
        console.print(f"[yellow]not run (not reached before the campaign ended, so not judged): "
                      f"{', '.join(summary['not_run'])}; give more --scenarios or --minutes[/]", soft_wrap=True)
    if summary["unexpected"]:
        console.print(f"[red]unexpected results: {', '.join(summary['unexpected'])}[/]")
        for r in campaign["scenarios"]:
            if r["system"] in summary["unexpected"]:
                console.print(f"  replay: {r['repro']}", soft_wrap=True)
                break
    if summary["errors"]:
        console.print(f"[red]{len(summary['errors'])} scenario(s) could not be run to their end:[/]")
        for line in summary["errors"][:5]:
            console.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)
    if json_error:
        campaign["json_error"] = json_error
        console.print(f"[red]{json_error}[/]; the scenarios that finished are in {out_dir / 'results.jsonl'}")
    else:
        console.print(f"results: {json_file} (histories under {out_dir}; the controllers' and readers' output: "
                      f"{campaign['log']})", soft_wrap=True)
    if junit_error:
        campaign["junit_error"] = junit_error
        console.print(f"[red]{junit_error}[/]", soft_wrap=True)
    elif junit_path:
        console.print(f"JUnit: {junit_path}")
    if report:
        write_run_report(out_dir, None if json_error else json_file)
    print_stopped(campaign, f"eos-harness chaos --suite metadata --resume {out_dir}")
