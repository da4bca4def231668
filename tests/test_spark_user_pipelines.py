"""A user's own Structured Streaming query (``--pipeline module:function``), judged against its own crash-free
run: the pipelines are written as a user would (``tests/fixtures/spark_user_*.py``), run through the CLI."""

from __future__ import annotations

import json
import os
import shlex
from collections import Counter
from pathlib import Path

import pytest
from eos_harness.suites.spark.user import compare_output, parse_ddl


def write_batches(folder: Path, batches: int = 5) -> Path:
    """Events ``(id, key, ts)``, event times rising 10 s a batch; an id twice in its batch, and the last id
    of each batch delivered again in the next (what a deduplicating query must drop)."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(batches):
        rows = [{"id": n * 6 + i, "key": "abc"[i % 3], "ts": 1_000_000 + n * 10 + i} for i in range(6)]
        rows.append(dict(rows[0]))
        if n:
            rows.append({"id": n * 6 - 1, "key": "c", "ts": 1_000_000 + (n - 1) * 10 + 5})
        (folder / f"batch-{n}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def run_users_pipeline(cli, tmp_path: Path, ref: str, inputs: Path, *options):
    """``eos-harness run --suite spark --pipeline REF --input INPUTS OPTIONS`` from ``tmp_path`` (the run in
    ``run/``, no report): the command's run, and the verdict it wrote (None when it wrote none)."""
    verdict = tmp_path / "v.json"
    done = cli("run", "--suite", "spark", "--pipeline", ref, "--input", inputs, *options, "--out", tmp_path / "run",
               "--json", verdict, "--no-report", cwd=tmp_path)
    return done, json.loads(verdict.read_text()) if verdict.exists() else None


def test_the_output_is_judged_against_the_crash_free_run_as_a_multiset():
    crash = [{"run": 0, "target": "sink@1", "after": "marks/_batches/1", "window": "after_sink", "batch": 1}]
    expected = Counter({"a": 2, "b": 1, "c": 1})
    assert compare_output(expected, Counter(expected), "exactly-once", crash) == ([], {"count": 0, "windows": []})
    found, duplicates = compare_output(expected, Counter({"a": 3, "b": 1, "d": 1}), "exactly-once", crash)
    assert sorted((v.check, v.key) for v in found) == [("exactly_once_output", "a"), ("exactly_once_output", "d"),
                                                       ("no_loss", "c")]
    assert duplicates["count"] == 1 and duplicates["windows"] == ["after_sink"]
    assert duplicates["by_crash"][0]["batch"] == 1
    # declared at least once: the duplicate is counted and attributed, and fails only under --strict
    found, duplicates = compare_output(expected, Counter({"a": 3, "b": 1, "c": 1}), "at-least-once", crash)
    assert [v.counts(False) for v in found] == [False] and duplicates["count"] == 1


def test_the_state_is_judged_against_the_crash_free_runs_after_the_same_batch():
    from eos_harness.suites.spark.user import compare_state

    def state(batch, rows, join=None):
        ops = [{"operator": 0, "name": "stateStoreSave", "store": "default", "rows": rows}]
        if join is not None:
            ops.append({"operator": 1, "name": "transformWithStateExec", "store": "default", "not_read": join})
        return {"batch": batch, "operators": ops}

    rows = ['{"key": {"k": "a"}, "value": {"count": 2}}', '{"key": {"k": "b"}, "value": {"count": 1}}']
    assert compare_state(state(4, rows), state(4, list(reversed(rows)))) == ([], "pass")  # a multiset
    found, status = compare_state(state(4, rows), state(4, [rows[0], '{"key": {"k": "b"}, "value": {"count": 2}}']))
    assert status == "fail" and [v.check for v in found] == ["state_matches_crash_free"]
    assert found[0].key == "operator 0 (stateStoreSave) store default at batch 4"
    assert '"count": 1' in found[0].expected and '"count": 2' in found[0].observed
    found, status = compare_state(state(4, rows), state(4, rows + rows[:1]))  # a row twice: not the same state
    assert status == "fail" and "0 rows" not in found[0].observed
    # never a pass without a comparison
    assert compare_state(None, state(4, rows))[1].startswith("not exercised")
    assert compare_state(state(3, rows), state(4, rows))[1].startswith("not exercised (the last batch differs")
    assert compare_state({"batch": 4, "operators": []}, {"batch": 4, "operators": []}) == (
        [], "not exercised (the query keeps no state)")
    only = {"batch": 4, "operators": state(4, rows, "needs stateVarName")["operators"][1:]}
    assert compare_state(only, only) == ([], "not exercised (operator 1 (transformWithStateExec) store default at "
                                             "batch 4: needs stateVarName)")
    assert compare_state(state(4, rows, "x"), state(4, rows, "x"))[1].startswith("pass (not read: operator 1")
    found, status = compare_state(state(4, rows, "x"), state(4, rows))  # an operator gone after the kills
    assert status == "fail" and found[0].observed == "absent"


def test_the_state_is_compared_after_each_batch_and_the_first_that_differs_is_named():
    from eos_harness.suites.spark.user import compare_states

    def state(*batches):
        return {"batch": batches[-1][0], "operators": [], "batches": [
            {"batch": n, "operators": [{"operator": 0, "name": "stateStoreSave", "store": "default", "rows": rows}]}
            for n, rows in batches]}

    a, b = '{"key": "a", "value": 1}', '{"key": "a", "value": 2}'
    crash_free = state((0, [a]), (1, [b]), (2, [b]), (3, [b]))
    assert compare_states(crash_free, state((0, [a]), (1, [b]), (2, [b]), (3, [b]))) == ([], "pass (batches 0..3)")
    # batch 1's state differs and the last batch's is the same again: the violation is batch 1's, named the first
    found, status = compare_states(crash_free, state((0, [a]), (1, [a]), (2, [b]), (3, [b])))
    assert status == "fail (the state first differs after batch 1)"
    assert [v.key for v in found] == ["operator 0 (stateStoreSave) store default at batch 1 (the first batch whose "
                                      "state differs; its state after batches 0 equal)"]
    # batches read on one side only are not compared; none in common is never a pass
    assert compare_states(crash_free, state((2, [b]), (3, [b]), (4, [b]))) == ([], "pass (batches 2..3)")
    assert compare_states(crash_free, state((5, [b])))[1].startswith("not exercised (no batch whose state")
    # a batch whose watermark Spark recorded differs evicts other state: judged by the batches after it
    lagged = state((0, [a]), (1, [a, b]), (2, [b]), (3, [b]))
    assert compare_states(crash_free, lagged, watermarks={1: (5000, 15000)}) == (
        [], "pass (batches 0, 2..3; batch 1 not compared: its watermark 5000 ms recorded, 15000 ms crash-free)")
    assert compare_states(crash_free, state((0, [a]), (1, [a, b]), (2, [a]), (3, [b])),
                          watermarks={1: (5000, 15000)})[1] == "fail (the state first differs after batch 2)"
    empty = {"batch": 3, "operators": [], "batches": []}
    assert compare_states(empty, empty) == ([], "not exercised (the query keeps no state)")


def test_a_transform_with_state_operator_is_read_by_the_state_variables_its_metadata_names():
    from eos_harness.spark.user_app import _state_variables

    def props(mode, *variables):
        return json.dumps({"timeMode": mode, "stateVariables": [
            {"stateName": n, "stateVariableType": t, "ttlEnabled": ttl} for n, t, ttl in variables]})

    timers = ("$eventTimers_keyToTimestamp", "TimerState", False)
    assert _state_variables(props("EventTime", ("session", "ValueState", False), timers)) == (
        [("stateVarName", "session"), ("readRegisteredTimers", "true")], [])
    # what follows the clock is not compared (named, with why), never read as if it were the input's
    reads, skipped = _state_variables(props("ProcessingTime", ("seen", "ListState", True), ("n", "MapState", False),
                                            timers))
    assert reads == [("stateVarName", "n")]
    assert [s for s, _ in skipped] == ["stateVarName=seen", "readRegisteredTimers=true"]
    assert _state_variables(None)[0] == [] and "stateVarName" in _state_variables(None)[1][0][1]


def test_the_state_check_in_junit_is_skipped_when_no_scenario_compared_a_state():
    from eos_harness.suites.spark.junit import spark_suites

    def result(state_check: str) -> dict:
        return {"pipeline": "my_jobs:build", "sink": "user", "seed": 5, "schedule": ["sink@2"], "verdict": "pass",
                "configuration": {"state_provider": "rocksdb", "changelog_checkpointing": False,
                                  "checkpoint_format": 1, "source": "file"}, "violations": [], "repro": "eos-harness",
                "reference": {}, "checks": {"state_matches_crash_free": state_check}}

    def state_case(results):
        (suite,) = spark_suites(results, strict=False)
        return next(c for c in suite.cases if c.name == "state_matches_crash_free")

    unread = state_case([result("not exercised (the query keeps no state)")])
    assert unread.outcome == "skipped" and "the query keeps no state" in unread.message
    assert state_case([result("not exercised (the query keeps no state)"), result("pass")]).outcome == "passed"


def test_a_ddl_schema_is_checked_before_anything_runs():
    assert parse_ddl("id long, key string, at timestamp") == [("id", "long"), ("key", "string"), ("at", "timestamp")]
    assert parse_ddl("m map<string, array<int>>, s struct<a: int, b: decimal(10, 2)> NOT NULL COMMENT 'x'") == [
        ("m", "map<string,array<int>>"), ("s", "struct<a:int,b:decimal(10,2)>")]
    for bad in ("", "id", "id lon", "id long,", "id long, id string", "a array<int", "a decimal(x)"):
        with pytest.raises(ValueError):
            parse_ddl(bad)


@pytest.mark.spark
def test_bad_pipeline_input_is_a_usage_error_before_anything_runs(cli, tmp_path):
    inputs = write_batches(tmp_path / "in")
    (tmp_path / "empty").mkdir()
    cases = {
        ("--pipeline", "no_such_module:build", "--input", inputs): "module 'no_such_module' not found",
        ("--pipeline", "spark_user_dedup:nope", "--input", inputs): "has no attribute 'nope'",
        ("--pipeline", "spark_user_dedup:F", "--input", inputs): "not a function",
        ("--pipeline", "spark_user_dedup:build", "--input", tmp_path / "empty"): "has no input file",
        ("--pipeline", "spark_user_dedup:build", "--input", inputs, "--schema", "id long, key strin"):
            "'strin' is not a Spark data type",
        ("--pipeline", "spark_user_dedup:build", "--input", inputs, "--crash-at", "sink@5"): "5 micro-batches",
    }
    for args, message in cases.items():
        done = cli("run", "--suite", "spark", *args, "--seed", "1", cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.spark
def test_a_declarative_pipelines_project_is_refused_with_the_reason(cli, tmp_path):
    """A Spark Declarative Pipelines project (spark-pipelines) is not run yet: its spec, or its folder, given as
    --pipeline is a usage error for run and chaos that says why, before anything runs."""
    inputs = write_batches(tmp_path / "in")
    project = tmp_path / "project"
    project.mkdir()
    (project / "spark-pipeline.yml").write_text("name: p\nstorage: storage\n")
    for command in ("run", "chaos"):
        for ref in (project / "spark-pipeline.yml", project):
            done = cli(command, "--suite", "spark", "--pipeline", ref, "--input", inputs, "--seed", "1", cwd=tmp_path)
            assert done.returncode == 2, (command, ref, done.stdout, done.stderr)
            assert "Spark Declarative Pipelines project" in done.stderr and "persistent catalog" in done.stderr
            assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.spark
def test_a_deduplicating_aggregation_to_a_file_sink_survives_a_kill_after_its_sink(cli, tmp_path):
    inputs = write_batches(tmp_path / "in")
    done, result = run_users_pipeline(cli, tmp_path, "spark_user_dedup:build", inputs, "--crash-at", "sink@2",
                                      "--seed", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["verdict"] == "pass" and result["sink"] == "parquet"
    assert [c["window"] for c in result["crash_windows"]] == ["after_sink"]
    assert result["checks"]["output_rows_compared"] > 0 and result["duplicates"]["count"] == 0
    assert result["checks"]["exactly_once_output"] == "pass" and result["checks"]["orphan_files"]["count"] == 0
    # the state read back with Spark's state data source equals the crash-free run's after the same batch
    state = json.loads(Path(result["runs"][-1]["state"]).read_text())
    last = result["last_committed_batch"]
    assert state["batch"] == last >= 4  # (availableNow may add a batch for the watermark)
    # compared after each committed batch, the batches before the kill, the killed one and those after it
    # (a batch whose watermark lagged after the restart is judged by the batches after it, and named)
    lagging = result["watermarks"].get("lagging_batches", [])
    status = result["checks"]["state_matches_crash_free"]
    assert status.startswith("pass (batches 0..") and (lagging or status == f"pass (batches 0..{last})"), status
    assert all(f"batch {n} not compared: its watermark" in status for n in lagging), status
    assert [b["batch"] for b in state["batches"]] == list(range(last + 1))
    assert sorted(o["name"] for o in state["operators"]) == ["dedupe", "stateStoreSave"]  # dropDuplicates, count
    assert all(o.get("rows") for o in state["operators"]), state  # every store read, and not empty
    # a row of the aggregation's state lost after batch 2 only (the last batch's the same) would have failed it,
    # naming the store and batch 2 as the first whose state differs
    from eos_harness.suites.spark.user import compare_states

    crash_free = json.loads(Path(result["reference"]["folder"], "run-0.state.json").read_text())
    assert state["batches"][2]["operators"][0]["rows"], state["batches"][2]
    state["batches"][2]["operators"][0]["rows"].pop()
    found, status = compare_states(crash_free, state)
    assert status == "fail (the state first differs after batch 2)", status
    assert found[0].key.startswith("operator 0 (stateStoreSave) store default at batch 2 (the first"), found


@pytest.mark.spark
def test_a_non_idempotent_foreach_batch_is_caught_with_its_crash_window_and_replayed(cli, tmp_path):
    inputs = write_batches(tmp_path / "in", batches=3)
    # the job is a module of the user's package (tests/fixtures/spark_user_jobs), importing its sibling modules by
    # the package's name and relatively, one of them in a UDF that Spark's Python workers run
    done, result = run_users_pipeline(cli, tmp_path, "spark_user_jobs.appender:build", inputs, "--crash-at",
                                      "sink@1", "--seed", "3")
    assert done.returncode == 1, done.stdout + done.stderr
    assert result["sink"] == "foreachBatch" and result["sink_guarantee"] == "exactly-once"
    rows = [json.loads(line) for line in Path(result["runs"][-1]["rows"]).read_text().splitlines()]
    assert {r["key"] for r in rows} == {"A", "B", "C"}  # spelled by the UDF, in the workers
    # batch 1 written by the sink, the driver killed before commits/1: the replayed batch is appended again
    assert result["duplicates"]["windows"] == ["after_sink"] and result["duplicates"]["by_crash"][0]["batch"] == 1
    assert result["duplicates"]["count"] == 8  # batch 1's rows (its same-batch duplicate counts twice)
    assert "window after_sink of batch 1" in done.stdout
    printed = " ".join(done.stdout.split("replay: ", 1)[1].split("report:", 1)[0].split())
    assert printed == result["repro"]  # the printed replay is the verdict's (the console may wrap it)
    words = shlex.split(result["repro"])
    assert words[0] == "eos-harness" and "sink@1" in words
    again = cli(*words[1:], "--json", tmp_path / "again.json", "--no-report", cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert json.loads((tmp_path / "again.json").read_text())["duplicates"]["count"] == 8


def test_a_campaign_of_a_users_query_kills_it_in_every_window_under_every_state_configuration(tmp_path):
    from eos_harness.suites.spark.plan import subjects_of
    from eos_harness.suites.spark.user import STATE_CONFIGURATIONS, WINDOWS, UserScenario, user_plan

    template = UserScenario("my_jobs:build", str(write_batches(tmp_path / "in")))
    planned = user_plan(7, template)
    assert planned == user_plan(7, template)  # the seed decides it
    cells = {(s.provider, s.changelog, s.checkpoint_format, s.schedule[0].split("@")[0]) for s in planned}
    assert cells == {(*c, w) for c in STATE_CONFIGURATIONS for w in WINDOWS}  # each window under each configuration
    assert all(1 <= int(s.schedule[0].split("@")[1]) <= 3 for s in planned)  # a batch before and after the kill
    assert sum(len(s.schedule) == 2 for s in planned) == len(planned) // 5  # every fifth: a random kill too
    assert [s.checkpoint_format for s in planned if s.provider == "hdfs"] == [1] * len(WINDOWS)
    assert subjects_of({"pipeline": "my_jobs:build", "sinks": None}) == ["user"]
    with pytest.raises(ValueError, match="not with --pipeline"):
        subjects_of({"pipeline": "my_jobs:build", "sinks": ["file"]})
    with pytest.raises(ValueError, match="only with your own query"):
        subjects_of({"sinks": ["user"]})


def test_a_campaign_of_a_users_query_shows_its_windows_by_configuration():
    """The table a user reads after `chaos --pipeline`: a row per state configuration, a column per window aimed
    at, each cell the verdict, the check that fired and where the kill landed on disk."""
    from eos_harness.faces.spark import window_grid
    from rich.console import Console

    def scenario(provider, fmt, schedule, verdict, landed, checks=()):
        return {"sink": "user", "pipeline": "jobs:build", "schedule": schedule, "verdict": verdict,
                "configuration": {"state_provider": provider, "changelog_checkpointing": False,
                                  "checkpoint_format": fmt, "source": "file"},
                "crash_windows": [{"window": w, "batch": b} for w, b in landed],
                "violations": [{"check": c, "key": "run 1", "expected": "a restart", "observed": "…"} for c in checks]}

    results = [scenario("rocksdb", 2, ["sink@3"], "fail", [("after_sink", 3)], ["restart_liveness"]),
               scenario("rocksdb", 2, ["commit@2", "random@650"], "pass", [("after_commit", 2), ("after_offsets", 3)]),
               scenario("hdfs", 1, ["state@1"], "not_applicable", []),
               {"sink": "foreach-nocheck", "pipeline": "count", "schedule": ["sink@2"], "verdict": "fail"}]
    console = Console(width=200, record=True)
    console.print(window_grid(results, "jobs:build"))
    lines = [" ".join(line.replace("│", " ").replace("┃", " ").split()) for line in console.export_text().splitlines()]
    assert "configuration killed after offsets@N killed after state@N killed after sink@N killed after commit@N" \
        in lines
    assert "rocksdb/fmt2 - - fail restart_liveness sink(3) pass commit(2), offsets(3) + random" in lines
    assert "hdfs/fmt1 - n/a - -" in lines
    assert not any("foreach-nocheck" in line or "count" in line for line in lines)  # the mutant sink: not the query's


def test_rows_are_compared_whole_or_by_the_key_columns_only(tmp_path):
    from eos_harness.suites.spark.user import _rows

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1, "key": "a", "at": 5}\n{"id": 1, "key": "a", "at": 9}\n{"id": 2, "key": "b", "at": 5}\n')
    assert sum(_rows(rows, ()).values()) == 3 and len(_rows(rows, ())) == 3
    by_key = _rows(rows, ("id", "key"))  # a processing time differs between runs: not compared
    assert by_key == Counter({'{"id": 1, "key": "a"}': 2, '{"id": 2, "key": "b"}': 1})


@pytest.mark.spark
@pytest.mark.slow  # a Spark finding, opt-in with the others (make test-spark-full)
def test_sparks_own_restart_failure_on_a_users_query_is_reported_with_sparks_error(cli, tmp_path):
    # checkpoint format 2, a file sink, the driver killed after the sink's metadata and before commits/N: the
    # restart fails in Spark itself (found by the built-in matrix on 4.1.1; the same on 4.2.0)
    inputs = write_batches(tmp_path / "in", batches=4)
    done, result = run_users_pipeline(cli, tmp_path, "spark_user_dedup:build", inputs, "--checkpoint-format", "2",
                                      "--crash-at", "sink@1", "--seed", "9")
    assert done.returncode == 1, done.stdout + done.stderr
    liveness = [v for v in result["violations"] if v["check"] == "restart_liveness"]
    assert liveness and "CheckpointInfo length: 0" in liveness[0]["observed"], result["violations"]
    assert result["checks"]["exactly_once_output"].startswith("not exercised")  # no output read back to judge


# What PySpark's pandas functions (applyInPandasWithState, transformWithStateInPandas: its state server speaks
# protobuf) import: as PySpark's users install them (pyspark[pandas_on_spark], protobuf)
PANDAS_PACKAGES = ("pandas", "pyarrow", "numpy", "dateutil", "pytz", "tzdata", "google")


def _plain_pyspark(folder: Path, pandas: bool = False) -> Path:
    """A Python environment with PySpark (and its py4j; with ``pandas``, what its pandas functions import) and
    nothing else of this project's: a new venv whose only extra path is a folder of links to those packages.
    Returns its python."""
    import importlib
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    packages = folder / "packages"
    packages.mkdir()
    for name in ("pyspark", "py4j", *(PANDAS_PACKAGES if pandas else ())):
        module = importlib.import_module(name)
        source = Path(next(iter(module.__path__))) if hasattr(module, "__path__") else Path(module.__file__)
        (packages / source.name).symlink_to(source)
        libs = source.parent / f"{name}.libs"  # a wheel's vendored native libraries, found beside it
        if libs.is_dir():
            (packages / libs.name).symlink_to(libs)
    site = next((folder / "lib").glob("python3*/site-packages"))
    (site / "plain-pyspark.pth").write_text(f"{packages}\n")
    return folder / "bin" / "python"


@pytest.mark.spark
@pytest.mark.slow  # a Spark finding, opt-in with the others (make test-spark-full)
@pytest.mark.parametrize("query", ["users", "built-in", "built-in tws", "built-in pandas-state"])
def test_sparks_own_restart_failure_is_exported_as_a_standalone_pyspark_repro_that_fails_the_same_way(cli, tmp_path,
                                                                                                       query):
    # checkpoint format 2, a file sink, the driver killed after the sink's metadata and before commits/1

    export = tmp_path / "report"
    if query == "users":
        inputs = write_batches(tmp_path / "in", batches=4)
        args = ("--pipeline", "spark_user_dedup:build", "--input", inputs)
        module = "spark_user_dedup.py"
    else:  # the built-in finding (README: what the full matrix finds, every pipeline with state), its query written out
        pipeline = query.partition(" ")[2] or "window-tumbling"
        inputs, args, module = None, ("--pipeline", pipeline, "--sink", "file"), "pipeline.py"
    done = cli("run", "--suite", "spark", *args, "--checkpoint-format", "2", "--crash-at", "sink@1", "--seed", "9",
               "--out", tmp_path / "run", "--export-repro", export, "--no-report", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"exported: {export}" in " ".join(done.stdout.split()), done.stdout
    assert sorted(p.name for p in export.iterdir()) == sorted(["README.md", "input", module, "repro.py"])
    copied = [p.read_text() for p in sorted((export / "input").iterdir())]
    assert copied == [p.read_text() for p in sorted((inputs or tmp_path / "run" / "input").iterdir())]
    script = (export / "repro.py").read_text() + (export / module).read_text()
    assert "eos_harness" not in script and "checkpointFormatVersion': '2'" in script
    readme = (export / "README.md").read_text()
    assert "CheckpointInfo length: 0" in readme and "PySpark 4.2.0" in readme and "python repro.py" in readme
    ran = _run_exported(tmp_path, export, pandas=query.endswith(("tws", "pandas-state")))
    assert "run 0: killed right after output/_spark_metadata/1 appeared" in ran.stdout, ran.stdout
    assert "sink/1 yes, commit/1 no" in ran.stdout  # the kill landed in the window: after the sink, before commits/1
    assert "REPRODUCED: assertion failed: CheckpointInfo length: 0" in ran.stdout, ran.stdout + ran.stderr


def _run_exported(tmp_path: Path, export: Path, pandas: bool = False):
    """``python repro.py`` of ``export`` on plain PySpark (a Python that cannot import the harness; with ``pandas``,
    also pandas and pyarrow), from a folder of its own that it leaves empty; it must exit 1 (reproduced). Returns
    the finished process."""
    import subprocess

    python = _plain_pyspark(tmp_path / "plain", pandas)
    clean = tmp_path / "elsewhere"
    clean.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    probe = subprocess.run([python, "-c", "import pyspark; import eos_harness"], capture_output=True, text=True,
                           cwd=clean, env=env)
    assert "No module named 'eos_harness'" in probe.stderr, probe.stderr
    ran = subprocess.run([python, export / "repro.py"], capture_output=True, text=True, cwd=clean, env=env,
                         timeout=600, start_new_session=True)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert sorted(p.name for p in clean.iterdir()) == []  # the script writes only beside itself (work/)
    return ran


def test_export_repro_is_refused_before_anything_runs(cli, tmp_path):
    inputs = write_batches(tmp_path / "in", batches=3)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("kept")
    (tmp_path / "a-file").write_text("kept")
    user = ("--pipeline", "spark_user_dedup:build", "--input", inputs)
    cases = {
        (*user, "--export-repro", tmp_path / "full"): "exists and is not an empty directory",
        (*user, "--export-repro", tmp_path / "a-file"): "exists and is not an empty directory",
        (*user, "--export-repro", tmp_path / "no" / "such"): "does not exist",
        ("--pipeline", "window-tumbling", "--sink", "file", "--export-repro", tmp_path / "full"): "not an empty directory",
        ("chaos", "--export-repro", tmp_path / "full"): "not an empty directory",
        ("chaos", *user, "--export-repro", tmp_path / "a-file"): "not an empty directory",
    }
    for args, message in cases.items():
        command = ("chaos", "--suite", "spark", *args[1:]) if args[0] == "chaos" else ("run", "--suite", "spark", *args)
        done = cli.invoke(*command, "--seed", "1")
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert (tmp_path / "full" / "x").read_text() == "kept" and (tmp_path / "a-file").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "full", "in"]  # nothing ran, nothing written


def test_the_crash_free_run_is_run_again_when_a_module_the_query_may_import_changes(tmp_path):
    """The crash-free run is kept by the hash of the query's sources: a helper module beside the job (of its
    package, or of its folder) is one, so editing it is never judged against a stale crash-free run."""
    from eos_harness.suites.spark.user import UserScenario, query_sources, reference_key

    package = tmp_path / "my_pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "jobs.py", "helpers.py", "sub/__init__.py", "sub/more.py"):
        (package / name).write_text("X = 1\n")
    scenario = UserScenario("my_pkg.jobs:build", str(write_batches(tmp_path / "in", batches=3)))
    job = str(package / "jobs.py")
    assert [p.relative_to(package).as_posix() for p in query_sources(job)] == [
        "__init__.py", "helpers.py", "jobs.py", "sub/__init__.py", "sub/more.py"]
    before = reference_key(scenario, job)
    (package / "helpers.py").write_text("X = 2\n")
    assert reference_key(scenario, job) != before
    (tmp_path / "solo.py").write_text("X = 1\n")  # a top-level module: the modules of its own folder
    assert [p.name for p in query_sources(str(tmp_path / "solo.py"))] == ["solo.py"]


def test_a_random_kill_and_a_kill_after_the_state_are_exported_where_they_landed(tmp_path):
    """A random kill is exported as a kill right after the step of the window it landed in (what the files on disk
    showed), so the script kills there every time; a kill after the state waits for the batch's first state file."""
    import importlib.util

    from eos_harness.suites.spark.export import Query, export_repro, unsupported

    (tmp_path / "in.json").write_text('{"key": "a", "ts": 1}\n')
    result = {"verdict": "fail", "schedule": ["state@1", "random@700"], "sink": "json", "repro": "eos-harness run",
              "crash_windows": [{"run": 0, "target": "state@1", "window": "after_state", "batch": 1},
                                {"run": 1, "target": "random@700", "window": "after_sink", "batch": 2}],
              "violations": [{"check": "restart_liveness", "key": "run 2", "expected": "a restart",
                              "observed": "java.lang.AssertionError: assertion failed: CheckpointInfo length: 0"}]}
    query = Query("window-tumbling", "pipeline", "build", (tmp_path / "in.json",), "key string, ts long", "rocksdb",
                  False, 2, "json", module_text="def build(source):\n    return source.writeStream.format('json')\n")
    assert unsupported(result, query) is None
    folder = export_repro(result, query, tmp_path / "report")
    readme = (folder / "README.md").read_text()
    assert "run 0: killed (SIGKILL of the driver and its JVM) right after the first file of state version 2 (batch 1)" \
        in readme
    assert "right after `output/_spark_metadata/2` appears (the harness killed it at random@700: it landed there)" \
        in readme
    spec = importlib.util.spec_from_file_location("repro", folder / "repro.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # the script's own code, not run: its main() is behind __name__ == "__main__"
    assert script.KILLS == [("state", 1), ("sink", 2)]
    script.WORK = tmp_path / "work"
    partition = script.WORK / "checkpoint" / "state" / "0" / "1"
    partition.mkdir(parents=True)
    (partition / "1.delta").write_text("")
    (partition / ".2.delta.tmp").write_text("")  # not final: Spark has not renamed it into place yet
    assert script.state_file(1) is None
    (partition / "2_0c1d2e3f-aaaa-bbbb.zip").write_text("")  # checkpoint format 2's file of version 2
    assert script.state_file(1) == "checkpoint/state/0/1/2_0c1d2e3f-aaaa-bbbb.zip"
    # a random kill that landed in no micro-batch's window cannot be exported there: said, not guessed
    before = {**result, "crash_windows": [result["crash_windows"][0],
                                          {"run": 1, "target": "random@700", "window": "before_first_batch"}]}
    assert "landed before_first_batch" in unsupported(before, query)


def test_a_module_of_a_package_is_exported_with_its_package(tmp_path):
    """The exported script imports a module of a user's package by its dotted name, the package copied whole
    beside it: its sibling modules (imported by the package's name or relatively) come with it."""
    import subprocess
    import sys

    from eos_harness.suites.spark.export import export_repro, unsupported, user_query
    from eos_harness.suites.spark.user import UserScenario

    fixtures = Path(__file__).parent / "fixtures"
    scenario = UserScenario("spark_user_jobs.appender:build", str(write_batches(tmp_path / "in", batches=3)),
                            checkpoint_format=2, schedule=("commit@1",),
                            module_file=str(fixtures / "spark_user_jobs" / "appender.py"))
    result = {"verdict": "fail", "schedule": ["commit@1"], "sink": "foreachBatch", "repro": "eos-harness run",
              "crash_windows": [], "violations": [{"check": "restart_liveness", "key": "run 1", "expected": "-",
                                                   "observed": "[STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED] x"}]}
    query = user_query(scenario)
    assert unsupported(result, query) is None
    folder = export_repro(result, query, tmp_path / "report")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "input", "repro.py", "spark_user_jobs"]
    assert sorted(p.name for p in (folder / "spark_user_jobs").iterdir()) == [
        "__init__.py", "appender.py", "keys.py", "tables.py"]
    assert "from spark_user_jobs.appender import build as build" in (folder / "repro.py").read_text()
    # importable from the export alone, its sibling modules with it
    done = subprocess.run([sys.executable, "-c", "import spark_user_jobs.appender as a; print(a.normalise('x'), "
                           "a.__file__)"], cwd=folder, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    assert done.stdout.split() == ["X", str(folder / "spark_user_jobs" / "appender.py")], done.stderr


@pytest.mark.spark
@pytest.mark.slow  # a Spark finding, opt-in with the others (make test-spark-full)
def test_a_campaigns_first_failure_in_spark_is_exported(cli, tmp_path):
    """chaos --export-repro: the campaign's first scenario whose restart fails in Spark itself is exported (seed 6:
    its fourth scenario is window-sliding to the file sink, checkpoint format 2, killed after the sink's metadata)."""
    export = tmp_path / "report"
    done = cli("chaos", "--suite", "spark", "--sinks", "file", "--scenarios", "4", "--seed", "6", "--export-repro",
               export, "--out", tmp_path / "campaign", "--no-report", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    campaign = json.loads((tmp_path / "campaign" / "chaos.json").read_text())
    failed = [r for r in campaign["scenarios"] if any(v["check"] == "restart_liveness" for v in r["violations"])]
    assert [(r["index"], r["pipeline"], r["configuration"]["checkpoint_format"]) for r in failed] == [
        (3, "window-sliding", 2)], [(r["index"], r["violations"][:1]) for r in campaign["scenarios"]]
    printed = " ".join(done.stdout.split())
    assert "--export-repro: scenario 3 (window-sliding, sink@3, rocksdb, format 2)" in printed, done.stdout
    assert f"exported: {export}" in printed, done.stdout
    assert sorted(p.name for p in export.iterdir()) == ["README.md", "input", "pipeline.py", "repro.py"]
    readme = (export / "README.md").read_text()
    assert "CheckpointInfo length: 0" in readme and "`output/_spark_metadata/3`" in readme
    assert "--export-repro" not in campaign["repro"]  # the campaign's replay writes no export
    ran = _run_exported(tmp_path, export)  # and it fails the same way on plain PySpark
    assert "sink/3 yes, commit/3 no" in ran.stdout, ran.stdout
    assert "REPRODUCED: assertion failed: CheckpointInfo length: 0" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.spark
def test_a_stopped_campaign_whose_query_or_input_changed_is_not_resumed(cli, tmp_path):
    """A campaign of a user's query keeps what it judges besides its options (the query's source files and its input,
    as digests): ``--resume`` after either changed is a usage error naming which, before anything runs (its finished
    scenarios were judged against the crash-free run of what it read then); put back, it is what the campaign kept."""
    from eos_harness.suites.spark.plan import kept_inputs

    from tests.conftest import FIXTURES, interrupt_once_kept

    inputs = write_batches(tmp_path / "in", batches=3)
    module = tmp_path / "my_dedup.py"
    module.write_text((FIXTURES / "spark_user_dedup.py").read_text())
    out = tmp_path / "campaign"
    proc = cli.start("chaos", "--suite", "spark", "--pipeline", "my_dedup:build", "--input", inputs, "--scenarios", "3",
                     "--seed", "1", "--out", out, "--no-report", cwd=tmp_path)
    output = interrupt_once_kept(proc, out)  # stopped before its first scenario could finish
    assert proc.returncode == 130, output
    state = json.loads((out / "campaign.json").read_text())
    kept = state["inputs"]
    assert kept["input"]["what"] == f"the input files in {inputs}" and kept["input"]["detail"] == "3 files"
    results = (out / "results.jsonl").read_text() if (out / "results.jsonl").exists() else ""

    original = (inputs / "batch-1.jsonl").read_text()
    (inputs / "batch-1.jsonl").write_text(original.replace('"key": "a"', '"key": "z"'))
    done = cli("chaos", "--suite", "spark", "--resume", out, cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the input files in {inputs} changed since it began (then: 3 files, digest {kept['input']['digest']}" in said
    assert "judged against the crash-free run of what it read then" in said and "the query's source files" not in said

    (inputs / "batch-1.jsonl").write_text(original)
    module.write_text(module.read_text() + "\n# a change to the query's module\n")
    done = cli("chaos", "--suite", "spark", "--resume", out, cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the query's source files ({module} and those beside it) changed since it began" in said
    assert "the input files" not in said

    module.write_text((FIXTURES / "spark_user_dedup.py").read_text())  # put back: what the campaign kept
    cwd = os.getcwd()
    os.chdir(tmp_path)  # where the command looked for the module (as python -m does)
    try:
        assert kept_inputs(state) == kept
    finally:
        os.chdir(cwd)
    assert ((out / "results.jsonl").read_text() if (out / "results.jsonl").exists() else "") == results  # none ran
