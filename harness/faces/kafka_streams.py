"""``eos-harness run --suite kafka-streams``: one real Kafka Streams 4.4.0 application on a real broker, killed
at named steps of Streams' own commit and restarted, judged against the model
(:mod:`eos_harness.suites.kafka_streams`)."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace

import click
from eos_harness.broker.opening import open_broker
from eos_harness.faces import toolkit
from eos_harness.faces.params import BrokerParam, require_extra
from eos_harness.faces.toolkit import console, incomplete, seed_or_drawn, write_json
from eos_harness.verdict import ERROR
from rich.table import Table


def _apps() -> list[str]:
    from eos_harness.suites.kafka_streams.plan import known_subjects

    return known_subjects()


def _points() -> list[str]:
    from eos_harness.kafka_streams.app_points import POINTS_BY_NAME, RANDOM_KILL

    return [*POINTS_BY_NAME, RANDOM_KILL]


@click.command("kafka-streams")
@toolkit.run_options("kafka-streams", "kafka-streams-run", "Seed of the workload and of the kills (printed when not given).")
@click.option("--app", "app", type=click.Choice(_apps()), default="rocksdb-tx", show_default=True,
              help="The application: its store (rocksdb, memory) with transactional state stores on (-tx) or off, "
                   "under exactly_once_v2; or a mutant its check must catch.")
@click.option("--kills", type=click.IntRange(0, 20), default=2, show_default=True,
              help="Instances SIGKILLed at a named step (each restarted).")
@click.option("--point", type=click.Choice(_points()), default=None,
              help="Kill every instance at this step (its hit drawn), instead of steps drawn from the seed; random: "
                   "SIGKILL a drawn 50-1500 ms after the instance is given its input, wherever it is.")
@click.option("--broker", type=BrokerParam(needs_kafka="the kafka-streams suite"), default="kafka-local",
              show_default=True, help="kafka-local | kafka-local:3 | kafka-quorum[:N] | kafka://HOST:PORT")
@click.option("--records", type=click.IntRange(1, 100_000), default=60, show_default=True,
              help="Input records per instance.")
@click.option("--memtable-kb", type=click.IntRange(0, 1 << 20), default=64, show_default=True,
              help="RocksDB's write buffer in KiB (0: Kafka Streams' default): small, so commits reach disk in a "
                   "short run and KIP-892's restoration from the last commit shows.")
@click.option("--liveness", type=click.FloatRange(1, 3600), default=60.0, show_default=True,
              help="Bound (s) for an instance to reach RUNNING and to process its input.")
@click.option("--threads", type=click.IntRange(1, 4), default=1, show_default=True,
              help="Stream threads per instance (num.stream.threads).")
@click.option("--instances", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Instances of the application at once: with 2, a second one runs beside each killed one.")
@click.option("--crash-at", "crash_at", multiple=True, metavar="broker-kill@N|broker-pause@N",
              help="A fault of the broker besides the kills (repeatable, or comma-separated): once the broker "
                   "acknowledged the N-th input record (the rest of that instance's batch still to come), SIGKILL and restart (broker-kill) or SIGSTOP for a while (broker-pause) "
                   "the broker coordinating the application's transactions. Needs --broker kafka-local or "
                   "kafka-quorum.")
def kafka_streams_command(app, seed, kills, point, broker, records, memtable_kb, liveness, threads, instances,
                          crash_at, json_path, junit_path, out, overwrite, no_report):
    """A Kafka Streams 4.4.0 application (exactly_once_v2; transactional state stores on or off) killed at
    named steps of its commit and restarted: output exactly once, state equal to the model after every
    restart, no wipe of a transactional store, liveness."""
    from eos_harness.broker.spec import STARTED_HERE
    from eos_harness.cluster import ClusterError
    from eos_harness.kafka_streams.build import BuildError
    from eos_harness.suites.kafka_streams.plan import parse_broker_faults
    from eos_harness.suites.kafka_streams.plan import scenario as make_scenario
    from eos_harness.suites.kafka_streams.runner import CHILDREN_LOG, error_result, run_one

    require_extra("kafka", "the kafka-streams suite")
    seed = seed_or_drawn(seed)
    started = time.monotonic()
    try:
        broker_faults = parse_broker_faults(",".join(crash_at))
        if broker_faults and broker.kind not in STARTED_HERE:
            raise ValueError(f"--crash-at {','.join(crash_at)}: a broker fault kills or stops a broker: it needs a "
                             f"cluster the harness starts (--broker kafka-local or kafka-quorum), not "
                             f"{broker.cli_text!r}")
        scenario = make_scenario(app, seed, kills, point, broker=broker.cli_text, records=records,
                                 memtable_kb=memtable_kb, liveness_s=liveness, threads=threads,
                                 instances=instances, broker_faults=broker_faults)
        # the run directory keeps the instances' output (streams-apps.log) and their state directories
        out_dir = toolkit.run_outputs(json_path, junit_path, out, "kafka-streams-run", seed, overwrite)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"seed: {seed}")
    console.print("kills: " + (", ".join(f"{p}@{h}" for p, h in scenario.kills) or "none")
                  + "".join(f", {f}@{n}" for f, n in scenario.broker_faults), markup=False)
    try:
        with open_broker(broker, say=console.print) as opened:
            try:
                report = run_one(replace(scenario, opened=opened.spec.text), out_dir)
            except (BuildError, Exception) as exc:  # noqa: BLE001 - the scenario could not be run to its end: exit 3
                report = error_result(scenario, exc)
    except ClusterError as exc:
        raise incomplete(exc) from None
    report.setdefault("seconds", round(time.monotonic() - started, 3))
    if (out_dir / CHILDREN_LOG).is_file():
        report["children_log"] = str(out_dir / CHILDREN_LOG)
    (out_dir / "verdict.json").write_text(json.dumps(report, indent=2))
    json_error = write_json(json_path, report)
    if junit_path:
        from eos_harness.junit import run_suites, write_junit
        from eos_harness.suites.kafka_streams.checks import CHECKS

        json_error = json_error or write_junit(junit_path, run_suites(report, CHECKS, "system"),
                                               f"eos-harness run --suite kafka-streams, seed {seed}")
    show_result(report)
    if report["verdict"] == "pass":  # (finish_run prints the replay of any other verdict)
        console.print(f"replay: {report['repro']}", soft_wrap=True, markup=False, highlight=False)
    toolkit.finish_run(report, out_dir, json_error, not no_report,
                       ("children_log", "the instances' output"))


def show_result(report: dict) -> None:
    """The checks (exercised or not), the restorations and the verdict."""
    from eos_harness.suites.kafka_streams.checks import CHECKS

    if report["verdict"] == ERROR and "coverage" not in report:
        console.print("[red]verdict: error[/]: the scenario could not be run to its end:")
        console.print(report.get("error", ""), markup=False, highlight=False)
        return
    coverage = report["coverage"]
    failed = {v["check"] for v in report["violations"]}
    table = Table(title=f"{report['system']}: Kafka {report.get('kafka_version')}, Streams {report['streams_version']}")
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    table.add_column("promise", overflow="fold")
    for name, meaning in CHECKS.items():
        if name in failed:
            result = "[red]fail[/]"
        elif name in coverage["not_applicable"]:
            result = "not applicable"
        elif name in coverage["not_exercised"]:
            result = "[yellow]not exercised[/]"
        else:
            result = f"pass ({coverage['exercised'][name]})"
        table.add_row(name, result, meaning)
    console.print(table)
    restored = [n for n in report["restored_per_crash"] if n is not None]
    if restored:
        console.print(f"records restored per store partition after a crash: median {statistics.median(restored):g}, "
                      f"max {max(restored)}; restore ms: {report['restore_ms']}", markup=False)
    for fault in report.get("broker_faults", []):
        console.print(f"{fault['at']}: " + (f"failed: {fault['error']}" if "error" in fault else
                                            f"node {fault['node']} after {fault['after_inputs']} input records, "
                                            f"{fault['seconds']} s"), markup=False, highlight=False)
    if report.get("zombie_outcome"):
        console.print(f"zombie: {report['zombie_outcome']}", markup=False, highlight=False, soft_wrap=True)
    for v in report["violations"][:20]:
        console.print(f"{v['check']}: {v['key']}: expected {v['expected']}, observed {v['observed']}",
                      markup=False, highlight=False)
    colour = "green" if report["verdict"] == "pass" else "red"
    console.print(f"{report['records_produced']} records in, {report['outputs_read']} out (read committed), "
                  f"{len(report['lives'])} instances in {report['seconds']} s")
    console.print(f"[{colour}]verdict: {report['verdict']}[/]" + (f": {report['error']}" if report.get("error") else ""))


def transactional_table(campaign: dict) -> Table:
    """Transactional state stores on and off side by side (the campaign JSON's ``transactional_stores``): per
    configuration a row for each side, its scenarios, verdicts and records restored per store partition after
    a crash (median / max), and restore time."""
    from eos_harness.suites.kafka_streams.compare import number_text, verdicts_text

    table = Table(title=f"kafka-streams chaos, seed {campaign['seed']}: transactional state stores (KIP-892) on "
                        "and off")
    for column in ("configuration", "tx", "application", "scenarios", "verdicts"):
        table.add_column(column, no_wrap=True)
    table.add_column("records restored per crash: median / max (restorations)", justify="right")
    table.add_column("restore ms: median / max", justify="right")
    for row in campaign.get("transactional_stores") or []:
        for tx, side in (("on", row["on"]), ("off", row["off"])):
            ran = bool(side["scenarios"])
            table.add_row(row["configuration"] if tx == "on" else "", tx, side["system"] or "—",
                          str(side["scenarios"]) if ran else "not run", verdicts_text(side["verdicts"]),
                          f"{number_text(side['restored_median'])} / {number_text(side['restored_max'])} "
                          f"({side['restorations']})" if ran else "—",
                          f"{number_text(side['restore_ms_median'])} / {number_text(side['restore_ms_max'])}"
                          if ran else "—", end_section=tx == "off")
    return table


def show_campaign(campaign: dict) -> None:
    """What a kafka-streams campaign shows besides its tallies: transactional stores on and off side by side."""
    if campaign.get("transactional_stores"):
        console.print(transactional_table(campaign))
