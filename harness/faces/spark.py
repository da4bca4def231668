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
from eos_harness.suites.spark.export import check_export_dir
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
        sink = r.get("sink_kind") or r["sink"]
        sink += "" if conf.get("source", "file") == "file" else f" ({conf['source']} source)"
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
        sink = (r.get("sink_kind") or r["sink"]) + ("" if conf.get("source", "file") == "file"
                                                    else f" ({conf['source']} source)")
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


_GRID_STEPS = ("offsets", "state", "sink", "commit")


def window_grid(results: list[dict], title: str) -> Table:
    """A user's query's campaign, windows × configurations: a row per state configuration, a column per commit
    window a kill was aimed at, each cell the verdict and the window (batch) the files on disk showed after the
    kill (``+ random``: a random kill too); ``n/a`` where the window or configuration does not apply."""
    cells: dict[tuple, dict[str, str]] = {}
    for r in results:
        if r["sink"] != "user" or not r.get("schedule"):
            continue
        conf = r["configuration"]
        state = (conf["state_provider"], conf["changelog_checkpointing"], conf["checkpoint_format"])
        step = r["schedule"][0].split("@")[0]
        colour = {"pass": "green", "fail": "red", "not_applicable": "dim"}.get(r["verdict"], "yellow")
        verdict = "n/a" if r["verdict"] == "not_applicable" else r["verdict"]
        fired = sorted({v["check"] for v in counted_violations(r, r.get("strict", False))})
        text = f"[{colour}]{verdict}[/]" + (f" {', '.join(fired)}" if fired and r["verdict"] == "fail" else "")
        landed = ", ".join(f"{c['window'].removeprefix('after_')}({c['batch']})" for c in r.get("crash_windows", []))
        text += (f" {landed}" if landed else "") + (" + random" if len(r["schedule"]) > 1 else "")
        cells.setdefault(state, {})[step] = text
    table = Table(title=title)
    for col in ("configuration", *(f"killed after {s}@N" for s in _GRID_STEPS)):
        table.add_column(col, overflow="fold")
    for (provider, changelog, fmt), row in sorted(cells.items()):
        table.add_row(provider + ("+changelog" if changelog else "") + f"/fmt{fmt}", *(row.get(s, "-") for s in _GRID_STEPS))
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
            + (": the output is still judged against the crash-free run's (Spark may aggregate data behind the "
               "watermark; a difference that explains is reported all the same)" if "reference" in result else
               ": judged with the recorded watermarks (Spark may aggregate data behind the watermark)"),
            markup=False, highlight=False)
    duplicates = result.get("duplicates", {})
    if duplicates.get("count"):
        console.print(f"duplicates: {duplicates['count']} (crash windows {duplicates['windows']})")
        for crash in duplicates.get("by_crash", []):
            console.print(f"  {crash['count']} after the kill of run {crash['run']} ({crash['target']}, killed after "
                          f"{crash['after']}): window {crash['window']} of batch {crash['batch']}",
                          markup=False, highlight=False)
    if "reference" in result and result.get("checks"):
        console.print(f"output: {result['checks'].get('output_rows_compared')} rows of the crash-free run "
                      f"({'cached' if result['reference'].get('cached') else 'run'} in "
                      f"{result['reference'].get('seconds')} s) compared as a multiset"
                      + (f" by {', '.join(result['key'])}" if result.get("key") else "")
                      + f"; sink {result['sink']}, {result['sink_guarantee']}", markup=False, highlight=False)
    console.print(f"replay: {result['repro']}", markup=False, highlight=False)


@click.command("run")
@toolkit.run_options("spark", "spark-run")
@click.option("--pipeline", required=True, help=f"A built-in pipeline ({', '.join(PIPELINES)}), or your own query "
              "as module:function: build(source) returns a DataStreamWriter, not started (the harness sets its "
              "checkpoint location, trigger and a file sink's path; the Spark conf eos.output.dir is the run's "
              "output directory); an optional read_output(spark, output_dir) in the same module reads a "
              "foreachBatch sink's output back. Judged against its own crash-free run over the same --input.")
@click.option("--sink", type=click.Choice(SINKS), help="The built-in pipeline's sink (required with one; your "
              "own query's writer names its own).")
@click.option("--input", "input_dir", help="Your query's input: a directory of JSON-lines files, one micro-batch "
              "each, in name order; or a Kafka topic, kafka://HOST:PORT/TOPIC (read from its earliest offsets, "
              "read_committed; it must not change while the harness runs).")
@click.option("--schema", help="The input's schema as Spark DDL ('key string, ts timestamp'); default: inferred "
              "from the first input file. With a Kafka topic: each record's value parsed as a JSON object of this "
              "schema (default: Spark's Kafka columns, key, value, topic, partition, offset, timestamp, "
              "timestampType).")
@click.option("--max-offsets-per-trigger", "max_offsets", type=click.IntRange(min=1), help="A Kafka topic as input: "
              "Spark's maxOffsetsPerTrigger, the same in every run (default: the topic's offsets in 5 micro-batches).")
@click.option("--key", default="", help="Compare your query's output rows by these columns only (comma-separated; "
              "default: whole rows).")
@click.option("--read-output", "reader", help="module:function(spark, output_dir) reading your query's output "
              "back (default: read_output in your query's module, else the file sink's own format).")
@click.option("--sink-guarantee", "guarantee", type=click.Choice(["exactly-once", "at-least-once"]),
              help="What your query's sink promises (default: at least once for the Kafka sink, else exactly "
              "once); at least once: duplicates are counted and attributed to the crash window, not a failure.")
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
@click.option("--export-repro", "export_dir", type=click.Path(), help="When the verdict names a failure in Spark "
              "itself (a restart after a kill fails with Spark's error, the crash-free run having ended well), write "
              "into this new (or empty) directory a standalone PySpark script (repro.py, no harness import), the "
              "input files, the query's module (a built-in window pipeline's written out) and a README.md with the steps and "
              "versions.")
def spark_run_command(pipeline, sink, input_dir, schema, max_offsets, key, reader, guarantee, provider, changelog, checkpoint_format,
                      source, crash_at, batches, strict, seed, broker, export_dir, json_path, junit_path, out, overwrite,
                      no_report):
    """Run one Spark scenario: a pipeline under driver kills, restarted and checked against its model (your own
    query, module:function: against its own crash-free run)."""
    from eos_harness.suites.spark.runner import SparkScenario, error_result, run_spark_scenario

    require_extra("spark", "--suite spark")
    user_given = [f for f, v in (("--input", input_dir), ("--schema", schema), ("--key", key),
                                 ("--max-offsets-per-trigger", max_offsets),
                                 ("--read-output", reader), ("--sink-guarantee", guarantee)) if v]
    from eos_harness.suites.spark.user import declarative_refusal

    if refusal := declarative_refusal(pipeline):
        raise click.UsageError(refusal)
    if ":" in pipeline:
        ctx = click.get_current_context()
        given = [f"--{n}" for n in ("sink", "source", "batches", "strict")
                 if ctx.get_parameter_source(n.replace("-", "_")) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)}: not for your own query (its writer names its sink, "
                                   "--input is its source, one micro-batch per file)")
        if not input_dir:
            raise click.UsageError(f"--pipeline {pipeline}: give its input with --input DIR (one JSON-lines file "
                                   "per micro-batch) or --input kafka://HOST:PORT/TOPIC")
        _user_run(pipeline, input_dir, schema, max_offsets, key, reader, guarantee, provider, changelog, checkpoint_format, crash_at,
                  seed, json_path, junit_path, out, overwrite, no_report, export_dir)
        return
    if pipeline not in PIPELINES:
        raise click.UsageError(f"--pipeline {pipeline!r}: a built-in pipeline ({', '.join(PIPELINES)}) or your "
                               "own query as module:function")
    if user_given:
        raise click.UsageError(f"{', '.join(user_given)}: only with your own query (--pipeline module:function)")
    if sink is None:
        raise click.UsageError("--sink: required with a built-in pipeline")
    if "kafka" in (source, sink):
        require_extra("kafka", f"--{'source' if source == 'kafka' else 'sink'} kafka")
    seed = toolkit.seed_or_drawn(seed)
    scenario = SparkScenario(pipeline, sink, provider, int(checkpoint_format), changelog, source,
                             tuple(t for t in crash_at.split(",") if t.strip()), seed, batches, strict)
    try:
        scenario.validate()
        export_folder = check_export_dir(export_dir) if export_dir else None
        run_dir = toolkit.run_outputs(json_path, junit_path, out, "spark-run", seed, overwrite)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"seed: {seed}")
    needed = scenario.uses_kafka and not unsupported(pipeline, sink, provider, int(checkpoint_format))
    try:
        with _kafka(broker, needed) as kafka:
            result = run_spark_scenario(scenario, run_dir, keep=True, kafka=kafka, faults_must_fire=True)
    except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
        result = error_result(scenario, exc)
    query = None
    if export_folder is not None:
        from eos_harness.suites.spark import export

        query = lambda: export.built_in_query(scenario, run_dir)  # noqa: E731
    _finish_run(result, run_dir, json_path, junit_path, spark_suites([result], strict),
                f"eos-harness run --suite spark, seed {seed}", no_report, export_folder, query)


def _user_run(pipeline, input_dir, schema, max_offsets, key, reader, guarantee, provider, changelog, checkpoint_format, crash_at, seed,
              json_path, junit_path, out, overwrite, no_report, export_dir=None) -> None:
    """``run --suite spark --pipeline module:function``: a user's query killed, restarted and judged against its
    crash-free run (:mod:`eos_harness.suites.spark.user`). Bad input is a usage error before anything runs."""
    from dataclasses import replace
    from pathlib import Path

    from eos_harness.suites.spark.export import user_query
    from eos_harness.suites.spark.user import (
        UserScenario,
        drawn_schedule,
        is_kafka_input,
        probe,
        python_path,
        run_user_scenario,
        user_error_result,
    )

    seed = toolkit.seed_or_drawn(seed)
    schedule = tuple(t.strip() for t in crash_at.split(",") if t.strip())
    where = input_dir if is_kafka_input(input_dir) else str(Path(input_dir).absolute())
    scenario = UserScenario(pipeline, where, schema or None,
                            tuple(c.strip() for c in key.split(",") if c.strip()), guarantee, provider,
                            int(checkpoint_format), changelog, schedule, seed, tuple(python_path()), reader=reader,
                            max_offsets=max_offsets)
    try:
        scenario.validate()
        export_folder = check_export_dir(export_dir) if export_dir else None
        if scenario.kafka:  # the topic read whole before anything runs: unreachable, missing, empty: exit 2
            console.print(f"reading the input topic {scenario.kafka.url} …")
            scenario = scenario.resolved()
            scenario.validate()
        if not schedule:
            scenario = replace(scenario, schedule=drawn_schedule(seed, scenario.batch_count()))
        scenario = replace(scenario, module_file=probe(pipeline, list(scenario.python_path)).get("file"))
        if reader:
            probe(reader, list(scenario.python_path))
        run_dir = toolkit.run_outputs(json_path, junit_path, out, "spark-run", seed, overwrite)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"seed: {seed}")
    try:
        result = run_user_scenario(scenario, run_dir)
    except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
        result = user_error_result(scenario, exc)
    _finish_run(result, run_dir, json_path, junit_path, spark_suites([result], False),
                f"eos-harness run --suite spark --pipeline {pipeline}, seed {seed}", no_report, export_folder,
                lambda: user_query(scenario))


def _finish_run(result: dict, run_dir, json_path, junit_path, suites, title: str, no_report: bool,
                export_folder, query) -> None:
    """The end of one Spark ``run``: its JSON and JUnit written first, the verdict printed, the export
    (``query()`` gives the query to export), the report, and the exit code."""
    json_error = toolkit.write_json(json_path, result)
    if junit_path:
        json_error = json_error or write_junit(junit_path, suites, title)
    _print_result(result)
    if export_folder is not None:
        _export(result, query, export_folder)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    if not no_report:
        write_run_report(run_dir)
    sys.exit(exit_code([result["verdict"]], incomplete=bool(json_error)))


def _export(result: dict, query, folder) -> None:
    """``--export-repro``: the standalone reproduction of a failure in Spark itself, or why there is none (``query``:
    the query to export, or a function giving it, called only for a failure in Spark: it may read a topic)."""
    from eos_harness.suites.spark import export

    if export.spark_failure(result) is None:
        console.print(f"--export-repro: nothing exported: the verdict ({result['verdict']}) names no failure in "
                      "Spark itself (a restart after a kill failing with Spark's error)", markup=False, highlight=False)
        return
    if callable(query):
        query = query()
    why = query if isinstance(query, str) else export.unsupported(result, query)
    if why:
        console.print(f"--export-repro: nothing exported: {why}", markup=False, highlight=False)
        return
    export.export_repro(result, query, folder)
    console.print(f"exported: {folder} (python {folder / 'repro.py'}; steps in {folder / 'README.md'})",
                  markup=False, highlight=False)


def show_campaign(campaign: dict) -> None:
    """What a Spark campaign shows besides its tallies: a row per configuration, the scenarios that did not
    pass, and the first violations of each failing one."""
    strict = bool(campaign.get("strict"))
    console.print(_matrix_table(campaign["scenarios"], f"spark chaos, seed {campaign['seed']}: "
                                                       f"{campaign['summary']['total']} scenarios by configuration"))
    if campaign.get("pipeline") and ":" in str(campaign["pipeline"]):  # a user's query: its windows × configurations
        console.print(window_grid(campaign["scenarios"], f"{campaign['pipeline']}: windows × configurations "
                                                         "(verdict, window on disk)"))
    failing = [r for r in campaign["scenarios"] if r["verdict"] != "pass"]
    if failing:
        console.print(_table(failing, f"the {len(failing)} scenarios that did not pass"))
    for r in campaign["scenarios"]:
        if r["verdict"] == "fail":
            for v in counted_violations(r, strict)[:3]:
                console.print(f"  {r['pipeline']}/{r['sink']}: {v['check']} key={v['key']} "
                              f"observed={str(v['observed'])[:300]}", markup=False, highlight=False)
    if campaign.get("export_repro"):
        _export_first(campaign)


def _export_first(campaign: dict) -> None:
    """``chaos --export-repro``: the standalone reproduction of the campaign's first scenario (in plan order) whose
    verdict names a failure in Spark itself, or why there is none."""
    from dataclasses import replace
    from pathlib import Path

    from eos_harness.suites.spark import export

    folder = Path(campaign["export_repro"]).absolute()
    found = [r for r in sorted(campaign["scenarios"], key=lambda r: r.get("index", 0)) if export.spark_failure(r)]
    if not found:
        console.print("--export-repro: nothing exported: no scenario's verdict names a failure in Spark itself (a "
                      "restart after a kill failing with Spark's error)", markup=False, highlight=False)
        return
    result = found[0]
    conf = result["configuration"]
    console.print(f"--export-repro: scenario {result.get('index')} ({result['pipeline']}, {','.join(result['schedule'])}"
                  f", {conf['state_provider']}, format {conf['checkpoint_format']}), the first of {len(found)} that "
                  "failed in Spark itself", markup=False, highlight=False)
    if "reference" in result:  # a user's query: the campaign's, in this scenario's state configuration
        from eos_harness.suites.spark.kafka_input import TopicSnapshot
        from eos_harness.suites.spark.plan import _user_template

        scenario = replace(_user_template(campaign, probed=True), provider=conf["state_provider"],
                           changelog=conf["changelog_checkpointing"], checkpoint_format=conf["checkpoint_format"],
                           schedule=tuple(result["schedule"]))
        if result.get("topic"):  # the topic's micro-batches as this scenario's verdict counted them
            scenario = replace(scenario, topic=TopicSnapshot.from_json(result["topic"]),
                               max_offsets=result["topic"]["max_offsets_per_trigger"])
        query = export.user_query(scenario)
    else:
        from eos_harness.suites.spark.runner import SparkScenario

        scenario = SparkScenario(result["pipeline"], result.get("sink_kind") or result["sink"], conf["state_provider"],
                                 conf["checkpoint_format"], conf["changelog_checkpointing"], conf.get("source", "file"),
                                 tuple(result["schedule"]), result["seed"])
        query = export.built_in_query(scenario, Path(result["history"]).parent)
    _export(result, query, folder)
