"""What a store implementer gets from ``eos-harness verify`` and ``run``: capabilities a store declares
it lacks are not checked (and the verdict says so), every distinct finding is reported (shrunk, with
a replay that reproduces it), ``--allow`` waives a known one, each violation says what happened just
before, and a store's own ``restore`` is used and checked against the offset convention.

The stores are in ``tests/fixtures/implementer_stores.py`` (users' stores, outside the package).
"""

from __future__ import annotations

import itertools
import json
import re

import pytest
from eos_harness.process.server import StoreServer
from eos_harness.store import Capabilities
from eos_harness.suites.conformance import checks
from eos_harness.suites.conformance.driver import StoreUnderTest
from eos_harness.suites.conformance.runner import not_checked, verify
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES

SMALL = {"examples": 10, "steps": 12}  # enough for these stores' bugs, small enough for a shared machine
# Every fixture store is a new store (user_store.JsonFileStore): no legacy offsets files, no older format.
NEW_STORE = not_checked(Capabilities(legacy_offsets_import=False, legacy_downgrade=False))


@pytest.fixture(autouse=True)
def fixture_stores_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))  # the store children get the driver's sys.path


def machine_findings(result: dict) -> dict[str, dict]:
    return {v["check"]: v for v in result["violations"] if v["case"].startswith("hypothesis (shrunk)")}


def shrunk_steps(violation: dict) -> list[str]:
    return [line for line in violation["case"].splitlines() if line.startswith("state.") and "teardown" not in line]


# -- capabilities ----------------------------------------------------------------------------------------

def test_a_store_declaring_no_range_scans_passes_and_the_verdict_says_range_is_not_checked(cli, tmp_path):
    # Its range() and all() raise: had the suite called them, the verdict would be store_raised.
    out = tmp_path / "v.json"
    proc = cli("verify", "implementer_stores:no_range", "--seed", "3", "--examples", "10", "--steps", "12",
               "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not checked: range (the store declares no range scans)" in proc.stdout
    assert "verdict: pass" in proc.stdout
    result = json.loads(out.read_text())
    assert result["verdict"] == "pass"
    assert result["not_checked"][0].startswith("range (the store declares no range scans):")
    assert result["not_checked"][1:] == NEW_STORE


def test_a_store_that_offers_range_scans_and_gets_them_wrong_is_still_caught():
    # Which checks catch it, not the shrinking (shrunk findings: test_two_independent_bugs_…, test_an_empty_commit_…).
    result = verify("implementer_stores:range_ignores_tombstones", seed=3, shrink=False, **SMALL)
    assert result["verdict"] == "fail"
    assert {v["check"] for v in result["violations"]} == {"read_your_own_writes"}, result["violations"]
    assert result["not_checked"] == NEW_STORE
    # The same mistake in a built-in mutant (which declares nothing, so offers range scans) is caught by
    # read_your_own_writes alone: tests/test_verify.py::test_every_mutant_is_caught_…[mutant-range-ignores-tombstones].


def test_a_store_without_put_all_passes_verify_and_the_lifecycle_writes_through_put(cli, tmp_path):
    # Its put_all raises: any call to it would be a store_raised finding.
    result = verify("implementer_stores:no_put_all", seed=4, **SMALL)
    assert result["verdict"] == "pass", result["violations"]
    assert result["not_checked"][0].startswith("put_all (the store declares no put_all)")
    run = cli("run", "--store", "implementer_stores:no_put_all", "--crash-at", "task.commit.after_eos@2",
              "--seed", "1", "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verdict: pass" in run.stdout


def test_an_empty_commit_that_records_no_offset_is_explained_and_passes_once_declared():
    undeclared = verify("implementer_stores:empty_commit_writes_nothing", seed=5, **SMALL)
    assert undeclared["verdict"] == "fail"
    finding = machine_findings(undeclared)["committed_offset_durable"]
    # In a store implementer's words, beside the shrunk steps: which commit, what it had, what came back.
    assert re.search(r"commit #1 had no writes; committed_offset returned None, expected 1", finding["detail"])
    assert "Capabilities(empty_commit_records_offset=False)" in finding["detail"]
    assert "just before" in finding["detail"] and "commit #1 with offset 1 (no writes" in finding["detail"]
    assert shrunk_steps(finding) == ["state.commit()"], finding["case"]

    declared = verify("implementer_stores:declares_empty_commit_writes_nothing", seed=5, **SMALL)
    assert declared["verdict"] == "pass", declared["violations"]
    assert declared["not_checked"] == ["the offset of an empty commit (the store declares its empty commit "
                                       "records no offset)", *NEW_STORE]


# -- all findings, --allow -------------------------------------------------------------------------------

def test_two_independent_bugs_are_both_reported_each_shrunk_with_a_replay_that_reproduces_it():
    # Seed 4: the state machine finds the delete bug from 5 examples on (15 leaves a margin); the matrix
    # finds it for every seed. The steps depend on the seed alone (harness/seeding.py), not on what is imported.
    result = verify("implementer_stores:two_bugs", seed=4, examples=15, steps=12)
    assert result["verdict"] == "fail"
    # The same seed reports the same cases and the same findings, each shrunk to the same minimal steps.
    again = verify("implementer_stores:two_bugs", seed=4, examples=15, steps=12)
    assert again["cases"] == result["cases"]
    assert again["violations"] == result["violations"]
    found = machine_findings(result)
    assert set(found) == {"committed_offset_durable", "read_your_own_writes"}, result["violations"]
    assert len(result["violations"]) == 2  # each distinct check once (the offsets suite: nothing it lacks fails)
    for finding in found.values():
        assert len(shrunk_steps(finding)) <= 2, finding["case"]
        assert finding["replay"].startswith("eos-harness verify implementer_stores:two_bugs --seed 4")
    assert shrunk_steps(found["committed_offset_durable"]) == ["state.commit()"]
    write, delete = shrunk_steps(found["read_your_own_writes"])  # a write, then the delete that misreports it
    assert write.startswith("state.put") and delete.startswith("state.delete("), found["read_your_own_writes"]["case"]
    # The replay of the finding reported second waives the first: replayed, it is found first, the same.
    second = next(v for v in result["violations"] if "--allow" in v["replay"])
    allowed = re.findall(r"--allow (\S+)", second["replay"])
    assert allowed == [c for c in found if c != second["check"]]
    replayed = verify("implementer_stores:two_bugs", seed=4, allow=allowed, max_findings=1, examples=15, steps=12)
    assert [(v["check"], v["case"], v["detail"]) for v in replayed["violations"]] == [
        (second["check"], second["case"], second["detail"])]


def test_the_same_seed_generates_the_same_steps_from_the_command_line_and_in_a_test(cli, tmp_path):
    # Hypothesis draws some values from the literals of the modules loaded in the process: the CLI and a
    # test load different ones. With seed 2 the command line once found the delete bug the test missed.
    out = tmp_path / "v.json"
    args = ("--seed", "2", "--examples", "15", "--steps", "12", "--no-shrink")
    cli("verify", "implementer_stores:two_bugs", *args, "--json", str(out))
    here = verify("implementer_stores:two_bugs", seed=2, examples=15, steps=12, shrink=False)
    there = json.loads(out.read_text())
    assert [(v["check"], v["case"]) for v in there["violations"]] == [(v["check"], v["case"]) for v in here["violations"]]


def test_allow_waives_one_bug_the_other_is_still_reported_and_the_verdict_names_what_was_waived(cli, tmp_path):
    out = tmp_path / "v.json"
    proc = cli("verify", "implementer_stores:two_bugs", "--seed", "1", "--examples", "10", "--steps", "12",
               "--allow", "committed_offset_durable", "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert [v["check"] for v in result["violations"]] == ["read_your_own_writes"]
    assert result["allowed"] == ["committed_offset_durable"] and result["waived"]["committed_offset_durable"] > 0
    assert re.search(r"waived: committed_offset_durable \(--allow; fired \d+ times?\)", proc.stdout)
    assert "delete('e') returned nothing" in proc.stdout or "delete(" in result["violations"][0]["detail"]
    assert "#1 replay: eos-harness verify implementer_stores:two_bugs --seed 1" in proc.stdout
    assert result["repro"].endswith("--allow committed_offset_durable")


def test_allow_of_a_check_that_does_not_exist_is_a_usage_error(cli):
    proc = cli("verify", "implementer_stores:two_bugs", "--allow", "atomic_comit", timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "atomic_comit" in proc.stderr and "atomic_commit" in proc.stderr


# -- restore ---------------------------------------------------------------------------------------------

def test_a_store_with_its_own_restore_passes_and_a_restore_that_keeps_the_last_offset_is_caught():
    good = verify("implementer_stores:restoring", seed=2, **SMALL)
    assert good["verdict"] == "pass", good["violations"]
    bad = verify("implementer_stores:restore_keeps_last_offset", seed=2, **SMALL)
    assert bad["verdict"] == "fail"
    assert {v["check"] for v in bad["violations"]} == {"offset_convention"}, bad["violations"]
    finding = bad["violations"][0]
    assert "the next changelog offset to read" in finding["detail"]
    assert "the store kept the offset of the last record" in finding["detail"]
    assert finding["observed"] == finding["expected"] - 1


def test_the_runtime_restores_the_changelog_tail_through_the_stores_own_restore(cli, tmp_path):
    out = tmp_path / "run"
    proc = cli("run", "--store", "implementer_stores:restoring", "--crash-at", "task.commit.after_eos@2",
               "--seed", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recovers = [e for e in map(json.loads, (out / "history.jsonl").read_text().splitlines())
                if e["type"] == "recover"]
    assert {e["restored_by"] for e in recovers} == {"store.restore"}
    replayed = [e["replayed_records"] for e in recovers]
    assert any(replayed), replayed  # the crash after the EOS commit left a tail to restore
    [log] = list(out.rglob("restored.log"))
    batches = log.read_text().splitlines()
    assert len(batches) == len(recovers)
    assert any(line.startswith(f"{n} records, end_offset ") for n in replayed if n for line in batches), batches


# -- findings about the store's own calls ----------------------------------------------------------------

def test_a_stores_exception_reads_as_a_finding_about_that_store_in_verify_and_run(cli, tmp_path):
    verify_proc = cli("verify", "bad_stores:put_raises", "--seed", "1", "--examples", "2", timeout=120)
    run_proc = cli("run", "--store", "bad_stores:put_raises", "--seed", "1", "--out", str(tmp_path / "run"),
                   timeout=120)
    for proc in (verify_proc, run_proc):
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "store_raised in the store's put: put raised ValueError: bad_stores: cannot write" in proc.stdout
        assert "the store's own traceback:" in proc.stdout
        assert "in raise_from_deep_inside" in proc.stdout  # the store's own frames
        assert "Traceback (most recent call last)" not in proc.stderr


# -- the checks themselves (pure) --------------------------------------------------------------------------

def test_the_offset_checks_explain_an_off_by_one_in_terms_of_the_convention():
    commit = checks.commit_offset("t-0", 3, 2, expected=7, observed=6, previous=4, empty_may_keep=False)
    assert commit.check == "committed_offset_durable"
    assert commit.detail.startswith("commit #3 had 2 writes; committed_offset returned 6, expected 7")
    assert "not the next one to read" in commit.detail
    assert checks.commit_offset("t-0", 3, 0, expected=7, observed=4, previous=4, empty_may_keep=True) is None
    assert checks.commit_offset("t-0", 3, 1, expected=7, observed=4, previous=4, empty_may_keep=True) is not None
    restore = checks.restore_offset("t-0", start=4, count=3, end_offset=7, observed=7, previous=None,
                                    empty_may_keep=False)
    assert restore is None


def test_a_recovered_state_is_classified_by_what_differs():
    before, after = {b"a": b"1"}, {b"a": b"2"}
    outcomes = [(before, 1), (after, 2)]
    assert checks.recovered_state("t-0", outcomes, after, 2, {}, 2, 1) is None
    torn = checks.recovered_state("t-0", outcomes, after, 1, {}, 2, 1)
    assert torn.check == "atomic_commit" and "data and offset were not committed together" in torn.detail
    leaked = checks.recovered_state("t-0", [(before, 1)], {b"a": b"9"}, 1, {b"a": b"9"}, None, 1)
    assert leaked.check == "no_uncommitted_survives"
    lost = checks.recovered_state("t-0", [(before, 1)], {}, 1, {}, None, 1)
    assert lost.check == "committed_durable"
    # after a clean close: a write of the transaction open at the close, kept, is named as such
    kept = checks.clean_close_durable(before, {b"a": b"9"}, {b"a": b"9"})
    assert kept.check == "clean_close_durable" and "uncommitted write of the transaction open at the close" in kept.detail
    assert "uncommitted" not in checks.clean_close_durable(before, {}, {b"b": b"9"}).detail


# -- recovery judged without ambiguity: an independent SQLite store with its own restore ----------------------

PARTITIONS = ("t-0", "t-1", "t-2")


@st.composite
def commit_sequences(draw):
    """States a store committed one after the other (data, each partition's offset), where a commit
    often changes nothing the next one shows: no writes, and the first partition's offset given again
    (what a commit right after a restore does), while a further partition moves or not."""
    data = {b"a": b"1"}
    offsets = {"t-0": 1, "t-1": 101, "t-2": 51}
    states = [(dict(data), dict(offsets))]
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            data = {**data, draw(st.sampled_from([b"a", b"b"])): draw(st.sampled_from([b"1", b"2"]))}
        offsets = {tp: offset + draw(st.sampled_from([0, 0, 1])) for tp, offset in offsets.items()}
        states.append((dict(data), dict(offsets)))
    return states


@given(states=commit_sequences(), data=st.data())
@settings(max_examples=150, deadline=None, database=None)
def test_a_recovered_store_is_right_when_one_recorded_state_explains_all_it_shows(states, data):
    # A crash inside the commit after state k: the store may hold state k or state k+1, whole.
    k = data.draw(st.integers(0, len(states) - 2))
    outcomes = [states[k], states[k + 1]]
    held_data, held = data.draw(st.sampled_from(outcomes))
    index, broken = checks.judge_recovery(outcomes, held_data, held, {}, 2, 1)
    assert broken == [] and outcomes[index] == (held_data, held)
    # Any other mix of the two (data of one, some partition's offset of the other) is explained by none:
    # a violation, never a pass.
    mixed = {tp: data.draw(st.sampled_from([o[1][tp] for o in outcomes])) for tp in PARTITIONS}
    mixed_data = data.draw(st.sampled_from([o[0] for o in outcomes]))
    index, broken = checks.judge_recovery(outcomes, mixed_data, mixed, {}, 2, 1)
    if (mixed_data, mixed) in outcomes:
        assert index is not None and broken == []
    else:
        assert index is None and broken, (outcomes, mixed_data, mixed)
        assert {v.check for v in broken} <= {"atomic_commit", "committed_offset_durable"}


def test_a_commit_right_after_a_restore_that_changes_nothing_the_first_partition_shows_is_judged_whole():
    # After restore(records, end) the next commit, with no writes, gives the first partition `end` again:
    # the states before and after it differ only in the further partitions. A crash after that commit
    # left the later one, which the store holds: accepted (it was once judged against the earlier one).
    with StoreServer(timeout=30) as server:
        sut = StoreUnderTest(server, "sqlite_store:make_store", "restore, then an empty commit and a crash")
        try:
            sut.put_all([(b"a", b"v1"), (b"b", b"v1")])
            sut.commit()
            sut.restore([(b"c", b"v2"), (b"a", None)])
            sut.crash_in_commit("sqlite.commit.committed", 1)
            sut.check_reads()
            sut.check_read_committed()
            assert any("died at crash point sqlite.commit.committed" in line for line in sut.story), sut.story
        finally:
            sut.dispose()


@pytest.mark.parametrize("seed", [2])
def test_an_independent_sqlite_store_with_its_own_restore_passes_verify(seed):
    result = verify("sqlite_store:make_store", seed=seed, examples=8, steps=20, shrink=False)
    assert result["verdict"] == "pass", result["violations"]
    assert result["not_checked"] == NEW_STORE


@pytest.mark.slow
def test_the_independent_sqlite_store_passes_verify_on_50_seeds():
    failed = {seed: [v["check"] for v in result["violations"]]
              for seed in range(1, 51)
              if (result := verify("sqlite_store:make_store", seed=seed, examples=20, shrink=False))["verdict"] != "pass"}
    assert failed == {}


# -- a task's store: fed by its own changelog partition only ---------------------------------------------------

def test_a_task_store_that_refuses_other_partitions_passes_once_it_declares_it(cli, tmp_path):
    # As quixstreams' RocksDBStore (one changelog offset per store partition): a commit naming any other
    # partition is refused. Declared (Capabilities(several_changelog_partitions=False)), every suite commits
    # its one partition and says what it leaves out; undeclared, the first commit is refused.
    result = verify("sqlite_store:task_store", seed=1, **SMALL)
    assert result["verdict"] == "pass", result["violations"]
    several = not_checked(Capabilities(several_changelog_partitions=False))
    assert result["not_checked"] == [*NEW_STORE, *several]
    assert several[0].startswith("several changelog partitions (the store declares it is a task's store")
    offsets = result["offsets"]
    assert offsets["verdict"] == "pass"
    left_out = {entry["scenario"]: entry["checks"] for entry in offsets["not_checked"]
                if "several_changelog_partitions" in entry["lacks"]}
    assert left_out["partitions_crash"] == ["partitions_committed_together"]
    assert "partitions_reopen" in left_out
    assert offsets["checks"]["partitions_committed_together"] != "pass"
    assert {"offsets_match_data", "flush_is_noop", "checkpoint_on_close"} <= {
        check for check, verdict in offsets["checks"].items() if verdict == "pass"}
    refused = verify("sqlite_store:undeclared_task_store", seed=1, examples=1, steps=5, shrink=False)
    assert refused["verdict"] == "fail"
    assert "commit named app-store-changelog-1" in refused["violations"][0]["observed"], refused["violations"]
    run = cli("run", "--store", "sqlite_store:task_store", "--seed", "1", "--out", str(tmp_path / "run"))
    assert run.returncode == 0 and "verdict: pass" in run.stdout, run.stdout + run.stderr
    # The global workload (a global store, fed by 3 changelog partitions) is not what a task's store is:
    # refused before anything runs, saying why (never a store_raised of a store that keeps its word).
    global_run = cli("run", "--store", "sqlite_store:task_store", "--workload", "global", "--seed", "1",
                     "--out", str(tmp_path / "global"))
    flat = " ".join(global_run.stderr.split())
    assert global_run.returncode == 2 and "declares it is a task's store" in flat, global_run.stdout + flat
    assert "Capabilities(several_changelog_partitions=False)" in flat and not (tmp_path / "global").exists()
    # chaos too: with only that workload the store is not run (a usage error saying why); beside others, a
    # campaign plans it only on workloads of one partition.
    only_global = cli("chaos", "--stores", "sqlite_store:task_store", "--workloads", "global", "--scenarios", "2",
                      "--out", str(tmp_path / "chaos"))
    flat = " ".join(only_global.stderr.split())
    assert only_global.returncode == 2 and "declares it is a task's store" in flat, only_global.stdout + flat
    from eos_harness.suites.lifecycle.plan import campaign

    def workloads_planned(task_stores: list[str]) -> set[str]:
        options = {"stores": ["memory"], "workloads": ["counter", "global"], "reached": {"memory": []},
                   "task_stores": task_stores}
        return {scenario.workload for scenario in itertools.islice(campaign(1, options), 60)}

    assert workloads_planned([]) == {"counter", "global"} and workloads_planned(["memory"]) == {"counter"}
