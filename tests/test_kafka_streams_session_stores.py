"""Kafka Streams' own session stores (``Stores.persistentSessionStore``, ``Stores.inMemorySessionStore``; 4.4.0 with
KIP-892's transactions on and off, 4.3.1) judged by the window suite through zero-length sessions, in a JVM,
crashed at points woven into their commit, and the mutant of the in-memory session store's transaction buffer.

The tests without a JVM run in ``make check``; the ones marked ``jvm`` and ``slow`` build the JVM side from
nothing into a temp folder once per session (``fresh_build``, shared with tests/test_kafka_streams_stores.py)
and leave no JVM behind."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eos_harness.kafka_streams.build import BUILD_ENV
from eos_harness.kafka_streams.points import points_for, weave_spec
from eos_harness.process.window_server import WindowStoreServer
from eos_harness.store import StoreContext
from eos_harness.suites.windows.runner import WindowViolation, run_case

from tests.test_kafka_streams_stores import _our_jvms, fresh_build  # noqa: F401  (the session's build)

SESSION_STORES = {  # name: (version, transactional, persistent)
    f"kafka-streams-{version}-{kind}-session{'-tx' if tx else ''}": (version, tx, kind == "rocksdb")
    for version, tx in (("4.4.0", True), ("4.4.0", False), ("4.3.1", False)) for kind in ("rocksdb", "memory")}
TX_MEMORY = "kafka-streams-4.4.0-memory-session-tx"
TX_ROCKSDB = "kafka-streams-4.4.0-rocksdb-session-tx"
MUTANT = "mutant-kafka-streams-4.4.0-memory-session-tx-removals-lost-at-commit"
TP = StoreContext(directory=Path()).changelog


def test_kafkas_session_stores_are_listed_as_window_stores_with_their_system_and_version(cli):
    listed = {row["name"]: row for row in json.loads(cli.invoke("stores", "--json").stdout)}
    for name, (version, transactional, persistent) in SESSION_STORES.items():
        row = listed[name]
        assert (row["system"], row["version"], row["kind"], row["transactional"], row["manages_offsets"]) == \
            ("kafka-streams", version, "window-store", transactional, persistent), row
        assert "zero-length sessions" in row["description"]
    mutant = listed[MUTANT]
    assert (mutant["system"], mutant["kind"], mutant["transactional"]) == ("kafka-streams", "window-mutant", True)
    from eos_harness.suites.windows.plan import subjects

    assert not (set(SESSION_STORES) | {MUTANT}) & set(subjects(None))  # a JVM per store process: run when named


def test_a_chaos_campaign_plans_kafkas_session_stores_on_windowed_workloads_crashed_at_their_own_points(cli):
    """``chaos --stores`` takes the session stores: its plan gives each one scenario per crash point of its own
    (as a probe of the store finds them; given here, no JVM) and of the task lifecycle, on windowed workloads."""
    from eos_harness.models.workloads import WORKLOADS
    from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS, default_stores, plan

    reached = {name: [p.name for p in points_for(name.split("-", 3)[3].removesuffix("-tx"), tx)]
               for name, (_, tx, _) in SESSION_STORES.items()}
    assert reached[TX_MEMORY] == ["ks.session.commit.enter", "ks.session.memory.before_flush",
                                  "ks.session.memory.after_flush"]
    coverage = sum(len(LIFECYCLE_POINTS) + len(points) + 1 for points in reached.values())
    planned = list(itertools.islice(plan(7, list(SESSION_STORES), list(WORKLOADS), reached=reached), coverage))
    for name, points in reached.items():
        mine = [scenario for scenario in planned if scenario.store == name]
        assert mine and all(WORKLOADS[scenario.workload].windowed for scenario in mine), name
        assert {fault.point for scenario in mine for fault in scenario.schedule} >= {*points, *LIFECYCLE_POINTS}, name
    assert not set(SESSION_STORES) & set(default_stores())  # a JVM per task instance: run when named
    refused = cli.invoke("chaos", "--stores", "kafka-streams-9.9.9-rocksdb-session")
    assert refused.returncode == 2 and all(name in refused.stderr for name in SESSION_STORES), refused.stderr


def test_the_session_stores_crash_points_sit_in_kafkas_session_classes():
    memory_tx = {p.name: p.java for p in points_for("memory-session", True)}
    assert memory_tx == {
        "ks.session.commit.enter": "MeteredSessionStore.commit (at entry)",
        "ks.session.memory.before_flush": "InMemorySessionTransactionBuffer.flushToBase (at entry)",
        "ks.session.memory.after_flush": "InMemorySessionTransactionBuffer.flushToBase (at exit)"}
    assert [p.name for p in points_for("memory-session", False)] == ["ks.session.commit.enter"]  # no buffer
    rocksdb_tx = {p.name for p in points_for("rocksdb-session", True)}
    # a persistent session store is a RocksDB per segment, as a window store: RocksDBStore's points fire in each
    assert {"ks.session.commit.enter", "ks.window.rocksdb.after_segment_commit", "ks.rocksdb.commit.enter",
            "ks.rocksdb.commit.before_write_batch", "ks.rocksdb.commit.exit"} <= rocksdb_tx
    assert not rocksdb_tx & {"ks.commit.enter", "ks.window.commit.enter", "ks.session.memory.before_flush"}
    spec = weave_spec()
    assert ("ks.session.memory.before_flush\torg.apache.kafka.streams.state.internals."
            "InMemorySessionTransactionBuffer\tflushToBase\tAT ENTRY\n") in spec


def test_the_session_mutant_is_listed_under_the_check_that_catches_it(cli):
    listing = cli.invoke("verify", "--list-checks").stdout
    windows = listing[listing.index("windows suite"):]
    tombstone = windows[windows.index("tombstone_deletes_window"):].split("\n  ", 3)
    assert any(f"catches Kafka Streams' {MUTANT}" in line for line in tombstone[:3]), tombstone


@pytest.mark.jvm
@pytest.mark.slow  # a JVM per store, one per crash: kept out of make test's budget
def test_kafkas_session_store_answers_the_window_protocol_through_zero_length_sessions(fresh_build, tmp_path,  # noqa: F811
                                                                                      monkeypatch):
    monkeypatch.setenv(BUILD_ENV, str(fresh_build))
    with WindowStoreServer(timeout=120) as server:
        for name in (TX_ROCKSDB, TX_MEMORY):
            store = server.start(name, tmp_path / name)
            store.call("put", b"a", b"v1", 100)  # put(Windowed(a, SessionWindow(100, 100)), v1)
            store.call("put", b"b", b"v2", 120_100)
            assert store.call("rc_all") == []  # Kafka's readOnly(READ_COMMITTED): staged, not committed
            store.call("commit", {TP: 1})
            assert store.call("rc_all") == [(b"a", 100, b"v1"), (b"b", 120_100, b"v2")], name
            # findSessions(key, earliestSessionEndTime, latestSessionStartTime): both bounds inclusive
            assert store.call("fetch", b"a", 100, 100) == [(100, b"v1")]
            assert store.call("fetch", b"a", 101, 200) == [] and store.call("fetch", b"a", 0, 99) == []
            assert store.call("fetch_window", b"b", 120_100) == b"v2"  # fetchSession(b, 120100, 120100)
            store.call("put", b"a", None, 100)  # a tombstone: the session removed, staged
            assert store.call("all") == [(b"b", 120_100, b"v2")]
            assert store.call("rc_all") == [(b"a", 100, b"v1"), (b"b", 120_100, b"v2")]
            assert store.call("committed_offset", TP) == (1 if name == TX_ROCKSDB else None)  # KIP-1035: RocksDB's
            store.call("close")
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
@pytest.mark.slow
def test_the_window_suite_catches_the_session_mutant_where_kafkas_own_session_store_passes(fresh_build, monkeypatch):  # noqa: F811
    """The matrix case "in-order" × a kill before the commit: a committed session removed, committed again, read at
    once. Kafka's own store removes it; the mutant's flush drops the staged removal and the session is back."""
    monkeypatch.setenv(BUILD_ENV, str(fresh_build))
    with WindowStoreServer(timeout=120) as server:
        run_case(server, TX_MEMORY, "in-order", None)  # raises WindowViolation on a broken promise
        with pytest.raises(WindowViolation) as caught:
            run_case(server, MUTANT, "in-order", None)
    violation = caught.value.violation
    assert violation.check == "tombstone_deletes_window", violation
    assert "b@100" in violation.key and "the tombstone did not delete it" in violation.detail
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
@pytest.mark.slow
def test_verify_and_points_and_a_lifecycle_run_take_kafkas_session_stores(fresh_build, cli, tmp_path):  # noqa: F811
    env = {BUILD_ENV: str(fresh_build)}
    done = cli("points", "--store", TX_MEMORY, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"ks.session.commit.enter", "ks.session.memory.before_flush", "ks.session.memory.after_flush"}
    assert all(row["reached"] for row in rows.values()), rows
    out = tmp_path / "verdict.json"
    done = cli("verify", TX_MEMORY, "--seed", "1", "--examples", "1", "--steps", "5", "--no-shrink",
               "--allow", "read_committed_isolation", "--json", out, env=env, timeout=600)
    verdict = json.loads(out.read_text())
    assert done.returncode == 0 and verdict["verdict"] == "pass", verdict["violations"]
    assert verdict["suite"] == "windows" and verdict["semantics"] == "retention-only"
    assert any("ks.session.memory.before_flush" in case for case in verdict["cases"])
    assert verdict["coverage"]["exercised"]["atomic_commit"] > 0
    assert verdict["coverage"]["exercised"]["tombstone_deletes_window"] > 0
    run = tmp_path / "run"
    done = cli("run", "--workload", "tumbling-count", "--store", TX_ROCKSDB, "--crash-at", "ks.session.commit.enter",
               "--seed", "1", "--out", run, "--no-report", env=env, timeout=600)
    assert done.returncode == 0, done.stdout
    assert "crash points hit: ks.session.commit.enter" in done.stdout
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
@pytest.mark.slow
def test_chaos_and_the_pytest_plugin_take_kafkas_session_stores(fresh_build, cli, tmp_path):  # noqa: F811
    env = {BUILD_ENV: str(fresh_build)}
    stores = ["kafka-streams-4.4.0-memory-session", "kafka-streams-4.3.1-memory-session"]
    out = tmp_path / "chaos"
    done = cli("chaos", "--stores", ",".join(stores), "--scenarios", "4", "--seed", "7", "--out", out, "--no-report",
               env=env, timeout=900)
    campaign = json.loads((out / "chaos.json").read_text())
    assert done.returncode == 0, done.stdout
    tally = campaign["summary"]["stores"]
    assert set(tally) == set(stores), tally
    assert all(tally[name]["scenarios"] == 2 and tally[name]["status"] == "ok" for name in stores), tally
    assert "ks.session.commit.enter" in campaign["summary"]["points_hit"], campaign["summary"]
    # the window suite as a team runs it from pytest, on an in-memory session store of 4.4.0
    suite = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--pyargs",
                            "eos_harness.suites.windows", f"--eos-store={stores[0]}", "--eos-examples=1", "--eos-seed=1"],
                           capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **env}, timeout=900)
    assert suite.returncode == 0, suite.stdout[-3000:]
    crashed = [line for line in suite.stdout.splitlines()
               if line.startswith("test_windows.py::test_crash_matrix[") and "ks.session.commit.enter] PASSED" in line]
    assert crashed and "test_state_machine" in suite.stdout, suite.stdout[-3000:]
    assert _our_jvms(fresh_build) == []
