"""The task runtime's KIP-892 duties (issue 15, items 4 to 7) with real stores and real runs: the
``.checkpoint`` written on close from the store's own offsets, the offsets cache built on start
without opening a store twice, the warning for a persistent store that does not manage offsets,
commits requested by a processor (and refused when a processor commits a store), the commit
metrics in the JSON results, and a store writing outside its directory caught by ``store_directory``."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from eos_harness.runtime import TaskConfig
from eos_harness.runtime.checkpoint import write_checkpoint
from eos_harness.runtime.closing import LATEST, OffsetsCache
from eos_harness.runtime.names import naming_problems, outside_writes
from eos_harness.runtime.processor import ProcessorContext, ProcessorStore
from eos_harness.runtime.store_duties import StoreDuties, store_metrics
from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.stores.registry import resolve
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault

FIXTURES = Path(__file__).parent / "fixtures"
APP = "app"


def _events(result: dict) -> list[dict]:
    return [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]


def _passed(store: str, workload: str, records: int, fault: Fault, tmp_path: Path) -> tuple[dict, list[dict]]:
    """Run ``store`` under ``workload`` with ``fault``; the run must pass: its result and its history's events."""
    result = run_scenario(Scenario(store, workload, records, (fault,)), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    return result, _events(result)


def _open(spec: str, directory: Path, task_id: str = "0_0", store_name: str = "store", **kw):
    directory.mkdir(parents=True, exist_ok=True)
    store = resolve(spec)()
    partition = int(task_id.rpartition("_")[2])
    store.init(StoreContext(directory=directory, application_id=APP, task_id=task_id, store_name=store_name,
                            changelog=TopicPartition(f"{APP}-{store_name}-changelog", partition), **kw))
    return store


def _committed(spec: str, app_dir: Path, task_id: str, store_name: str, offsets: dict | None) -> None:
    """A store of ``task_id`` with one committed write and ``offsets`` (None: never committed), closed."""
    store = _open(spec, app_dir / task_id / "rocksdb" / store_name, task_id, store_name)
    store.put(b"k", b"v")
    if offsets is not None:
        store.commit(offsets)
    store.close()


# -- closed stores --------------------------------------------------------------------------
@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-secondary"])
def test_closing_a_task_writes_its_checkpoint_from_the_stores_committed_offset(store, tmp_path):
    _, events = _passed(store, "counter", 5, Fault("task.commit.after_store", 3), tmp_path)
    tp = f"{events[0]['application_id']}-store-changelog-0"
    # The instance after the clean close reads the .checkpoint (before its store opens and, upgraded, imports
    # and removes it): it holds the store's committed offset, the changelog end...
    last_start = [e for e in events if e["type"] == "offsets_cache"][-1]
    assert last_start["tasks"]["0_0"]["source"] == "checkpoint"
    assert last_start["tasks"]["0_0"]["offsets"] == {tp: 120}
    # ...which is what the store itself says it committed.
    last_recover = [e for e in events if e["type"] == "recover"][-1]
    assert last_recover["store_offset"] == 120 and last_recover["manages_offsets"]


def test_the_offsets_cache_opens_each_store_without_a_checkpoint_once_and_gives_sums_and_lags(tmp_path):
    app_dir = tmp_path / APP
    tp = {n: TopicPartition(f"{APP}-{s}-changelog", n % 10) for n, s in ((0, "a"), (1, "a"), (12, "b"), (2, "a"))}
    # 0_0 closed cleanly: its .checkpoint holds 40; its store must not be opened.
    _committed("rocksdb-indexed", app_dir, "0_0", "a", {tp[0]: 40})
    write_checkpoint(app_dir / "0_0" / ".checkpoint", {tp[0]: 40})
    # 0_1 crashed (no .checkpoint): its store says 7.
    _committed("rocksdb-indexed", app_dir, "0_1", "a", {tp[1]: 7})
    # 0_2 crashed with two stores, one committed (a: 5), one never committed (b).
    _committed("rocksdb-indexed", app_dir, "0_2", "a", {tp[2]: 5})
    _committed("rocksdb-indexed", app_dir, "0_2", "b", None)
    # 0_3 crashed with a store that does not manage offsets: opened once, no offset.
    _committed("rocksdb-legacy", app_dir, "0_3", "a", None)
    gc.collect()  # RocksDB's lock is released when the last handle is freed

    opens: list[Path] = []

    def open_store(context: StoreContext):
        opens.append(context.directory)
        spec = "rocksdb-legacy" if context.task_id == "0_3" else "rocksdb-indexed"
        store = resolve(spec)()
        store.init(context)
        return store

    def changelogs_of(task_id: str, store_name: str):
        return (TopicPartition(f"{APP}-{store_name}-changelog", int(task_id.rpartition("_")[2])),)

    cache = OffsetsCache.build(app_dir, APP, open_store, changelogs_of)
    assert sorted(opens) == sorted(app_dir / t / "rocksdb" / s for t, s in (("0_1", "a"), ("0_2", "a"), ("0_2", "b"),
                                                                            ("0_3", "a")))
    assert len(set(opens)) == len(opens), "a store was opened twice"
    assert cache.offset_sums() == {"0_0": 40, "0_1": 7, "0_2": 5, "0_3": 0}
    ends = {"0_0": {tp[0]: 50}, "0_1": {tp[1]: 7}, "0_2": {tp[2]: 9, TopicPartition(f"{APP}-b-changelog", 2): 3},
            "0_3": {TopicPartition(f"{APP}-a-changelog", 3): 11}}
    assert cache.lags(ends) == {"0_0": 10, "0_1": 0, "0_2": 4 + 3, "0_3": 11}
    # A task that restores here is caught up; on close it holds what its .checkpoint says. No store is opened.
    cache.restored("0_1", [tp[1]])
    assert cache.offset_sums()["0_1"] == LATEST and cache.lags(ends)["0_1"] == 0
    cache.closed("0_1", {tp[1]: 9})
    assert cache.offset_sums()["0_1"] == 9 and cache.lags({"0_1": {tp[1]: 12}})["0_1"] == 3
    assert len(opens) == 4


def test_the_runtime_builds_the_cache_on_start_from_the_checkpoint_without_opening_its_own_store(tmp_path):
    _, events = _passed("rocksdb-indexed", "counter", 2, Fault("task.commit.after_store", 2), tmp_path)
    caches = [e for e in events if e["type"] == "offsets_cache"]
    assert len(caches) == 3 and all(c["opened"] == [] for c in caches)
    assert caches[0]["tasks"] == {} and caches[1]["tasks"] == {}  # nothing on disk; then a crash: no .checkpoint
    last = caches[2]["tasks"]["0_0"]  # after a clean close: the closing .checkpoint, caught up
    assert last["source"] == "checkpoint" and last["offset_sum"] == 120 and last["lag"] == 0


def test_the_runtimes_offsets_cache_asks_a_global_store_of_another_task_for_every_partition(tmp_path):
    from eos_harness.broker import connect

    config = TaskConfig(store="rocksdb-indexed", broker=f"embedded:{tmp_path / 'broker.sqlite'}",
                        state_dir=str(tmp_path / "state"), workload="global", application_id=APP)
    tps = config.changelog_tps
    assert len(tps) == 3
    broker = connect(config.broker)
    broker.create_topic(config.changelog_topic, len(tps))
    broker.produce(config.changelog_topic, 2, [(b"k", b"v")] * 9)  # partition 2's end: 9
    # Task 0_1 crashed (no .checkpoint) holding a global store that committed all three partitions.
    store = _open("rocksdb-indexed", Path(config.state_dir) / APP / "0_1" / "rocksdb" / "store", "0_1",
                  changelogs=tps)
    store.put(b"k", b"v")
    store.commit({tps[0]: 0, tps[1]: 0, tps[2]: 6})
    store.close()
    gc.collect()

    events: list[dict] = []
    StoreDuties(config, events.append).on_start(broker, resolve("rocksdb-indexed"))
    (cache,) = [e for e in events if e["type"] == "offsets_cache"]
    other = cache["tasks"]["0_1"]
    assert other["offsets"] == {str(tps[0]): 0, str(tps[1]): 0, str(tps[2]): 6}, "a partition of the global store was not asked"
    assert other["offset_sum"] == 6 and other["lag"] == 3
    broker.close()


def test_a_persistent_store_that_does_not_manage_offsets_gets_one_warning(tmp_path):
    legacy = run_scenario(Scenario("rocksdb-legacy", "counter", 1, (Fault("task.commit.after_eos", 2),)), tmp_path / "l")
    assert legacy["verdict"] == "pass", legacy["violations"]
    assert len(legacy["warnings"]) == 1, legacy["warnings"]
    assert "'store'" in legacy["warnings"][0] and "manages_offsets() return True" in legacy["warnings"][0]
    assert sum(e["type"] == "store_warning" for e in _events(legacy)) == 3  # at each instance's init, once
    for store in ("rocksdb-indexed", "memory"):
        result = run_scenario(Scenario(store, "counter", 1), tmp_path / store)
        assert result["warnings"] == [], store


def test_the_run_cli_shows_the_warning_and_the_metrics_in_its_json(cli, tmp_path):
    out = tmp_path / "v.json"
    proc = cli("run", "--store", "rocksdb-legacy", "--seed", "4", "--out", tmp_path / "r", "--json", out, "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("does not manage its own offsets") == 1, proc.stdout
    data = json.loads(out.read_text())
    names = {m["name"] for m in data["metrics"]}
    assert names == {"commit-rate", "commit-latency-avg", "commit-latency-max"}
    tags = data["metrics"][0]["tags"]
    assert tags["type"] == "stream-state-metrics" and tags["task-id"] == "0_0" and tags["rocksdb-state-id"] == "store"
    assert tags["thread-id"].endswith("-StreamThread-1")


# -- commit from a processor ----------------------------------------------------------------
@pytest.mark.parametrize("spec", ["rocksdb-indexed", "rocksdb-secondary", "rocksdb-legacy", "memory"])
def test_a_store_reached_through_a_processor_refuses_commit(spec, tmp_path):
    store = _open(spec, tmp_path / "s")
    try:
        view = ProcessorStore(store, ProcessorContext("0_0"))
        view.put(b"k", b"v")
        with pytest.raises(CommitFromProcessorError, match=r"context\.commit\(\)"):
            view.commit({TopicPartition(f"{APP}-store-changelog", 0): 1})
        view.flush()  # a no-op: nothing committed
        if store.transactional():
            assert store.read_committed().get(b"k") is None
        view.context.commit()
        assert view.context.take_request() and not view.context.take_request()
    finally:
        store.close()
    # The real store itself, initialised for a processor, refuses too.
    direct = _open(spec, tmp_path / "p", via_processor=True)
    try:
        with pytest.raises(CommitFromProcessorError):
            direct.commit({TopicPartition(f"{APP}-store-changelog", 0): 1})
    finally:
        direct.close()


@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-legacy"])
def test_a_commit_requested_by_the_processor_is_honoured_after_its_record(store, tmp_path):
    _, events = _passed(store, "commit-request", 6, Fault("task.commit.after_eos", 4), tmp_path)
    requested = [e for e in events if e["type"] == "commit_requested"]
    assert len(requested) >= 5
    for request in requested:  # the next event of that instance that commits is at the same position
        following = next(e for e in events if e["seq"] > request["seq"] and e["instance"] == request["instance"]
                         and e["type"] in ("commit", "crash"))
        if following["type"] == "commit":
            assert following["input_position"] == request["input_position"]
    last = requested[-1]["instance"]  # the instance that ran to the end: every request of it was committed
    committed_at = {e["input_position"] for e in events if e["type"] == "commit" and e["instance"] == last}
    asked_at = {r["input_position"] for r in requested if r["instance"] == last}
    assert asked_at and asked_at <= committed_at
    assert any(p % 10 for p in asked_at), "every request fell on a commit_interval boundary: nothing shown"


# -- metrics ---------------------------------------------------------------------------------
def test_the_commit_metrics_count_every_store_commit_and_no_flush(tmp_path):
    result, events = _passed("rocksdb-indexed", "counter", 8, Fault("task.commit.after_eos", 3), tmp_path)
    for instance in {e["instance"] for e in events if e["type"] == "metrics"}:
        commits = sum(e["type"] == "store_commit" and e["instance"] == instance for e in events)
        metrics = {m["name"]: m for m in result["metrics"] if m["instance"] == instance}
        assert metrics["commit-rate"]["count"] == commits > 0
        assert 0 < metrics["commit-latency-avg"]["value"] <= metrics["commit-latency-max"]["value"]
        assert metrics["commit-rate"]["value"] > 0
    assert {m["instance"] for m in result["metrics"]} == {2, 3}, "the crashed instance reports none"
    summary = store_metrics([result])["rocksdb-indexed"]
    assert summary["commits"] == sum(m["count"] for m in result["metrics"] if m["name"] == "commit-rate")

    # flush() through the processor's view is a no-op and is not counted.
    config = TaskConfig(store="rocksdb-indexed", broker="", state_dir=str(tmp_path / "x"), workload="counter")
    duties = StoreDuties(config, lambda event: None)
    store = _open("rocksdb-indexed", config.store_dir)
    duties.opened(store, StoreContext(directory=config.store_dir))
    view = duties.processor_view(store)
    for _ in range(5):
        view.flush()
    duties.commit(store, {config.changelog_tp: 1})
    store.close()
    assert duties.metrics.count == 1


# -- names on disk ---------------------------------------------------------------------------
def test_a_store_writing_outside_its_directory_is_caught_by_store_directory(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))  # the store children get the driver's sys.path
    result = run_scenario(Scenario("outside_writer:store", "counter", 3), tmp_path)
    assert result["verdict"] == "fail"
    found = [v for v in result["violations"] if v["check"] == "store_directory"]
    assert [v["key"] for v in found] == [str(tmp_path / "state" / _events(result)[0]["application_id"] / "0_0"
                                             / "store-debug.log")]
    assert "outside its directory" in found[0]["detail"]
    clean = run_scenario(Scenario("rocksdb-indexed", "counter", 3), tmp_path / "clean")
    assert clean["verdict"] == "pass" and not [v for v in clean["violations"] if v["check"] == "store_directory"]


def test_the_naming_rule_is_checked(tmp_path):
    good = StoreContext(directory=tmp_path / "app" / "0_1" / "rocksdb" / "counts", application_id="app", task_id="0_1",
                        store_name="counts", changelog=TopicPartition("app-counts-changelog", 1))
    assert naming_problems(good, tmp_path) == []
    bad = StoreContext(directory=tmp_path / "app" / "0_1" / "counts", application_id="app", task_id="0_1",
                       store_name="counts", changelog=TopicPartition("counts-changelog", 1))
    problems = naming_problems(bad, tmp_path)
    assert len(problems) == 2
    assert "rocksdb/counts" in problems[0] + problems[1] and "'app-counts-changelog'" in problems[0] + problems[1]
    task = tmp_path / "app" / "0_1"
    (task / "rocksdb" / "counts").mkdir(parents=True)
    (task / "rocksdb" / "counts" / "CURRENT").write_text("x")
    (task / ".checkpoint").write_text("0\n0\n")
    assert outside_writes(task, [task / "rocksdb" / "counts"]) == []
    (task / "rocksdb" / "stray.sst").write_text("x")
    assert outside_writes(task, [task / "rocksdb" / "counts"]) == [str(task / "rocksdb" / "stray.sst")]


def test_the_chaos_json_has_the_metrics_per_store(cli, tmp_path):
    out = tmp_path / "c.json"
    proc = cli("chaos", "--scenarios", "4", "--seed", "7", "--stores", "rocksdb-indexed", "--out", tmp_path / "c",
               "--json", out, "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    metrics = data["metrics"]["rocksdb-indexed"]
    assert metrics["commits"] > 0 and 0 < metrics["commit-latency-avg"] <= metrics["commit-latency-max"]
    assert all("metrics" in s for s in data["scenarios"])


def test_the_lifecycle_pytest_suite_prints_the_commit_metrics_per_store(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
                           "eos_harness.suites.lifecycle", "--eos-store=rocksdb-indexed", "-k", "counter"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    section = proc.stdout.split("commit metrics (stream-state-metrics, KIP-892)", 1)[1]
    line = next(line for line in section.splitlines() if line.startswith("rocksdb-indexed: "))
    assert " commits, commit-rate " in line and "commit-latency-avg" in line and "commit-latency-max" in line


def test_the_offsets_suite_reports_a_store_writing_outside_its_directory_with_the_path(monkeypatch):
    from eos_harness.suites.offsets.runner import verify_offsets

    monkeypatch.syspath_prepend(str(FIXTURES))
    result = verify_offsets("outside_writer:store", seed=1, only=["store_directory", "closing_checkpoint",
                                                                  "commit_from_processor"])
    assert result["verdict"] == "fail"
    assert {v["check"] for v in result["violations"]} == {"store_directory"}
    assert result["violations"][0]["key"].endswith("/app/0_0/store-debug.log")
    assert result["checks"]["checkpoint_on_close"] == result["checks"]["processor_commit_refused"] == "pass"
