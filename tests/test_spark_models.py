"""Pure parts of the Spark suite: the window model (KIP-428 + Spark's watermarks), the crash-window
classifier, the output checks, and the watcher killing a process group right after a file appears."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest
from eos_harness.faults.spark import WATCHER_NICE, CrashTarget, FileWatcher, classify, parse_target, step_of
from eos_harness.models.spark import generate_batches, model_for
from eos_harness.models.windows import SparkWatermarkedCounts, WindowSpec, WindowStore, windows_of
from eos_harness.suites.spark.checks import check_output

pytestmark = pytest.mark.spark


def test_window_spec_validation_follows_kip_428():
    with pytest.raises(ValueError, match="retention period of the window store must be no smaller than its window size"):
        WindowSpec(size=10, advance=10, grace=0, retention=5)
    with pytest.raises(ValueError, match="grace period of the window store must not exceed its retention period"):
        WindowSpec(size=10, advance=10, grace=20, retention=15)
    with pytest.raises(ValueError, match="cannot be negative"):
        WindowSpec(size=10, advance=10, grace=-1)


def test_sliding_windows_contain_the_timestamp():
    spec = WindowSpec(size=20, advance=10, grace=0)
    assert windows_of(25, spec) == [(10, 30), (20, 40)]
    assert windows_of(20, spec) == [(10, 30), (20, 40)]
    assert windows_of(5, WindowSpec(size=10, advance=10, grace=0)) == [(0, 10)]


def test_window_store_drops_records_of_closed_windows_and_expires_by_retention():
    store = WindowStore(WindowSpec(size=10, advance=10, grace=5))
    store.observe(30)
    assert store.add("a", 12) == []  # window [10, 20) closed: 20 + 5 <= 30
    assert store.add("a", 17, now=24) == [(10, 20)]
    assert store.expire(now=35) == [("a", (10, 20), 1)]  # retention 15: 10 + 15 <= 35
    assert store.contents() == {}


def test_spark_watermark_emits_a_window_once_the_watermark_passes_its_end():
    model = SparkWatermarkedCounts(WindowSpec(size=10_000, advance=10_000, grace=10_000))
    assert model.batch([("a", 1_001_000), ("a", 1_002_000)]) == []
    assert model.batch([("a", 1_025_000)]) == []  # runs with watermark 992 s: nothing closed yet
    # watermark now 1015 s: [1000, 1010) closes; a record late by one batch is still counted (late watermark 992 s)
    assert model.batch([("b", 1_003_000)]) == [("a", 1_000_000, 1_010_000, 2), ("b", 1_000_000, 1_010_000, 1)]
    assert model.batch([("c", 1_004_000)]) == []  # late watermark 1015 s: dropped
    assert ("c", 1_004_000, (1_000_000, 1_010_000)) in model.dropped


def test_models_are_deterministic_by_seed():
    assert generate_batches(7) == generate_batches(7)
    assert generate_batches(7) != generate_batches(8)
    for pipeline in ("count", "window-tumbling", "window-sliding", "pandas-state", "tws"):
        a, b = model_for(pipeline, generate_batches(3)), model_for(pipeline, generate_batches(3))
        assert a.all_output(6) == b.all_output(6)


def test_step_of_names_each_commit_step_and_ignores_temp_and_crc_files():
    assert step_of("checkpoint", "offsets/3") == ("offsets", 3)
    assert step_of("checkpoint", "commits/3") == ("commit", 3)
    assert step_of("checkpoint", "state/0/1/4.delta") == ("state", 3)
    assert step_of("checkpoint", "state/0/1/4_0d48f600-86d0-46be-8e8d-34f78fe5a57f.zip") == ("state", 3)
    assert step_of("checkpoint", "state/0/1/4.changelog") == ("state", 3)
    assert step_of("checkpoint", "state/0/1/.4.delta.crc") is None
    assert step_of("checkpoint", "state/0/1/4.zip.crc") is None
    assert step_of("checkpoint", "offsets/.3.abc.tmp") is None
    # a stream-stream join: four stores below each partition, each with its own version files (the campaign of
    # a user's join never reached state@N before these were read)
    assert step_of("checkpoint", "state/0/1/left-keyToNumValues/4.zip") == ("state", 3)
    assert step_of("checkpoint", "state/0/1/right-keyWithIndexToValue/4.delta") == ("state", 3)
    assert step_of("checkpoint", "state/0/1/left-keyToNumValues/SSTs/000008-5ca979f5.sst") is None
    assert step_of("checkpoint", "state/0/1/_metadata/4") is None
    assert step_of("checkpoint", "state/0/_metadata/v2/4") is None
    assert step_of("output", "_spark_metadata/3") == ("sink", 3)
    assert step_of("output", "_batches/3") == ("sink", 3)


def test_classify_reads_the_crash_window_from_the_files_on_disk():
    base = {"checkpoint": ["offsets/0", "state/0/0/1.delta", "state/0/1/1.delta", "commits/0", "offsets/1"],
            "output": ["_spark_metadata/0"]}
    assert classify(base, 2)["window"] == "after_offsets"
    with_state = {**base, "checkpoint": [*base["checkpoint"], "state/0/0/2.delta"]}
    assert classify(with_state, 2) | {} == classify(with_state, 2)
    assert (classify(with_state, 2)["window"], classify(with_state, 2)["state_files"]) == ("after_state", 1)
    with_sink = {"checkpoint": with_state["checkpoint"], "output": [*base["output"], "_spark_metadata/1"]}
    assert classify(with_sink, 2)["window"] == "after_sink"
    committed = {"checkpoint": [*with_state["checkpoint"], "commits/1"], "output": with_sink["output"]}
    assert classify(committed, 2)["window"] == "after_commit"
    assert classify({"checkpoint": [], "output": []}, 2)["window"] == "before_first_batch"


def test_parse_target_rejects_unknown_kinds():
    assert parse_target("commit@2") == CrashTarget("commit", 2)
    with pytest.raises(ValueError, match="bad crash point"):
        parse_target("after-commit@2")


def test_output_check_reports_duplicates_losses_and_reapplied_batches():
    model = model_for("count", [[("a", 1)], [("a", 2), ("b", 2)]])
    rows = [["a", 1], ["a", 2], ["a", 2]]
    found, tally = check_output("foreach", ("key", "count"), model, 1, rows, applied={0: 1, 1: 2})
    observed = {(v.key, v.observed) for v in found}
    assert ('["a", 2]', "2× (duplicate)") in observed
    assert ('["b", 1]', "0× (lost)") in observed
    assert ("batch 1", "applied 2×") in observed
    # the counts the verdict's duplicates and no_loss are computed from, never the text above
    assert (tally["duplicate"], tally["lost"], tally["extra"], tally["reapplied"]) == (1, 1, 0, 1)
    assert check_output("foreach", ("key", "count"), model, 1, [["a", 1], ["a", 2], ["b", 1]],
                        applied={0: 1, 1: 1}) == ([], {})


def test_watcher_kills_the_process_group_right_after_the_target_file(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    script = (
        "import os, time, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"os.makedirs({str(checkpoint / 'commits')!r}, exist_ok=True)\n"
        "for n in range(50):\n"
        f"    tmp = os.path.join({str(checkpoint / 'commits')!r}, '.%d.tmp' % n)\n"
        "    open(tmp, 'w').write('v1')\n"
        f"    os.replace(tmp, os.path.join({str(checkpoint / 'commits')!r}, str(n)))\n"
        "    time.sleep(0.2)\n"
    )
    with FileWatcher({"checkpoint": checkpoint}, CrashTarget("commit", 3), clock_zero=time.monotonic()) as watcher:
        proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
        watcher.attach(proc.pid)
        try:
            code = proc.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
    assert code == -9
    assert watcher.killed["after"] == "checkpoint/commits/3"
    written = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert written[-1] in (3, 4)  # the kill lands within one step after the file
    assert _live_members(proc.pid) == []  # nothing of the group is left (zombies await their reaper)


def test_the_watcher_lowers_the_driver_to_nice_19_at_the_step_before_its_target(tmp_path):
    """A late watcher must not let the driver get past the step after the target: from the step before it (the
    sink of batch 3 for commit@3) the driver's group runs at nice 19, the kill follows at the target."""
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        with FileWatcher({"checkpoint": checkpoint, "output": output}, CrashTarget("commit", 3),
                         clock_zero=time.monotonic()) as watcher:
            watcher.attach(proc.pid)
            (checkpoint / "commits").mkdir()
            (output / "_spark_metadata").mkdir()
            (checkpoint / "commits" / "2").write_text("v1")  # an earlier batch: nothing happens
            (output / "_spark_metadata" / "2").write_text("v1")
            time.sleep(0.3)
            assert os.getpriority(os.PRIO_PROCESS, proc.pid) == 0 and watcher.slowed is None
            (output / "_spark_metadata" / "3").write_text("v1")  # batch 3's sink: the step before commit@3
            deadline = time.monotonic() + 10
            while watcher.slowed is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert watcher.slowed == "output/_spark_metadata/3" and watcher.killed is None
            if os.geteuid() == 0:  # the watcher's thread at a higher priority where it may be raised (root here)
                assert os.getpriority(os.PRIO_PROCESS, watcher._thread.native_id) == WATCHER_NICE
            assert os.getpriority(os.PRIO_PROCESS, proc.pid) == 19
            (checkpoint / "commits" / "3").write_text("v1")
            assert proc.wait(timeout=10) == -9
        assert watcher.killed["after"] == "checkpoint/commits/3"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()


def _live_members(pgid: int) -> list[int]:
    import psutil

    deadline = time.monotonic() + 5
    while True:
        live = []
        for p in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    live.append(p.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)


def test_restart_liveness_reports_sparks_error_and_skips_runs_the_schedule_killed_again():
    from eos_harness.suites.spark.checks import check_restarts

    runs = [{"run": 0, "killed": True, "exit": -9, "first_commit_s": 20.0},
            {"run": 1, "killed": True, "exit": -9, "seconds": 6.0},  # killed again before its first commit
            {"run": 2, "exit": 1, "error": "StateStoreCommitValidationFailed: …"},
            {"run": 3, "exit": 0, "first_commit_s": 200.0}]
    found = check_restarts(runs, bound_s=120)
    assert [(v.key, str(v.observed)[:30]) for v in found] == [
        ("run 2", "StateStoreCommitValidationFail"), ("run 3", "first batch after 200.0 s")]


def test_processes_of_finds_what_a_run_left_behind(tmp_path):
    from eos_harness.spark.process import RUN_ENV, processes_of

    env = {**os.environ, RUN_ENV: str(tmp_path / "run-0")}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env, start_new_session=True)
    try:
        time.sleep(0.3)
        assert proc.pid in processes_of(tmp_path)
        assert proc.pid not in processes_of(tmp_path / "elsewhere")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert proc.pid not in processes_of(tmp_path)


def test_a_query_that_cannot_start_is_reported_with_sparks_error():
    from eos_harness.spark.pipelines import unsupported
    from eos_harness.suites.spark.checks import check_restarts

    found = check_restarts([{"run": 0, "exit": 1, "error": "[STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED] …"}], 120)
    assert [(v.check, v.key) for v in found] == [("restart_liveness", "run 0")]
    assert "STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED" in unsupported("count", "foreach", "hdfs", 2)
    assert unsupported("count", "foreach", "rocksdb", 2) is None


def test_a_state_configuration_spark_refuses_for_a_query_is_named_with_sparks_words():
    """What a user's transformWithStateInPandas query's crash-free run on the HDFS provider ended with (chaos of a
    sessionizer, PySpark 4.2.0): the configuration is not the query's (``not_applicable``), unlike a query that
    fails or Spark's own restart failure."""
    from eos_harness.spark.pipelines import refused_configuration

    seen = ("org.apache.spark.sql.execution.streaming.state.StateStoreBackendNotSupportedForTWSException: "
            "[UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS] The feature is not supported: Store backend "
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider is not supported by "
            "TransformWithState operator. Please use RocksDBStateStoreProvider. SQLSTATE: 0A000\n"
            "StreamingQueryException: [STREAM_FAILED] Query [id = abbda0b5] terminated with exception: …")
    assert refused_configuration(seen) == (
        "[UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS] The feature is not supported: Store backend "
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider is not supported by "
        "TransformWithState operator. Please use RocksDBStateStoreProvider.")
    assert refused_configuration("java.lang.AssertionError: assertion failed: CheckpointInfo length: 0") is None
    assert refused_configuration("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column named `ts` cannot be resolved") is None


def test_a_watermark_that_lags_after_a_restart_is_reported_and_judged_with_what_spark_recorded():
    """Seen in the full matrix (window-tumbling, file sink, killed after _spark_metadata/1): the
    restart skips batch 1 without computing it, so offsets/2 keeps batch 1's watermark, batch 3
    judges lateness by it, and its late record (k4, 1001) is counted. Spark documents that late data
    may or may not be aggregated: a lag is reported and the model follows the recorded watermarks."""
    from eos_harness.models.spark import generate_batches, model_for
    from eos_harness.suites.spark.checks import check_watermarks

    batches = [list(b) for b in generate_batches(518913276, batches=5, keys=6)]
    uninterrupted = model_for("window-tumbling", batches)
    recorded = {0: 0, 1: 1_001_000, 2: 1_001_000, 3: 1_017_000, 4: 1_026_000, 5: 1_034_000}
    report, violations, model = check_watermarks("window-tumbling", batches, recorded)
    assert violations == [] and report["lagging_batches"] == [2] and report["uninterrupted"][2] == 1_010_000
    assert ("k4", 1000, 1010, 1) in model.all_output(5)  # (k4, 1001) of batch 3, counted
    assert ("k4", 1000, 1010, 1) not in uninterrupted.all_output(5)
    # agreeing watermarks: nothing to report, the uninterrupted model stands
    same = {n: w for n, w in report["uninterrupted"].items()}
    assert check_watermarks("window-tumbling", batches, same)[1:] == ([], None)
    # a watermark ahead of the uninterrupted one could drop on-time records: a violation
    ahead = {**same, 2: 1_020_000}
    _, violations, _ = check_watermarks("window-tumbling", batches, ahead)
    assert [(v.check, v.key) for v in violations] == [("watermark_not_ahead", "batch 2")]
    # the running count has no watermark: nothing to compare
    assert check_watermarks("count", batches, recorded) == ({}, [], None)
