"""One Spark scenario: a pipeline, a sink and a state configuration run on seeded input files under
a schedule of driver kills, restarted on the same checkpoint until it finishes, then checked.

The driver (this module) keeps the history: every final file the watcher saw, each kill with the
files really on disk after it and the crash window they show, each run's exit and Spark's error,
the state each run read back. The verdict has the shape of the lifecycle suite's, with
the pipeline, sink and configuration instead of the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.faults.spark import CrashTarget, final_files, parse_target, step_of
from eos_harness.models.spark import generate_batches, model_for
from eos_harness.rundir import claim
from eos_harness.spark.pipelines import OUTPUT_COLUMNS, unsupported
from eos_harness.store import StoreContext
from eos_harness.stores.registry import resolve
from eos_harness.suites.spark.checks import (
    EXACTLY_ONCE_SINKS,
    check_at_least_once,
    check_output,
    check_restarts,
    check_state,
    check_watermarks,
    read_file_sink,
    recorded_watermarks,
)
from eos_harness.suites.spark.driver_run import committed_batches, run_driver
from eos_harness.suites.spark.kafka_input import kafka_jars
from eos_harness.suites.spark.plan import SparkScenario, StateChoice, judge, matrix
from eos_harness.verdict import (
    ERROR,
    NOT_APPLICABLE,
    PASS,
    Violation,
    error_reason,
    unfired_is_error,
    verdict_of,
)

__all__ = ["SparkScenario", "error_result", "run_one", "run_spark_scenario"]

RESTART_BOUND_S = 120.0
EPOCH = 1_700_000_000  # input files get modification times EPOCH+n: the file source takes them in that order


@dataclass
class _History:
    events: list[dict] = field(default_factory=list)

    def add(self, event: dict) -> int:
        seq = len(self.events)
        self.events.append({"seq": seq, **event})
        return seq


def read_store_sink(output: Path) -> tuple[dict[int, list[list]], dict[int, int]]:
    """Rows per batch and how many times each batch was applied, read from the ``rocksdb-indexed`` sink store
    (its read-committed view) after the last run; the checks judge these rows."""
    store = resolve("rocksdb-indexed")()
    store.init(StoreContext(directory=output / "store", store_name="spark-sink"))
    try:
        rows: dict[int, list[list]] = {}
        applied: dict[int, int] = {}
        for key, value in store.read_committed().all():
            if key.startswith(b"out/"):
                _, batch, row = key.split(b"/", 2)
                rows.setdefault(int(batch), []).append(json.loads(row))
            elif key.startswith(b"applied/"):
                applied[int(key.split(b"/")[1])] = int(value)
        return rows, applied
    finally:
        store.close()


def write_input(directory: Path, batches: list[list[tuple[str, int]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, batch in enumerate(batches):
        path = directory / f"part-{n:05d}.json"
        path.write_text("".join(json.dumps({"key": k, "ts": ts}) + "\n" for k, ts in batch))
        os.utime(path, (EPOCH + n, EPOCH + n))


def error_result(scenario, exc: BaseException) -> dict:
    """The verdict object of a scenario that could not be run to its end: verdict ``error``, with the reason."""
    from eos_harness.suites.spark.user import UserScenario, result_of_campaign, user_error_result

    if isinstance(scenario, UserScenario):
        return result_of_campaign(user_error_result(scenario, exc))
    return {**scenario.header(), "verdict": ERROR, "error": error_reason(exc), "violations": [], "crash_points": [],
            "crash_windows": []}


def run_spark_scenario(scenario: SparkScenario, run_dir: Path, keep: bool = False,
                       measure: dict | None = None, watch: bool = True, kafka: str | None = None,
                       faults_must_fire: bool = False) -> dict:
    """Run ``scenario`` in ``run_dir`` (created, or emptied of the harness's earlier results: see
    :func:`eos_harness.rundir.claim`); returns the verdict object. ``watch=False``
    (only without kills) runs without the inotify watcher; ``measure`` receives batch latencies.
    ``kafka``: bootstrap servers of the broker a Kafka source or sink uses; when None and the
    scenario needs one, a one-node :class:`eos_harness.cluster.LocalKafka` is started for it and stopped.
    ``faults_must_fire``: a scheduled kill never reached makes the verdict ``error`` (``run``, ``chaos``);
    else it is listed in ``not_fired`` only."""
    scenario.validate()
    if scenario.uses_kafka and kafka is None and not unsupported(scenario.pipeline, scenario.sink, scenario.provider,
                                                                 scenario.checkpoint_format):
        from eos_harness.broker.opening import open_broker

        run_dir = claim(Path(run_dir))
        with open_broker("kafka-local") as opened:
            return run_spark_scenario(scenario, run_dir, keep, measure, watch, kafka=opened.bootstrap_servers,
                                      faults_must_fire=faults_must_fire)
    started = time.monotonic()
    started_at = round(time.time(), 3)  # wall clock (Unix time), to line scenarios up with each other
    claim(run_dir)
    base = scenario.header()
    reason = unsupported(scenario.pipeline, scenario.sink, scenario.provider, scenario.checkpoint_format)
    if reason:
        return {**base, "verdict": NOT_APPLICABLE, "reason": reason, "violations": [], "crash_points": [],
                "crash_windows": [], "seconds": 0.0, "started_at": started_at}
    batches = generate_batches(scenario.seed, batches=scenario.batches, keys=6)
    model = model_for(scenario.pipeline, batches)
    roots = {"checkpoint": run_dir / "checkpoint", "output": run_dir / "output"}
    history = _History()
    history.add({"type": "scenario", **base, "batches": batches})
    kafka_config = None
    if scenario.uses_kafka:
        from eos_harness.spark import kafka as topics

        assert kafka is not None
        names = topics.topic_names(run_dir)
        topics.create_topics(kafka, list(names.values()))
        from eos_harness.cluster.local import version_of

        kafka_config = {"bootstrap": kafka, "input_topic": names["input"], "output_topic": names["output"],
                        "per_batch": len(batches[0]), "kafka_version": version_of(f"kafka://{kafka}")}
        history.add({"type": "kafka", **kafka_config})
    if scenario.source == "kafka":
        assert kafka_config is not None and len({len(b) for b in batches}) == 1
        topics.produce_input(kafka, kafka_config["input_topic"], batches)
    else:
        write_input(run_dir / "input", batches)
    follower_cm: contextlib.AbstractContextManager = contextlib.nullcontext()
    if scenario.sink == "kafka":
        assert kafka_config is not None
        follower_cm = topics.SinkFollower(kafka, kafka_config["output_topic"], OUTPUT_COLUMNS[scenario.pipeline],
                                          [model.output(b) for b in range(len(batches) + 3)], roots["checkpoint"],
                                          roots["output"])
    with follower_cm as follower:
        runs, crash_windows = _run_all(scenario, run_dir, roots, history, started, watch, kafka_config)
    if follower is not None and follower.error:
        history.add({"type": "follower_error", "error": follower.error})
    return _verdict(scenario, run_dir, roots, history, (started, started_at), base, batches, model, runs,
                    crash_windows, measure, keep, kafka_config, faults_must_fire)


def _run_all(scenario: SparkScenario, run_dir: Path, roots: dict[str, Path], history: _History, started: float,
             watch: bool, kafka_config: dict | None) -> tuple[list[dict], list[dict]]:
    """Run the pipeline once per scheduled kill, and once more after the last, on the same checkpoint."""
    runs: list[dict] = []
    crash_windows: list[dict] = []
    targets: list[CrashTarget | None] = [parse_target(t) for t in scenario.schedule] + [None]
    killed_at: float | None = None
    for number, target in enumerate(targets):
        config = {"pipeline": scenario.pipeline, "sink": scenario.sink, "provider": scenario.provider,
                  "changelog": scenario.changelog, "format": scenario.checkpoint_format,
                  "input": str(run_dir / "input"), "checkpoint": str(roots["checkpoint"]),
                  "output": str(roots["output"]), "report": str(run_dir / f"run-{number}.report.jsonl"),
                  "partitions": 2, "source": scenario.source}
        if kafka_config is not None:
            config["kafka"] = kafka_config
            config["jars"] = kafka_jars()
        run = {"run": number, "target": str(target) if target else None}
        if number >= len(scenario.schedule) + 1:
            run["recovery"] = True  # restarted after Spark failed, not after a kill
        driver = run_driver(config, run_dir, f"run-{number}", roots, target, started, watch)
        proc = driver.process
        run["seq"] = history.add({"type": "start", "run": number, "target": run["target"],
                                  "at": round(driver.started - started, 3)})
        if driver.hung:
            run["error"] = driver.hung
        run["exit"] = code = driver.code
        for at, label, rel in driver.file_events:
            history.add({"type": "file", "run": number, "at": at, "root": label, "path": rel})
        if driver.first_new_commit is not None:
            run["first_commit_s"] = driver.first_commit_s(killed_at, started)
        reports = proc.reports()
        for event in reports:
            if event["event"] == "state":
                seq = history.add({"type": "state", "run": number, "phase": event["phase"], "batch": event["batch"],
                                   "rows": event["rows"]})
                event["seq"] = seq
            elif event["event"] == "state_error":
                history.add({"type": "state_error", "run": number, "phase": event["phase"], "batch": event["batch"],
                             "error": event["error"]})
            elif event["event"] == "error":
                run["error"] = event["error"]
                history.add({"type": "error", "run": number, "error": event["error"], "traceback": event["traceback"]})
        if run.get("error"):
            causes = proc.causes()
            if causes:
                run["error"] = f"{causes}\n{run['error']}"
        if driver.killed:
            run["killed"] = True
            killed_at = driver.killed["at"]
            crash = driver.crash(number)
            crash_windows.append(crash)
            history.add({"type": "crash", **crash, "at": killed_at, "files": driver.files})
        else:
            killed_at = None
            if code not in (0, None) and "error" not in run:
                run["log_tail"] = proc.log_tail()
            if target is not None:
                history.add({"type": "target_not_reached", "run": number, "target": str(target)})
        run["seconds"] = round(time.monotonic() - proc.started, 3)
        runs.append(run)
        history.add({"type": "exit", "run": number, "code": code, "seconds": run["seconds"]})
        if code not in (0, None) and not driver.killed:
            # Spark failed (restart_liveness reports it). A run that committed batches before failing is
            # restarted once more, so the output and state after Spark's own recovery are checked too
            # (e.g. Spark 4.1.1's Kafka source failed once after re-running a batch planned before a kill; 4.2.0 does not).
            if run.get("first_commit_s") is not None and not any(r.get("recovery") for r in runs):
                targets.append(None)
                history.add({"type": "recovery_restart", "run": number + 1, "after_error_of_run": number})
                continue
            break  # Spark could not run at all
    return runs, crash_windows


def _verdict(scenario: SparkScenario, run_dir: Path, roots: dict[str, Path], history: _History,
             started: tuple[float, float], base: dict, batches: list, model, runs: list[dict],
             crash_windows: list[dict], measure: dict | None, keep: bool, kafka_config: dict | None,
             faults_must_fire: bool = False) -> dict:
    """The verdict object (also written to ``run_dir/verdict.json``); ``started``: (monotonic, wall
    clock) when the scenario started. ``faults_must_fire``: a kill of the schedule that never fired
    makes the verdict ``error``."""
    violations: list[Violation] = []
    violations += check_restarts(runs, RESTART_BOUND_S)
    watermarks, late, recorded_model = check_watermarks(scenario.pipeline, batches, recorded_watermarks(roots["checkpoint"]))
    violations += late
    if recorded_model is not None:  # judged with the watermarks Spark really used
        model = recorded_model
    final = final_files(roots)
    commits = sorted(committed_batches(final["checkpoint"]))
    last = commits[-1] if commits else -1
    if last < len(batches) - 1:
        violations.append(Violation("restart_liveness", "input", f"every batch 0..{len(batches) - 1} committed",
                                    f"last committed batch {last}", None))
    if commits != list(range(last + 1)):
        violations.append(Violation("exactly_once_output", "commit log", list(range(last + 1)), commits, None))
    state_events = [e for e in history.events if e["type"] == "state"]
    violations += check_state(scenario.pipeline, model, state_events)
    for event in history.events:
        if event["type"] == "state_error":
            violations.append(Violation("state_matches_model", f"state of batch {event['batch']} ({event['phase']} run "
                                        f"{event['run']})", "readable with the state data source",
                                        event["error"][:1500], event["seq"]))
    orphans: list[str] = []
    columns = OUTPUT_COLUMNS[scenario.pipeline]
    output_seq = None
    # The sink may hold one batch more than the commit log (killed between the sink and commits/N).
    sink_batches = [s[1] for rel in final["output"] if (s := step_of("output", rel)) and s[0] == "sink"]
    sink_last = max([last, *sink_batches])
    tally: Counter = Counter()  # rows duplicate, lost or extra and batches reapplied by an exactly-once sink
    if scenario.sink == "file":
        rows, orphans = read_file_sink(roots["output"])
        output_seq = history.add({"type": "output", "rows": rows, "orphans": orphans, "sink_last": sink_last})
        found, tally = check_output(scenario.sink, columns, model, sink_last, rows, seq=output_seq)
        violations += found
    elif scenario.sink.startswith("foreach"):
        per_batch, applied = read_store_sink(roots["output"])
        rows = [r for b in sorted(per_batch) for r in per_batch[b]]
        output_seq = history.add({"type": "output", "rows": rows, "applied": applied, "sink_last": sink_last})
        found, tally = check_output(scenario.sink, columns, model, sink_last, rows, applied=applied, seq=output_seq,
                                    per_batch=per_batch)
        violations += found
    count = tally["duplicate"] + tally["reapplied"]
    duplicates = {"count": count, "windows": sorted({c["window"] for c in crash_windows}) if count else []}
    if scenario.sink == "kafka":
        from eos_harness.spark.kafka import read_topic

        assert kafka_config is not None
        rows = read_topic(kafka_config["bootstrap"], kafka_config["output_topic"])
        output_seq = history.add({"type": "output", "topic": kafka_config["output_topic"], "rows": rows,
                                  "last": last})
        found, duplicates = check_at_least_once(columns, model, last, rows, crash_windows, seq=output_seq)
        violations += found
        for event in history.events:
            if event["type"] == "follower_error":
                duplicates["follower_error"] = event["error"]
    history_path = run_dir / "history.jsonl"
    history_path.write_text("".join(json.dumps(e) + "\n" for e in history.events))
    verdict = verdict_of(violations, scenario.strict)
    failed = {v.check for v in violations if v.counts(scenario.strict)}  # the checks whose promise was broken
    # A run per kill, in order: a run whose target was not reached ended without it (and a kill never
    # started, after Spark could not run at all, was not reached either).
    targeted = [r for r in runs if r["target"] is not None]
    not_fired = [r["target"] for r in targeted if not r.get("killed")] + list(scenario.schedule[len(targeted):])
    result = {
        **base,
        "verdict": verdict,
        "violations": [v.to_json() for v in violations],
        "crash_points": [c["target"] for c in crash_windows],
        "crash_windows": crash_windows,
        "not_fired": not_fired,  # scheduled kills never reached (an error with faults_must_fire)
        "checks": {
            "restart_liveness": "fail" if "restart_liveness" in failed else "pass",
            "exactly_once_output": ("fail" if "exactly_once_output" in failed else "pass")
            if scenario.sink in EXACTLY_ONCE_SINKS or scenario.strict else "n/a",
            "no_loss": "fail" if "no_loss" in failed or tally["lost"] else "pass",
            "state_matches_model": "fail" if "state_matches_model" in failed else "pass",
            "orphan_files": {"count": len(orphans), "files": orphans[:20]},
        },
        "duplicates": duplicates,
        "watermarks": watermarks,
        "runs": runs,
        "last_committed_batch": last,
        "seconds": round(time.monotonic() - started[0], 3),
        "started_at": started[1],
        "history": str(history_path),
    }
    if kafka_config is not None:  # the Kafka release of the source's or sink's broker (None: not ours to ask)
        result["kafka_version"] = kafka_config["kafka_version"]
    if faults_must_fire:
        result = unfired_is_error(result)
    if measure is not None:
        measure.update(_latencies(final, roots))
    (run_dir / "verdict.json").write_text(json.dumps(result, indent=2))
    if not keep and result["verdict"] == PASS:
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    return result


def _latencies(files: dict[str, list[str]], roots: dict[str, Path]) -> dict:
    """Micro-batch latency (offsets/N written → commits/N written), from the files' modification times."""
    out = []
    for rel in files["checkpoint"]:
        step = step_of("checkpoint", rel)
        if step and step[0] == "commit":
            offsets = roots["checkpoint"] / "offsets" / str(step[1])
            commit = roots["checkpoint"] / rel
            if offsets.exists():
                out.append((step[1], commit.stat().st_mtime - offsets.stat().st_mtime))
    return {"batch_latencies": sorted(out)}


def run_one(scenario, directory: Path) -> dict:
    """One scenario of a campaign (the suite contract), on the Kafka its campaign opened (``scenario.kafka``)
    when its source or sink is Kafka. A scheduled kill never reached makes it an error (the campaign's plan
    lands every kill within its run: :func:`eos_harness.suites.spark.plan.campaign_plan`)."""
    from eos_harness.suites.spark.user import UserScenario, result_of_campaign, run_user_scenario

    if isinstance(scenario, UserScenario):  # a user's query: its crash-free run kept once for the campaign
        return result_of_campaign(run_user_scenario(scenario, directory, reference_root=directory.parent))
    return run_spark_scenario(scenario, directory, kafka=scenario.kafka, faults_must_fire=True)


@contextlib.contextmanager
def campaign_session(options: Mapping, say: Callable[[str], object] = lambda text: None) -> Iterator[dict]:
    """The campaign's Kafka, when its source or a sink is Kafka: ``kafka-local`` and ``kafka-quorum`` started
    once for every scenario and always stopped, ``kafka://`` checked to answer (``kafka``: its bootstrap
    servers, for the plan)."""
    if options.get("source") != "kafka" and "kafka" not in options["sinks"]:
        yield options
        return
    from eos_harness.broker.opening import open_broker

    with open_broker(options["broker"], say=say) as opened:
        yield {**options, "kafka": opened.bootstrap_servers}


def campaign_fields(campaign: dict) -> dict:
    """The campaign's summary with the scenarios Spark refused (``not_applicable``), the size of the matrix
    (with the mutant sink) and the duplicates of the at-least-once Kafka sink."""
    results = campaign["scenarios"]
    configurations = StateChoice.of(campaign).configurations()  # those chosen (default: every one)
    if campaign.get("pipeline"):  # a user's query: every window under every state configuration, and the mutant
        from eos_harness.suites.spark.user import WINDOWS

        size = len(configurations) * len(WINDOWS) + 1
    else:
        size = len(matrix(campaign["source"], tuple(campaign["sinks"]), configurations)) + 1
    return {"summary": {**campaign["summary"],
                        "not_applicable": [judge(r) for r in results].count(NOT_APPLICABLE),
                        "matrix_size": size,
                        "duplicates": sum(r.get("duplicates", {}).get("count", 0) for r in results
                                          if r["sink"] == "kafka")}}
