"""The window stores against the window suite: every built-in window store passes ``verify``; every
window mutant fails, named by the check of its mistake (its ``caught_by``); ``eos-harness verify``
picks the window suite from the store's kind. Each verify is kept small (few examples)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from eos_harness.faces.cli import main
from eos_harness.stores import builtin_spec, builtin_specs
from eos_harness.suites.windows.runner import verify

WINDOW_STORES = [s.name for s in builtin_specs() if s.kind == "window-store"]
WINDOW_MUTANTS = [s.name for s in builtin_specs() if s.kind == "window-mutant"]


def test_the_window_stores_and_mutants_are_registered_as_windows():
    assert {"memory-window", "memory-window-txn", "rocksdb-window", "rocksdb-window-txn"} <= set(WINDOW_STORES)
    assert len(WINDOW_MUTANTS) == 5
    assert all(builtin_spec(m).expected_to_fail for m in WINDOW_MUTANTS)
    assert not any(builtin_spec(s).expected_to_fail for s in WINDOW_STORES)


@pytest.mark.parametrize("store", WINDOW_STORES)
def test_every_window_store_passes(store):
    result = verify(store, seed=11, examples=3, steps=15, shrink=False)
    assert result["verdict"] == "pass", result["violations"]
    assert result["suite"] == "windows"
    assert any(case.startswith("matrix: edges") for case in result["cases"])


@pytest.mark.parametrize("mutant", WINDOW_MUTANTS)
def test_every_window_mutant_is_caught_by_the_check_naming_its_mistake(mutant):
    result = verify(mutant, seed=11, examples=3, steps=15, shrink=False)
    assert result["verdict"] == "fail"
    caught_by = builtin_spec(mutant).caught_by
    checks = {v["check"] for v in result["violations"]}
    assert checks <= set(caught_by), f"{mutant}: caught by {checks}, expected only {caught_by}"


def test_verify_picks_the_window_suite_from_the_kind(tmp_path):
    out = tmp_path / "verdict.json"
    run = CliRunner().invoke(main, ["verify", "mutant-window-grace-off-by-one", "--seed", "3", "--examples", "1",
                                    "--no-shrink", "--json", str(out)])
    assert run.exit_code == 1 and run.exception is None or isinstance(run.exception, SystemExit), run.output
    # The finding is printed whole: what broke, the case, and the command that replays it.
    assert "#1 case:" in run.output and "#1 replay: eos-harness verify mutant-window-grace-off-by-one --seed 3" in run.output
    verdict = json.loads(out.read_text())
    assert verdict["suite"] == "windows" and verdict["semantics"] == "kip428-proposal"
    assert all(v["replay"] == verdict["repro"] for v in verdict["violations"])
    assert {v["check"] for v in verdict["violations"]} == {"late_write_dropped"}


def test_chaos_runs_windowed_workloads_on_window_stores_through_every_lifecycle_crash_point(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from eos_harness.models.workloads import WORKLOADS
    from eos_harness.runtime import P_MID_REPLAY
    from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS

    out = tmp_path / "chaos.json"
    eos = str(Path(sys.executable).with_name("eos-harness"))
    proc = subprocess.run([eos, "chaos", "--scenarios", "17", "--seed", "7", "--stores", "memory-window,rocksdb-window-txn",
                           "--json", str(out), "--out", str(tmp_path / "c")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    campaign = json.loads(out.read_text())
    scenarios = campaign["scenarios"]
    assert {s["workload"] for s in scenarios} == {name for name, w in WORKLOADS.items() if w.windowed}
    assert all(s["verdict"] == "pass" and s["violations"] == [] for s in scenarios)
    for store in ("memory-window", "rocksdb-window-txn"):
        hit = {p for s in scenarios if s["store"] == store for p in s["crash_points"]}
        assert set(LIFECYCLE_POINTS) | {P_MID_REPLAY} <= hit, (store, hit)
    assert {"window.rocksdb.commit.before_write", "window.rocksdb.commit.after_write"} <= {
        p for s in scenarios for p in s["crash_points"]}


@pytest.mark.slow
def test_chaos_catches_every_window_mutant_the_runtime_can_reach(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from eos_harness.stores.window_catalogue import SUITE_ONLY

    reachable = [m for m in WINDOW_MUTANTS if m not in SUITE_ONLY]
    out = tmp_path / "chaos.json"
    eos = str(Path(sys.executable).with_name("eos-harness"))
    proc = subprocess.run([eos, "chaos", "--scenarios", "40", "--seed", "7", "--stores", ",".join(reachable),
                           "--json", str(out), "--out", str(tmp_path / "c")], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stores = json.loads(out.read_text())["summary"]["stores"]
    assert {name: tally["status"] for name, tally in stores.items()} == {m: "caught" for m in reachable}


def test_a_user_window_store_is_verified_by_the_window_suite_and_what_it_lacks_is_not_checked(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fixtures), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "verdict.json"
    proc = subprocess.run([str(Path(sys.executable).with_name("eos-harness")), "verify", "user_window_store:make",
                           "--seed", "5", "--examples", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads(out.read_text())
    assert verdict["suite"] == "windows" and verdict["verdict"] == "pass"
    assert verdict["not_checked"] == ["backward_fetch (the store declares it lacks it)"]


def test_a_window_store_that_fails_at_start_leaves_no_directory_behind(tmp_path, monkeypatch):
    import tempfile
    from pathlib import Path

    from eos_harness.process.window_server import WindowStoreServer
    from eos_harness.suites.windows.runner import run_case

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with WindowStoreServer() as server, pytest.raises(Exception) as raised:
        run_case(server, "user_window_store:unreadable_config", "in-order", None)
    assert "window_config is broken" in str(raised.value), raised.value
    assert not list(tmp_path.glob("eos-windows-*"))
