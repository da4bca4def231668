"""Replays that replay: the line a suite prints for a failure, run as it is printed, fails again with
the same verdict and the same checks (the conformance and window pytest entries print a ``verify``
line that carries their steps per example; a campaign's scenario carries the ``run`` line of its own,
as the lifecycle's in tests/test_store_implementers.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path


def _replayed(cli, line: str, tmp_path: Path) -> dict:
    """Run a printed replay line (``eos-harness …``) with ``--json``; its verdict JSON."""
    args = shlex.split(line)
    assert args[0] == "eos-harness", line
    out = tmp_path / "replayed.json"
    extra = ["--no-report", "--out", str(tmp_path / "replayed")] if args[1] == "run" else []
    proc = cli(*args[1:], "--json", str(out), *extra, timeout=900, cwd=tmp_path)
    assert proc.returncode == 1, f"{line}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(out.read_text())


def test_the_conformance_pytest_entrys_printed_replay_fails_the_same_way(cli, tmp_path):
    # Its state machine catches it at once (a get after a reopen raises), shrunk in a few store lives: the
    # pytest entry and the replay each cost about a second of CPU, where a mistake the machine must shrink
    # through crashes and restarts costs tens (each mutant's own check: tests/test_verify.py).
    store = "mutant-get-indexes-database"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
                           "eos_harness.suites.conformance", f"--eos-store={store}", "--eos-seed", "1",
                           "--eos-examples", "5", "-k", "state_machine", "-s", "-q"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [line] = re.findall(r"replay: (eos-harness verify .*)", proc.stdout)
    assert "--steps " in line and "--examples 5" in line and "--seed 1" in line
    fired = set(re.findall(r"ConformanceViolation: (\w+): key", proc.stdout))
    assert fired, proc.stdout
    result = _replayed(cli, line, tmp_path)
    assert result["verdict"] == "fail"
    assert fired <= {v["check"] for v in result["violations"]}


def test_a_metadata_campaigns_replay_of_a_caught_mutant_fails_the_same_way(cli, tmp_path):
    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--suite", "metadata", "--systems", "controller-skips-abort", "--scenarios", "2",
               "--seed", "1", "--workers", "1", "--json", str(out), "--out", str(tmp_path / "c"), "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the mutant was caught: expected
    campaign = json.loads(out.read_text())
    assert campaign["suite"] == "metadata" and isinstance(campaign["summary"]["errors"], list)
    failed = next(r for r in campaign["scenarios"] if r["verdict"] == "fail")
    result = _replayed(cli, failed["repro"], tmp_path)
    assert (result["verdict"], {v["check"] for v in result["violations"]}) == (
        "fail", {v["check"] for v in failed["violations"]})
