"""What a store implementer sees of ``verify``, ``run`` and ``chaos``, through the CLI: a user's store
module is imported once per run (not once per child), its output goes to the log file and not to the
terminal, and a crash point of its own that it never declared is used, with a warning, and judged on
its behaviour."""

from __future__ import annotations

import json
from pathlib import Path

DIES_AT_OPEN = "dies_at_open_store: cannot lock the state directory"  # the fixture's line, then its directory
NOISE = "slow_noisy_store: heavy dependency loaded"  # what the fixture's module warns and prints on import


def _verify(cli, tmp_path: Path, store: str, seed: int, examples: int, exit_code: int) -> tuple:
    """``eos-harness verify STORE`` (not shrunk) through the CLI, which must exit ``exit_code``: the
    finished process and the JSON verdict (``verdict.json``, its log beside it)."""
    out = tmp_path / "verdict.json"
    proc = cli("verify", store, "--seed", seed, "--examples", examples, "--no-shrink", "--json", str(out))
    assert proc.returncode == exit_code, proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_verify_imports_a_user_store_module_once_and_keeps_its_output_off_the_terminal(cli, tmp_path, monkeypatch):
    imports = tmp_path / "imports.txt"
    monkeypatch.setenv("EOS_TEST_IMPORT_LOG", str(imports))
    proc, result = _verify(cli, tmp_path, "slow_noisy_store:make_store", seed=3, examples=4, exit_code=0)
    assert result["verdict"] == "pass"
    # Every case restarted the store in a new child, many times over; the module was imported by the
    # probe's child (to learn what the store is) and once more, by the zygote all children are forked
    # from; never by the command's own process (tests/test_user_code_isolation).
    crashes = sum(p["crashes"] for p in result["points"])
    assert crashes >= 5, result["points"]  # and each crash restarted the store in a new child
    importers = [line.split()[-1] for line in imports.read_text().splitlines()]
    assert len(importers) == 2 and len(set(importers)) == 2, importers
    # Quiet: the terminal shows the verdict, none of the store's warnings; the log file has them.
    assert NOISE not in proc.stdout + proc.stderr
    assert "verdict: pass" in proc.stdout
    assert result["log"] == str(tmp_path / "verdict.log")
    assert NOISE in (tmp_path / "verdict.log").read_text()
    assert "UserWarning" in (tmp_path / "verdict.log").read_text()
    assert f"the store's output: {result['log']}" in proc.stdout.replace("\n", "")


def test_an_undeclared_crash_point_where_offsets_are_written_before_data_is_caught_by_atomic_commit(cli, tmp_path):
    proc, result = _verify(cli, tmp_path, "offsets_first_store:make_store", seed=1, examples=3, exit_code=1)
    assert result["verdict"] == "fail"
    # The conformance suite's atomic_commit, and the offsets suite's name for the same mistake (a crash at
    # the undeclared point inside a commit of three partitions), each once.
    checks = [v["check"] for v in result["violations"]]
    assert sorted(checks) == ["atomic_commit", "offsets_match_data"], result["violations"]
    assert all("user.commit.between_files" in v["case"] for v in result["violations"])
    [warning] = result["warnings"]
    assert "'user.commit.between_files'" in warning and "declare(" in warning
    assert result["points"] == [{"name": "user.commit.between_files", "declared": False,
                                 "crashes": result["points"][0]["crashes"]}]
    assert result["points"][0]["crashes"] >= 3
    assert "user.commit.between_files" in proc.stdout and "warning:" in proc.stdout


def test_points_lists_a_user_stores_own_points_with_their_meanings_and_the_undeclared_ones(cli):
    proc = cli("points", "--store", "user_store:make_store")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "user.commit.before_rename" in proc.stdout and "not yet renamed into place" in proc.stdout
    assert "task.commit.after_eos" not in proc.stdout  # only the store's own
    proc = cli("points", "--store", "offsets_first_store:make_store", "--json")
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["user.commit.between_files"]["declared"] is False and rows["user.commit.between_files"]["reached"]


def test_chaos_catches_offsets_written_before_data_at_an_undeclared_point_and_run_replays_it(cli, tmp_path):
    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "offsets_first_store:make_store", "--scenarios", "14", "--seed", "1",
                  "--out", str(out), "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    assert "user.commit.between_files" in campaign["summary"]["points_hit"]
    assert campaign["summary"]["unexpected"] == ["offsets_first_store:make_store"]
    [caught] = [r for r in campaign["scenarios"] if r["verdict"] == "fail"]
    assert "user.commit.between_files" in caught["crash_points"]  # the early block pairs a fault window with it
    assert "atomic_commit" in {v["check"] for v in caught["violations"]}
    assert all(r["verdict"] == "pass" for r in campaign["scenarios"] if r is not caught)  # no error: the point is used
    [warning] = campaign["warnings"]
    assert "'user.commit.between_files'" in warning and "declare(" in warning and "eos_harness.faults.points" in warning
    assert proc.stdout.count("warning: ") == 1
    # The replay command names the undeclared point: run declares it for the run as well, and fails the same way.
    replay = caught["repro"].split()[1:]
    proc = cli(*replay, "--out", str(tmp_path / "run"), "--json", str(tmp_path / "run.json"), "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "run.json").read_text())
    assert "atomic_commit" in {v["check"] for v in result["violations"]}
    assert proc.stdout.count("warning: ") == 1 and "'user.commit.between_files'" in proc.stdout


def test_run_and_chaos_keep_a_noisy_stores_output_off_the_terminal_in_the_run_directorys_log(cli, tmp_path):
    proc = cli("run", "--store", "slow_noisy_store:make_store", "--seed", "1", "--crash-at",
                  "task.commit.after_eos", "--out", str(tmp_path / "run"), "--json", str(tmp_path / "run.json"),
                  "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["verdict"] == "pass" and result["crash_points"] == ["task.commit.after_eos"]
    assert result["log"] == str(tmp_path / "run" / "children.log")
    assert NOISE not in proc.stdout + proc.stderr
    log = (tmp_path / "run" / "children.log").read_text()
    assert NOISE in log and "UserWarning" in log
    assert result["log"] in proc.stdout.replace("\n", "")

    proc = cli("chaos", "--stores", "slow_noisy_store:make_store", "--seed", "1", "--scenarios", "4",
                  "--out", str(tmp_path / "chaos"), "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    campaign = json.loads((tmp_path / "chaos" / "chaos.json").read_text())
    assert campaign["summary"]["stores"]["slow_noisy_store:make_store"]["status"] == "ok"
    assert campaign["log"] == str(tmp_path / "chaos" / "children.log")
    assert NOISE not in proc.stdout + proc.stderr
    # The driver's own import (when it checks --stores), the zygote's and the probe's: all in the log.
    assert NOISE in (tmp_path / "chaos" / "children.log").read_text()


def test_a_task_that_dies_at_open_carries_the_first_lines_it_wrote_in_its_finding(cli, tmp_path):
    """``run``: the ``task_finishes`` finding's detail (JSON and terminal) has the line the store wrote to
    stderr before its process died; the run's children.log has it too."""
    proc = cli("run", "--store", "dies_at_open_store:make_store", "--seed", "1", "--out", str(tmp_path / "run"),
                  "--json", str(tmp_path / "run.json"), "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "run.json").read_text())
    [finding] = result["violations"]
    assert finding["check"] == "task_finishes", finding
    state = tmp_path / "run" / "state"
    assert f"{DIES_AT_OPEN}: {state}" in finding["detail"], finding
    assert f"{DIES_AT_OPEN}: {state}" in proc.stdout.replace("\n", "")  # beside the finding, not only in the log
    assert "task_finishes: it never did" in proc.stdout
    assert f"{DIES_AT_OPEN}: {state}" in (tmp_path / "run" / "children.log").read_text()
    assert DIES_AT_OPEN not in proc.stderr


def test_chaos_attaches_to_each_finding_the_lines_its_own_task_wrote_not_another_scenarios(cli, tmp_path):
    """``chaos`` runs two scenarios at a time, their children writing to one log file: each scenario's
    ``task_finishes`` detail has only what its own task's process wrote (the line naming its own state
    directory), and children.log has every scenario's lines."""
    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "dies_at_open_store:make_store", "--seed", "1", "--scenarios", "8",
                  "--workers", "2", "--out", str(out), "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    failed = [r for r in campaign["scenarios"] if r["verdict"] == "fail"]
    assert len(failed) == 8, [r["verdict"] for r in campaign["scenarios"]]
    log = (out / "children.log").read_text()
    for result in failed:
        [finding] = result["violations"]
        assert finding["check"] == "task_finishes", finding
        lines = [line for line in finding["detail"].splitlines() if line.startswith(DIES_AT_OPEN)]
        own = Path(result["history"]).parent / "state"
        assert len(lines) == 1 and lines[0].startswith(f"{DIES_AT_OPEN}: {own}/"), (own, finding["detail"])
        assert lines[0] in log
    # The terminal shows the replayed scenario's finding with its lines (and nothing of the others').
    replayed = next(r for r in failed if f"replay: {r['repro']}" in proc.stdout)
    shown = proc.stdout.split("could not be run")[0]  # the probe's error, below, quotes its own child
    [line] = [line for line in shown.splitlines() if DIES_AT_OPEN in line]
    assert line.startswith(f"{DIES_AT_OPEN}: {Path(replayed['history']).parent / 'state'}/"), proc.stdout
    assert DIES_AT_OPEN not in proc.stderr


def test_the_pytest_suites_write_nothing_in_the_directory_they_are_run_from(tmp_path):
    """A store implementer runs our suites from their project: nothing of ours may land there (Hypothesis
    caches the constants of every loaded module in ./.hypothesis unless the suites keep it from drawing
    them, which also keeps their steps those of `verify --seed`)."""
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
                           "eos_harness.suites.conformance", "eos_harness.suites.windows", "--eos-store=memory",
                           "--eos-examples", "3", "-k", "state_machine"],
                          capture_output=True, text=True, timeout=600, cwd=project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout
    assert sorted(p.name for p in project.iterdir()) == [], "the suites wrote into the user's directory"
