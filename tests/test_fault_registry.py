"""Fault kinds live in one registry (``eos_harness.faults.kinds``): the schedule parser, the
lifecycle driver and the planners read it, so a new kind is one entry. The plans the registry
feeds are the same, seed for seed, as before it existed."""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from eos_harness.broker.spec import parse
from eos_harness.faults import kinds
from eos_harness.faults.spark import CrashTarget, parse_target
from eos_harness.suites.lifecycle.plan import affects_cluster, kafka_faults, plan
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault, ScheduleError, parse_schedule
from eos_harness.suites.spark.plan import plan as spark_plan

STORES = ["memory", "rocksdb-indexed", "rocksdb-secondary", "mutant-marker-deleted-early", "rocksdb-legacy-nowipe"]
WORKLOADS = ["counter", "tombstones", "range-aggregate", "put-all", "large-values", "many-keys"]
KAFKA_FAULTS = ["broker-kill", "broker-pause", "coordinator-kill", "txn-timeout"]


def fingerprint(scenarios) -> str:
    return hashlib.sha256("\n".join(s.repro() for s in scenarios).encode()).hexdigest()[:16]


def test_the_same_seed_gives_the_same_plan_as_before_the_registry():
    # Computed from the plans before fault kinds moved into the registry (first 300 scenarios'
    # replay commands): a change here changes what every existing seed replays.
    assert fingerprint(itertools.islice(plan(7, STORES, WORKLOADS), 300)) == "fe805f31817036b7"
    on_a_cluster = plan(7, STORES, WORKLOADS, broker=parse("kafka-local").started_at("127.0.0.1:1"),
                        broker_faults=KAFKA_FAULTS)
    assert fingerprint(itertools.islice(on_a_cluster, 300)) == "8871250d7b91f07d"
    on_a_remote_kafka = plan(7, STORES, WORKLOADS, broker="kafka://127.0.0.1:1", broker_faults=["txn-timeout"])
    assert fingerprint(itertools.islice(on_a_remote_kafka, 300)) == "e65cc805f9e3e06d"
    assert fingerprint(spark_plan(7, None)) == "2fcc2e13d1ea9880"


# A kind that exists only in this test: the driver, after the instance's n-th event, records what it
# saw and SIGKILLs the instance.
def _record_and_kill(instance, fault) -> None:
    instance.history.add(instance.number, {"type": "test_fault", "fault": fault.point, "after_events": instance.seen})
    instance.kill()


TEST_KIND = kinds.FaultKind(
    "test-recorded-kill", "test-recorded-kill@n",
    "test only: the driver records the instance's event count, then SIGKILLs it, after its n-th event",
    kinds.BY_DRIVER, draw_hit=lambda rng, name, commit_interval: rng.randint(2, 6), after_events=_record_and_kill)


def test_a_kind_registered_by_a_test_runs_through_the_schedule_the_plan_and_the_driver(tmp_path):
    with pytest.raises(ScheduleError, match="unknown crash point 'test-recorded-kill'"):
        parse_schedule("test-recorded-kill@3")
    with kinds.registered(TEST_KIND):
        assert parse_schedule("test-recorded-kill@3,kill@2") == (Fault("test-recorded-kill", 3), Fault("kill", 2))
        assert str(Fault("test-recorded-kill", 3)) == "test-recorded-kill@3"
        drawn = [sc for sc in itertools.islice(plan(3, ["memory"], ["counter"]), 300)
                 if any(f.point == TEST_KIND.name for f in sc.schedule)]
        assert drawn, "the lifecycle plan never drew the registered kind"
        assert all(2 <= f.hit <= 6 for sc in drawn for f in sc.schedule if f.point == TEST_KIND.name)
        # Run it alone, so that the verdict shows it and nothing else.
        scenario = replace(drawn[0], schedule=tuple(f for f in drawn[0].schedule if f.point == TEST_KIND.name)[:1])
        result = run_scenario(scenario, tmp_path / "run")
    hit = scenario.schedule[0].hit
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == ["test-recorded-kill"]
    events = [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]
    recorded = [e for e in events if e["type"] == "test_fault"]
    assert [(e["instance"], e["after_events"]) for e in recorded] == [(1, hit)]
    crash = next(e for e in events if e["type"] == "crash")
    assert crash["instance"] == 1 and crash["point"] == "test-recorded-kill"
    assert f"--crash-at test-recorded-kill@{hit}" in result["repro"]
    with pytest.raises(ScheduleError):  # gone with its registration
        parse_schedule("test-recorded-kill@3")


def test_what_a_kind_needs_and_whether_it_stops_a_broker_come_from_its_entry(tmp_path):
    rig = kinds.Need("a test rig", "--test-rig", lambda broker: broker.startswith("kafka://"))
    needy = replace(TEST_KIND, name="test-needs-a-rig", spelling="test-needs-a-rig@n", needs=(rig,), stops_broker=True)
    with kinds.registered(needy):
        scenario = Scenario("memory", "counter", 1, parse_schedule("test-needs-a-rig@2"))
        with pytest.raises(ScheduleError, match=r"test-needs-a-rig: needs a test rig \(--test-rig\); the broker is 'embedded'"):
            run_scenario(scenario, tmp_path / "run")
        assert not (tmp_path / "run").exists()
        assert affects_cluster(scenario)  # a campaign runs it alone
        assert kafka_faults("embedded") == []
        assert kafka_faults("kafka://127.0.0.1:1") == ["txn-timeout", "test-needs-a-rig"]
    assert kafka_faults("kafka://127.0.0.1:1") == ["txn-timeout"]  # no cluster this process started


def test_kinds_are_spelled_one_way_and_refused_where_they_cannot_apply():
    assert [str(f) for f in parse_schedule("freeze:task.commit.before_eos@2,kill@4,txn-timeout")] == [
        "freeze:task.commit.before_eos@2", "kill@4", "txn-timeout"]
    with pytest.raises(ScheduleError, match="freeze: takes a crash point, not kill"):
        parse_schedule("freeze:kill@2")
    with pytest.raises(ScheduleError, match="did you mean the fault kind broker-kill"):
        parse_schedule("broker-kil@2")
    assert parse_target("random@700") == CrashTarget("random", 700)
    with pytest.raises(ValueError, match="offsets@N, state@N, sink@N, commit@N, random@MS"):
        parse_target("kill@2")


def test_points_lists_every_fault_kind_with_its_meaning(cli):
    text = cli.invoke("points").stdout
    for kind in kinds.kinds():
        assert kind.spelling in text and kind.meaning in text, kind.name
    assert "task.commit.after_eos" in text and "kafka.commit.in_flight" in text
    rows = json.loads(cli.invoke("points", "--json").stdout)
    faults = {r["name"]: r for r in rows if r["type"] == "fault kind"}
    assert faults["broker-kill@n"]["stops_broker"] and faults["broker-kill@n"]["suite"] == "lifecycle"
    assert faults["txn-timeout@n"]["needs"] == ["a Kafka broker"] and faults["commit@N"]["suite"] == "spark"


def test_crash_points_are_declared_by_an_explicit_load_not_by_whatever_was_imported():
    # A fresh interpreter that imports only the schedule parser: the parser loads the declarations.
    code = ("from eos_harness.faults import points\n"
            "assert points.declared() == [], points.declared()\n"
            "from eos_harness.suites.lifecycle.schedule import parse_schedule\n"
            "print(parse_schedule('store.commit.after_marker@2,task.commit.after_eos'))\n"
            "names = {p.name for p in points.load_declarations('user_store')}\n"
            "assert {'task.close.mid', 'store.commit.mid_copy', 'kafka.commit.in_flight', 'user.commit.before_rename'} <= names\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent / "fixtures")
    assert proc.returncode == 0, proc.stderr
    assert "store.commit.after_marker" in proc.stdout


def test_a_campaign_runs_its_early_block_then_the_pinned_plan_with_only_faults_that_can_fire():
    # The early block (each store's own crash points and the fault windows first) is drawn from an RNG
    # of its own: after it, a campaign runs the plan pinned above, scenario for scenario, each with the
    # faults it can reach only (the pinned plan draws some that never fire: a scenario of a campaign
    # whose fault never fired is an error). A scenario left with none is not run.
    from eos_harness.stores.probe import reached_points
    from eos_harness.stores.registry import base_store
    from eos_harness.suites.lifecycle.plan import campaign_plan, early
    from eos_harness.suites.lifecycle.reach import fireable

    reached = {s: reached_points(base_store(s)) for s in STORES}
    block = early(7, STORES, WORKLOADS, 10, reached)
    assert len({s.store for s in block[:len(STORES)]}) == len(STORES), "every store in the first round"
    assert [fireable(s) for s in block] == block  # the early block draws only faults that fire
    pinned = list(itertools.islice(plan(7, STORES, WORKLOADS, reached=reached), 300))
    assert fingerprint(pinned) == "fe805f31817036b7"
    kept = [k for s in pinned if (k := fireable(s)) is not None]
    campaign = list(itertools.islice(campaign_plan(7, STORES, WORKLOADS, reached=reached), len(block) + len(kept)))
    assert campaign == block + kept
    left_out = {str(f) for s in pinned for f in s.schedule} - {str(f) for s in kept for f in s.schedule}
    assert {"task.restore.mid_replay@2", "task.restore.mid_replay@3"} <= left_out  # reached once an instance
    assert len(kept) < len(pinned) and sum(k.schedule != s.schedule for s, k in zip(pinned, map(fireable, pinned),
                                                                                    strict=True) if k) > 0
    # Two stores sharing their points start at different ones; a mutant's first scenario crashes first
    # with uncommitted writes in the store (task.commit.before_eos), then at its own point.
    secondary, marker = (next(s for s in block if s.store == name) for name in ("rocksdb-secondary",
                                                                                 "mutant-marker-deleted-early"))
    assert secondary.schedule[1].point != marker.schedule[1].point
    assert marker.schedule[0].point == "task.commit.before_eos"
    # With a global store's workload (a default chaos campaign's), each store's crash during recovery runs
    # on it (partitions_one_commit's condition): the same scenarios, no more, each window as early; a
    # task's store keeps its own workloads.
    with_global = early(7, STORES, [*WORKLOADS, "global"], 10, reached, task_stores={"memory"})
    assert [(s.store, s.seed, s.schedule) for s in with_global] == [(s.store, s.seed, s.schedule) for s in block]
    assert [fireable(s) for s in with_global] == with_global
    replays = [s for s in with_global if any(f.point == "task.restore.mid_replay" for f in s.schedule)]
    assert {s.store: s.workload for s in replays if s.store != "memory"} == dict.fromkeys(set(STORES) - {"memory"},
                                                                                          "global")
    assert all(s.workload != "global" for s in with_global if s.store == "memory")


def test_a_campaign_keeps_of_a_schedule_only_the_faults_its_scenario_reaches():
    # Each rule as the lifecycle shows it (120 records, a commit every 10: 12 commits in a fresh instance).
    from eos_harness.suites.lifecycle.reach import reachable_faults

    def kept(text: str) -> list[str]:
        return [str(f) for f in reachable_faults(parse_schedule(text), 120, 10)]

    assert kept("task.restore.mid_replay") == []  # the first instance has no changelog to replay
    assert kept("task.commit.after_eos@2,task.restore.mid_replay@2") == ["task.commit.after_eos@2"]  # once
    assert kept("task.commit.after_eos@2,task.restore.mid_replay") == ["task.commit.after_eos@2",
                                                                      "task.restore.mid_replay"]
    assert kept("task.commit.before_eos,task.restore.mid_replay") == ["task.commit.before_eos"]  # no tail for all
    # After a crash in close no input is left: no commit, a close again, no work for a driver's kill to cut.
    assert kept("task.close.mid,task.commit.before_eos@2,task.close.mid,kill@3") == [
        "task.close.mid", "task.close.mid"]
    assert kept("task.close.mid@2,kill@19") == ["kill@19"]
    assert kept("task.process.mid_batch@121") == [] and kept("task.commit.after_store@13") == []
    assert kept("task.commit.after_store@12,store.commit.after_write") == ["task.commit.after_store@12"]
    # A fault after which the task's process goes on (a broker killed) may end the instance: nothing after it.
    assert kept("broker-kill@5,task.commit.after_eos") == ["broker-kill@5"]
    # A store's own point of its close or open (Kafka Streams' database close, its status marker) is reached
    # once an instance, as task.close.mid is (a later hit never fired: 16 of 256 chaos scenarios ran as errors).
    assert kept("ks.rocksdb.close.db@3,ks.rocksdb.commit.enter@2") == ["ks.rocksdb.commit.enter@2"]
    assert kept("ks.rocksdb.close.db,ks.rocksdb.commit.enter@2,ks.rocksdb.close.status") == [
        "ks.rocksdb.close.db", "ks.rocksdb.close.status"]
    assert kept("ks.rocksdb.open.status@2") == [] and kept("ks.rocksdb.open.status") == ["ks.rocksdb.open.status"]
    # and a campaign plans them at their first hit, so that the scenario runs them.
    from eos_harness.suites.lifecycle.plan import early
    from eos_harness.suites.lifecycle.reach import fireable

    own = ["ks.commit.enter", "ks.rocksdb.open.status", "ks.rocksdb.close.status", "ks.rocksdb.close.db"]
    block = early(7, ["kafka-streams-4.4.0-rocksdb"], ["counter"], 10, {"kafka-streams-4.4.0-rocksdb": own})
    assert {str(f) for s in block for f in s.schedule if f.point in own[1:]} == set(own[1:])
    assert [fireable(s) for s in block] == block


def test_a_spark_campaign_lands_its_random_kill_while_the_restarted_run_has_work():
    # The pinned Spark plan draws the second kill up to 8 s after the restarted run's first offsets file,
    # often after that run ended (random@8000 never fired): a campaign lands it within 1 s, as random.
    from eos_harness.suites.spark.plan import campaign_plan as spark_campaign_plan

    planned, campaign = spark_plan(7, None), spark_campaign_plan(7, None)
    assert [s.schedule[0] for s in planned] == [s.schedule[0] for s in campaign]
    drawn = [int(t.split("@")[1]) for s in campaign for t in s.schedule[1:]]
    assert drawn and all(500 <= ms <= 1000 for ms in drawn) and len(set(drawn)) > 1
    assert any(int(t.split("@")[1]) > 1000 for s in planned for t in s.schedule[1:])
