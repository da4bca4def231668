"""``eos-harness verify``: every mutant is caught by the check that names
its mistake, a user's store works through a factory, bad factories get clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eos_harness.stores.registry import builtin_specs, opt_in_specs
from eos_harness.suites.conformance.runner import CHECKS, MAX_FINDINGS, verify

from tests.conftest import FIXTURES, every_check_exercised

REAL = [s.name for s in builtin_specs() if s.kind == "store"]
MUTANTS = [s for s in builtin_specs() if s.kind == "mutant"]


def test_the_builtin_real_stores_are_all_there():
    assert {"memory", "rocksdb-indexed", "rocksdb-secondary", "rocksdb-legacy"} <= set(REAL)
    assert len(MUTANTS) >= 6


# Every real store passing: suites/conformance (the matrix and the state machine, every real store
# by default) and suites/offsets run under `make test`; a passing verify's verdict is checked below
# on a user's store.


@pytest.mark.parametrize("store", REAL)
def test_verify_exercises_every_check_that_applies_to_the_store(store):
    # verify's coverage: every check that applies met its condition in some case (none is passed
    # unexercised); a store with no restore of its own has no offset_convention to meet, and what does
    # not apply to a store of its kind says why.
    coverage = every_check_exercised(verify(store, seed=1, examples=8, steps=15, shrink=False), CHECKS)
    assert "offset_convention" in coverage["not_applicable"]


def test_list_checks_names_the_builtin_mutant_each_check_alone_catches(cli):
    # Each named mutant is held to it by test_every_mutant_is_caught_… (test_window_stores for windows).
    from eos_harness.stores.registry import caught_alone_by
    from eos_harness.suite import SUITES

    listed = cli.invoke("verify", "--list-checks").stdout
    for suite, kind in (("conformance", "mutant"), ("windows", "window-mutant")):
        for check, meaning in SUITES[suite].checks().items():
            mutants = caught_alone_by(check, kind)
            assert mutants, f"{suite}: no built-in mutant is caught by {check} alone"
            line = f"alone catches the built-in {', '.join(mutants)}"
            assert f"  {check:<34} {meaning}\n  {'':<34} {line}" in listed, (suite, check)


# The offsets suite's own mutants (suite "offsets") are caught by that suite's check naming their
# mistake in tests/test_offsets_suite.py and tests/test_offsets_migration.py (verify_offsets, the part of
# verify that catches them); verify joining such a finding: test_an_offsets_finding_replays_alone_….
CONFORMANCE_MUTANTS = [s for s in MUTANTS if s.suite != "offsets"]
# Caught by its check through the command line instead (test_verify_cli_writes_json_and_leaves_no_process): the
# same verify, up to its first finding, not shrunk, run once for both.
BY_THE_CLI = "mutant-read-committed-sees-overlay"


@pytest.mark.parametrize("mutant", [m for m in CONFORMANCE_MUTANTS if m.name != BY_THE_CLI], ids=lambda s: s.name)
def test_every_mutant_is_caught_by_the_check_naming_its_mistake(mutant):
    # Up to the first finding: the assertion is about which check catches it (not every check that could);
    # a mutant verify --list-checks names as its check's alone: every finding, and none but that check's.
    # (a store that hangs is given up on after 15 s, not the default 60 s)
    result = verify(mutant.name, seed=1, examples=30, steps=20, shrink=False, store_timeout=15,
                    max_findings=MAX_FINDINGS if mutant.alone else 1)
    assert result["verdict"] == "fail", f"{mutant.name} survived: a hole in the harness"
    fired = {v["check"] for v in result["violations"]}
    assert fired & set(mutant.caught_by), f"{mutant.name}: expected one of {mutant.caught_by}, got {fired}"
    if mutant.alone:  # verify --list-checks names it as the mutant its one check alone catches
        assert fired == {mutant.alone}, f"{mutant.name}: caught by {fired}, not by {mutant.alone} alone"


# The same seed reporting the same cases, each finding shrunk to a minimal sequence of steps:
# tests/test_implementers.py::test_two_independent_bugs_are_both_reported_each_shrunk_with_a_replay_that_reproduces_it
# (verify run twice on a store with two bugs, in its child process as every store is).


def test_verify_cli_writes_json_and_leaves_no_process(cli, tmp_path):
    out = tmp_path / "v.json"
    # The command's own output and JSON, not the shrinking (test_implementers: shrunk findings, the same for a seed);
    # the mutant caught by the check naming its mistake, as test_every_mutant_is_caught_… holds the others.
    [mutant] = [m for m in CONFORMANCE_MUTANTS if m.name == BY_THE_CLI]
    assert not mutant.alone  # (one finding is all the assertion needs)
    proc = cli("verify", mutant.name, "--seed", "3", "--examples", "10", "--no-shrink", "--max-findings", "1",
               "--json", out)
    output = proc.stdout + proc.stderr  # (cli checks that no process is left)
    assert proc.returncode == 1, output
    assert "seed: 3" in output and "read_committed_isolation" in output
    data = json.loads(out.read_text())
    assert data["verdict"] == "fail" and data["seed"] == 3 and data["store"] == "mutant-read-committed-sees-overlay"
    assert {v["check"] for v in data["violations"]} & set(mutant.caught_by), data["violations"]
    assert {"check", "key", "expected", "observed", "case"} <= set(data["violations"][0])
    assert data["repro"].startswith("eos-harness verify mutant-read-committed-sees-overlay --seed 3")


def test_a_user_store_outside_the_package_passes_verify_and_the_pytest_suite(cli):
    proc = cli("verify", "user_store:make_store", "--seed", "5", "--examples", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: pass" in proc.stdout
    env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
    suite = subprocess.run([sys.executable, "-m", "pytest", "-v", "suites/conformance", "--eos-store=user_store:make_store",
                            "--eos-examples=5", "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=300,
                           env=env, cwd=Path(__file__).parent.parent)
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "user_store:make_store" in suite.stdout and " passed" in suite.stdout


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("no_such_module:make", "cannot import module 'no_such_module'"),
        ("user_store:missing", "module 'user_store' has no attribute 'missing'"),
        ("user_store:not_a_store", "returned dict, which is not a state store"),
        ("rocksdb-indexd", "unknown store 'rocksdb-indexd'"),
    ],
)
def test_a_bad_factory_gets_a_clear_error(cli, factory, message):
    proc = cli("verify", factory, "--seed", "1", "--examples", "1", timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr


def test_stores_and_points_list_as_json(cli):
    stores = json.loads(cli("stores", "--json").stdout)
    assert {"name", "kind", "transactional", "manages_offsets", "description"} <= set(stores[0])
    # Every mutant: the built-in ones (each caught here) and those run only when named (Kafka Streams'
    # own code, each caught in tests/test_kafka_streams_mutants.py).
    assert {s["name"] for s in stores if s["kind"] == "mutant"} == {m.name for m in MUTANTS} | {
        m.name for m in opt_in_specs() if m.kind == "mutant"}
    assert {m.name for m in opt_in_specs() if m.kind == "mutant"}, "Kafka Streams' mutants are listed"
    names = {p["name"] for p in json.loads(cli("points", "--json").stdout)}
    assert {"task.commit.after_eos", "store.commit.after_marker", "store.commit.before_write"} <= names
