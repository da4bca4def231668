"""A finding in Kafka Streams 4.4.0, shown with a real application on a real broker: with
``enable.transactional.statestores=true`` under exactly-once, a task whose RocksDB store directory has its
status marker OPEN on disk (left by a store without transactions, 4.3.1 or 4.4.0 with the setting off,
killed after RocksDB flushed uncommitted writes) never runs: the store raises TaskCorruptedException at every
initialisation and the task is never wiped.

Why, in Kafka 4.4.0's code: ``RocksDBStore.init`` throws from ``openDB`` (the marker is not CLOSED) before it
registers the store with the task's ``ProcessorStateManager``; ``TaskManager.handleCorruption`` closes the task
dirty and asks ``markChangelogAsCorrupted``, which finds no registered store to mark (its
IllegalStateException is swallowed); ``StateManagerUtil.closeStateManager`` wipes only when
``!closeClean && eosEnabled && (!transactionalStateStoresEnabled || stateMgr.hasCorruptedStores())``, false
here; the revived task meets the same marker. Without transactional stores the same condition is true: the
task is wiped once and restored (the control). It is the upgrade path this project's offsets suite checks
(``kafka_streams_upgrade``): a 4.3.1 application that crashed, restarted on 4.4.0 with KIP-892 turned on.

The test asserts what a user sees, both ways: stuck in REBALANCING with nothing processed and the directory
kept, versus RUNNING with every record processed after one wipe. Should Kafka fix it, the first half fails,
and the offsets suite's note (``suites/offsets/kafka_upgrade.py``, ``_NOT_WIPED``) must change with it."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from eos_harness.process.server import StoreServer

APP = Path(__file__).parent / "fixtures" / "kafka_streams_app" / "CountingApp.java"
RUN_MS = 20_000


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory) -> str:
    """CountingApp compiled against Kafka Streams 4.4.0: the classpath to run it with."""
    from eos_harness.jars import ensure
    from eos_harness.kafka_streams.bundles import streams_bundle

    jars = ":".join(str(p) for p in ensure(streams_bundle("4.4.0")))
    out = tmp_path_factory.mktemp("counting-app")
    subprocess.run(["javac", "-d", str(out), "-cp", jars, str(APP)], check=True, capture_output=True, timeout=120)
    return f"{jars}:{out}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from eos_harness.cluster import LocalKafka

    with LocalKafka(brokers=1, directory=tmp_path_factory.mktemp("kafka"), heap="384m") as kafka:
        yield kafka


def left_open_after_a_flush(task_dir: Path) -> set[str]:
    """Kafka Streams 4.3.1's store "counts" in ``task_dir``: a clean close, then more uncommitted data than its
    memtable and a SIGKILL once RocksDB flushed it (the OPEN marker with it). The table files on disk."""
    with StoreServer(timeout=120) as server:
        context = {"store_name": "counts"}
        store = server.start("kafka-streams-4.3.1-rocksdb", task_dir, context=context)
        store.call("put", b"k0", b"\0" * 8)
        store.call("close")
        store = server.start("kafka-streams-4.3.1-rocksdb", task_dir, context=context)
        before = {p.name for p in task_dir.rglob("*.sst")}
        store.call("put_all", [(b"big%02d" % i, b"x" * (1 << 20)) for i in range(18)])
        store.call("put", b"k1", b"\0" * 8)  # RocksDB switches the full memtable at the next write
        deadline = time.monotonic() + 60
        while not {p.name for p in task_dir.rglob("*.sst")} - before:
            assert time.monotonic() < deadline, "RocksDB never flushed the full memtable"
            time.sleep(0.05)
        time.sleep(0.5)
        store.kill()
    return {p.name for p in task_dir.rglob("*.sst")}


@pytest.mark.jvm
@pytest.mark.kafka
@pytest.mark.slow  # a broker and two 20 s applications
@pytest.mark.parametrize("transactional", [True, False])
def test_440_with_transactional_stores_never_runs_a_task_whose_marker_a_crashed_non_transactional_store_left(
        transactional, app_classes, broker, tmp_path):
    app = f"app-{'tx' if transactional else 'plain'}"
    state = tmp_path / "state"
    task_dir = state / app / "0_0"
    left = left_open_after_a_flush(task_dir)
    run = subprocess.run(["java", "-cp", app_classes, "CountingApp", broker.bootstrap_servers, str(state), str(RUN_MS),
                          str(transactional).lower(), app], capture_output=True, text=True, timeout=RUN_MS / 1000 + 90)
    lines = run.stdout.splitlines()
    processed = next(int(line.split()[1]) for line in lines if line.startswith("PROCESSED"))
    ran = "STATE REBALANCING -> RUNNING" in lines
    kept = {p.name for p in task_dir.rglob("*.sst")}
    try:
        if transactional:  # the finding: never RUNNING, nothing processed, the directory never wiped
            assert (ran, processed, kept >= left) == (False, 0, True), lines
        else:  # the control: wiped once (the old table files gone), restored, every record processed
            assert (ran, processed, kept >= left) == (True, 10, False), lines
    finally:
        shutil.rmtree(state, ignore_errors=True)
