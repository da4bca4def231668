"""The EOS task lifecycle end to end on the embedded broker: real child processes killed at every
crash window, checked against the model; zombies fenced; the CLI; no process left behind."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from eos_harness.runtime import P_AFTER_EOS, P_BEFORE_EOS, P_MID_REPLAY, TaskConfig
from eos_harness.stores.registry import builtin_spec
from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS, default_stores, expected_to_fail, plan
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault, ScheduleError, parse_schedule
from eos_harness.verdict import EXIT_FAIL, EXIT_PASS


def checks(result: dict) -> set[str]:
    return {v["check"] for v in result["violations"]}


# Every real store through a crash in every lifecycle window, and a crash during the recovery that
# follows one: suites/lifecycle (test_crash_window, every real store by default, under `make test`),
# which also crashes each store at every point of its own commit.


def test_roll_forward_replays_exactly_the_uncommitted_tail(tmp_path):
    if builtin_spec("rocksdb-indexed") is None:
        pytest.fail("rocksdb-indexed is not registered")
    indexed = run_scenario(Scenario("rocksdb-indexed", "counter", 1, (Fault(P_AFTER_EOS, 3),)), tmp_path / "i")
    assert indexed["verdict"] == "pass", indexed["violations"]
    after_crash = indexed["recovery"][1]
    # 10 records per commit, one write each: the tail is the 10 writes of the unapplied commit.
    assert after_crash["replayed_records"] == after_crash["uncommitted_tail"] == 10
    assert not after_crash["wiped"]
    legacy = run_scenario(Scenario("rocksdb-legacy", "counter", 1, (Fault(P_AFTER_EOS, 3),)), tmp_path / "l")
    assert legacy["verdict"] == "pass", legacy["violations"]
    assert legacy["recovery"][1]["wiped"] and legacy["recovery"][1]["replayed_records"] == 30


def test_legacy_store_without_the_wipe_keeps_uncommitted_writes(tmp_path):
    result = run_scenario(Scenario("rocksdb-legacy-nowipe", "many-keys", 2, (Fault("task.process.mid_batch", 15),)), tmp_path)
    assert result["verdict"] == "fail"
    assert "no_uncommitted_survives" in checks(result)


def test_the_unsafe_variant_is_listed_with_the_stores_and_runs_on_its_base(cli):
    listed = json.loads(cli("stores", "--json").stdout)
    assert [r["kind"] for r in listed if r["name"] == "rocksdb-legacy-nowipe"] == ["unsafe-runtime"]
    assert "rocksdb-legacy-nowipe" in default_stores() and expected_to_fail("rocksdb-legacy-nowipe")
    config = TaskConfig.for_store("rocksdb-legacy-nowipe", broker="", state_dir="", workload="counter")
    assert (config.store, config.legacy_wipe) == ("rocksdb-legacy", False)
    # Not a store of its own: checking it as one is a usage error that names the store to check.
    verify = cli("verify", "rocksdb-legacy-nowipe")
    assert verify.returncode == 2 and "check the store itself with 'rocksdb-legacy'" in verify.stderr


@pytest.mark.parametrize("store", ["memory", "rocksdb-indexed"])
def test_a_zombie_is_fenced_and_none_of_its_writes_is_read_committed(store, tmp_path):
    result = run_scenario(Scenario(store, "counter", 9, (Fault(P_BEFORE_EOS, 2, "freeze"),)), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    events = [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]
    zombie = next(e["instance"] for e in events if e["type"] == "frozen")
    assert any(e["type"] == "fenced" and e["instance"] == zombie for e in events)
    # The zombie had processed 20 records past its last commit: their outputs appear once, from the new instance.
    output = next(e for e in events if e["type"] == "output")["records"]
    assert len(output) == 120 and len({tuple(r) for r in output}) == 120


def test_the_same_seed_plans_the_same_scenarios():
    stores, workloads = ["memory"], ["counter", "tombstones"]
    first = list(itertools.islice(plan(5, stores, workloads), 30))
    assert first == list(itertools.islice(plan(5, stores, workloads), 30))
    assert first != list(itertools.islice(plan(6, stores, workloads), 30))


def test_every_store_meets_every_workload_in_its_coverage_scenarios():
    # Some mistakes show on one workload only (a range scan over a tombstone needs range-aggregate):
    # a store whose first scenarios skip a workload lets such a mutant survive a short campaign.
    from eos_harness.models.workloads import DEFAULT_WORKLOADS, WORKLOADS
    from eos_harness.suites.lifecycle.plan import default_stores, expected_to_fail, workloads_for

    stores, workloads = default_stores(), list(DEFAULT_WORKLOADS)  # a campaign's default
    for broker_faults in ([], ["broker-kill"]):
        first = list(itertools.islice(plan(7, stores, workloads, broker="embedded" if not broker_faults else "kafka-local",
                                           broker_faults=broker_faults), 15 * len(stores)))
        for store in stores:
            mine = [sc for sc in first if sc.store == store][:10]
            runs = workloads_for(store, workloads)  # a window store runs the windowed workloads, the others the rest
            assert {sc.workload for sc in mine} == set(runs), (store, broker_faults)
            if broker_faults and expected_to_fail(store):
                # On Kafka a short campaign gets a few scenarios per store: a store expected to
                # fail uses every store operation within its first two.
                used = set().union(*(WORKLOADS[sc.workload].operations for sc in mine[:2]))
                assert used == set().union(*(WORKLOADS[w].operations for w in runs)), store


def test_schedules_name_known_points_only():
    assert parse_schedule("task.commit.after_eos@2,kill@3,freeze:task.commit.before_eos") == (
        Fault(P_AFTER_EOS, 2), Fault("kill", 3), Fault(P_BEFORE_EOS, 1, "freeze"))
    with pytest.raises(ScheduleError, match="did you mean task.commit.after_eos"):
        parse_schedule("task.commit.after_eso")


def test_run_cli_writes_the_verdict_json_and_rejects_bad_input(cli, tmp_path):
    out = tmp_path / "out.json"
    proc = cli("run", "--store", "memory", "--workload", "tombstones", "--crash-at", "task.commit.after_store@2",
               "--seed", "4", "--json", out, "--out", tmp_path / "r")
    assert proc.returncode == EXIT_PASS, proc.stdout + proc.stderr
    assert "seed: 4" in proc.stdout and "verdict: pass" in proc.stdout
    data = json.loads(out.read_text())
    assert {"store", "workload", "broker", "seed", "crash_points", "verdict", "violations", "recovery", "repro"} <= set(data)
    assert data["crash_points"] == ["task.commit.after_store"] and data["verdict"] == "pass"
    bad = cli("run", "--store", "nope", "--seed", "1")
    assert bad.returncode == 2 and "unknown store 'nope'" in bad.stderr


def test_a_store_commit_that_splits_data_and_offsets_is_caught_through_the_run_cli(cli, tmp_path):
    # The point is the mutant store's own: `run` must know it without being told where it lives.
    out = tmp_path / "out.json"
    proc = cli("run", "--store", "mutant-split-offsets-write", "--crash-at", "store.commit.between_data_and_offsets@2",
               "--seed", "3", "--json", out, "--out", tmp_path / "r")
    assert proc.returncode == EXIT_FAIL, proc.stdout + proc.stderr
    # the meaning of the check that fired is shown beside it
    assert "atomic_commit: what a transactional store holds right after recover" in proc.stdout
    data = json.loads(out.read_text())
    assert data["crash_points"] == ["store.commit.between_data_and_offsets"]
    assert "atomic_commit" in {v["check"] for v in data["violations"]}
    assert data["repro"] == ("eos-harness run --store mutant-split-offsets-write --workload counter "
                             "--crash-at store.commit.between_data_and_offsets@2 --seed 3")


def test_the_chaos_campaign_passes_a_real_store_and_catches_every_mutant(cli, tmp_path):
    """The main job's promise: the coverage part of a campaign (every store × every point it reaches).
    The RocksDB stores' own coverage scenarios are suites/lifecycle's (every real store, every window,
    every point of its commit); here memory stands for the stores that pass, beside every mutant and
    the unsafe variant, each of which reaches the points of the store it breaks."""
    out = tmp_path / "chaos.json"
    stores = [s for s in default_stores() if not builtin_spec(s).window  # window stores: tests/test_window_stores.py
              and (s == "memory" or expected_to_fail(s))]
    proc = cli("chaos", "--scenarios", "115", "--seed", "7", "--stores", ",".join(stores), "--json", out,
               "--out", tmp_path / "c", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # (cli checks that no process is left)
    campaign = json.loads(out.read_text())
    tallies = campaign["summary"]["stores"]
    assert campaign["summary"]["unexpected"] == []
    assert set(tallies) == set(stores)
    for name, tally in tallies.items():
        expected = "fail" if name.startswith("mutant-") or name == "rocksdb-legacy-nowipe" else "pass"
        assert tally["expected"] == expected, name
        assert tally["status"] == ("caught" if expected == "fail" else "ok"), (name, tally)
    assert "no_uncommitted_survives" in tallies["rocksdb-legacy-nowipe"]["checks"]
    hit = set(campaign["summary"]["points_hit"])
    assert set(LIFECYCLE_POINTS) | {P_MID_REPLAY, "store.commit.mid_copy", "store.commit.after_write",
                                    "store.legacy.commit.after_flush"} <= hit
    for scenario in campaign["scenarios"]:  # which scenario hit which point
        assert {"store", "workload", "crash_points", "verdict", "repro", "recovery"} <= set(scenario)
    for store in stores:  # every store crashed for real in every lifecycle window
        crashed = {p for sc in campaign["scenarios"] if sc["store"] == store for p in sc["crash_points"]}
        assert set(LIFECYCLE_POINTS) <= crashed, (store, set(LIFECYCLE_POINTS) - crashed)


def test_a_broker_fault_scenario_runs_alone_while_the_others_run_side_by_side(tmp_path, monkeypatch):
    # The campaign's scheduling, without a cluster: the scenarios only record when they ran.
    import threading
    import time as clock

    import eos_harness.suites.lifecycle.plan as plan
    import eos_harness.suites.lifecycle.runner as runner
    from eos_harness.broker.spec import parse
    from eos_harness.faults.kinds import kinds
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import defaults, run_suite_campaign

    cluster_faults = {k.name for k in kinds() if k.stops_broker}

    spans, lock = [], threading.Lock()

    def scenario_that_records(scenario, run_dir):
        start = clock.monotonic()
        clock.sleep(0.05)
        with lock:
            spans.append((start, clock.monotonic(), {f.point for f in scenario.schedule}))
        return {"store": scenario.store, "verdict": "pass", "violations": [], "crash_points": []}

    monkeypatch.setattr(runner, "run_one", scenario_that_records)  # how the campaign runs each scenario
    monkeypatch.setattr(plan, "kafka_faults", lambda broker: ["broker-kill", "broker-pause", "coordinator-kill", "txn-timeout"])
    entry = SUITES["lifecycle"]
    broker = "kafka://127.0.0.1:9"  # never reached: opened as it is, no scenario runs on it
    campaign = run_suite_campaign(entry, 7, {**defaults(entry), "stores": ["memory", "rocksdb-indexed"], "broker": broker},
                                  tmp_path, scenarios=24, workers=2, running={"opened": parse(broker)})
    assert campaign["summary"]["total"] == 24
    cluster = [s for s in spans if s[2] & cluster_faults]
    assert len(cluster) >= 3
    for start, end, _ in cluster:
        assert not [o for o in spans if o[0] < end and o[1] > start and o[0] != start]
    others = [s for s in spans if not s[2] & cluster_faults]
    assert any(a[0] < b[1] and a[1] > b[0] for a in others for b in others if a is not b)


def test_a_scenario_that_cannot_run_is_an_error_verdict_and_the_campaign_goes_on(tmp_path, monkeypatch):
    import eos_harness.suites.lifecycle.runner as runner
    from eos_harness.broker import BrokerError
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import defaults, run_suite_campaign

    real = runner.run_one
    calls = []

    def broker_gone_once(scenario, run_dir):
        calls.append(scenario)
        if len(calls) == 2:
            raise BrokerError("creating topic 'x-input' failed: Local: Broker transport failure")
        return real(scenario, run_dir)

    monkeypatch.setattr(runner, "run_one", broker_gone_once)
    entry = SUITES["lifecycle"]
    campaign = run_suite_campaign(entry, 3, {**defaults(entry), "stores": ["memory"]}, tmp_path, scenarios=4, workers=1)
    verdicts = [s["verdict"] for s in campaign["scenarios"]]
    assert verdicts.count("error") == 1 and verdicts.count("pass") == 3
    error = next(s for s in campaign["scenarios"] if s["verdict"] == "error")
    assert "Broker transport failure" in error["error"] and error["repro"] == calls[1].repro()
    summary = campaign["summary"]
    assert len(summary["errors"]) == 1 and "replay: eos-harness run --store memory" in summary["errors"][0]
    assert summary["stores"]["memory"]["status"] == "ERROR"
