"""CLI of the Kafka log suite: ``eos-harness kafka-log`` (Kafka's own transactional log, after Jepsen's
Kafka workload)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import click
from eos_harness.broker.opening import open_broker
from eos_harness.faces.params import BrokerParam, require_extra
from eos_harness.faces.toolkit import check_output_path, console, incomplete, seed_or_drawn, write_json
from eos_harness.verdict import ERROR, exit_code
from rich.table import Table


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
    from eos_harness.suites.kafka_log.plan import Scenario
    from eos_harness.suites.kafka_log.runner import error_result, run_one

    require_extra("kafka", "kafka-log")
    seed = seed_or_drawn(seed)
    scenario = Scenario(isolation, seed, transactions, partitions, abort_ratio, broker.cli_text)
    started = time.monotonic()
    try:
        check_output_path(json_path)
        console.print(f"seed: {seed}")
        with open_broker(broker, say=console.print) as opened:
            try:
                report = run_one(replace(scenario, opened=opened.spec.text))
            except ValueError:
                raise
            except Exception as exc:  # noqa: BLE001 - the workload could not be run to its end: exit 3
                report = error_result(scenario, exc)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise incomplete(exc) from None
    if report["verdict"] == ERROR:
        write_json(json_path, {**report, "seconds": round(time.monotonic() - started, 3)})
        console.print("[red]verdict: error[/]: the workload could not be run to its end:")
        console.print(report["error"], markup=False, highlight=False)
        sys.exit(exit_code([ERROR]))
    json_error = write_json(json_path, report)
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
        console.print(f"replay: {report['repro']}", soft_wrap=True, markup=False, highlight=False)
    if json_error:
        console.print(f"[red]{json_error}[/]")
    sys.exit(exit_code([report["verdict"]], incomplete=bool(json_error)))
