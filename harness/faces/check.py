"""CLI of ``eos-harness check RUN_DIR``: a campaign's checks over the Parquet histories it wrote
(``chaos --engine spark``: ``RUN_DIR/parquet/histories``), judged again, in this process (``--engine local``, the
suite's own checkers) or as Spark DataFrame jobs (``--engine spark``, for histories too large for one process), with
the same answer from either: the lifecycle suite's per-key checks, or Kafka's log anomalies (the kafka-log suite).

Exit codes: 0 no subject expected to keep its promises broke one of these (a mutant caught is expected); 1 one
did; 2 bad usage (no such run, no
Parquet histories, a bad --master), nothing judged; 3 Spark could not run the check.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click
from eos_harness.engine import DEFAULT_MASTER, ENGINES
from eos_harness.faces.toolkit import console
from eos_harness.verdict import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_PASS, error_reason

__all__ = ["SMALL_BYTES", "check_command", "check_run"]

SMALL_BYTES = 64 << 20  # histories smaller than this on disk: a Spark session tuned for start-up, not peak speed


def histories_of(run_dir: Path) -> tuple[str, Path]:
    """The suite whose Parquet histories ``run_dir`` holds (lifecycle, else kafka-log) and their path (a usage
    error, ValueError, when it holds neither's)."""
    from eos_harness.results_parquet import HISTORIES_DATASET, PARQUET_DIR
    from eos_harness.suites.lifecycle.at_scale import lifecycle_histories

    path = Path(run_dir) / PARQUET_DIR / HISTORIES_DATASET
    if Path(run_dir).is_dir() and any(path.glob("suite=kafka-log/**/*.parquet")) \
            and not any(path.glob("suite=lifecycle/**/*.parquet")):
        return "kafka-log", path
    return "lifecycle", lifecycle_histories(run_dir)


def check_run(run_dir: Path, engine: str, master: str | None = None, driver_memory: str = "2g",
              say=lambda text: None) -> dict:
    """The answer of ``check`` for ``run_dir`` (a usage error, ValueError, when it has no histories to judge)."""
    suite, path = histories_of(run_dir)
    if suite == "kafka-log":
        from eos_harness.suites.kafka_log import at_scale
        from eos_harness.suites.kafka_log.frames import check_frames

        in_process, frames, subject = at_scale.check_in_process, check_frames, at_scale.SUBJECT
    else:
        from eos_harness.suites.lifecycle import at_scale
        from eos_harness.suites.lifecycle.frames import check_frames

        semantics = at_scale.semantics_resolver()
        subject = "store"

        def in_process(path: Path) -> list[dict]:
            return at_scale.check_in_process(path, semantics)

        def frames(spark, path: Path) -> list[dict]:
            return check_frames(spark, path, semantics)
    if engine == "local":
        scenarios = in_process(path)
    else:
        from eos_harness.spark.session import dataframe_session

        log = Path(tempfile.gettempdir()) / "spark-check.log"  # the command's temp root: removed at its end
        say(f"engine: spark on {master}")
        size = sum(f.stat().st_size for f in path.rglob("*.parquet"))
        with dataframe_session(master, log, f"eos-harness check {run_dir}", driver_memory,
                               small=size < SMALL_BYTES) as spark:
            scenarios = frames(spark, path)
    return {"run_dir": str(run_dir), "suite": suite, "subject": subject, "engine": engine,
            "master": master if engine == "spark" else None, "checks": list(at_scale.CHECKS_AT_SCALE),
            "scenarios": scenarios, "expected": _expected(run_dir, suite)}


def _expected(run_dir: Path, suite: str) -> dict[str, str]:
    """Each scenario's expected verdict as its campaign recorded it (plan index -> pass/fail)."""
    from eos_harness.results_parquet import run_results

    try:
        return {str(r["index"]): r.get("expected", "pass") for r in run_results(run_dir)
                if r.get("suite") == suite and isinstance(r.get("index"), int)}
    except (OSError, ValueError):
        return {}


@click.command("check")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="Where the checks run: local (the suite's own checkers, in this process) or spark "
                   "(DataFrame jobs on --master, for histories too large for one process; the same answer).")
@click.option("--master", default=None, metavar="URL",
              help=f"The Spark master of --engine spark: {DEFAULT_MASTER} (the default), local[N] or spark://HOST:PORT.")
@click.option("--driver-memory", default="2g", show_default=True, metavar="SIZE",
              help="The Spark driver's heap (--engine spark), e.g. 2g or 512m.")
@click.option("--json", "json_path", default=None, type=click.Path(path_type=Path),
              help="Write the answer as JSON here (every scenario's checks and violations).")
def check_command(run_dir: Path, engine: str, master: str | None, driver_memory: str, json_path: Path | None) -> None:
    """Judge the histories of the campaign in RUN_DIR (its Parquet histories, RUN_DIR/parquet/histories, which
    `chaos --engine spark` writes). A lifecycle campaign's with the per-key checks: what a recovery left
    (no_uncommitted_survives, committed_rolls_forward, recovery_idempotent, state_matches_model), what reads saw
    (read_your_own_writes, read_committed_isolation) and the read-committed output (exactly_once_output). A kafka-log
    campaign's with Kafka's log anomalies: duplicate, aborted_read, inconsistent_offsets, lost_write,
    committed_not_read, partial_transaction, hanging_transaction."""
    import re

    from eos_harness.engine import check_master
    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import RunDirError
    from eos_harness.suites.lifecycle.at_scale import HistoryError

    if master is not None and engine != "spark":
        raise click.UsageError(f"--master {master} is the Spark master of --engine spark: add --engine spark")
    if not re.fullmatch(r"[1-9][0-9]*[mg]", driver_memory):
        raise click.BadParameter(f"{driver_memory!r} is not a size such as 2g or 512m", param_hint="--driver-memory")
    try:
        histories_of(run_dir)
        if engine == "spark":
            master = check_master(master or DEFAULT_MASTER)
        check_outputs({"--json": str(json_path) if json_path else None})
    except (HistoryError, ValueError, RunDirError) as exc:
        raise click.UsageError(str(exc)) from None
    try:
        answer = check_run(run_dir, engine, master, driver_memory, say=console.print)
    except Exception as exc:  # noqa: BLE001 - Spark could not run the job: the reason, not the JVM's stack
        console.print(f"[red]the check could not be run:[/] {error_reason(exc).splitlines()[0][:600]}",
                      soft_wrap=True, highlight=False)
        sys.exit(EXIT_INCOMPLETE)
    if json_path is not None:
        json_path.write_text(json.dumps(answer, indent=2))
    sys.exit(_print(answer))


def _print(answer: dict) -> int:
    """Print the answer by subject (as a campaign's table reads) and return the exit code."""
    from rich.table import Table

    subject = answer.get("subject", "store")
    rows: dict[str, dict] = {}
    unexpected = []
    for scenario in answer["scenarios"]:
        row = rows.setdefault(scenario[subject], {"scenarios": 0, "failed": 0, "fired": {}, "expected": "pass"})
        expected = answer["expected"].get(str(scenario["index"]), "pass")
        row["expected"] = expected
        row["scenarios"] += 1
        row["failed"] += scenario["verdict"] == "fail"
        for v in scenario["violations"]:
            row["fired"][v["check"]] = row["fired"].get(v["check"], 0) + 1
        if scenario["verdict"] == "fail" and expected == "pass":
            unexpected.append(scenario)
    suite = answer.get("suite", "lifecycle")
    what = "per-key checks" if suite == "lifecycle" else "log checks"
    table = Table(title=f"{what} of {answer['run_dir']} ({answer['engine']}): {len(answer['scenarios'])} "
                        f"{suite} scenarios")
    for column in (subject, "expected", "scenarios", "failed", "checks that fired"):
        table.add_column(column)
    for name, row in rows.items():
        table.add_row(name, row["expected"], str(row["scenarios"]), str(row["failed"]),
                      ", ".join(f"{c}×{n}" for c, n in row["fired"].items()))
    console.print(table)
    judged = {c: sum(s["checks"][c] != "not exercised" for s in answer["scenarios"]) for c in answer["checks"]}
    never = [c for c, n in judged.items() if not n]
    if never:
        console.print(f"not exercised (no history held what it judges: not passed): {', '.join(never)}",
                      soft_wrap=True, highlight=False, markup=False)
    for scenario in unexpected:
        for v in scenario["violations"][:5]:
            where = f" (history event {v['event']})" if v["event"] is not None else ""
            console.print(f"scenario {scenario['index']} ({scenario[subject]}): {v['check']} key {v['key']}: expected "
                          f"{v['expected']}, observed {v['observed']}{where}",
                          soft_wrap=True, highlight=False, markup=False)
    return EXIT_FAIL if unexpected else EXIT_PASS
