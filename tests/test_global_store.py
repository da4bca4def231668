"""The global-store workload: one store fed by 3 changelog partitions (each write to its key's partition),
through the EOS task runtime and the lifecycle checks, on the embedded broker: every partition is
committed, checkpointed and restored from its own offset; a crash in every window keeps EOS on a
correct store, and a store that tears data from offsets, or one partition's offset from another's,
is caught by the check that names its mistake."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from eos_harness.broker import connect
from eos_harness.models.workloads import (
    DEFAULT_WORKLOADS,
    GLOBAL_PARTITIONS,
    WORKLOADS,
    changelog_partition,
    workload,
)
from eos_harness.runtime import (
    P_AFTER_EOS,
    P_CLOSE_MID,
    P_MID_BATCH,
    P_MID_REPLAY,
    Task,
    TaskConfig,
    create_topics,
)
from eos_harness.runtime.checkpoint import read_checkpoint
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores.indexed import P_AFTER_WRITE, P_BEFORE_WRITE
from eos_harness.stores.registry import resolve
from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS, plan
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault

GLOBAL = "global"


def checks(result: dict) -> set[str]:
    return {v["check"] for v in result["violations"]}


def run_task(store: str, tmp_path: Path, seed: int = 5, partitions: int = 0) -> tuple[TaskConfig, dict[TopicPartition, int]]:
    """One clean task instance in this process (recover, process the whole input, close); its config
    and the end offset of each changelog partition."""
    config = TaskConfig(store=store, broker=f"embedded:{tmp_path / 'broker.sqlite'}", state_dir=str(tmp_path / "state"),
                        workload=GLOBAL, changelog_partitions=partitions)
    broker = connect(config.broker)
    create_topics(broker, config)
    broker.produce(config.input_topic, 0, workload(GLOBAL).generate(random.Random(seed), 60))
    Task(config).run()
    ends = {tp: broker.end_offset(tp) for tp in config.changelog_tps}
    broker.close()
    return config, ends


def test_the_global_workload_is_fed_by_three_partitions_and_is_drawn_only_when_named():
    assert GLOBAL in WORKLOADS and GLOBAL not in DEFAULT_WORKLOADS
    assert WORKLOADS[GLOBAL].changelog_partitions == GLOBAL_PARTITIONS >= 3
    # The plan of a campaign that names no workload is the one it always was; naming it draws it.
    default = [(s.store, s.workload, s.seed) for s in itertools.islice(plan(7, ["rocksdb-indexed"], DEFAULT_WORKLOADS), 40)]
    assert GLOBAL not in {w for _, w, _ in default}
    chosen = list(itertools.islice(plan(7, ["rocksdb-indexed", "memory"], [GLOBAL]), 30))
    assert {s.workload for s in chosen} == {GLOBAL}
    # One record's two writes (its key and the running total) land on different partitions.
    records = workload(GLOBAL).generate(random.Random(1), 120)
    assert {changelog_partition(key, GLOBAL_PARTITIONS) for key, _ in records} == set(range(GLOBAL_PARTITIONS))


@pytest.mark.parametrize("partitions", [0, 5], ids=["the workload's 3", "5"])
def test_every_partition_is_committed_with_the_data_and_checkpointed(partitions, tmp_path):
    # A store that manages offsets: after a clean close it holds each partition's changelog end.
    config, ends = run_task("rocksdb-indexed", tmp_path / "indexed", partitions=partitions)
    assert len(config.changelog_tps) == (partitions or GLOBAL_PARTITIONS)
    assert all(end > 0 for end in ends.values()), ends
    store = resolve("rocksdb-indexed")()
    store.init(StoreContext(config.store_dir, config.application_id, config.task_id, config.store_name,
                            config.changelog_tp, changelogs=config.changelog_tps))
    assert {tp: store.committed_offset(tp) for tp in config.changelog_tps} == ends
    assert store.committed_offset(TopicPartition(config.changelog_topic, len(ends))) is None
    store.close()
    # A store that does not: the task's .checkpoint holds every partition.
    legacy, legacy_ends = run_task("rocksdb-legacy", tmp_path / "legacy", partitions=partitions)
    assert read_checkpoint(legacy.checkpoint_path) == legacy_ends


WINDOWS = [Fault(point, 1 if point == P_CLOSE_MID else 2) for point in LIFECYCLE_POINTS] + [
    Fault(P_BEFORE_WRITE, 2), Fault(P_AFTER_WRITE, 2),  # inside the store's commit
    Fault(P_AFTER_EOS, 2, "freeze"),  # a zombie, fenced when it wakes
    Fault("kill", 9),
]


@pytest.mark.parametrize("fault", WINDOWS, ids=str)
def test_a_crash_in_every_window_keeps_every_partition_exactly_once(fault, tmp_path):
    result = run_scenario(Scenario("rocksdb-indexed", GLOBAL, 3, (fault,)), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"], "the fault never fired"


@pytest.mark.parametrize("store", ["rocksdb-secondary", "memory", "rocksdb-legacy"])
def test_a_crash_during_a_roll_forward_restore_of_three_partitions_is_harmless(store, tmp_path):
    result = run_scenario(Scenario(store, GLOBAL, 4, (Fault(P_AFTER_EOS, 2), Fault(P_MID_REPLAY))), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == [P_AFTER_EOS, P_MID_REPLAY]
    after_crash = result["recovery"][1]
    if store == "rocksdb-secondary":  # the roll forward: the commit the store missed, from all three partitions
        assert after_crash["replayed_records"] == after_crash["uncommitted_tail"] == 20
    else:  # not persistent, or wiped (legacy): every partition from its start
        assert after_crash["replayed_records"] == after_crash["changelog_length"] == 40


@pytest.mark.parametrize(("store", "fault", "check"), [
    ("mutant-split-offsets-write", Fault("store.commit.between_data_and_offsets", 2), "atomic_commit"),
    ("mutant-offsets-before-data", Fault("store.commit.between_offsets_and_data", 2), "atomic_commit"),
    ("mutant-offsets-first-partition-only", Fault(P_AFTER_EOS, 2), "partitions_one_commit"),
    ("rocksdb-legacy-nowipe", Fault(P_MID_BATCH, 15), "no_uncommitted_survives"),
], ids=lambda value: value if isinstance(value, str) else str(value))
def test_a_store_that_breaks_eos_on_a_global_store_is_caught_by_the_check_naming_its_mistake(store, fault, check,
                                                                                            tmp_path):
    result = run_scenario(Scenario(store, GLOBAL, 3 if store.startswith("mutant") else 2, (fault,)), tmp_path)
    assert result["verdict"] == "fail"
    assert check in checks(result), result["violations"]


# The offsets suite's mutant: data with the first partition's offset, each other partition's offset in
# a write of its own. Each instance's restore commit reaches its point twice (all offsets unchanged
# then); @3 is the first commit of processed records, between partitions 0 and 1.
TORN = ("mutant-offsets-partition-apart", Fault("store.commit.between_partitions", 3))


def test_one_partition_offset_written_apart_from_the_others_is_caught_by_partitions_one_commit(tmp_path):
    store, fault = TORN
    result = run_scenario(Scenario(store, GLOBAL, 3, (fault,)), tmp_path)
    assert result["verdict"] == "fail"
    torn = [v for v in result["violations"] if v["check"] == "partitions_one_commit"]
    assert torn, result["violations"]
    # the first partition's offset is the new commit's, the others' the commit before
    assert "partition 1" in torn[0]["detail"] and "partition 2" in torn[0]["detail"]
    assert "partition 0" not in torn[0]["detail"]
    # the same store, without the crash between its partitions, keeps EOS
    clean = run_scenario(Scenario(store, GLOBAL, 3, (Fault(P_AFTER_EOS, 2),)), tmp_path / "clean")
    assert clean["verdict"] == "pass", clean["violations"]


@pytest.mark.kafka
def test_three_partitions_on_kafka_roll_forward_and_a_torn_commit_is_caught(eos_kafka_cluster, tmp_path):
    # On Kafka each partition's offsets skip the transaction markers: every partition is restored
    # from its own committed offset all the same.
    result = run_scenario(Scenario("rocksdb-indexed", GLOBAL, 4, (Fault(P_AFTER_EOS, 2), Fault(P_MID_REPLAY)),
                                   broker=eos_kafka_cluster.spec), tmp_path / "indexed")
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == [P_AFTER_EOS, P_MID_REPLAY]
    assert result["recovery"][1]["replayed_records"] == result["recovery"][1]["uncommitted_tail"] == 20
    store, fault = TORN
    torn = run_scenario(Scenario(store, GLOBAL, 3, (fault,), broker=eos_kafka_cluster.spec), tmp_path / "torn")
    assert torn["verdict"] == "fail"
    assert "partitions_one_commit" in checks(torn), torn["violations"]


def test_a_mutant_is_caught_for_its_mistake_alone_after_a_clean_close_left_a_checkpoint(tmp_path):
    """Two instances: the first closes cleanly (its .checkpoint is imported when the store reopens);
    the mutant must then fail on the partition it forgets, not on a crash of its own."""
    result = run_scenario(Scenario("mutant-offsets-first-partition-only", GLOBAL, 3, (Fault(P_AFTER_EOS, 2),)),
                          tmp_path)
    assert "store_raised" not in checks(result), result["violations"]
    assert "partitions_one_commit" in checks(result), result["violations"]


def test_a_global_campaign_leaves_out_the_mutant_whose_mistake_it_cannot_reach_and_says_why(cli, tmp_path):
    """The global workload never range-scans: a campaign over it cannot catch a store whose range scans
    are wrong, so that store is left out with the reason (not a "NOT CAUGHT" failing the campaign); a
    mutant whose mistake is in an operation it does use (delete) is run and caught."""
    import json

    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "rocksdb-indexed,mutant-range-ignores-tombstones,mutant-delete-drops-from-overlay",
               "--workloads", "global", "--scenarios", "16", "--seed", "7", "--out", out, "--no-report")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert ("left out: mutant-range-ignores-tombstones: its mistake is in range, which none of the workloads "
            "global uses") in proc.stdout
    campaign = json.loads((out / "chaos.json").read_text())
    assert set(campaign["left_out"]) == {"mutant-range-ignores-tombstones"}
    stores = campaign["summary"]["stores"]
    assert "mutant-range-ignores-tombstones" not in stores and campaign["summary"]["unexpected"] == []
    assert stores["mutant-delete-drops-from-overlay"]["status"] == "caught"
    assert stores["rocksdb-indexed"]["status"] == "ok" and stores["rocksdb-indexed"]["scenarios"] >= 2

    # Stopped (at the first caught mutant) and resumed: the same store is left out again, and said so.
    stopped = tmp_path / "stopped"
    first = cli("chaos", "--stores", "mutant-range-ignores-tombstones,mutant-delete-drops-from-overlay",
                "--workloads", "global", "--scenarios", "8", "--seed", "7", "--until-failure", "--out", stopped,
                "--no-report")
    assert first.returncode == 0 and "left out: mutant-range-ignores-tombstones" in first.stdout, first.stdout
    resumed = cli("chaos", "--resume", stopped)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "left out: mutant-range-ignores-tombstones" in resumed.stdout
    whole = json.loads((stopped / "chaos.json").read_text())
    assert set(whole["left_out"]) == {"mutant-range-ignores-tombstones"}
    assert {r["store"] for r in whole["scenarios"]} == {"mutant-delete-drops-from-overlay"}

    alone = cli("chaos", "--stores", "mutant-range-ignores-tombstones", "--workloads", "global", "--scenarios", "2",
                "--seed", "7", "--out", tmp_path / "alone", "--no-report")
    assert alone.returncode == 2 and "no store left to run: mutant-range-ignores-tombstones: its mistake is in " \
        "range" in alone.stderr, alone.stdout + alone.stderr
