"""``eos-harness kafka-metadata``: KIP-868's own test plan on a real KRaft quorum (3 dedicated
controllers and brokers from the pinned jars): controller kills while 1,000-partition topics are
created, a bootstrap cut, and the checks of :mod:`eos_harness.suites.kafka_metadata.checks`."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from eos_harness.faces.params import require_extra
from eos_harness.faces.toolkit import check_output_path, console, seed_or_drawn, write_json
from eos_harness.verdict import exit_code
from rich.table import Table


@click.command("kafka-metadata")
@click.option("--seed", type=int, default=None, help="Seed of the kill timing (printed when not given).")
@click.option("--topics", type=click.IntRange(0, 200), default=6, show_default=True,
              help="Topics created while the active controller is killed.")
@click.option("--partitions", type=click.IntRange(1, 10000), default=1000, show_default=True,
              help="Partitions of each topic.")
@click.option("--controller-kills", type=click.IntRange(0, 50), default=1, show_default=True,
              help="SIGKILLs of the active controller while topics are created (each restarted).")
@click.option("--bootstrap-kills", type=click.IntRange(0, 20), default=1, show_default=True,
              help="Fresh quorums whose first leader is SIGKILLed as it writes the bootstrap records.")
@click.option("--brokers", type=click.IntRange(1, 5), default=3, show_default=True)
@click.option("--heap", default="384m", show_default=True, help="JVM heap of each node.")
@click.option("--json", "json_path", default=None, help="Write the result JSON here.")
@click.option("--keep", "keep_dir", type=click.Path(file_okay=False), default=None,
              help="Run in this (new or empty) directory and keep it: every node's kafka.log, data and "
                   "metadata log, to read after a finding.")
def kafka_metadata_command(seed, topics, partitions, controller_kills, bootstrap_kills, brokers, heap, json_path,
                           keep_dir):
    """KIP-868 on a real KRaft quorum: no broker ever shows part of a topic, every acknowledged topic
    exists whole, and the metadata log (decoded by Kafka's DumpLogSegments) closes every
    transaction, never interleaves one, and aborts one a failover cut."""
    from eos_harness.suites.kafka_metadata.checks import CHECKS
    from eos_harness.suites.kafka_metadata.runner import Plan, run

    require_extra("kafka", "kafka-metadata")
    seed = seed_or_drawn(seed)
    try:
        check_output_path(json_path)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if keep_dir and Path(keep_dir).exists() and any(Path(keep_dir).iterdir()):
        raise click.UsageError(f"--keep {keep_dir}: the directory is not empty; name a new one")
    console.print(f"seed: {seed}")
    plan = Plan(seed=seed, topics=topics, partitions=partitions, controller_kills=controller_kills,
                bootstrap_kills=bootstrap_kills, brokers=brokers, heap=heap)
    report = run(plan, Path(keep_dir) if keep_dir else None)
    json_error = write_json(json_path, report)
    console.print(f"{report['controller_kills']} controller kills, {report['bootstrap_kills']} bootstrap kills, "
                  f"{report['topics_acknowledged']} topics ({report['partitions_acknowledged']} partitions) "
                  f"acknowledged in {report['seconds']} s")
    table = Table(title="checks")
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    table.add_column("promise", overflow="fold")
    for name, meaning in CHECKS.items():
        table.add_row(name, report["checks"][name], meaning)
    console.print(table)
    for v in report["violations"][:20]:
        console.print(f"{v['check']}: {v['key']}: expected {v['expected']}, observed {v['observed']}",
                      markup=False, highlight=False)
        if v.get("detail"):
            console.print(v["detail"], markup=False, highlight=False)
    colour = "green" if report["verdict"] == "pass" else "red"
    console.print(f"[{colour}]verdict: {report['verdict']}[/]" + (f": {report['error']}" if report["error"] else ""))
    if report["verdict"] != "pass":
        console.print(f"replay: {report['repro']}", soft_wrap=True, markup=False)
    if keep_dir:
        console.print(f"kept: {keep_dir} (each node's kafka.log under <phase>/<controller|broker>-<id>/)",
                      markup=False, highlight=False)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    sys.exit(exit_code([report["verdict"]], incomplete=bool(json_error)))
