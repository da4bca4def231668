"""Kafka faults in schedules (``faults.kafka``) against a real broker: a broker killed and
restarted, a broker paused, the transaction coordinator killed while a commit is in flight, a task
frozen past ``transaction.timeout.ms``; the transactional store keeps EOS through each. The CLI
runs them with ``--broker kafka-local`` and refuses them, clearly, where they cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eos_harness.broker import connect
from eos_harness.faults.kafka import PAUSE_SECONDS, STALL_SECONDS, TXN_TIMEOUT_MS
from eos_harness.process.wait import wait_until
from eos_harness.store import TopicPartition
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import ScheduleError, parse_schedule


def history(result: dict) -> list[dict]:
    return [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]


def run(eos_kafka_cluster, tmp_path, schedule: str, store: str = "rocksdb-indexed", seed: int = 3) -> dict:
    return run_scenario(Scenario(store, "counter", seed, parse_schedule(schedule), broker=eos_kafka_cluster.spec), tmp_path)


@pytest.mark.kafka
def test_a_paused_broker_keeps_eos(eos_kafka_cluster, tmp_path):
    before = eos_kafka_cluster.pid(1)
    result = run(eos_kafka_cluster, tmp_path, "broker-pause@5", store="rocksdb-secondary")
    # (an error verdict says why: a broker call that failed the task)
    assert result["verdict"] == "pass", (result["violations"], result.get("error"), result["fault_errors"])
    # As with a kill: the broker may abort a transaction the pause kept open too long (the task then restarts
    # from its last commit), which is Kafka doing its job, not a second fault of ours (seen in a CI run).
    assert "broker-pause" in result["crash_points"], result["crash_points"]
    assert set(result["crash_points"]) <= {"broker-pause", "transaction.aborted"}, result["crash_points"]
    fault = next(e for e in history(result) if e["type"] == "broker_fault")
    assert fault["seconds"] >= PAUSE_SECONDS
    assert eos_kafka_cluster.pid(1) == before  # stopped and continued, not restarted


@pytest.mark.kafka
def test_the_coordinator_killed_while_a_commit_is_in_flight_keeps_eos(eos_kafka_cluster, tmp_path):
    result = run(eos_kafka_cluster, tmp_path, "coordinator-kill@2")
    assert result["verdict"] == "pass", result["violations"]
    fault = next(e for e in history(result) if e["type"] == "broker_fault")
    assert fault["fault"] == "coordinator-kill" and fault["in_flight"], fault


@pytest.mark.kafka
def test_a_task_frozen_past_the_transaction_timeout_is_aborted_and_none_of_its_writes_is_read(eos_kafka_cluster, tmp_path):
    result = run(eos_kafka_cluster, tmp_path, "txn-timeout@2")
    assert result["verdict"] == "pass", result["violations"]
    events = history(result)
    stalled = next(e for e in events if e["type"] == "stalled")
    assert stalled["seconds"] > TXN_TIMEOUT_MS / 1000
    # Woken, the instance finds its transaction aborted by the broker (its old epoch fenced) and
    # never commits again; a new instance takes over.
    ended = [e for e in events if e["instance"] == stalled["instance"] and e["type"] in ("aborted", "fenced", "commit")
             and e["seq"] > stalled["seq"]]
    assert [e["type"] for e in ended] in (["aborted"], ["fenced"]), ended
    # The records of its second transaction (outputs of input 10..19) reached the log (read
    # uncommitted) and were never read committed: the output has each of the 120 records once.
    app = events[0]["application_id"]
    with connect(eos_kafka_cluster.spec) as broker:
        tp = TopicPartition(f"{app}-output", 0)
        committed = broker.read_committed(tp)
        everything = broker.read_uncommitted(tp)
    assert len(committed) == 120 and len({(r.key, r.value) for r in committed}) == 120
    assert len(everything) > len(committed)
    assert STALL_SECONDS > TXN_TIMEOUT_MS / 1000


@pytest.mark.kafka
def test_the_cli_runs_a_broker_kill_on_a_local_kafka(cli, tmp_path):
    out = tmp_path / "verdict.json"
    proc = cli("run", "--store", "rocksdb-indexed", "--broker", "kafka-local", "--crash-at", "broker-kill@5", "--seed", "5",
               "--json", out, "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "pass", result["violations"]
    # Under load the broker may also abort a transaction the kill left open too long (the task then
    # restarts from the last commit): that is Kafka doing its job, not a second fault of ours.
    assert "broker-kill" in result["crash_points"], result["crash_points"]
    assert set(result["crash_points"]) <= {"broker-kill", "transaction.aborted"}, result["crash_points"]
    fault = next(e for e in history(result) if e["type"] == "broker_fault")
    assert "error" not in fault and fault["node"] == 1
    # The task still finished on the restarted broker (that the kill starts a new JVM on the same storage:
    # test_broker_faults_on_one_cluster_run_one_at_a_time, on the session's cluster).
    assert any(e["type"] == "done" for e in history(result))
    assert "--broker kafka-local" in result["repro"]


def test_broker_faults_on_the_embedded_broker_are_refused_with_what_to_do(cli, tmp_path):
    proc = cli("run", "--store", "rocksdb-indexed", "--crash-at", "broker-kill@5", "--seed", "1", "--out", tmp_path / "run")
    assert proc.returncode == 2
    assert "broker-kill" in proc.stderr and "--broker kafka-local" in proc.stderr


def test_broker_faults_need_a_cluster_this_process_started(tmp_path):
    with pytest.raises(ScheduleError, match="kafka-local"):
        run_scenario(Scenario("rocksdb-indexed", "counter", 1, parse_schedule("broker-pause@3"),
                              broker="kafka://127.0.0.1:9"), tmp_path)


def test_a_bad_broker_option_names_the_accepted_forms(cli, tmp_path):
    proc = cli("run", "--store", "rocksdb-indexed", "--broker", "kafka-local:x", "--seed", "1", "--out", tmp_path / "run")
    assert proc.returncode == 2 and "kafka-local:3" in proc.stderr


def test_kafka_faults_parse_and_cannot_be_frozen():
    assert [str(f) for f in parse_schedule("broker-kill@5,coordinator-kill@2,txn-timeout@2,broker-pause")] == [
        "broker-kill@5", "coordinator-kill@2", "txn-timeout@2", "broker-pause"]
    with pytest.raises(ScheduleError, match="freeze: takes a crash point"):
        parse_schedule("freeze:broker-kill@2")


@pytest.mark.kafka
def test_broker_faults_on_one_cluster_run_one_at_a_time(eos_kafka_cluster):
    """A campaign's workers share one cluster: a kill while another fault restarts the broker would
    fail that restart, so the second fault waits until the broker is back."""
    from concurrent.futures import ThreadPoolExecutor

    from eos_harness.faults.kinds import run_broker_fault

    before = eos_kafka_cluster.pid(1)
    with ThreadPoolExecutor(2) as pool:
        kill = pool.submit(run_broker_fault, eos_kafka_cluster, "broker-kill", None, 1)
        pause = pool.submit(run_broker_fault, eos_kafka_cluster, "broker-pause", None, 1)
        done = [kill.result(timeout=180), pause.result(timeout=180)]
    first, second = sorted(done, key=lambda d: d["waited_for_other_fault"])
    assert first["waited_for_other_fault"] < 0.5
    # The second began only once the first had finished (the broker restarted, or resumed).
    assert second["waited_for_other_fault"] >= first["seconds"] - first["waited_for_other_fault"] - 0.5, done
    assert eos_kafka_cluster.pid(1) not in (None, before)
    # Back in service within the cluster's own start bound (a restarted JVM on a loaded 2-core
    # machine has taken more than 30 s to answer metadata again).
    eos_kafka_cluster.wait_ready()


def test_a_stopped_process_is_told_apart_from_a_running_one():
    """A SIGSTOPped broker still accepts connections: the cluster's not-ready error and its resume
    tell it apart by the process state, not by the port."""
    import os
    import signal
    import subprocess

    from eos_harness.cluster.local import process_state

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert process_state(sleeper.pid) == "running"
        os.kill(sleeper.pid, signal.SIGSTOP)
        wait_until(lambda: process_state(sleeper.pid) == "stopped", 5, 0.01, "the sleeper to stop")
        os.kill(sleeper.pid, signal.SIGCONT)
        wait_until(lambda: process_state(sleeper.pid) == "running", 5, 0.01, "the sleeper to run")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert process_state(sleeper.pid) == "gone" and process_state(None) == "gone"
