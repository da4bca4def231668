"""Kafka Streams' own state stores (4.4.0 with KIP-892's transactions on and off, 4.3.1) under the store
suites: opened in a JVM through Kafka's public ``Stores`` builders, driven over a pipe, crashed at points
woven into Kafka's commit.

The tests marked ``jvm`` build the JVM side from nothing into a temp folder once per session (the jars
come from the shared cache, fetched and checked as every bundle is) and leave no JVM behind."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest
from eos_harness.kafka_streams.build import BUILD_ENV, ensure_built, store_java
from eos_harness.process.server import ChildCrashed, StoreServer
from eos_harness.store import TopicPartition

# Kafka Streams' stores the harness offers, by version and kind of store (RocksDB's are persistent), with
# KIP-892's transactions (4.4.0 only: a name ending "-tx") and without.
KAFKA_STORE_VARIANTS = (("4.4.0", "rocksdb", True), ("4.4.0", "rocksdb", False), ("4.4.0", "memory", True),
                        ("4.4.0", "memory", False), ("4.3.1", "rocksdb", False), ("4.3.1", "memory", False))


def kafka_streams_stores(window: bool = False) -> dict[str, tuple[str, bool, bool]]:
    """name: (version, transactional, persistent) of each of Kafka Streams' key-value stores, or window stores."""
    return {f"kafka-streams-{version}-{kind}{'-window' if window else ''}{'-tx' if tx else ''}":
            (version, tx, kind == "rocksdb") for version, kind, tx in KAFKA_STORE_VARIANTS}


KAFKA_STORES = kafka_streams_stores()
TX_ROCKSDB = "kafka-streams-4.4.0-rocksdb-tx"
TP = TopicPartition("app-store-changelog", 0)


def test_kafka_streams_stores_are_listed_with_their_system_and_version_and_kept_out_of_default_campaigns(cli):
    listed = {row["name"]: row for row in json.loads(cli.invoke("stores", "--json").stdout)}
    for name, (version, transactional, persistent) in KAFKA_STORES.items():
        row = listed[name]
        assert (row["system"], row["version"], row["kind"], row["transactional"]) == \
            ("kafka-streams", version, "store", transactional), row
        assert row["manages_offsets"] is persistent
    assert listed["rocksdb-indexed"]["system"] == "eos-harness"
    from eos_harness.suites.conformance.plan import subjects
    from eos_harness.suites.lifecycle.plan import default_stores

    assert not set(KAFKA_STORES) & set(subjects(None))  # a JVM per store process: run when named
    assert not set(KAFKA_STORES) & set(default_stores())
    refused = cli.invoke("chaos", "--stores", "kafka-streams-9.9.9-rocksdb")  # a name chaos --stores knows
    assert refused.returncode == 2 and all(name in refused.stderr for name in KAFKA_STORES), refused.stderr


def _our_jvms(build: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(build) in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.fixture(scope="session")
def fresh_build(tmp_path_factory):
    """The JVM side of 4.4.0 built from nothing (javac, RocksDB's native library, the class-data archive)
    into a temp folder; every JVM started from it is gone at the end."""
    build = tmp_path_factory.mktemp("kafka-streams-build")
    saved = os.environ.get(BUILD_ENV)
    os.environ[BUILD_ENV] = str(build)
    started = time.monotonic()
    server = ensure_built("4.4.0")
    print(f"built the Kafka Streams 4.4.0 store server from nothing in {time.monotonic() - started:.1f} s")
    assert server.jar.is_file() and (server.folder / "native").is_dir()
    java = store_java()  # what its JVMs map: on Java 25 on the AOT cache (none with an agent), else the archive
    mapped = f"-XX:AOTCache={server.aot_cache(java)}" if java.aot else f"-XX:SharedArchiveFile={server.folder / 'server.jsa'}"
    assert mapped in server.command()
    if java.aot:
        assert mapped not in server.command(agent=True)
    assert (server.aot_cache(java) if java.aot else server.folder / "server.jsa").is_file()
    try:
        yield build
    finally:
        if saved is None:
            os.environ.pop(BUILD_ENV, None)
        else:
            os.environ[BUILD_ENV] = saved
    assert _our_jvms(build) == []


@pytest.mark.jvm
def test_a_crash_point_woven_into_kafkas_commit_kills_the_store_there_and_the_store_recovers(fresh_build, tmp_path):
    with StoreServer(timeout=120) as server:
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        store.call("put", b"a", b"1")
        assert store.call("rc_get", b"a") is None  # Kafka's readOnly(READ_COMMITTED): not committed yet
        store.call("commit", {TP: 1})
        store.call("close")  # flushed: the commit is on disk
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        jvm = store.lent.pid
        store.call("put", b"b", b"2")
        store.call("arm", "ks.rocksdb.commit.before_write_batch", 1)
        with pytest.raises(ChildCrashed) as died:
            store.call("commit", {TP: 2})
        assert died.value.point == "ks.rocksdb.commit.before_write_batch"
        assert not psutil.pid_exists(jvm) or psutil.Process(jvm).status() == psutil.STATUS_ZOMBIE
        store = server.start(TX_ROCKSDB, tmp_path / "store")
        assert store.call("recover", 1) is True
        assert store.call("all") == [(b"a", b"1")]  # the commit the crash stopped left nothing
        assert store.call("committed_offset", TP) == 1  # and its data and offset belong together
        store.call("put", b"c", b"3")
        store.call("commit", {TP: 3})
        assert store.call("rc_all") == [(b"a", b"1"), (b"c", b"3")]
        store.call("close")
    assert server.crashes["ks.rocksdb.commit.before_write_batch"] == 1
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_verify_of_an_offsets_scenario_crashes_kafkas_store_and_finds_its_offsets_and_data_together(fresh_build, cli,
                                                                                                    tmp_path):
    """The CI-sized verify: one offsets scenario (the store SIGKILLed, its JVM with it, between commits of
    several partitions), each of its checks met and passed on Kafka's own store."""
    out = tmp_path / "verdict.json"
    done = cli("verify", TX_ROCKSDB, "--seed", "3", "--offsets-scenario", "partitions_crash", "--json", out,
               env={BUILD_ENV: str(fresh_build)}, timeout=300)
    verdict = json.loads(out.read_text())
    assert done.returncode == 0, (done.stdout, verdict["violations"])
    assert verdict["verdict"] == "pass"
    checks = verdict["offsets"]["checks"]
    assert {name: checks[name] for name in ("offsets_match_data", "partitions_committed_together",
                                            "partition_offset_exact", "partition_offset_survives_reopen")} == \
        dict.fromkeys(("offsets_match_data", "partitions_committed_together", "partition_offset_exact",
                       "partition_offset_survives_reopen"), "pass"), checks
    assert "SLF4J" not in done.stdout + done.stderr  # Kafka's logging goes to the store's output, not the terminal
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
@pytest.mark.slow  # ~30 store JVMs (a crash kills one): minutes on a loaded 2-core machine
def test_verify_runs_the_conformance_and_offsets_suites_on_kafkas_transactional_rocksdb_store(fresh_build, cli,
                                                                                              tmp_path):
    out = tmp_path / "verdict.json"
    done = cli("verify", TX_ROCKSDB, "--seed", "3", "--examples", "1", "--steps", "12", "--json", out,
               env={BUILD_ENV: str(fresh_build)}, timeout=300)
    verdict = json.loads(out.read_text())
    assert done.returncode == 0, (done.stdout, verdict["violations"])
    assert verdict["verdict"] == "pass"
    crashed = {p["name"] for p in verdict["points"] if p["crashes"]}  # the points inside Kafka's code, reached and crashed at
    assert "ks.rocksdb.commit.before_write_batch" in crashed, verdict["points"]
    assert any("committed_durable" in line for line in verdict["not_checked"])  # declared, and said
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_points_lists_the_crash_points_of_kafkas_store_with_the_java_method_each_sits_in(fresh_build, cli):
    done = cli("points", "--store", TX_ROCKSDB, "--json", env={BUILD_ENV: str(fresh_build)}, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"ks.commit.enter", "ks.rocksdb.commit.enter", "ks.rocksdb.commit.before_offsets",
                         "ks.rocksdb.commit.before_write_batch", "ks.rocksdb.commit.after_write_batch",
                         "ks.rocksdb.commit.exit", "ks.rocksdb.close.db"}  # no status marker points: transactional
    assert all(row["reached"] for row in rows.values()), rows  # one run of the store reaches each
    assert "RocksDBTransactionBuffer.flushToBase" in rows["ks.rocksdb.commit.before_write_batch"]["description"]
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_the_lifecycle_runs_kafkas_store_crashed_inside_kafka_in_a_task_process_and_leaves_no_jvm(fresh_build, cli,
                                                                                               tmp_path):
    out = tmp_path / "run"
    done = cli("run", "--store", TX_ROCKSDB, "--crash-at", "ks.rocksdb.commit.before_write_batch", "--seed", "1",
               "--out", out, "--no-report", "--json", tmp_path / "verdict.json", env={BUILD_ENV: str(fresh_build)},
               timeout=300)
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert done.returncode == 0, (done.stdout, verdict.get("violations"))
    assert verdict["verdict"] == "pass"
    assert "ks.rocksdb.commit.before_write_batch" in done.stdout  # the point was hit, in the task's own JVM
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_store_servers_inside_a_shared_pool_reuse_a_cleanly_closed_jvm_and_none_outlives_the_pool(fresh_build,
                                                                                                   tmp_path):
    from eos_harness.kafka_streams.pool import shared

    with shared(lambda: None):
        with StoreServer(timeout=120) as server:
            store = server.start(TX_ROCKSDB, tmp_path / "a")
            first = store.lent.pid
            store.call("put", b"a", b"1")
            store.call("commit", {TP: 1})
            store.call("close")
        assert psutil.pid_exists(first)  # the server is gone; its JVM, its store closed, waits in the pool
        with StoreServer(timeout=120) as server:
            store = server.start(TX_ROCKSDB, tmp_path / "a")
            assert store.lent.pid == first  # the next server's store is served by it, no JVM started
            assert store.call("all") == [(b"a", b"1")]
            store.call("put", b"b", b"2")  # left open: the server's exit kills the store and its JVM
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_a_store_released_at_a_cases_end_closes_without_its_armed_point_and_its_jvm_serves_the_next(fresh_build,
                                                                                                   tmp_path):
    from eos_harness.kafka_streams.pool import shared

    with shared(lambda: None), StoreServer(timeout=120) as server:
        store = server.start(TX_ROCKSDB, tmp_path / "a")
        first = store.lent.pid
        store.call("put", b"a", b"1")
        store.call("commit", {TP: 1})
        store.call("put", b"b", b"2")  # never committed: the clean close drops it
        store.call("arm", "ks.rocksdb.close.db", 1)  # a point of the close, armed and never reached in the case
        store.release()
        assert not store.alive and not server.crashes  # closed cleanly: the armed point did not fire
        again = server.start(TX_ROCKSDB, tmp_path / "a")
        assert again.lent.pid == first  # the released store's JVM, no new start
        assert again.call("all") == [(b"a", b"1")]
        assert again.call("committed_offset", TP) == 1
    assert _our_jvms(fresh_build) == []


@pytest.mark.jvm
def test_a_jvm_the_shared_pool_started_in_a_scenario_thread_that_ended_serves_another_threads_store(fresh_build,
                                                                                                     tmp_path):
    # A campaign runs its scenarios in threads, and they share the pool: a JVM one scenario's thread started
    # (the pool starts the next as one dies) serves the store of a scenario in another thread after the first
    # ended. (The JVM's parent-death signal fires when the thread that started it ends: it killed such a JVM,
    # and the borrowing task's store failed its open, a false store_raised.)
    import threading

    from eos_harness.kafka_streams.pool import shared

    with shared(lambda: None) as pool:
        lent, done = threading.Event(), threading.Event()
        started: list = []

        def scenario() -> None:  # starts a JVM into the pool, and ends once another thread's store borrowed it
            started.append(pool.take("4.4.0"))
            pool.give_back(started[0])
            lent.set()
            done.wait(60)

        thread = threading.Thread(target=scenario)
        thread.start()
        assert lent.wait(120)
        with StoreServer(timeout=120) as server:
            store = server.start(TX_ROCKSDB, tmp_path / "a")
            assert store.lent is started[0]
            done.set()
            thread.join()
            time.sleep(0.5)
            store.call("put", b"a", b"1")
            store.call("commit", {TP: 1})
            assert store.call("all") == [(b"a", b"1")]
            store.call("close")
    assert _our_jvms(fresh_build) == []
