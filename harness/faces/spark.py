"""CLI of the Spark suite: ``eos-harness run --suite spark …`` (one scenario; the CLI's group sends it here
from the suite registry, :data:`eos_harness.suite.SUITES`), and what its ``chaos`` campaign
(:mod:`eos_harness.faces.chaos`) shows besides its tallies: the matrix by configuration."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import click
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import BrokerSpec
from eos_harness.faces import toolkit
from eos_harness.faces.params import BrokerParam, require_extra
from eos_harness.faces.report import write_run_report
from eos_harness.faces.toolkit import console
from eos_harness.junit import write_junit
from eos_harness.spark.pipelines import PIPELINES, SINKS, unsupported
from eos_harness.suites.spark.junit import spark_suites
from eos_harness.suites.spark.plan import MIN_BATCHES, counted_violations
from eos_harness.verdict import exit_code
from rich.table import Table


def _table(results: list[dict], title: str) -> Table:
    table = Table(title=title)
    for col in ("pipeline", "sink", "state", "fmt", "crash", "window on disk", "verdict", "checks that fired"):
        table.add_column(col, overflow="fold")
    for r in results:
        conf = r["configuration"]
        state = conf["state_provider"] + ("+changelog" if conf["changelog_checkpointing"] else "")
        windows = ", ".join(f"{c['window']}({c['batch']})" for c in r.get("crash_windows", [])) or "-"
        fired = sorted({v["check"] for v in counted_violations(r, r.get("strict", False))})
        colour = {"pass": "green", "fail": "red"}.get(r["verdict"], "yellow")
        dups = r.get("duplicates", {}).get("count", 0)
        verdict = f"[{colour}]{r['verdict']}[/]" + (f" ({dups} duplicates)" if dups else "")
        sink = r["sink"] + ("" if conf.get("source", "file") == "file" else f" ({conf['source']} source)")
        table.add_row(r["pipeline"], sink, state, str(conf["checkpoint_format"]), ",".join(r["schedule"]) or "-",
                      windows, verdict, ", ".join(fired))
    return table


def _matrix_table(results: list[dict], title: str) -> Table:
    """A campaign, one row per (pipeline, sink, state configuration, format): how its scenarios
    went, and in which crash windows (on disk) it failed."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        conf = r["configuration"]
        state = conf["state_provider"] + ("+changelog" if conf["changelog_checkpointing"] else "")
        sink = r["sink"] + ("" if conf.get("source", "file") == "file" else f" ({conf['source']} source)")
        groups.setdefault((r["pipeline"], sink, state, str(conf["checkpoint_format"])), []).append(r)
    table = Table(title=title)
    for col in ("pipeline", "sink", "state", "fmt", "scenarios", "pass", "fail", "n/a", "failing windows",
                "checks that fired", "duplicates"):
        table.add_column(col, overflow="fold")
    for key, rows in sorted(groups.items()):
        counts = {v: sum(r["verdict"] == v for r in rows) for v in ("pass", "fail", "not_applicable")}
        failing = sorted({c["window"] for r in rows if r["verdict"] == "fail" for c in r.get("crash_windows", [])})
        fired = sorted({v["check"] for r in rows for v in counted_violations(r, r.get("strict", False))})
        dups = sum(r.get("duplicates", {}).get("count", 0) for r in rows)
        table.add_row(*key, str(len(rows)), str(counts["pass"]),
                      f"[red]{counts['fail']}[/]" if counts["fail"] else "0", str(counts["not_applicable"]),
                      ", ".join(failing), ", ".join(fired), str(dups) if dups else "")
    return table


BROKER_HELP = ("Kafka for --source kafka / --sink kafka: kafka-local (default: one KRaft broker on 127.0.0.1 "
               "started for this command and stopped at its end; kafka-local:N for N brokers), kafka-quorum[:N] "
               "(3 dedicated KRaft controllers and N brokers) or "
               "kafka://HOST:PORT (a broker you run).")
BROKER = BrokerParam(needs_kafka="Spark's Kafka source and sink")


@contextlib.contextmanager
def _kafka(broker: BrokerSpec, needed: bool) -> Iterator[str | None]:
    """Bootstrap servers of the command's Kafka when ``needed`` (kafka-local started here and
    always stopped, kafka:// checked to answer), else None. No broker to run on: exit 3."""
    if not needed:
        yield None
        return
    from eos_harness.cluster import ClusterError

    with contextlib.ExitStack() as stack:
        try:
            opened = stack.enter_context(open_broker(broker, say=console.print))
        except ClusterError as exc:
            raise toolkit.incomplete(exc) from None
        yield opened.bootstrap_servers


def _print_result(result: dict) -> None:
    console.print(_table([result], f"spark scenario, seed {result['seed']}"))
    if result["verdict"] == "not_applicable":
        console.print(f"not applicable: {result['reason']}")
    if result["verdict"] == "error":
        console.print(f"error: the scenario could not be run to its end: {result['error']}", markup=False,
                      highlight=False)
    for v in counted_violations(result, result.get("strict", False))[:20]:
        console.print(f"  {v['check']}: key={v['key']} expected={str(v['expected'])[:200]} "
                      f"observed={str(v['observed'])[:400]} (event {v['event']})", markup=False, highlight=False)
    lagging = result.get("watermarks", {}).get("lagging_batches")
    if lagging:
        marks = {k: {str(n): w for n, w in result["watermarks"][k].items()} for k in ("recorded", "uninterrupted")}
        console.print("watermark lagged after the restart in batch " + ", ".join(
            f"{n} ({marks['recorded'][str(n)]} ms recorded, {marks['uninterrupted'][str(n)]} ms uninterrupted)"
            for n in lagging)
            + ": judged with the recorded watermarks (Spark may aggregate data behind the watermark)",
            markup=False, highlight=False)
    duplicates = result.get("duplicates", {})
    if duplicates.get("count"):
        console.print(f"duplicates: {duplicates['count']} (crash windows {duplicates['windows']})")
        for crash in duplicates.get("by_crash", []):
            console.print(f"  {crash['count']} after the kill of run {crash['run']} ({crash['target']}, killed after "
                          f"{crash['after']}): window {crash['window']} of batch {crash['batch']}",
                          markup=False, highlight=False)
    console.print(f"replay: {result['repro']}", markup=False, highlight=False)


@click.command("run")
@toolkit.run_options("spark", "spark-run")
@click.option("--pipeline", type=click.Choice(PIPELINES), required=True)
@click.option("--sink", type=click.Choice(SINKS), required=True)
@click.option("--state-provider", "provider", type=click.Choice(["hdfs", "rocksdb"]), default="rocksdb", show_default=True)
@click.option("--changelog", is_flag=True, help="RocksDB changelog checkpointing on (Spark's default: off).")
@click.option("--checkpoint-format", "checkpoint_format", type=click.Choice(["1", "2"]), default="1", show_default=True)
@click.option("--source", type=click.Choice(["file", "kafka"]), default="file", show_default=True)
@click.option("--crash-at", "crash_at", default="", help="Comma-separated kills, one per run: offsets@N, state@N, "
              "sink@N, commit@N (right after that file of batch N appears) or random@MS.")
@click.option("--batches", type=click.IntRange(min=MIN_BATCHES), default=5, show_default=True,
              help="Input files (one micro-batch each); at least 3, so a kill has a batch before and after it.")
@click.option("--strict", is_flag=True, help="At-least-once duplicates (Kafka sink) fail the verdict.")
@click.option("--broker", type=BROKER, default="kafka-local", help=BROKER_HELP)
def spark_run_command(pipeline, sink, provider, changelog, checkpoint_format, source, crash_at, batches, strict,
                      seed, broker, json_path, junit_path, out, overwrite, no_report):
    """Run one Spark scenario: a pipeline under driver kills, restarted and checked against its model."""
    from eos_harness.suites.spark.runner import SparkScenario, error_result, run_spark_scenario

    require_extra("spark", "--suite spark")
    if "kafka" in (source, sink):
        require_extra("kafka", f"--{'source' if source == 'kafka' else 'sink'} kafka")
    seed = toolkit.seed_or_drawn(seed)
    console.print(f"seed: {seed}")
    scenario = SparkScenario(pipeline, sink, provider, int(checkpoint_format), changelog, source,
                             tuple(t for t in crash_at.split(",") if t.strip()), seed, batches, strict)
    try:
        scenario.validate()
        run_dir = toolkit.run_outputs(json_path, junit_path, out, "spark-run", seed, overwrite)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    needed = scenario.uses_kafka and not unsupported(pipeline, sink, provider, int(checkpoint_format))
    try:
        with _kafka(broker, needed) as kafka:
            result = run_spark_scenario(scenario, run_dir, keep=True, kafka=kafka, faults_must_fire=True)
    except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
        result = error_result(scenario, exc)
    json_error = toolkit.write_json(json_path, result)
    if junit_path:
        json_error = json_error or write_junit(junit_path, spark_suites([result], strict), f"eos-harness run --suite "
                                               f"spark, seed {seed}")
    _print_result(result)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    if not no_report:
        write_run_report(run_dir)
    sys.exit(exit_code([result["verdict"]], incomplete=bool(json_error)))


def show_campaign(campaign: dict) -> None:
    """What a Spark campaign shows besides its tallies: a row per configuration, the scenarios that did not
    pass, and the first violations of each failing one."""
    strict = bool(campaign.get("strict"))
    console.print(_matrix_table(campaign["scenarios"], f"spark chaos, seed {campaign['seed']}: "
                                                       f"{campaign['summary']['total']} scenarios by configuration"))
    failing = [r for r in campaign["scenarios"] if r["verdict"] != "pass"]
    if failing:
        console.print(_table(failing, f"the {len(failing)} scenarios that did not pass"))
    for r in campaign["scenarios"]:
        if r["verdict"] == "fail":
            for v in counted_violations(r, strict)[:3]:
                console.print(f"  {r['pipeline']}/{r['sink']}: {v['check']} key={v['key']} "
                              f"observed={str(v['observed'])[:300]}", markup=False, highlight=False)
