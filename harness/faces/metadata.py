"""CLI of the metadata suite (KIP-868): ``eos-harness run --suite metadata …`` (one scenario) and
``eos-harness chaos --suite metadata …`` (a campaign). The CLI's group sends ``run``/``chaos``
with ``--suite metadata`` here (:data:`eos_harness.faces.spark.SUITE_COMMANDS`)."""

from __future__ import annotations

import sys
import time

import click
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import BrokerSpec
from eos_harness.faces.lifecycle import (
    OVERWRITE_HELP,
    _check_json_path,
    _incomplete,
    _require_kafka_extra,
    _run_dir,
    _seed,
    _write_json,
    console,
    interrupted_exit_code,
)
from eos_harness.faces.params import AT_LEAST_ONE, POSITIVE_MINUTES, BrokerParam, NameList
from eos_harness.verdict import ERROR, exit_code
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

BROKER_HELP = ("Where the metadata log lives: embedded (a topic of the SQLite log) | kafka-local (start a local "
               "Kafka on 127.0.0.1) | kafka://HOST:PORT (a running cluster).")


def _systems() -> list[str]:
    from eos_harness.suites.metadata.runner import SYSTEMS

    return list(SYSTEMS)


SYSTEM_LIST = NameList("system", _systems)


def _check_broker(broker: BrokerSpec) -> None:
    if broker.kind == "kafka-local" and broker.brokers != 1:
        raise ValueError(f"--broker {broker.cli_text!r}: the metadata suite runs on embedded, kafka-local or "
                         "kafka://HOST:PORT")


def _violations_table(result: dict) -> Table:
    table = Table(title=f"violations of {result['system']}")
    table.add_column("check", no_wrap=True)
    for col in ("key", "expected", "observed", "where"):
        table.add_column(col, overflow="fold")
    for v in result["violations"][:20]:
        table.add_row(v["check"], str(v["key"]), str(v["expected"]), str(v["observed"]), str(v.get("detail") or ""))
    return table


@click.command("run")
@click.option("--suite", type=click.Choice(["eos", "spark", "metadata"]), default="metadata")
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
@click.option("--out", default=None, help="Run directory (default runs/metadata-<seed>).")
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
def metadata_run_command(suite, system, crash_at, max_batch_bytes, commands, broker, seed, json_path, out, overwrite):
    """Run one metadata scenario: controllers writing metadata transactions under a crash schedule,
    readers following the log, checked against the KIP-868 model."""
    from dataclasses import replace

    from eos_harness.cluster import ClusterError
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
        _check_json_path(json_path)
        out_dir = _run_dir(out, f"runs/metadata-{seed}", overwrite)
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            try:
                result = run_scenario(scenario, out_dir)
            except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                result = error_verdict(scenario, exc)
    except (ScheduleError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    json_error = _write_json(json_path, result)
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
    if json_error:
        console.print(f"[red]{json_error}[/]")
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
@click.option("--suite", type=click.Choice(["eos", "spark", "metadata"]), default="metadata")
@click.option("--systems", type=SYSTEM_LIST, default=None,
              help="Comma-separated systems (default: the real controller and every mutant).")
@click.option("--minutes", type=POSITIVE_MINUTES, default=None, help="Run for this long (default 1 unless --scenarios).")
@click.option("--scenarios", type=AT_LEAST_ONE, default=None, help="Run exactly this many scenarios.")
@click.option("--seed", type=int, default=None, help="Campaign seed (printed when not given).")
@click.option("--json", "json_path", default=None, help="Write the campaign JSON here (default OUT/chaos.json).")
@click.option("--out", default=None, help="Results directory (default runs/metadata-chaos-<seed>).")
@click.option("--workers", type=AT_LEAST_ONE, default=2, show_default=True, help="Scenarios run at once.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
def metadata_chaos_command(suite, systems, minutes, scenarios, seed, json_path, out, workers, broker, overwrite):
    """Run a metadata chaos campaign: the real controller under every crash window, and every mutant,
    which must be caught by the check that names its mistake."""
    from pathlib import Path

    from eos_harness.cluster import ClusterError
    from eos_harness.suites.metadata.campaign import campaign_exit_code, run_campaign

    _require_kafka_extra(broker)
    seed = _seed(seed)
    try:
        _check_broker(broker)
        _check_json_path(json_path)
        out_dir = _run_dir(out, f"runs/metadata-chaos-{seed}", overwrite)
        with open_broker(broker, say=console.print) as opened:
            console.print(f"seed: {seed}   broker: {broker.cli_text}   results: {out_dir}")
            started = time.monotonic()
            with Progress(TextColumn("[bold]chaos"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console) as progress:
                task = progress.add_task("chaos", total=scenarios, status="")
                counts = {"fail": 0, "error": 0}

                def on_result(result: dict) -> None:
                    counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
                    errors = f", {counts['error']} could not run" if counts["error"] else ""
                    progress.update(task, advance=1, status=f"{counts['fail']} failing (mutants included){errors}")

                campaign = run_campaign(seed, out_dir, minutes, scenarios, workers, on_result, opened.spec,
                                        tuple(systems) if systems else None)
            campaign["seconds"] = round(time.monotonic() - started, 1)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise _incomplete(exc) from None
    json_file = Path(json_path) if json_path else out_dir / "chaos.json"
    json_error = _write_json(json_file, campaign)
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
        console.print(f"results: {json_file} (histories under {out_dir})")
    stopped = campaign.get("stopped") or {}
    if stopped:
        console.print(f"[red]{stopped['message']}[/]", soft_wrap=True)
    sys.exit(interrupted_exit_code(campaign) or campaign_exit_code(campaign))
