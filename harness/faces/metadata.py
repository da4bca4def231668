"""CLI of the metadata suite (KIP-868): ``eos-harness run --suite metadata …`` (one scenario). Its
campaign, ``eos-harness chaos --suite metadata …``, is the chaos command written once for every suite
(:mod:`eos_harness.faces.chaos`)."""

from __future__ import annotations

import click
from eos_harness.broker.opening import open_broker
from eos_harness.faces import toolkit
from eos_harness.faces.params import AT_LEAST_ONE, BrokerParam
from eos_harness.faces.toolkit import console
from eos_harness.suites.metadata.plan import check_options
from eos_harness.verdict import ERROR

BROKER_HELP = ("Where the metadata log lives: embedded (a topic of the SQLite log) | kafka-local (start a local "
               "Kafka on 127.0.0.1) | kafka-quorum[:N] (start 3 dedicated KRaft controllers and N brokers) | "
               "kafka://HOST:PORT (a running cluster).")


def _systems() -> list[str]:
    from eos_harness.suites.metadata.runner import SYSTEMS

    return list(SYSTEMS)


@click.command("run")
@toolkit.run_options("metadata", "metadata-run", "Seed of the commands (printed when not given).")
@click.option("--system", type=click.Choice(_systems()), default="controller", show_default=True,
              help="controller (the real controller and readers) or a mutant (a deliberate mistake).")
@click.option("--crash-at", "crash_at", multiple=True,
              help="Fault schedule, one per controller: POINT[@n] (a metadata.controller.* crash point, the n-th "
                   "time reached), freeze:POINT[@n] (a zombie controller), kill@n. Repeat or comma-separate.")
@click.option("--max-batch-bytes", type=click.IntRange(min=256), default=8192, show_default=True,
              help="The largest batch the controller appends (KRaft's: 8 KiB).")
@click.option("--commands", type=AT_LEAST_ONE, default=10, show_default=True, help="Controller commands to run.")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@toolkit.starts_store_processes
def metadata_run_command(system, crash_at, max_batch_bytes, commands, broker, seed, json_path, junit_path, out,
                         overwrite, no_report):
    """Run one metadata scenario: controllers writing metadata transactions under a crash schedule,
    readers following the log, checked against the KIP-868 model."""
    from dataclasses import replace

    from eos_harness.cluster import ClusterError
    from eos_harness.process.server import children_output
    from eos_harness.suites.metadata.runner import (
        CHILDREN_LOG,
        Scenario,
        ScheduleError,
        error_verdict,
        parse_metadata_schedule,
        run_scenario,
    )

    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    try:
        check_options({"broker": broker.cli_text})
        scenario = Scenario(system, seed, parse_metadata_schedule(list(crash_at)), max_batch_bytes, commands)
        out_dir = toolkit.run_outputs(json_path, junit_path, out, "metadata-run", seed, overwrite)
        console.print(f"seed: {seed}")
        with open_broker(broker, say=console.print) as opened:
            scenario = replace(scenario, broker=opened.spec)
            # The controllers' and readers' output (a fenced zombie's Kafka client logs) is kept in the run
            # directory, not written to the terminal.
            with children_output(out_dir / CHILDREN_LOG) as children_log:
                try:
                    result = run_scenario(scenario, out_dir, faults_must_fire=True)
                except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict, exit 3
                    result = error_verdict(scenario, exc)
            if children_log.is_file():  # named only when a child wrote something
                result["children_log"] = str(children_log)
    except (ScheduleError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise toolkit.incomplete(exc) from None
    json_error = toolkit.write_json(json_path, result)
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
        toolkit.print_violations(result, f"violations of {result['system']}", "where")
    toolkit.finish_run(result, out_dir, json_error, not no_report,
                       ("children_log", "the controllers' and readers' output"))
