"""CLI of ``eos-harness check RUN_DIR``: the lifecycle suite's per-key checks over the Parquet histories a
campaign wrote (``chaos --suite lifecycle --engine spark``: ``RUN_DIR/parquet/histories``), judged again, in this
process (``--engine local``, the suite's own checkers) or as Spark DataFrame jobs (``--engine spark``, for
histories too large for one process), with the same answer from either.

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


def check_run(run_dir: Path, engine: str, master: str | None = None, driver_memory: str = "2g",
              say=lambda text: None) -> dict:
    """The answer of ``check`` for ``run_dir`` (a usage error, ValueError, when it has no lifecycle histories)."""
    from eos_harness.suites.lifecycle.at_scale import (
        CHECKS_AT_SCALE,
        check_in_process,
        lifecycle_histories,
        semantics_resolver,
    )

    path = lifecycle_histories(run_dir)
    semantics = semantics_resolver()
    if engine == "local":
        scenarios = check_in_process(path, semantics)
    else:
        from eos_harness.spark.session import dataframe_session
        from eos_harness.suites.lifecycle.frames import check_frames

        log = Path(tempfile.gettempdir()) / "spark-check.log"  # the command's temp root: removed at its end
        say(f"engine: spark on {master}")
        size = sum(f.stat().st_size for f in path.rglob("*.parquet"))
        with dataframe_session(master, log, f"eos-harness check {run_dir}", driver_memory,
                               small=size < SMALL_BYTES) as spark:
            scenarios = check_frames(spark, path, semantics)
    return {"run_dir": str(run_dir), "engine": engine, "master": master if engine == "spark" else None,
            "checks": list(CHECKS_AT_SCALE), "scenarios": scenarios, "expected": _expected(run_dir)}


def _expected(run_dir: Path) -> dict[str, str]:
    """Each scenario's expected verdict as its campaign recorded it (plan index -> pass/fail)."""
    from eos_harness.results_parquet import run_results

    try:
        return {str(r["index"]): r.get("expected", "pass") for r in run_results(run_dir)
                if r.get("suite") == "lifecycle" and isinstance(r.get("index"), int)}
    except (OSError, ValueError):
        return {}


@click.command("check")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="Where the checks run: local (the lifecycle suite's own checkers, in this process) or spark "
                   "(DataFrame jobs on --master, for histories too large for one process; the same answer).")
@click.option("--master", default=None, metavar="URL",
              help=f"The Spark master of --engine spark: {DEFAULT_MASTER} (the default), local[N] or spark://HOST:PORT.")
@click.option("--driver-memory", default="2g", show_default=True, metavar="SIZE",
              help="The Spark driver's heap (--engine spark), e.g. 2g or 512m.")
@click.option("--json", "json_path", default=None, type=click.Path(path_type=Path),
              help="Write the answer as JSON here (every scenario's checks and violations).")
def check_command(run_dir: Path, engine: str, master: str | None, driver_memory: str, json_path: Path | None) -> None:
    """Judge the lifecycle histories of the campaign in RUN_DIR (its Parquet histories, RUN_DIR/parquet/histories,
    which `chaos --suite lifecycle --engine spark` writes) with the per-key checks: what a recovery left
    (no_uncommitted_survives, committed_rolls_forward, recovery_idempotent, state_matches_model), what reads saw
    (read_your_own_writes, read_committed_isolation) and the read-committed output (exactly_once_output)."""
    import re

    from eos_harness.engine import check_master
    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import RunDirError
    from eos_harness.suites.lifecycle.at_scale import HistoryError, lifecycle_histories

    if master is not None and engine != "spark":
        raise click.UsageError(f"--master {master} is the Spark master of --engine spark: add --engine spark")
    if not re.fullmatch(r"[1-9][0-9]*[mg]", driver_memory):
        raise click.BadParameter(f"{driver_memory!r} is not a size such as 2g or 512m", param_hint="--driver-memory")
    try:
        lifecycle_histories(run_dir)
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
    """Print the answer by store (as a campaign's table reads) and return the exit code."""
    from rich.table import Table

    stores: dict[str, dict] = {}
    unexpected = []
    for scenario in answer["scenarios"]:
        row = stores.setdefault(scenario["store"], {"scenarios": 0, "failed": 0, "fired": {}, "expected": "pass"})
        expected = answer["expected"].get(str(scenario["index"]), "pass")
        row["expected"] = expected
        row["scenarios"] += 1
        row["failed"] += scenario["verdict"] == "fail"
        for v in scenario["violations"]:
            row["fired"][v["check"]] = row["fired"].get(v["check"], 0) + 1
        if scenario["verdict"] == "fail" and expected == "pass":
            unexpected.append(scenario)
    table = Table(title=f"per-key checks of {answer['run_dir']} ({answer['engine']}): {len(answer['scenarios'])} "
                        "lifecycle scenarios")
    for column in ("store", "expected", "scenarios", "failed", "checks that fired"):
        table.add_column(column)
    for store, row in stores.items():
        table.add_row(store, row["expected"], str(row["scenarios"]), str(row["failed"]),
                      ", ".join(f"{c}×{n}" for c, n in row["fired"].items()))
    console.print(table)
    judged = {c: sum(s["checks"][c] != "not exercised" for s in answer["scenarios"]) for c in answer["checks"]}
    never = [c for c, n in judged.items() if not n]
    if never:
        console.print(f"not exercised (no history held what it judges: not passed): {', '.join(never)}",
                      soft_wrap=True, highlight=False, markup=False)
    for scenario in unexpected:
        for v in scenario["violations"][:5]:
            console.print(f"scenario {scenario['index']} ({scenario['store']}): {v['check']} key {v['key']}: expected "
                          f"{v['expected']}, observed {v['observed']} (history event {v['event']})",
                          soft_wrap=True, highlight=False, markup=False)
    return EXIT_FAIL if unexpected else EXIT_PASS
