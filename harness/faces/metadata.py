"""CLI of the metadata suite (KIP-868): ``eos-harness run --suite metadata …`` (one scenario) and
``eos-harness chaos --suite metadata …`` (a campaign). The CLI's group sends ``run``/``chaos``
with ``--suite metadata`` here (:data:`eos_harness.suite.SUITES`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import BrokerSpec, parse
from eos_harness.faces import toolkit
from eos_harness.faces.params import AT_LEAST_ONE, BrokerParam, NameList
from eos_harness.faces.toolkit import console
from eos_harness.verdict import ERROR

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
    from eos_harness.suites.metadata.campaign import CHILDREN_LOG
    from eos_harness.suites.metadata.runner import (
        Scenario,
        ScheduleError,
        error_verdict,
        parse_metadata_schedule,
        run_scenario,
    )

    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    console.print(f"seed: {seed}")
    try:
        _check_broker(broker)
        scenario = Scenario(system, seed, parse_metadata_schedule(list(crash_at)), max_batch_bytes, commands)
        out_dir = toolkit.run_outputs(json_path, junit_path, out, "metadata-run", seed, overwrite)
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


@click.command("chaos")
@toolkit.campaign_options("metadata", "metadata-chaos", "A mutant caught by the check that names its "
                          "mistake is an expected failure (skipped, with its evidence); one not caught so is the "
                          "failure of its testcase 'caught'.", UNTIL_FAILURE_HELP, RESUME_HELP)
@click.option("--systems", type=SYSTEM_LIST, default=None,
              help="Comma-separated systems (default: the real controller and every mutant).")
@click.option("--broker", type=BrokerParam(), default="embedded", show_default=True, help=BROKER_HELP)
@toolkit.starts_store_processes
def metadata_chaos_command(ctx, systems, minutes, scenarios, seed, json_path, out, workers, broker, overwrite,
                           junit_path, until_failure, resume_dir, no_report):
    """Run a metadata chaos campaign: the real controller under every crash window, and every mutant,
    which must be caught by the check that names its mistake."""
    from eos_harness.cluster import ClusterError
    from eos_harness.suites.metadata.campaign import SUITE

    if resume_dir is not None:
        state = toolkit.resumed_state(ctx, resume_dir, SUITE, ("systems", "minutes", "scenarios", "seed", "out",
                                                               "broker", "overwrite"),
                                      " (start a new one, or give a longer one --minutes/--scenarios)")
        seed, systems, minutes, scenarios = state["seed"], state["systems"], state["minutes"], state["scenarios"]
        try:
            broker = parse(state["broker"])
        except ValueError as exc:
            raise click.UsageError(f"--resume {resume_dir}: {exc}") from None
        workers = toolkit.given_or_kept(ctx, state, "workers", workers)  # not the plan: these may be given anew
        until_failure = until_failure or state.get("until_failure", False)
        json_path, junit_path = json_path or state.get("json"), junit_path or state.get("junit")
    toolkit.require_kafka_extra(broker)
    seed = toolkit.seed_or_drawn(seed)
    try:
        _check_broker(broker)
        out_dir = toolkit.campaign_outputs(json_path, junit_path, out, resume_dir, "metadata-chaos", seed, overwrite)
        with open_broker(broker, say=console.print) as opened:
            campaign = _run_chaos(seed, systems, minutes, scenarios, out_dir, workers, opened.spec, until_failure,
                                  resume_dir is not None, json_path, junit_path)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ClusterError as exc:
        raise toolkit.incomplete(exc) from None
    from eos_harness.suites.metadata.junit import campaign_suites

    toolkit.finish_campaign(campaign, out_dir, json_path, junit_path, not no_report, campaign_suites, _show_chaos,
                            outputs="the controllers' and readers' output", asked="--systems" if systems else None)
    sys.exit(toolkit.campaign_exit(campaign))


def _run_chaos(seed, systems, minutes, scenarios, out_dir: Path, workers, broker: BrokerSpec, until_failure, resume,
               json_path, junit_path) -> dict:
    from eos_harness.suites.metadata.campaign import run_campaign

    console.print(f"seed: {seed}   broker: {broker.cli_text}   results: {out_dir}")
    with toolkit.campaign_progress(out_dir, scenarios, resume) as on_result:
        return run_campaign(seed, out_dir, minutes, scenarios, workers, on_result, broker,
                            tuple(systems) if systems else None, until_failure=until_failure, resume=resume,
                            outputs=toolkit.kept_outputs(json_path, junit_path))


def _show_chaos(campaign: dict) -> None:
    summary = campaign["summary"]
    console.print(toolkit.tallies_table(campaign))
    console.print(f"{summary['total']} scenarios in {campaign['seconds']} s; crash points hit: "
                  f"{', '.join(summary['points_hit']) or 'none'}", soft_wrap=True)
