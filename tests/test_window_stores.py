"""The window stores against the window suite: every window mutant fails, named by the check of its
mistake (its ``caught_by``); ``eos-harness verify`` picks the window suite from the store's kind. Each
verify is kept small (few examples). Every built-in window store passing the suite (its matrix, its
state machine, its argument validation) is suites/windows' own run under ``make test``."""

from __future__ import annotations

import json

import pytest
from eos_harness.stores.registry import builtin_spec, builtin_specs
from eos_harness.suites.windows.checks import CHECKS
from eos_harness.suites.windows.runner import verify

from tests.conftest import every_check_exercised

WINDOW_STORES = [s.name for s in builtin_specs() if s.kind == "window-store"]
WINDOW_MUTANTS = [s.name for s in builtin_specs() if s.kind == "window-mutant"]
_VERIFIED: dict[str, dict] = {}


def verified_mutant(mutant: str) -> dict:
    """The verdict of verify on a window mutant as test_every_window_mutant_… runs it (seed 11, 3 examples of 15
    steps, not shrunk), run once in this module: a test about that mutant's finding reads the same verdict."""
    if mutant not in _VERIFIED:
        _VERIFIED[mutant] = verify(mutant, seed=11, examples=3, steps=15, shrink=False)
    return _VERIFIED[mutant]


def test_the_window_stores_and_mutants_are_registered_as_windows():
    assert {"memory-window", "memory-window-txn", "rocksdb-window", "rocksdb-window-txn"} <= set(WINDOW_STORES)
    assert len(WINDOW_MUTANTS) == 17
    assert all(builtin_spec(m).expected_to_fail for m in WINDOW_MUTANTS)
    assert not any(builtin_spec(s).expected_to_fail for s in WINDOW_STORES)


@pytest.mark.parametrize("store", WINDOW_STORES)
def test_a_window_store_exercises_every_check_that_applies(store):
    # verify's coverage: every check that applies to the store met its condition in some case (none is
    # passed unexercised), held_iterator in every matrix case; what cannot apply says why.
    result = verify(store, seed=11, examples=3, steps=15, shrink=False)
    coverage = every_check_exercised(result, CHECKS)
    matrix = sum(case.startswith("matrix:") for case in result["cases"])
    assert coverage["exercised"]["held_iterator"] >= matrix
    if store == "rocksdb-window-txn":  # every check applies to it but one: it is retention-only
        assert list(coverage["not_applicable"]) == ["late_write_dropped"]


@pytest.mark.parametrize("mutant", WINDOW_MUTANTS)
def test_every_window_mutant_is_caught_by_the_check_naming_its_mistake(mutant):
    result = verified_mutant(mutant)
    assert result["verdict"] == "fail"
    spec = builtin_spec(mutant)
    checks = {v["check"] for v in result["violations"]}
    # verify --list-checks names it as the mutant its check alone catches
    assert checks == {spec.alone}, f"{mutant}: caught by {checks}, expected {spec.alone} alone"


def test_verify_picks_the_window_suite_from_the_kind(cli, tmp_path):
    out = tmp_path / "verdict.json"
    run = cli.invoke("verify", "mutant-window-grace-off-by-one", "--seed", "3", "--examples", "1", "--no-shrink",
                     "--json", out)
    assert run.returncode == 1, run.stdout + run.stderr
    # The finding is printed whole: what broke, the case, and the command that replays it.
    assert "#1 case:" in run.stdout and "#1 replay: eos-harness verify mutant-window-grace-off-by-one --seed 3" in run.stdout
    verdict = json.loads(out.read_text())
    assert verdict["suite"] == "windows" and verdict["semantics"] == "kip428-proposal"
    assert all(v["replay"] == verdict["repro"] for v in verdict["violations"])
    assert {v["check"] for v in verdict["violations"]} == {"late_write_dropped"}


def test_chaos_runs_windowed_workloads_on_window_stores_through_every_lifecycle_crash_point(cli, tmp_path):
    from eos_harness.models.workloads import WORKLOADS
    from eos_harness.runtime import P_MID_REPLAY
    from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS

    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--scenarios", "17", "--seed", "7", "--stores", "memory-window,rocksdb-window-txn",
               "--json", out, "--out", tmp_path / "c")
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


def test_chaos_runs_a_users_window_store_on_the_windowed_workloads(cli, tmp_path):
    # The store's kind comes from its StoreRef (learned in a child): a user's window store gets the windowed
    # workloads, as a built-in one does, not key-value ones it cannot serve (which ended in task_finishes).
    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--scenarios", "3", "--seed", "7", "--stores", "user_window_store:make", "--json", out,
               "--out", tmp_path / "c")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scenarios = json.loads(out.read_text())["scenarios"]
    assert {s["workload"] for s in scenarios} == {"tumbling-count", "hopping-count"}
    assert all(s["verdict"] == "pass" for s in scenarios), [s["violations"] for s in scenarios]


@pytest.mark.slow
def test_chaos_catches_every_window_mutant_the_runtime_can_reach(cli, tmp_path):
    from eos_harness.stores.window_catalogue import SUITE_ONLY

    reachable = [m for m in WINDOW_MUTANTS if m not in SUITE_ONLY]
    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--scenarios", "40", "--seed", "7", "--stores", ",".join(reachable), "--json", out,
               "--out", tmp_path / "c", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stores = json.loads(out.read_text())["summary"]["stores"]
    assert {name: tally["status"] for name, tally in stores.items()} == {m: "caught" for m in reachable}


def test_a_user_window_store_is_verified_by_the_window_suite_and_what_it_lacks_is_not_checked(cli, tmp_path):
    out = tmp_path / "verdict.json"
    proc = cli("verify", "user_window_store:make", "--seed", "5", "--examples", "2", "--json", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads(out.read_text())
    assert verdict["suite"] == "windows" and verdict["verdict"] == "pass"
    assert verdict["not_checked"] == ["backward_fetch (the store declares it lacks it)"]


def test_a_window_store_that_fails_at_start_leaves_no_directory_behind(tmp_path, monkeypatch):
    import tempfile
    from pathlib import Path

    from eos_harness.process.server import forkserver_context
    from eos_harness.process.window_server import WindowStoreServer
    from eos_harness.suites.windows.runner import run_case

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures"))
    # The zygote started first, in the session's temp dir: started under tmp_path, its socket's path would be
    # too long (the first test of a pytest-xdist worker to start a child, as under `make check`).
    forkserver_context()._get()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with WindowStoreServer() as server, pytest.raises(Exception) as raised:
        run_case(server, "user_window_store:unreadable_config", "in-order", None)
    assert "window_config is broken" in str(raised.value), raised.value
    assert not list(tmp_path.glob("eos-windows-*"))


# -- findings named for what broke ---------------------------------------------------------------------------

def test_a_store_that_loses_its_stream_time_on_reopen_is_named_stream_time_rebuilt(monkeypatch):
    # A transactional RocksDB window store that never reads its stream time back: after a reopen (or a
    # crash and recover) expired windows come back. It was reported as expired_never_fetched after a
    # reopen and as atomic_commit after a crash inside a commit.
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures"))
    result = verify("broken_window_stores:stream_time_lost_on_reopen", seed=11, examples=3, steps=15, shrink=False)
    assert result["verdict"] == "fail"
    assert {v["check"] for v in result["violations"]} == {"stream_time_rebuilt"}, result["violations"]
    reopened = next(v for v in result["violations"] if v["key"].startswith("all() after a clean close"))
    window = reopened["key"].rpartition(": ")[2]  # e.g. a@95
    key, _, start = window.partition("@")
    assert [key, int(start)] in [row[:2] for row in reopened["observed"]]  # the window it quotes is one it returned
    assert reopened["detail"].startswith(f"all() after a clean close returned {window}=")
    assert "the store's stream time was not rebuilt" in reopened["detail"]
    crashed = [v for v in result["violations"] if v["key"].startswith("all() after a crash and recover")]
    assert crashed, result["violations"]


def test_a_check_that_fired_in_the_matrix_alone_is_never_reported_not_exercised(monkeypatch):
    # The matrix's clean close and reopen finds the lost stream time before any read met the check's
    # condition: the verdict failed on stream_time_rebuilt while its coverage said "not exercised".
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures"))
    result = verify("broken_window_stores:stream_time_lost_on_reopen", seed=11, examples=1, steps=1, shrink=False)
    assert {v["check"] for v in result["violations"]} == {"stream_time_rebuilt"}, result["violations"]
    assert "stream_time_rebuilt" not in result["coverage"]["not_exercised"]
    assert result["coverage"]["exercised"]["stream_time_rebuilt"] >= 1


def test_a_committed_tombstone_that_deletes_another_window_is_named_tombstone_deletes_window():
    from eos_harness.models.windows import RETENTION_ONLY, WindowConfig, WindowStoreModel
    from eos_harness.suites.windows.checks import compare_records

    result = verified_mutant("mutant-window-tombstone-wrong-window")  # (caught by its check: the test above)
    finding = result["violations"][0]
    assert finding["check"] == "tombstone_deletes_window"
    assert finding["key"].endswith("b@100") and ["b", 100, "v1"] in finding["observed"]
    assert "returned b@100=v1, a window its last write deleted" in finding["detail"]
    # Seen through read_committed() right after the commit (the finding was read_committed_isolation).
    model = WindowStoreModel(WindowConfig("w", 60, 10, 20, RETENTION_ONLY), transactional=True, persistent=True,
                             manages_offsets=True)
    model.put(b"b", b"v1", 100)
    model.commit({"tp": 1})
    model.put(b"b", None, 100)
    model.commit({"tp": 2})
    found = compare_records(model, "read_committed().all()", [], [(b"b", 100, b"v1")], committed=True,
                            default="read_committed_isolation")
    assert found.check == "tombstone_deletes_window", found
    assert found.detail.startswith("read_committed().all() returned b@100=v1")


def test_verify_allow_waives_a_read_difference_of_a_window_store_and_its_crashes_are_still_judged(cli, tmp_path):
    # The mutant lists all() by key within the store (as Kafka's persistent window store does within a segment):
    # with fetch_order waived, every case goes on to its crash, recovery, close and reopen.
    result = verify("mutant-window-lists-by-key", seed=11, examples=2, steps=10, shrink=False, allow=["fetch_order"])
    assert result["verdict"] == "pass", result["violations"]
    assert result["allowed"] == ["fetch_order"] and result["waived"]["fetch_order"] > 0
    assert result["coverage"]["exercised"]["no_uncommitted_survives"] > 0
    assert "--allow fetch_order" in result["repro"]
    wrong = cli.invoke("verify", "memory-window", "--allow", "atomic_commit", "--examples", "1")
    assert wrong.returncode == 2 and "for a window store" in wrong.stderr, wrong.stderr
    wrong = cli.invoke("verify", "rocksdb-indexed", "--allow", "fetch_order", "--examples", "1")
    assert wrong.returncode == 2 and "for a key-value store" in wrong.stderr, wrong.stderr
