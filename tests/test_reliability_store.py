"""Reliability of calls into a user's store, through the CLI as a user runs it.

Each store in ``tests/fixtures/bad_stores.py`` breaks the store protocol one way. The harness must
answer with a finding that names the check and what the store did (``store_hang`` within the
timeout plus a few seconds, with the store's stack; ``store_raised`` with the store's traceback;
``store_return_type`` saying which type came back), never hang, never print a harness traceback,
and leave no process behind. A crash point the store never declared is used in ``verify`` and
``chaos`` (declared for the run, with a warning saying how to declare it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eos_harness.process.guard import STORE_TIMEOUT_S

from tests.conftest import FIXTURES

TIMEOUT = 3  # --store-timeout of these tests
# What the harness may take beyond the timeout (start, probe, report, clean up) on a loaded
# 2-core machine; below the default --store-timeout (60 s), so a run that ignored the option fails.
SLACK = 30


def verify(cli, store: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict, float]:
    out = tmp_path / "verify.json"
    proc = cli("verify", f"bad_stores:{store}", "--seed", "1", "--store-timeout", str(TIMEOUT),
               "--examples", "3", "--json", str(out))
    assert "Traceback (most recent call last)" not in proc.stderr, proc.stderr
    return proc, json.loads(out.read_text()), cli.seconds


def test_verify_reports_a_hanging_commit_within_the_timeout_with_the_stores_stack(cli, tmp_path):
    proc, result, seconds = verify(cli, "commit_hangs", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert seconds < TIMEOUT + SLACK < STORE_TIMEOUT_S, seconds
    assert result["verdict"] == "fail"
    [hang] = result["violations"]
    assert hang["check"] == "store_hang" and hang["key"] == "commit"
    assert f"after {TIMEOUT} s" in hang["observed"]
    # The stack of the child at that moment: the store's own frame, inside commit.
    assert "bad_stores.py" in hang["detail"] and "in commit" in hang["detail"]
    assert "store_hang" in proc.stdout and "bad_stores.py" in proc.stdout


def test_verify_reports_a_wrong_return_type_by_its_type(cli, tmp_path):
    proc, result, _ = verify(cli, "get_returns_str", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = {v["check"] for v in result["violations"]}
    assert checks == {"store_return_type"}, result["violations"]
    assert result["violations"][0]["observed"] == "get returned str, the protocol requires bytes or None"
    assert "get returned str, the protocol requires bytes or None" in proc.stdout
    assert "expected v2, observed v2" not in proc.stdout


def test_verify_reports_a_raising_put_with_the_stores_traceback(cli, tmp_path):
    proc, result, _ = verify(cli, "put_raises", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [raised] = result["violations"]
    assert raised["check"] == "store_raised" and raised["key"] == "put"
    assert raised["observed"].startswith("put raised ValueError: bad_stores: cannot write")
    # The store's own traceback, down to the line that raised; none of the harness's frames.
    assert "raise_from_deep_inside" in raised["detail"] and "bad_stores.py" in raised["detail"]
    assert "eos_harness" not in raised["detail"] and "harness/process" not in raised["detail"]


def test_verify_reports_a_store_that_cannot_open_its_directory_with_rocksdbs_message(cli, tmp_path):
    proc, result, _ = verify(cli, "garbage_directory", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [raised] = result["violations"]
    assert raised["check"] == "store_raised" and raised["key"] == "init"
    assert "Corruption" in raised["observed"], raised  # RocksDB's own words
    assert "Corruption" in proc.stdout


def test_verify_an_undeclared_crash_point_is_used_with_a_warning_that_says_how_to_declare_it(cli, tmp_path):
    proc, result, _ = verify(cli, "undeclared_point", tmp_path)
    # The point is declared for the run and armed like any other; this store is correct (it crashes
    # before committing anything), so the verdict, judged on its behaviour, is pass.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["verdict"] == "pass" and result["violations"] == []
    [warning] = result["warnings"]
    assert "'user.commit.never_declared'" in warning and "declared for this run" in warning
    assert "declare('user.commit.never_declared'" in warning and "eos_harness.faults.points" in warning
    [point] = [p for p in result["points"] if p["name"] == "user.commit.never_declared"]
    assert point["declared"] is False and point["crashes"] > 0
    assert "warning: " in proc.stdout and "user.commit.never_declared (crashed" in proc.stdout


def test_chaos_with_a_hanging_store_reports_store_hang_within_the_timeout(cli, tmp_path):
    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "bad_stores:commit_hangs", "--scenarios", "3", "--seed", "1",
               "--store-timeout", str(TIMEOUT), "--out", str(out))
    seconds = cli.seconds
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert seconds < TIMEOUT + SLACK < STORE_TIMEOUT_S, seconds
    assert "Traceback (most recent call last)" not in proc.stderr, proc.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    checks = [v["check"] for r in campaign["scenarios"] for v in r["violations"]]
    assert checks == ["store_hang"], campaign["scenarios"]
    assert campaign["summary"]["stores"]["bad_stores:commit_hangs"]["checks"] == {"store_hang": 1}
    assert "store_hang" in proc.stdout


@pytest.mark.parametrize(
    ("store", "check", "operation", "message"),
    [
        ("commit_hangs", "store_hang", "commit", f"commit had not returned after {TIMEOUT} s"),
        ("get_returns_str", "store_return_type", "get", "get returned str, the protocol requires bytes or None"),
        ("put_raises", "store_raised", "put", "put raised ValueError"),
        ("garbage_directory", "store_raised", "init", "Corruption"),
    ],
)
def test_run_reports_the_stores_finding_in_the_lifecycle_verdict(cli, tmp_path, store, check, operation, message):
    out = tmp_path / "run"
    proc = cli("run", "--store", f"bad_stores:{store}", "--seed", "1", "--store-timeout", str(TIMEOUT),
               "--out", str(out), "--json", str(tmp_path / "run.json"))
    seconds = cli.seconds
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert seconds < TIMEOUT + SLACK < STORE_TIMEOUT_S, seconds
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["verdict"] == "fail"
    # The store's finding, once, and not also as the task failing to finish.
    assert [(v["check"], v["key"]) for v in result["violations"]] == [(check, operation)], result["violations"]
    assert message in result["violations"][0]["observed"]
    assert result["violations"][0]["detail"]  # the stack, or the store's traceback
    assert message in proc.stdout


def test_chaos_an_undeclared_crash_point_is_declared_for_the_run_and_the_store_judged_on_its_behaviour(cli, tmp_path):
    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "bad_stores:undeclared_point", "--scenarios", "10", "--seed", "1",
               "--store-timeout", str(TIMEOUT), "--out", str(out), "--no-report")
    campaign = json.loads((out / "chaos.json").read_text())
    # This store is correct (it crashes before committing anything): judged on that, the campaign passes.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["verdict"] for r in campaign["scenarios"]] == ["pass"] * 10, campaign["scenarios"]
    assert "user.commit.never_declared" in campaign["summary"]["points_hit"]
    [warning] = campaign["warnings"]
    assert "declare('user.commit.never_declared'" in warning and "declared for this run" in warning
    assert proc.stdout.count("warning: ") == 1 and "user.commit.never_declared" in proc.stdout


def test_the_pytest_plugin_bounds_the_stores_calls_with_eos_store_timeout():
    env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
    started = time.monotonic()
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "suites/conformance",
                            "--eos-store=bad_stores:commit_hangs", f"--eos-store-timeout={TIMEOUT}", "--eos-examples=2",
                            "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=180, env=env,
                           cwd=Path(__file__).parent.parent)
    assert suite.returncode == 1, suite.stdout + suite.stderr
    assert time.monotonic() - started < 2 * TIMEOUT + 3 * SLACK  # the matrix probe, then the machine's
    assert "store_hang: commit had not returned after 3 s" in suite.stdout, suite.stdout
    assert "2 failed" in suite.stdout, suite.stdout
