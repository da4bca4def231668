"""The offsets suite (suites/offsets, issue 15): the built-in stores pass what applies to them, a store
that does not manage offsets gets not_applicable with the reason, each offsets mutant is caught by
the check naming its mistake, and ``eos-harness verify`` runs it (JSON, JUnit, --list-checks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eos_harness.suites.offsets.checks import PROMISES
from eos_harness.suites.offsets.runner import scenarios, verify_offsets

EOS_BIN = str(Path(sys.executable).with_name("eos-harness"))
ROOT = Path(__file__).parent.parent


def _fired(result: dict) -> set[str]:
    return {v["check"] for v in result["violations"]}


@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-secondary"])
def test_the_transactional_stores_that_manage_offsets_pass_every_scenario(store):
    result = verify_offsets(store, seed=1)
    assert result["verdict"] == "pass", result["violations"]
    assert result["not_applicable"] == []
    assert [c.removeprefix("offsets: ") for c in result["cases"]] == [s.name for s in scenarios()]
    assert set(result["checks"]) == set(PROMISES)


@pytest.mark.parametrize("store", ["memory", "rocksdb-legacy"])
def test_a_store_that_does_not_manage_offsets_passes_what_applies_and_is_told_why_the_rest_does_not(store):
    result = verify_offsets(store, seed=1)
    assert result["verdict"] == "pass", result["violations"]
    assert result["checks"]["never_committed_is_none"] == "pass"
    skipped = {n["scenario"]: n["reason"] for n in result["not_applicable"]}
    assert "does not manage offsets" in skipped["partitions_reopen"]
    assert result["checks"]["partition_offset_survives_reopen"] == "not_applicable"


def test_offsets_kept_in_memory_are_caught_forgetting_every_partition_after_reopen():
    result = verify_offsets("mutant-offsets-in-memory", seed=1)
    assert result["verdict"] == "fail"
    assert "partition_offset_survives_reopen" in _fired(result)
    first = next(v for v in result["violations"] if v["check"] == "partition_offset_survives_reopen")
    assert "after close() and a reopen" in first["detail"] and first["replay"].startswith("eos-harness verify")


def test_verify_lists_every_check_of_both_suites_with_its_meaning():
    proc = subprocess.run([EOS_BIN, "verify", "--list-checks"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from eos_harness.suites.conformance.checks import CHECKS

    for name, meaning in [*CHECKS.items(), *PROMISES.items()]:
        assert f"  {name:<34} {meaning}" in proc.stdout


def test_verify_joins_the_offsets_verdict_in_json_and_junit(tmp_path):
    out, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = subprocess.run([EOS_BIN, "verify", "rocksdb-legacy", "--seed", "2", "--examples", "2", "--steps", "5",
                           "--json", str(out), "--junit", str(junit)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not applicable: offsets partitions_reopen" in proc.stdout
    data = json.loads(out.read_text())
    assert data["offsets"]["verdict"] == "pass"
    assert "offsets: offsets_none" in data["cases"]
    assert data["offsets"]["checks"]["partition_offset_survives_reopen"] == "not_applicable"
    xml = junit.read_text()
    assert 'testsuite name="rocksdb-legacy (offsets)"' in xml
    assert 'name="partition_offset_survives_reopen"' in xml and "not applicable: partitions_reopen" in xml


def test_the_pytest_entry_runs_each_scenario_per_store():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "suites/offsets", "--eos-store=rocksdb-legacy",
                           "--eos-store=rocksdb-indexed", "-p", "no:cacheprovider", "-rs"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "does not manage offsets" in proc.stdout  # the skip reason of the scenario that does not apply
    assert " passed" in proc.stdout
