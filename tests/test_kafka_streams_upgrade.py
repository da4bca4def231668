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


@pytest.mark.jvm
@pytest.mark.parametrize("store", ["kafka-streams-4.4.0-rocksdb", "kafka-streams-4.3.1-rocksdb"])
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
@pytest.mark.parametrize("store", list(STATUS_POINTS))
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
