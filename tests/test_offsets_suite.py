"""The offsets suite (suites/offsets, issue 15): the built-in stores pass what applies to them, a store
that does not manage offsets gets not_applicable with the reason, each offsets mutant is caught by
the check naming its mistake, and ``eos-harness verify`` runs it (JSON, JUnit, --list-checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eos_harness.suites.offsets.checks import PROMISES
from eos_harness.suites.offsets.runner import scenarios, verify_offsets

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
FIXTURES_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}


def _fired(result: dict) -> set[str]:
    return {v["check"] for v in result["violations"]}


# Each built-in store through each offsets scenario that applies to it: suites/offsets under `make test`.
# Here the whole suite's verdict, once for a store that gets every scenario and once for one that does not.


def test_a_transactional_store_that_manages_offsets_gets_every_scenario_in_one_verdict():
    result = verify_offsets("rocksdb-indexed", seed=1)
    assert result["verdict"] == "pass", result["violations"]
    # everything checked, legacy parts too; but Kafka Streams' own upgrade (4.3.1 -> 4.4.0), which is Kafka's store's
    assert [n["scenario"] for n in result["not_applicable"]] == ["kafka_streams_upgrade"]
    assert result["not_checked"] == []
    assert [c.removeprefix("offsets: ") for c in result["cases"]] == [s.name for s in scenarios()
                                                                      if s.name != "kafka_streams_upgrade"]
    assert set(result["checks"]) == set(PROMISES)


def test_a_store_that_does_not_manage_offsets_passes_what_applies_and_is_told_why_the_rest_does_not():
    result = verify_offsets("memory", seed=1)  # rocksdb-legacy: test_verify_joins_the_offsets_verdict_in_json_and_junit
    assert result["verdict"] == "pass", result["violations"]
    assert result["checks"]["never_committed_is_none"] == "pass"
    skipped = {n["scenario"]: n["reason"] for n in result["not_applicable"]}
    assert "does not manage offsets" in skipped["partitions_reopen"]
    assert result["checks"]["partition_offset_survives_reopen"] == "not_applicable"


@pytest.mark.parametrize("store", ["memory", "rocksdb-legacy"])
def test_crash_and_flush_scenarios_do_not_apply_to_a_store_that_is_not_transactional(store):
    result = verify_offsets(store, seed=1, only=["partitions_crash", "flush_noop"])
    assert result["cases"] == []
    reasons = {n["scenario"]: n["reason"] for n in result["not_applicable"]}
    assert "not transactional" in reasons["partitions_crash"] and "not transactional" in reasons["flush_noop"]
    assert result["checks"]["flush_is_noop"] == result["checks"]["partitions_committed_together"] == "not_applicable"


# Each offsets mutant (and the older ones whose mistake is about offsets): the check naming its mistake,
# and the scenario (case) that shows it.
CAUGHT = [
    ("mutant-offsets-before-data", "offsets_match_data", "partitions_crash: crash at store.commit.between_offsets_and_data"),
    ("mutant-split-offsets-write", "offsets_match_data", "partitions_crash: crash at store.commit.between_data_and_offsets"),
    ("mutant-offsets-partition-apart", "partitions_committed_together",
     "partitions_crash: crash at store.commit.between_partitions"),
    ("mutant-offsets-first-partition-only", "partition_offset_survives_reopen", "partitions_reopen"),
    ("mutant-offsets-in-memory", "partition_offset_survives_reopen", "partitions_reopen"),
    ("mutant-offsets-flush-commits", "flush_is_noop", "flush_noop"),
]


@pytest.mark.parametrize(("mutant", "check", "case"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_every_offsets_mutant_is_caught_by_the_check_naming_its_mistake(mutant, check, case):
    result = verify_offsets(mutant, seed=1)
    assert result["verdict"] == "fail", f"{mutant} survived the offsets suite"
    first = next((v for v in result["violations"] if v["check"] == check), None)
    assert first is not None, f"{mutant}: expected {check}, got {_fired(result)}"
    assert first["case"] == f"offsets: {case}"
    assert "just before" in first["detail"] and result["checks"][check] == "fail"


def test_the_offsets_mutants_are_registered_for_the_offsets_suite_only():
    from eos_harness.stores.registry import builtin_spec
    from eos_harness.suites.lifecycle.plan import default_stores

    for mutant, check, _ in CAUGHT:
        spec = builtin_spec(mutant)
        assert check in spec.caught_by or mutant in ("mutant-split-offsets-write", "mutant-offsets-in-memory")
        if mutant.startswith("mutant-offsets-") and mutant != "mutant-offsets-in-memory":
            assert spec.suite == "offsets" and mutant not in default_stores()


def test_the_conformance_suite_commits_three_partitions_and_catches_one_written_apart():
    from eos_harness.process.server import StoreServer
    from eos_harness.suites.conformance.runner import ConformanceViolation, run_case

    with StoreServer() as server:
        for store in ("rocksdb-indexed", "rocksdb-secondary"):  # every partition checked, none torn
            run_case(server, store, "overwrite", None)
        with pytest.raises(ConformanceViolation) as torn:
            run_case(server, "mutant-offsets-partition-apart", "overwrite", "store.commit.between_partitions")
        assert torn.value.violation.check == "atomic_commit"
        assert torn.value.violation.key == "app-store-changelog-1"
        assert "not committed together" in torn.value.violation.detail
        with pytest.raises(ConformanceViolation) as forgot:
            run_case(server, "mutant-offsets-first-partition-only", "overwrite", None)
        assert forgot.value.violation.check == "committed_offset_durable"
        assert forgot.value.violation.key == "app-store-changelog-1" and forgot.value.violation.observed is None


def test_offsets_kept_in_memory_are_caught_forgetting_every_partition_after_reopen():
    result = verify_offsets("mutant-offsets-in-memory", seed=1)
    assert result["verdict"] == "fail"
    assert "partition_offset_survives_reopen" in _fired(result)
    first = next(v for v in result["violations"] if v["check"] == "partition_offset_survives_reopen")
    assert "after close() and a reopen" in first["detail"] and first["replay"].startswith("eos-harness verify")


def test_verify_lists_every_check_of_both_suites_with_its_meaning(cli):
    proc = cli.invoke("verify", "--list-checks")
    assert proc.returncode == 0, proc.stderr
    from eos_harness.suites.conformance.checks import CHECKS

    for name, meaning in [*CHECKS.items(), *PROMISES.items()]:
        assert f"  {name:<34} {meaning}" in proc.stdout


def test_verify_joins_the_offsets_verdict_in_json_and_junit(cli, tmp_path):
    out, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = cli("verify", "rocksdb-legacy", "--seed", "2", "--examples", "2", "--steps", "5", "--json", out,
               "--junit", junit)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not applicable: offsets partitions_reopen" in proc.stdout
    assert proc.stdout.count("does not manage its own offsets") == 1, proc.stdout  # KIP-892's warning, once
    data = json.loads(out.read_text())
    checks = data["offsets"]["checks"]
    assert (f"offsets suite: pass ({len(data['offsets']['cases'])} scenarios; checks "
            f"{sum(v == 'pass' for v in checks.values())} passed, 0 failed, 0 error, "
            f"{len(data['offsets']['not_applicable'])} scenario(s) not applicable)") in proc.stdout
    assert data["offsets"]["verdict"] == "pass"
    assert "offsets: offsets_none" in data["cases"]
    assert data["offsets"]["checks"]["partition_offset_survives_reopen"] == "not_applicable"
    xml = junit.read_text()
    assert 'testsuite name="rocksdb-legacy (offsets)"' in xml
    assert 'name="partition_offset_survives_reopen"' in xml and "not applicable: partitions_reopen" in xml


def test_the_pytest_entry_collects_only_the_scenarios_that_apply_and_says_why_the_rest_are_left_out():
    # The built-in stores' scenarios are collected and deselected (they run in suites/offsets itself).
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "suites/offsets", "--eos-store=rocksdb-legacy",
                           "--eos-store=rocksdb-indexed", "--eos-store=user_store:make_store", "-p", "no:cacheprovider",
                           "-rs", "-k", "user_store"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=FIXTURES_ENV)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skipped" not in proc.stdout  # nothing collected only to be skipped
    # kafka_streams_upgrade (Kafka Streams' own 4.3.1 -> 4.4.0) applies to none of them
    built_in = (len(scenarios()) - 1) + (len(scenarios()) - 9)  # rocksdb-indexed, rocksdb-legacy
    assert f"{len(scenarios()) - 5} passed, {built_in} deselected" in proc.stdout, proc.stdout
    summary = proc.stdout.split("offsets scenarios left out", 1)[1]
    assert "rocksdb-legacy: partitions_reopen: not applicable: the store does not manage offsets" in summary
    assert ("user_store:make_store: downgrade_with_upgrade_from: not checked: the downgrade with upgrade_from "
            "(the store declares it has no older format to go back to)") in summary
    # a built-in store that manages offsets gets every scenario but Kafka Streams' own upgrade
    assert [line.split(":")[1] for line in summary.splitlines() if line.startswith("rocksdb-indexed:")] == \
        [" kafka_streams_upgrade"]


# -- what a store implementer sees ----------------------------------------------------------------------------

@pytest.fixture
def fixture_stores(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))  # the store children get the driver's sys.path


def test_a_new_store_that_declares_no_legacy_files_and_no_downgrade_passes_and_is_told_what_was_not_checked(
        fixture_stores):
    result = verify_offsets("user_store:make_store", seed=2)
    assert result["verdict"] == "pass", result["violations"]
    lacks = {n["scenario"]: n["lacks"] for n in result["not_checked"]}
    assert lacks == {"upgrade_from_legacy_files": ["legacy_offsets_import"],
                     "upgrade_without_checkpoint": ["legacy_offsets_import"],
                     "malformed_offsets_files": ["legacy_offsets_import"],
                     "downgrade_with_upgrade_from": ["legacy_downgrade"]}
    assert [n["scenario"] for n in result["not_applicable"]] == ["kafka_streams_upgrade"]  # Kafka's own stores
    assert result["checks"]["migration_keeps_offsets"] == result["checks"]["downgrade_keeps_offsets"] == "not_applicable"
    assert result["checks"]["partitions_committed_together"] == "pass"


def test_a_store_that_claims_the_legacy_parts_gets_each_broken_check_once_explained_with_how_to_declare(
        fixture_stores):
    result = verify_offsets("implementer_stores:claims_legacy_files", seed=2)
    assert result["verdict"] == "fail"
    checks = [v["check"] for v in result["violations"]]
    assert len(checks) == len(set(checks)), checks  # each distinct check once
    assert {"migration_keeps_offsets", "migration_cleans_files", "malformed_offsets_file",
            "downgrade_hands_back_offsets"} <= set(checks)
    by_check = {v["check"]: v for v in result["violations"]}
    # It reaches none of the migration's or the downgrade's crash points: only the case without a crash runs,
    # and nothing is labelled as a crash that did not happen; the notes say which points were left out.
    for v in result["violations"]:
        assert "crash at store." not in v["case"], v["case"]
    assert by_check["downgrade_hands_back_offsets"]["fired"] == {"cases": 1, "of": 1}
    assert by_check["downgrade_hands_back_offsets"]["case"] == (
        "offsets: downgrade_with_upgrade_from: downgrade with upgrade_from=3.9, no crash")
    assert by_check["malformed_offsets_file"]["fired"] == {"cases": 6, "of": 6}
    assert any("store.downgrade.after_drop" in n and "no crash case was run" in n for n in result["notes"])
    # What the store should do, and how to declare it does not offer it.
    assert "close() writes the changelog offsets" in by_check["downgrade_hands_back_offsets"]["detail"]
    assert "Capabilities(legacy_downgrade=False)" in by_check["downgrade_hands_back_offsets"]["detail"]
    assert "Capabilities(legacy_offsets_import=False)" in by_check["migration_keeps_offsets"]["detail"]
    assert by_check["downgrade_hands_back_offsets"]["replay"] == (
        "eos-harness verify implementer_stores:claims_legacy_files --seed 2 --offsets-scenario "
        "downgrade_with_upgrade_from")


def test_an_offsets_finding_replays_alone_from_its_command_in_json_terminal_and_junit(cli, tmp_path, fixture_stores):
    result = verify_offsets("implementer_stores:claims_legacy_files", seed=2)
    finding = next(v for v in result["violations"] if v["check"] == "migration_keeps_offsets")
    replay = finding["replay"].split()
    assert replay[:2] == ["eos-harness", "verify"] and "--offsets-scenario" in replay
    out, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = cli(*replay[1:], "--json", out, "--junit", junit)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    replayed = json.loads(out.read_text())
    assert [(v["check"], v["case"], v["observed"]) for v in replayed["violations"]] == [
        (finding["check"], finding["case"], finding["observed"])]
    assert replayed["cases"] == ["offsets: upgrade_from_legacy_files"]  # that scenario only: no conformance case
    assert f"#1 fired in {finding['fired']['cases']} of {finding['fired']['of']} cases" in proc.stdout
    assert "#2" not in proc.stdout
    xml = junit.read_text()
    assert xml.count("<failure") == 1 and "fired in 1 of 1 cases" in xml and "--offsets-scenario" in xml


def test_a_migration_mutant_is_reported_once_with_the_number_of_crash_cases_it_broke():
    result = verify_offsets("mutant-offsets-migration-deletes-early", seed=1, only=["upgrade_from_legacy_files"])
    lost = [v for v in result["violations"] if v["check"] == "migration_keeps_offsets"]
    assert len(lost) == 1 and "crash at store.migrate." in lost[0]["case"]
    assert 1 <= lost[0]["fired"]["cases"] < lost[0]["fired"]["of"] == 5  # no crash + every migration step
    assert result["notes"] == []  # the built-in store reaches every step


def test_verify_names_the_offsets_scenarios_and_refuses_one_that_does_not_exist(cli):
    listed = cli.invoke("verify", "--list-checks")
    assert "offsets scenarios (verify STORE --offsets-scenario NAME runs one alone):" in listed.stdout
    for scenario in scenarios():
        assert f"  {scenario.name:<34} {', '.join(scenario.checks)}" in listed.stdout
    proc = cli.invoke("verify", "rocksdb-indexed", "--offsets-scenario", "downgrade")
    assert proc.returncode == 2 and "no offsets scenario 'downgrade'" in proc.stderr
    assert "downgrade_with_upgrade_from" in proc.stderr


def test_a_store_that_keeps_source_positions_among_its_data_is_told_so_not_about_flush(monkeypatch):
    # Its source position (KIP-796) is a row of its data table: every read lists it. It was reported as
    # flush_is_noop, explained by "the write b=v2 that was never committed survived" with no b in the
    # data shown, and as offsets_match_data.
    monkeypatch.syspath_prepend(str(FIXTURES))
    result = verify_offsets("sqlite_store:positions_among_data", seed=1)
    assert _fired(result) == {"read_your_own_writes"}, result["violations"]
    [finding] = result["violations"]
    assert finding["key"] == "position/app-input-0"
    assert finding["observed"]["position/app-input-0"] == "100"
    assert finding["detail"].startswith("right after commit #1, the store lists {'position/app-input-0': '100'}, "
                                        "which no write made")


@pytest.mark.parametrize("mutant", ["mutant-recover-keeps-uncommitted", "mutant-put-all-bypasses-txn"])
def test_an_uncommitted_write_that_survives_a_kill_is_named_no_uncommitted_survives(mutant):
    # Killed with writes given to no commit, restarted with the last commit's offsets: the writes are still
    # there. That breaks "no uncommitted write survives a crash" (the conformance suite's promise), not
    # "data and offsets of one commit" (offsets_match_data), which it was named before.
    result = verify_offsets(mutant, seed=1, only=["partitions_crash"])
    found = [v for v in result["violations"] if v["case"] == "offsets: partitions_crash: kill before commit"]
    assert [v["check"] for v in found] == ["no_uncommitted_survives"], result["violations"]
    [finding] = found
    assert finding["key"] == "a" and finding["observed"] == {"a": "v2", "c": "v1", "d": "v1"}
    assert finding["expected"] == {"a": "v1", "b": "v1", "c": "v1"}
    assert "the uncommitted a=v2, d=v1, the delete of b" in finding["detail"] and "just before" in finding["detail"]


def test_an_offsets_campaign_over_stores_a_scenario_does_not_apply_to_ends_with_its_table(cli, tmp_path):
    # The offsets suite lists a scenario that does not apply as {"scenario", "checks", "reason"}, which the
    # campaign's tally took for a check -> why mapping: the campaign ended in a traceback, no table, no JSON.
    done = cli("chaos", "--suite", "offsets", "--scenarios", "8", "--seed", "7", "--out", tmp_path / "run",
               "--no-report", cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stdout + done.stderr
    campaign = json.loads((tmp_path / "run" / "chaos.json").read_text())
    tallies = campaign["summary"]["stores"]
    assert tallies["memory"]["status"] == tallies["rocksdb-legacy"]["status"] == "ok"
    reasons = [r["not_applicable"] for r in campaign["scenarios"] if r["store"] == "memory"]
    assert reasons and "does not manage offsets" in reasons[0][0]["reason"]
