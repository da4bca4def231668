"""``make bench`` (``python -m benchmarks``) stopped by SIGTERM or Ctrl-C leaves nothing in the temp directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_bench_stopped_by_sigterm_removes_what_it_wrote_in_the_temp_directory(tmp_path):
    # bench_check_frames first writes a synthetic history of 10 M events (272 MB of Parquet) under the temp directory
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks", "bench_check_frames"], cwd=ROOT,
                            env={**os.environ, "TMPDIR": str(temp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(temp.rglob("*.parquet")) and proc.poll() is None:
            time.sleep(0.2)
        assert any(temp.rglob("*.parquet")), "the benchmark wrote nothing to interrupt"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        # what the benchmark started (its pool of Parquet writers) is stopped with it, none left in its group
        time.sleep(0.5)
        left = _alive(proc.pid)
    finally:
        if _alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 143, (proc.returncode, out, err)
    assert "interrupted (SIGTERM)" in err
    assert not left, "processes of the benchmark outlived it"
    assert list(temp.iterdir()) == []  # its Parquet and the session's root, gone


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_benchmarks_chaos_rate_runs_a_campaign_into_a_folder_it_makes(tmp_path):
    # bench_lifecycle and bench_kafka time a lifecycle campaign through run_suite_campaign, which holds its run
    # directory: make bench stopped at bench_kafka with "chaos-kafka: cannot be used: No such file or directory"
    from benchmarks.bench_lifecycle import scenarios_per_second

    total, elapsed = scenarios_per_second(0.5, tmp_path / "chaos")
    assert total >= 1 and elapsed > 0
    assert (tmp_path / "chaos" / "results.jsonl").read_text().count("\n") == total  # each scenario kept
