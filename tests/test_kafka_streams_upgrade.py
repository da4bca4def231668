"""Kafka Streams' RocksDB store across a crash that left its status marker OPEN on disk, and across the
4.3.1 -> 4.4.0 upgrade of its directory.

What Kafka does (its code, 4.3.1 and 4.4.0): ``RocksDBStore`` writes the status marker OPEN into the offsets
column family at open and CLOSED at close, unless ``enable.transactional.statestores`` is on (4.4.0), where
it writes none; its writes go with RocksDB's write-ahead log off, so the marker reaches disk at the next
flush. Opening a directory whose marker is not CLOSED under exactly-once raises ``TaskCorruptedException``
("State store ... didn't find a valid state, since under EOS it has the risk of getting uncommitted data in
stores"), and Kafka Streams closes the task dirty, deletes its state directory and restores it from the
changelog. The harness's protocol calls that ``IncompatibleStoreDirectory`` from ``init``; the conformance
driver and the runtime wipe the store as Kafka does.

A flush is forced as Kafka meets one: more uncommitted data than the store's 16 MB memtable, then one more
write (RocksDB switches memtables at the next write), waiting until the flush's table files are on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from eos_harness.process.server import StoreServer
from eos_harness.suites.conformance.driver import StoreUnderTest

BIG = 1 << 20  # one value: 1 MiB
FLUSHED_AFTER = 18  # values: past the 16 MiB memtable of Kafka's RocksDB store


def flush_uncommitted(sut: StoreUnderTest) -> None:
    """Uncommitted writes past a memtable, then a write that switches it; returns once the flush (data and
    offsets column families together, atomic flush, with the status marker) is on disk."""
    before = {p.name for p in Path(sut.directory).rglob("*.sst")}
    sut.put_all([(b"big%02d" % i, bytes([65 + i]) * BIG) for i in range(FLUSHED_AFTER)])
    sut.put(b"e", b"v3")
    deadline = time.monotonic() + 60
    while not {p.name for p in Path(sut.directory).rglob("*.sst")} - before:
        assert time.monotonic() < deadline, "RocksDB never flushed the full memtable"
        time.sleep(0.05)
    time.sleep(0.5)  # the flush's MANIFEST edit follows its table files


SLOW = pytest.mark.slow  # the same on another of Kafka's stores: the slow tier


@pytest.mark.jvm
@pytest.mark.parametrize("store", ["kafka-streams-4.4.0-rocksdb", pytest.param("kafka-streams-4.3.1-rocksdb", marks=SLOW)])
def test_a_non_transactional_store_killed_after_a_flush_is_wiped_as_kafka_does_not_a_finding(store):
    # The OPEN marker reached disk with the uncommitted writes: on restart Kafka's store raises
    # TaskCorruptedException; the driver wipes it and opens it empty (Kafka's rule), no violation.
    with StoreServer(timeout=120) as server:
        sut = StoreUnderTest(server, store, "killed after a flush")
        try:
            sut.put(b"a", b"v1")
            sut.commit()
            sut.close_and_reopen()
            flush_uncommitted(sut)
            sut.kill()
            assert any("init refused its directory" in line and "TaskCorruptedException" in line
                       for line in sut.story), sut.story[-3:]
            assert sut.contents() == {} and sut.call("committed_offset", sut.commit_offsets(1).popitem()[0]) is None
            sut.put(b"b", b"v2")  # and the wiped store goes on as a new one
            sut.commit()
            sut.close_and_reopen()
        finally:
            sut.dispose()


STATUS_POINTS = {  # the points at the status marker and the database's close, by store
    "kafka-streams-4.4.0-rocksdb": ("ks.rocksdb.open.status", "ks.rocksdb.close.status", "ks.rocksdb.close.db"),
    "kafka-streams-4.3.1-rocksdb": ("ks.rocksdb.open.status", "ks.rocksdb.close.status", "ks.rocksdb.close.db"),
    "kafka-streams-4.4.0-rocksdb-tx": ("ks.rocksdb.close.db",),  # transactional: no status marker written
}


@pytest.mark.jvm
@pytest.mark.parametrize("store", [store if store == "kafka-streams-4.4.0-rocksdb" else pytest.param(store, marks=SLOW)
                                   for store in STATUS_POINTS])
def test_a_crash_at_the_status_marker_or_the_databases_close_breaks_no_promise_of_kafkas_store(store):
    # The conformance driver arms a point of the open or the close around a close and reopen (its name holds
    # ".open." / ".close."): the store dies there, inside Kafka's RocksDBStore, and recovers as after any crash.
    with StoreServer(timeout=120) as server:
        for point in STATUS_POINTS[store]:
            sut = StoreUnderTest(server, store, f"crash at {point}")
            try:
                sut.put(b"a", b"v1")
                sut.commit()
                sut.put(b"b", b"v2")  # uncommitted at the crash
                sut.crash_in_commit(point, 1)
                assert any(f"died at crash point {point}" in line for line in sut.story), sut.story[-4:]
                sut.check_reads()
                sut.check_read_committed()
                sut.put(b"c", b"v3")
                sut.commit()
                sut.close_and_reopen()
            finally:
                sut.dispose()
        assert all(server.crashes[point] == 1 for point in STATUS_POINTS[store]), dict(server.crashes)


UPGRADE_CHECKS = ("migration_keeps_offsets", "migration_keeps_keys", "offsets_match_data", "downgrade_keeps_offsets")


@pytest.mark.jvm
def test_verify_upgrades_a_directory_431_wrote_to_440_transactional_and_back_under_crashes(cli, tmp_path):
    """The offsets suite's kafka_streams_upgrade, as a user runs it: 4.3.1's directory opened by 4.4.0 with
    transactions, a crash at each point inside Kafka its open, first commits and close reach, 4.3.1 killed before
    and after a flush, and back to 4.3.1 and 4.4.0 without transactions: every check met and passed."""
    out = tmp_path / "verdict.json"
    started = time.monotonic()
    done = cli("verify", "kafka-streams-4.4.0-rocksdb-tx", "--seed", "3", "--offsets-scenario", "kafka_streams_upgrade",
               "--json", out, timeout=600)
    verdict = json.loads(out.read_text())
    assert done.returncode == 0, (done.stdout, verdict["violations"])
    offsets = verdict["offsets"]
    assert offsets["cases"] == ["offsets: kafka_streams_upgrade"] and verdict["violations"] == []
    assert {check: offsets["checks"][check] for check in UPGRADE_CHECKS} == dict.fromkeys(UPGRADE_CHECKS, "pass")
    # 4.3.1 killed after RocksDB flushed its uncommitted writes (its marker OPEN on disk): 4.4.0 refuses it
    assert any("flushed" in note and "TaskCorruptedException" in note for note in offsets["notes"]), offsets["notes"]
    print(f"kafka_streams_upgrade on kafka-streams-4.4.0-rocksdb-tx: {time.monotonic() - started:.0f} s")


def test_the_kafka_streams_upgrade_is_not_applicable_to_other_stores(cli, tmp_path):
    out = tmp_path / "verdict.json"
    done = cli("verify", "rocksdb-indexed", "--seed", "1", "--offsets-scenario", "kafka_streams_upgrade",
               "--json", out, timeout=300)
    offsets = json.loads(out.read_text())["offsets"]
    assert done.returncode == 0, done.stdout
    assert [row["scenario"] for row in offsets["not_applicable"]] == ["kafka_streams_upgrade"]
    assert "4.4.0" in offsets["not_applicable"][0]["reason"]
    assert all(offsets["checks"][check] == "not_applicable" for check in UPGRADE_CHECKS)


@pytest.mark.jvm
@pytest.mark.slow  # ~70 s each on a loaded 2-core machine
@pytest.mark.parametrize("store,fired", [
    ("kafka-streams-4.4.0-rocksdb", set()),  # the upgrade to 4.4.0 without transactions
    # the mutant refuses its own cleanly closed directory: every commit in it gone
    ("mutant-kafka-streams-4.4.0-rocksdb-tx-closed-marker-in-buffer", {"offsets_match_data"}),
])
def test_the_upgrade_scenario_on_440_without_transactions_and_on_the_status_marker_mutant(store, fired, tmp_path):
    from eos_harness.suites.offsets.kafka_upgrade import SCENARIOS

    found = SCENARIOS[0].run(store, tmp_path, 3, 120)
    assert {v.check for v in found} == fired, [v.to_json() for v in found]
    assert found.cases >= 12
