"""Kafka Streams' own window stores (``Stores.persistentWindowStore``, ``Stores.inMemoryWindowStore``; 4.4.0 with
KIP-892's transactions on and off, 4.3.1) under the window suite, in a JVM, crashed at points woven into
their commit. The tests marked ``jvm`` build the JVM side from nothing into a temp folder once per session
(``fresh_build``, shared with tests/test_kafka_streams_stores.py) and leave no JVM behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eos_harness.kafka_streams.build import BUILD_ENV
from eos_harness.process.window_server import WindowStoreServer
from eos_harness.store import StoreContext

from tests.test_kafka_streams_stores import _our_jvms, fresh_build, kafka_streams_stores  # noqa: F401  (the session's build)

WINDOW_STORES = kafka_streams_stores(window=True)
TX_ROCKSDB = "kafka-streams-4.4.0-rocksdb-window-tx"
TX_MEMORY = "kafka-streams-4.4.0-memory-window-tx"
TP = StoreContext(directory=Path()).changelog


def _short_verify(cli, build: Path, tmp_path: Path, store: str, timeout: float):
    """``eos-harness verify STORE`` on the JVM side in ``build``: seed 1, one example of 5 steps, no shrinking;
    the command's run and the verdict it wrote."""
    out = tmp_path / "verdict.json"
    done = cli("verify", store, "--seed", "1", "--examples", "1", "--steps", "5", "--no-shrink", "--json", out,
               env={BUILD_ENV: str(build)}, timeout=timeout)
    return done, json.loads(out.read_text())


def test_kafkas_window_stores_are_listed_as_window_stores_with_their_system_and_version(cli):
    listed = {row["name"]: row for row in json.loads(cli.invoke("stores", "--json").stdout)}
    for name, (version, transactional, persistent) in WINDOW_STORES.items():
        row = listed[name]
        assert (row["system"], row["version"], row["kind"], row["transactional"], row["manages_offsets"]) == \
            ("kafka-streams", version, "window-store", transactional, persistent), row
    from eos_harness.suites.windows.plan import subjects

    assert not set(WINDOW_STORES) & set(subjects(None))  # a JVM per store process: run when named


@pytest.mark.jvm
def test_points_lists_the_window_stores_crash_points_with_their_java_methods(fresh_build, cli):  # noqa: F811
    done = cli("points", "--store", TX_ROCKSDB, "--json", env={BUILD_ENV: str(fresh_build)}, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert {"ks.window.commit.enter", "ks.window.rocksdb.after_segment_commit", "ks.rocksdb.commit.enter",
            "ks.rocksdb.commit.before_write_batch", "ks.rocksdb.commit.exit"} <= set(rows), rows
    assert "ks.commit.enter" not in rows and "ks.window.memory.before_flush" not in rows  # others' points
    assert rows["ks.window.commit.enter"]["reached"] and rows["ks.rocksdb.commit.before_write_batch"]["reached"]
    assert "AbstractSegments.commit" in rows["ks.window.rocksdb.after_segment_commit"]["description"]
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_kafkas_read_committed_window_view_hides_staged_writes_and_shows_committed_ones(fresh_build, tmp_path,  # noqa: F811
                                                                                       monkeypatch):
    monkeypatch.setenv(BUILD_ENV, str(fresh_build))
    with WindowStoreServer(timeout=120) as server:
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        store.call("put", b"a", b"v1", 100)
        assert store.call("rc_all") == []  # Kafka's readOnly(READ_COMMITTED): staged, not committed
        assert store.call("all") == [(b"a", 100, b"v1")]  # the writer sees its own write
        store.call("commit", {TP: 1})
        assert store.call("rc_fetch", b"a", 0, 1000) == [(100, b"v1")]
        assert store.call("committed_offset", TP) == 1
        store.call("close")
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_an_uncommitted_put_far_ahead_hides_committed_windows_from_kafkas_read_committed_view(fresh_build, tmp_path,  # noqa: F811
                                                                                             monkeypatch):
    """A finding in Kafka Streams 4.4.0 (InMemoryWindowStore, transactional): the stream time of a staged put
    bounds the read-committed view too, and removeExpiredSegments drops the committed windows it passes."""
    monkeypatch.setenv(BUILD_ENV, str(fresh_build))
    with WindowStoreServer(timeout=120) as server:
        store = server.start(TX_MEMORY, tmp_path / "store")
        store.call("put", b"a", b"v1", 100)
        store.call("commit", {TP: 1})
        assert store.call("rc_all") == [(b"a", 100, b"v1")]
        store.call("put", b"c", b"v1", 100 + 240_000)  # staged; retention 240000 ms
        assert store.call("rc_all") == []  # the committed window a@100 is gone from READ_COMMITTED
        store.call("close")
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_the_window_suite_finds_kafkas_in_memory_read_committed_view_bounded_by_uncommitted_stream_time(
        fresh_build, cli, tmp_path):  # noqa: F811
    done, verdict = _short_verify(cli, fresh_build, tmp_path, TX_MEMORY, timeout=600)
    assert done.returncode == 1, done.stdout
    assert verdict["suite"] == "windows" and verdict["semantics"] == "retention-only"
    edges = [v for v in verdict["violations"] if v["case"].startswith("edges")]
    assert edges and {v["check"] for v in edges} == {"read_committed_isolation"}, verdict["violations"]
    assert any("argument_validation" in line for line in verdict["not_checked"])  # declared, and said
    assert "SLF4J" not in done.stdout + done.stderr  # Kafka's logging goes to the store's output, not the terminal
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
@pytest.mark.slow  # a JVM per crash, a crash per matrix case: minutes on a loaded 2-core machine
def test_the_window_suite_finds_kafkas_persistent_window_store_listing_all_by_key_within_a_segment(
        fresh_build, cli, tmp_path):  # noqa: F811
    done, verdict = _short_verify(cli, fresh_build, tmp_path, TX_ROCKSDB, timeout=900)
    assert done.returncode == 1, done.stdout
    matrix = [v for v in verdict["violations"] if not v["case"].startswith("hypothesis")]
    assert {v["check"] for v in matrix} <= {"fetch_order", "read_committed_isolation"}, matrix
    in_order = [v for v in matrix if v["case"].startswith("in-order")]
    assert in_order and {v["check"] for v in in_order} == {"fetch_order"}, matrix  # c@100 listed after b@120
    assert any("commit_durable" in line for line in verdict["not_checked"])  # declared, and said
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_a_crash_after_an_uncommitted_put_far_ahead_loses_a_committed_segment_of_kafkas_persistent_window_store(
        fresh_build, tmp_path, monkeypatch):  # noqa: F811
    """A finding in Kafka Streams 4.4.0 (AbstractRocksDBSegmentedBytesStore, transactional): a staged put
    advances observedStreamTime and getOrCreateSegmentIfLive drops the segments it expires, on disk, before any
    commit; the process dies, the transaction never commits, and the store reopens without the committed
    window of the dropped segment while its committed offset (kept by the newer segment) says it holds it."""
    monkeypatch.setenv(BUILD_ENV, str(fresh_build))
    with WindowStoreServer(timeout=120) as server:
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        store.call("put", b"a", b"v1", 100)  # segment 0 (retention 240000 ms: segments of 120000 ms)
        store.call("put", b"b", b"v1", 120_100)  # segment 1
        store.call("commit", {TP: 1})
        store.call("close")  # on disk
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        store.call("put", b"c", b"v1", 360_100)  # staged: its stream time expires segment 0
        store.kill()  # before any commit
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        assert store.call("recover", 1) is True  # Kafka trusts it, and restores the changelog after offset 1
        assert store.call("committed_offset", TP) == 1
        # committed, and live under the committed stream time 120100: a@100 should be here; it is not
        assert store.call("all") == [(b"b", 120_100, b"v1")]
        store.call("close")
    assert _our_jvms(fresh_build) == []


def _recovered(contents: dict, position: int) -> list[dict]:
    """A history whose task committed ``position`` input records and reopened its store holding ``contents``."""
    encoded = [[key.decode(), value.decode()] for key, value in sorted(contents.items())]
    return [{"seq": 0, "instance": 1, "type": "store_commit_begin", "input_position": position,
             "changelog_position": position},
            {"seq": 1, "instance": 1, "type": "store_commit", "input_position": position,
             "changelog_position": position, "restore": False},
            {"seq": 2, "instance": 2, "type": "recover", "input_position": position, "recovered_offset": position,
             "contents": encoded, "pre_replay_contents": encoded, "transactional": True, "persistent": True}]


def test_windows_kafka_keeps_past_retention_are_no_commit_violation_and_a_wrong_value_still_is():
    """Kafka's window stores keep stream time in memory only (AbstractRocksDBSegmentedBytesStore's
    observedStreamTime): a reopened store shows windows past retention until a put brings stream time back.
    The lifecycle's commit checks named them atomic_commit and committed_rolls_forward (a false verdict on
    `run --workload tumbling-count --store kafka-streams-4.4.0-rocksdb-window-tx`)."""
    from eos_harness.models.lifecycle import LifecycleModel
    from eos_harness.models.windows import RETENTION_ONLY
    from eos_harness.models.workloads import workload
    from eos_harness.suites.lifecycle.checks import check_atomic_commit, check_recovered_state

    tumbling = workload("tumbling-count")
    records = [(b"w0", b"5"), (b"w0", b"7"), (b"w1", b"200"), (b"w0", b"8")]  # retention 60: w0@0 expires at 200
    model = LifecycleModel(tumbling, records, RETENTION_ONLY)
    assert model.state_at(4) == {b"w1@0000000000200": b"1"}  # w0@0 expired; the late put there dropped
    for kept in (b"2", b"1"):  # the count when it expired, or the late put's count (its read saw nothing)
        history = _recovered({b"w0@0000000000000": kept, b"w1@0000000000200": b"1"}, 4)
        assert check_recovered_state(history, model) == [] and check_atomic_commit(history, model) == []
    wrong = _recovered({b"w0@0000000000000": b"9", b"w1@0000000000200": b"1"}, 4)  # no put ever wrote 9
    assert {v.check for v in check_recovered_state(wrong, model)} == {"state_matches_model"}
    assert {v.check for v in check_atomic_commit(wrong, model)} == {"atomic_commit"}
    lost = _recovered({b"w0@0000000000000": b"2"}, 4)  # a live window missing is still one
    assert {v.check for v in check_recovered_state(lost, model)} == {"committed_rolls_forward"}


def test_the_lifecycle_runtime_passes_on_kafkas_persistent_window_store_commits_durable_only_once_flushed():
    from eos_harness.models.workloads import workload
    from eos_harness.store import capabilities_of
    from eos_harness.stores.registry import task_store_factory

    for name, (_, _, persistent) in WINDOW_STORES.items():
        store = task_store_factory(name, workload("tumbling-count"))()  # not opened: no JVM
        assert capabilities_of(store).commit_durable is (not persistent), name


@pytest.mark.jvm
def test_a_lifecycle_run_of_kafkas_window_stores_crashed_in_their_commit_passes(fresh_build, cli, tmp_path):  # noqa: F811
    for name in (TX_ROCKSDB, TX_MEMORY, "kafka-streams-4.4.0-rocksdb-window"):
        out = tmp_path / name
        done = cli("run", "--workload", "tumbling-count", "--store", name, "--crash-at", "ks.window.commit.enter",
                   "--seed", "1", "--out", out, "--no-report", env={BUILD_ENV: str(fresh_build)}, timeout=600)
        assert done.returncode == 0, done.stdout
        assert "crash points hit: ks.window.commit.enter" in done.stdout
        history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
        recovers = [event for event in history if event["type"] == "recover"]
        assert len(recovers) == 2 and all(e.get("commit_durable", True) is (name == TX_MEMORY) for e in recovers)
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_the_window_suite_crashes_kafkas_window_store_inside_its_commit_only(fresh_build, cli, tmp_path):  # noqa: F811
    """The status marker's and the database close's points (4.4.0 without transactions) are reached while the
    store opens or closes, never in a commit: the window suite does not spend matrix cases on them, and says so."""
    done, verdict = _short_verify(cli, fresh_build, tmp_path, "kafka-streams-4.4.0-rocksdb-window", timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    matrix = [case for case in verdict["cases"] if case.startswith("matrix")]
    assert any("ks.window.commit.enter" in case for case in matrix), matrix
    assert not [case for case in matrix if ".open." in case or ".close." in case], matrix
    assert any("ks.rocksdb.open.status" in line and "never inside a commit" in line for line in verdict["not_checked"])
    assert verdict["coverage"]["exercised"]["atomic_commit"] > 0
    assert _our_jvms(fresh_build) == []
