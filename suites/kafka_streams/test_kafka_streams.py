"""The kafka-streams suite's pytest entry (``-m kafka``): a real Kafka Streams 4.4.0 application on the
session's broker (one KRaft node on 127.0.0.1), killed at named steps of its commit and restarted.

In ``make test`` (about 35 s): Kafka's application with transactional RocksDB stores passes every check, its
restoration after a crash only the tail since its last commit on disk; a sink that sends each record twice is
caught by the exactly-once output check alone. The other mutants, each caught by its check, the other
configurations and the zombie are ``slow`` (``make test-kafka-streams``)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from eos_harness.suites.kafka_streams.plan import scenario
from eos_harness.suites.kafka_streams.runner import run_scenario

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def _run(cluster, tmp_path, app: str, seed: int, kills: int, point: str | None = None, **options) -> dict:
    return run_scenario(scenario(app, seed, kills, point, liveness_s=options.pop("liveness_s", 60.0), **options),
                        cluster.bootstrap_servers, tmp_path)


def test_kafka_streams_with_transactional_rocksdb_stores_keeps_exactly_once_across_kills_and_restores_only_the_tail(
        eos_kafka_cluster, tmp_path):
    result = _run(eos_kafka_cluster, tmp_path, "rocksdb-tx", 7, 2, "streams.commit.after_producer_commit")
    assert result["verdict"] == "pass", result["violations"]
    assert (result["kafka_version"], result["streams_version"]) == ("4.4.0", "4.4.0")
    assert result["records_produced"] == result["outputs_read"] == 180
    assert [life["fired"] for life in result["lives"]] == [True, True, False]
    assert {"exactly_once_output", "state", "no_wipe", "liveness"} <= set(result["exercised"])
    # after the last instance, the changelog read committed: the store's 8 keys, as the model and the query say
    assert result["changelog"] == "8 keys read committed from sums' changelogs"
    # A store partition with commits on disk when killed restored from them, not from offset 0 (most runs both; on
    # a loaded machine one may not have flushed its memtable before the kill: restored from 0, rightly, not judged).
    last = result["lives"][-1]["restores"]
    durable = [r for r in last if r["durable"]]
    assert durable and all(r["start"] > 0 and r["restored"] < r["end"] for r in durable), last
    assert result["repro"].startswith("eos-harness run --suite kafka-streams --app rocksdb-tx --seed 7 --kills 2")


def test_a_sink_that_sends_each_record_twice_is_caught_by_the_exactly_once_output_check_alone(
        eos_kafka_cluster, tmp_path):
    # through the CLI, as a user runs it: the verdict in --json and --junit, the instances' output kept in the
    # run directory, the replay printed once
    done = subprocess.run(
        [sys.executable, "-m", "eos_harness.faces.cli", "run", "--suite", "kafka-streams", "--app", "output-twice",
         "--seed", "3", "--kills", "0", "--broker", f"kafka://{eos_kafka_cluster.bootstrap_servers}", "--json",
         str(tmp_path / "r.json"), "--junit", str(tmp_path / "j.xml"), "--out", str(tmp_path / "run"), "--no-report"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["expected"] == "fail" and result["verdict"] == "fail"
    assert {v["check"] for v in result["violations"]} == {"exactly_once_output"}, result["violations"]
    assert all(v["observed"] == "read 2 times" for v in result["violations"][:-1])
    assert json.loads((tmp_path / "run" / "verdict.json").read_text())["violations"] == result["violations"]
    assert (tmp_path / "run" / "streams-apps.log").is_file()
    assert done.stdout.count("replay: ") == 1 and f"replay: {result['repro']}" in " ".join(done.stdout.split())
    cases = {case.get("name"): case for case in ElementTree.parse(tmp_path / "j.xml").iter("testcase")}
    assert cases["exactly_once_output"].find("failure") is not None
    # no instance was killed: no_wipe never met its condition, so it is skipped, never passed
    assert cases["no_wipe"].find("skipped").get("message").startswith("not ")
    assert cases["zombie_fenced"].find("skipped").get("message").startswith("not applicable")


@pytest.mark.slow  # make test-kafka-streams
def test_an_application_run_at_least_once_is_caught_repeating_its_output_after_a_kill(eos_kafka_cluster, tmp_path):
    result = _run(eos_kafka_cluster, tmp_path, "at-least-once", 11, 1)
    assert result["expected"] == "fail" and result["verdict"] == "fail"
    assert result["kills"][0].startswith("streams.commit.enter@")
    repeated = [v for v in result["violations"] if v["check"] == "exactly_once_output"]
    assert repeated and all("read 2 times" in v["observed"] for v in repeated), result["violations"]


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize(("mutant", "check"), [("restore-from-zero", "no_wipe"), ("restore-skips-record", "state"),
                                               ("restore-hangs", "liveness"), ("output-value-altered", "output_values")])
def test_each_mutant_of_streams_code_is_caught_by_its_check(eos_kafka_cluster, tmp_path, mutant, check):
    result = _run(eos_kafka_cluster, tmp_path, mutant, 7, 2, liveness_s=30.0)
    assert result["verdict"] == "fail", result
    assert check in {v["check"] for v in result["violations"]}, result["violations"]
    if mutant in ("restore-from-zero", "output-value-altered", "restore-hangs"):  # it alone catches them
        assert {v["check"] for v in result["violations"]} == {check}, result["violations"]


@pytest.mark.slow  # make test-kafka-streams
def test_a_store_whose_changelog_writes_are_dropped_is_caught_by_its_changelog_while_its_queries_agree(
        eos_kafka_cluster, tmp_path):
    # No kill: nothing restores from the changelog, so the store answers its queries right and the output is
    # right; only the changelog, read committed after the last instance, is behind the model.
    result = _run(eos_kafka_cluster, tmp_path, "changelog-write-dropped", 3, 0)
    assert result["verdict"] == "fail" and result["expected"] == "fail"
    assert {v["check"] for v in result["violations"]} == {"state"}, result["violations"]
    assert len(result["violations"]) == 8 and all(
        v["key"].startswith("changelog k") and v["observed"].startswith("changelog no record; interactive query ")
        and v["observed"].endswith("(agrees with the model: the changelog alone differs)") for v in result["violations"])
    # the history marks them on the reading of the changelogs, on the harness's lane
    rows = [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]
    marked = {rows[v["event"]]["type"] for v in result["violations"]}
    assert marked == {"changelog"} and rows[result["violations"][0]["event"]]["lane"] == "harness"


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize("app", ["rocksdb", "memory-tx", "memory", "window-rocksdb-tx", "window-rocksdb"])
def test_kafka_streams_keeps_exactly_once_across_kills_in_every_configuration(eos_kafka_cluster, tmp_path, app):
    result = _run(eos_kafka_cluster, tmp_path, app, 5, 2)
    assert result["verdict"] == "pass", result["violations"]
    assert ("no_wipe" in result["coverage"]["not_applicable"]) == (app != "window-rocksdb-tx")
    assert " keys read committed from sums' changelogs" in result["changelog"]  # compared with the model


@pytest.mark.slow  # make test-kafka-streams
def test_an_instance_frozen_inside_its_commit_past_the_transaction_timeout_is_fenced_when_it_resumes(
        eos_kafka_cluster, tmp_path):
    result = _run(eos_kafka_cluster, tmp_path, "zombie", 7, 1)
    assert result["verdict"] == "pass", result["violations"]
    assert {"zombie_fenced", "exactly_once_output", "state"} <= set(result["exercised"])
    said = " ".join(result["lives"][0]["uncaught"])
    assert "ZOMBIE_FENCED" in said and "ZOMBIE_COMMITTED" not in said, said
    if result["kafka_version"] == "4.4.0":
        # The finding: on 4.4.0 brokers (transaction version 2) the resumed instance's EndTxn, one epoch behind the
        # coordinator's timeout abort, passes as a retry (TransactionCoordinator's retryOnEpochBump) and gets
        # INVALID_TXN_STATE; StreamsProducer.commitTransaction maps only ProducerFenced, InvalidProducerEpoch,
        # CommitFailed and InvalidPidMapping to TaskMigratedException: the client dies instead of rejoining.
        assert "InvalidTxnStateException" in said and "UNCAUGHT" in said, said
    else:  # 3.9.1 (transaction version 1): PRODUCER_FENCED, TaskMigratedException, the thread rejoins
        assert "TaskMigratedException" in said and "UNCAUGHT" not in said, said


@pytest.mark.slow  # make test-kafka-streams
def test_kafka_streams_keeps_exactly_once_when_killed_at_random_times(eos_kafka_cluster, tmp_path):
    result = _run(eos_kafka_cluster, tmp_path, "rocksdb-tx", 5, 2, "random")
    assert result["verdict"] == "pass", result["violations"]
    assert [k.partition("@")[0] for k in result["kills"]] == ["random", "random"]
    assert {"exactly_once_output", "state"} <= set(result["exercised"])


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize("app", ["join-rocksdb-tx", "join-memory-tx", "global-rocksdb-tx", "global-memory-tx"])
def test_a_stream_table_join_keeps_exactly_once_and_its_table_across_kills(eos_kafka_cluster, tmp_path, app):
    # The stream's deltas multiplied by the rates of a KTable (or a GlobalKTable) fed by a second topic; each
    # restart's store (the sums and the table) and the whole output against the model of the join.
    result = _run(eos_kafka_cluster, tmp_path, app, 2, 2)
    assert result["verdict"] == "pass", result["violations"]
    assert result["configuration"]["join"].startswith("stream-globaltable" if "global" in app else "stream-table")
    assert result["table_updates"] >= result["records_produced"] // (20 if "global" in app else 5)
    assert {"exactly_once_output", "output_values", "state", "liveness"} <= set(result["exercised"])
    assert result["records_produced"] == result["outputs_read"]
    # the changelogs read after the last instance: the sums' and, for the KTable, the table's
    assert result["changelog"].endswith("from sums, rates' changelogs" if app.startswith("join") else "from sums' changelogs")


@pytest.mark.slow  # make test-kafka-streams
def test_the_join_s_table_store_killed_inside_a_clean_close_restores_from_its_commit_on_disk(eos_kafka_cluster,
                                                                                            tmp_path):
    # The table's few small updates reach disk only when RocksDB flushes its store, at a clean close: killed once the
    # close closed the stores (before unlocking the task directories), the restart restores the table's store from
    # its commit on disk, and no_wipe judges it as it judges the aggregate's.
    # (What this test is about is no_wipe's verdict on the table's store; the join's output and sums are the other
    # join tests': under load a stream record is now and then joined before a table update acknowledged ahead of it.)
    result = _run(eos_kafka_cluster, tmp_path, "join-rocksdb-tx", 2, 2, "streams.close.before_unlock")
    assert result["verdict"] != "error" and result["not_fired"] == [], (result.get("error"), result["not_fired"])
    assert not [v for v in result["violations"] if v["check"] == "no_wipe"], result["violations"]
    tables = [r for life in result["lives"][1:] for r in life["restores"] if r["store"] == "rates"]
    assert any(r["durable"] and r["start"] > 0 for r in tables), tables
    assert "no_wipe" in result["exercised"]
    assert result["coverage"]["exercised"]["no_wipe"] > sum(
        1 for life in result["lives"][1:] for r in life["restores"] if r["store"] == "sums" and r["durable"])


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize("app", ["rocksdb-tx", "join-rocksdb-tx"])
def test_two_instances_one_killed_at_each_step_keep_exactly_once(eos_kafka_cluster, tmp_path, app):
    # Instance 1 runs beside each life of instance 0, which is killed and restarted: the output, and the store
    # that both answer for (each its own tasks), against the model.
    result = _run(eos_kafka_cluster, tmp_path, app, 3, 2, instances=2)
    assert result["verdict"] == "pass", (result["violations"], result.get("error"))
    assert result["instances"] == 2 and "--instances 2" in result["repro"]
    # the history: a lane per instance and per stream thread, the second instance's beside them
    lanes = {json.loads(line)["lane"] for line in Path(result["history"]).read_text().splitlines()}
    assert {"instance 0", "instance 0 StreamThread-1", "second instance", "second instance StreamThread-1",
            "harness"} <= lanes, lanes
    assert {"exactly_once_output", "state", "liveness"} <= set(result["exercised"])
    assert result["records_produced"] == result["outputs_read"]


@pytest.mark.slow  # make test-kafka-streams
def test_a_store_whose_only_table_file_on_disk_is_of_its_data_is_not_judged_as_wiped(eos_kafka_cluster, tmp_path):
    # These kills (commit.before_stores_commit@3, commit.enter@2) leave partition 0's store, most runs, with one
    # table file of its data (flushed before the restarted instance's first commit) and its committed offset
    # only in memory: Streams restores it from offset 0, rightly. A store whose offsets reached disk restores
    # from them; either way no_wipe's verdict is true.
    result = _run(eos_kafka_cluster, tmp_path, "global-rocksdb-tx", 815623033, 2)
    assert result["verdict"] == "pass", result["violations"]
    restores = [r for life in result["lives"][1:] for r in life["restores"]]
    assert all(r["start"] > 0 for r in restores if r["durable"]), restores


CLOSE_KILLS = (("streams.close.before_checkpoint", 1), ("streams.close.before_suspend", 2),
               ("streams.close.before_stores_close", 1), ("streams.close.before_unlock", 2))


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize("app", ["rocksdb-tx", "rocksdb"])
def test_kafka_streams_keeps_exactly_once_when_killed_at_each_step_of_a_clean_close(eos_kafka_cluster, tmp_path, app):
    # Each instance processes its batch, then is closed cleanly (KafkaStreams.close) and SIGKILLed inside its close:
    # before the enforced checkpoint of its stores, before suspending a task, before its stores close, before its
    # task directory is unlocked. Without transactional stores the close's checkpoint is their only commit.
    planned = dataclasses.replace(scenario(app, 4, len(CLOSE_KILLS)), kills=CLOSE_KILLS)
    result = run_scenario(planned, eos_kafka_cluster.bootstrap_servers, tmp_path)
    assert result["verdict"] == "pass", (result["violations"], result.get("error"))
    assert [life["fired"] for life in result["lives"]] == [True] * len(CLOSE_KILLS) + [False]  # each point reached
    assert result["not_fired"] == [] and result["records_produced"] == result["outputs_read"]
    assert {"exactly_once_output", "output_values", "state", "liveness"} <= set(result["exercised"])
    if app == "rocksdb-tx":
        # killed once both tasks' stores were closed (RocksDB flushed them): the restart restores nothing
        after_unlock = result["lives"][-1]["restores"]
        assert after_unlock and all(r["durable"] and r["restored"] == 0 for r in after_unlock), after_unlock
        assert "no_wipe" in result["exercised"]


@pytest.mark.slow  # make test-kafka-streams
def test_a_close_point_the_close_never_reaches_is_an_error_not_a_pass(eos_kafka_cluster, tmp_path):
    # The close of an instance holding 2 tasks passes each close point twice: a third hit is never reached.
    planned = dataclasses.replace(scenario("memory", 4, 1), kills=(("streams.close.before_stores_close", 3),))
    result = run_scenario(planned, eos_kafka_cluster.bootstrap_servers, tmp_path)
    assert result["verdict"] == "error" and result["not_fired"] == ["streams.close.before_stores_close@3"], result


@pytest.mark.slow  # make test-kafka-streams
def test_kafka_streams_keeps_exactly_once_when_its_broker_is_killed_and_paused_while_it_processes(
        eos_kafka_cluster, tmp_path):
    # The session's broker SIGKILLed and restarted once 30 input records are acknowledged (the first instance's
    # batch half sent), SIGSTOPped for a while at the 90th (the restarted instance's batch), besides a kill of the
    # instance inside its commit: judged by the same checks.
    planned = scenario("rocksdb-tx", 1, 1, liveness_s=90.0, broker_faults=(("broker-kill", 30), ("broker-pause", 90)))
    result = run_scenario(planned, eos_kafka_cluster.bootstrap_servers, tmp_path)
    assert result["verdict"] == "pass", (result["violations"], result.get("error"), result.get("broker_faults"))
    faults = result["broker_faults"]
    assert [f["at"] for f in faults] == ["broker-kill@30", "broker-pause@90"] and not any("error" in f for f in faults)
    assert all(f["transactional_id"].startswith(result["application_id"]) for f in faults), faults
    assert result["not_fired"] == [] and result["records_produced"] == result["outputs_read"]
    assert {"exactly_once_output", "output_values", "state", "liveness"} <= set(result["exercised"])
    assert "--crash-at broker-kill@30,broker-pause@90" in result["repro"]
    # A fault past the scenario's input never fires: the scenario asked for was not run, an error, never a pass.
    unreached = run_scenario(scenario("memory", 1, 0, broker_faults=(("broker-kill", 1000),)),
                             eos_kafka_cluster.bootstrap_servers, tmp_path / "unreached")
    assert unreached["verdict"] == "error" and unreached["not_fired"] == ["broker-kill@1000"], unreached


@pytest.mark.slow  # make test-kafka-streams
@pytest.mark.parametrize("app", ["upgrade-rocksdb-tx", "upgrade-rocksdb"])
def test_kafka_streams_keeps_exactly_once_when_killed_writing_the_downgrade_checkpoint_file(eos_kafka_cluster,
                                                                                           tmp_path, app):
    # With upgrade.from=4.2, 4.4.0's close writes each task's .checkpoint (KIP-1035's downgrade file) once its stores
    # are closed: killed with the second task's .checkpoint.tmp written and not yet renamed, then with the first's.
    kills = (("streams.checkpoint.before_rename", 2), ("streams.checkpoint.before_rename", 1))
    planned = dataclasses.replace(scenario(app, 4, len(kills)), kills=kills)
    result = run_scenario(planned, eos_kafka_cluster.bootstrap_servers, tmp_path)
    assert result["verdict"] == "pass", (result["violations"], result.get("error"))
    assert result["configuration"]["upgrade.from"] == "4.2"
    assert [life["fired"] for life in result["lives"]] == [True, True, False] and result["not_fired"] == []
    assert {"exactly_once_output", "output_values", "state", "liveness"} <= set(result["exercised"])
    # both tasks' stores were closed (RocksDB flushed them) before the second .checkpoint's rename: nothing restored
    after_both = result["lives"][1]["restores"]
    assert after_both and all(r["restored"] == 0 for r in after_both), after_both


@pytest.mark.slow  # make test-kafka-streams
def test_a_chaos_campaign_adds_drawn_broker_faults_to_its_scenarios(tmp_path):
    # As a user runs it: chaos starts its own broker (kafka-local) and kills or pauses it under each scenario.
    done = subprocess.run(
        [sys.executable, "-m", "eos_harness.faces.cli", "chaos", "--suite", "kafka-streams", "--systems", "memory-tx",
         "--scenarios", "1", "--kills", "1", "--broker-faults", "1", "--seed", "3", "--json", str(tmp_path / "c.json"),
         "--out", str(tmp_path / "run"), "--no-report"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    campaign = json.loads((tmp_path / "c.json").read_text())
    (result,) = campaign["scenarios"]
    assert result["verdict"] == "pass", (result["violations"], result.get("error"))
    (fault,) = result["broker_faults"]
    assert "error" not in fault and fault["at"].split("@")[0] in ("broker-kill", "broker-pause"), fault
    assert f"--crash-at {fault['at']}" in result["repro"] and result["not_fired"] == []


@pytest.mark.slow  # make test-kafka-streams
def test_a_campaign_stops_at_its_first_failure_and_a_resume_runs_the_rest_of_its_plan(eos_kafka_cluster, tmp_path):
    # Through the CLI as a user runs it: only a mutant, so --until-failure stops at its first caught scenario; the
    # resume (its options kept in the run directory, --until-failure with them) runs the scenario left, not the first.
    out = tmp_path / "chaos"

    def chaos(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "eos_harness.faces.cli", "chaos", "--suite", "kafka-streams", *args],
                              capture_output=True, text=True, timeout=900, cwd=tmp_path)

    first = chaos("--systems", "output-twice", "--kills", "0", "--records", "10", "--scenarios", "2", "--seed", "7",
                  "--broker", f"kafka://{eos_kafka_cluster.bootstrap_servers}", "--until-failure", "--out", str(out),
                  "--no-report")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]  # the mutant caught, as expected
    stopped = json.loads((out / "chaos.json").read_text())
    assert [(r["index"], r["verdict"]) for r in stopped["scenarios"]] == [(0, "fail")], "it must stop at the first"
    assert stopped["stopped"]["why"] == "until-failure"
    repro = stopped["scenarios"][0]["repro"]
    assert repro in stopped["stopped"]["message"] and repro in " ".join(first.stdout.split())
    assert f"--resume {out}" in " ".join(first.stdout.split())

    resumed = chaos("--resume", str(out))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "resuming the campaign" in resumed.stdout
    whole = json.loads((out / "chaos.json").read_text())
    assert [(r["index"], r["verdict"]) for r in whole["scenarios"]] == [(0, "fail"), (1, "fail")]
    # scenario 0 kept from the first start, not run again (its application id is its own run's)
    assert whole["scenarios"][0]["application_id"] == stopped["scenarios"][0]["application_id"]
    assert whole["scenarios"][1]["application_id"] != whole["scenarios"][0]["application_id"]
    assert whole["summary"]["systems"]["output-twice"]["status"] == "caught"
    assert whole["summary"]["systems"]["output-twice"]["scenarios"] == 2
    assert whole["transactional_stores"] == []  # a mutant only: no configuration to set side by side
