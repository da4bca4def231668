"""The metadata suite (KIP-868) on the embedded broker (every crash window of the real controller:
suites/metadata): every mutant is caught by the check that names its mistake, the CLI's exit codes; and a few
scenarios on a real Kafka (``-m kafka``)."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import replace

import pytest
from eos_harness.metadata import pack
from eos_harness.metadata.controller import POINTS
from eos_harness.models.metadata import RECORD, Entry
from eos_harness.suites.metadata.plan import MUTANTS, plan
from eos_harness.suites.metadata.runner import REAL, Scenario, parse_metadata_schedule, run_scenario

COVERAGE = list(itertools.islice(plan(7), 14))  # every crash window of the real controller, every mutant


def _id(scenario: Scenario) -> str:
    return f"{scenario.system}-{'+'.join(map(str, scenario.schedule)) or 'no-fault'}"


def test_the_coverage_reaches_every_crash_point_and_every_mutant():
    scheduled = {f.point for s in COVERAGE if s.system == REAL for f in s.schedule}
    assert set(POINTS) <= scheduled
    assert {s.system for s in COVERAGE} == {REAL, *MUTANTS}


# Every crash window of the real controller passing, its partial transaction aborted and its zombie
# fenced: suites/metadata (test_failover_window, the plan's coverage of the real controller).


@pytest.mark.parametrize("scenario", [s for s in COVERAGE if s.system != REAL], ids=_id)
def test_each_mutant_is_caught_by_the_check_that_names_it(scenario, tmp_path):
    result = run_scenario(scenario, tmp_path / "run")
    fired = {v["check"] for v in result["violations"]}
    assert result["verdict"] == "fail", f"mutant not caught; replay: {result['repro']}"
    assert MUTANTS[scenario.system][1] in fired, f"caught by {fired} only; replay: {result['repro']}"


def test_batches_never_exceed_the_maximum_batch_size():
    entries = [Entry(RECORD, ("partition", "t", i), "1.0", 0, 1, "0" * 10) for i in range(500)]
    batches = pack(entries, 1024)
    assert len(batches) > 1 and [e for b in batches for e in b] == entries
    assert all(sum(len(e.encode()) for e in b) <= 1024 for b in batches)


def test_the_same_seed_gives_the_same_plan():
    assert list(itertools.islice(plan(11), 30)) == list(itertools.islice(plan(11), 30))


def test_the_chaos_campaign_exits_0_when_the_controller_passes_and_its_mutants_are_caught(cli, tmp_path):
    # (Every mutant of the coverage is run by the test above; here the CLI's campaign over its first three.)
    done = cli("chaos", "--suite", "metadata", "--scenarios", "3", "--seed", "7", "--out", "out",
               "--json", "chaos.json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = json.loads((tmp_path / "chaos.json").read_text())["summary"]
    assert summary["systems"][REAL]["status"] == "ok"
    assert {s for s, t in summary["systems"].items() if t["status"] == "caught"} == {
        "reader-publishes-batches", "controller-skips-abort"}
    assert "caught by" in done.stdout and "one_open_transaction" in done.stdout


def test_a_campaign_whose_mutant_is_not_caught_exits_1(tmp_path):
    # Without a crash, a controller that would skip the abort never meets a partial transaction.
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import exit_code, summarize

    entry = SUITES["metadata"]
    result = run_scenario(Scenario("controller-skips-abort", 3), tmp_path / "run")
    assert result["verdict"] == "pass"
    campaign = {"scenarios": [result], "summary": summarize(entry, [result], entry.part("plan").subjects(None))}
    assert campaign["summary"]["unexpected"] == ["controller-skips-abort"]
    assert exit_code(entry, campaign) == 1


def test_run_exit_codes(cli, tmp_path):
    caught = cli("run", "--suite", "metadata", "--system", "abort-keeps-state", "--crash-at",
                 "metadata.controller.after_begin", "--seed", "5", "--out", "a", cwd=tmp_path)
    assert caught.returncode == 1, caught.stdout[-2000:]
    assert "controller_state_matches_model" in caught.stdout and "replay: eos-harness run --suite metadata" in caught.stdout
    real = cli("run", "--suite", "metadata", "--crash-at", "metadata.controller.between_batches@2", "--seed", "5",
               "--out", "b", cwd=tmp_path)
    assert real.returncode == 0, real.stdout[-2000:]
    usage = cli("run", "--suite", "metadata", "--crash-at", "task.commit.after_eos", "--out", "c", cwd=tmp_path)
    assert usage.returncode == 2 and "not a point of the metadata controller" in usage.stderr, usage.stderr
    # A scheduled fault the run never reaches (no partial transaction for a new controller to abort): the
    # run asked for was not run, an error (exit 3) naming it, not a pass.
    unfired = cli("run", "--suite", "metadata", "--crash-at", "metadata.controller.abort.before_append", "--seed", "5",
                  "--out", "d", "--json", "d.json", cwd=tmp_path)
    assert unfired.returncode == 3, unfired.stdout[-2000:]
    assert "scheduled fault metadata.controller.abort.before_append never fired" in " ".join(unfired.stdout.split())
    result = json.loads((tmp_path / "d.json").read_text())
    assert result["verdict"] == "error" and result["not_fired"] == ["metadata.controller.abort.before_append"]


def test_the_plan_draws_only_faults_a_scenario_reaches():
    # Abort points only after a crash that left a partial transaction, once; a transaction's point within
    # the two transactions every scenario writes; a driver kill while commands are left.
    from eos_harness.suites.metadata.plan import reachable_faults
    from eos_harness.suites.metadata.runner import parse_metadata_schedule as parsed

    def kept(system: str, text: str) -> list[str]:
        return [str(f) for f in reachable_faults(system, parsed(text), 6)]

    assert kept(REAL, "metadata.controller.abort.before_append") == []
    assert kept(REAL, "metadata.controller.after_begin,metadata.controller.abort.after_append@2,"
                      "metadata.controller.abort.before_append") == ["metadata.controller.after_begin",
                                                                     "metadata.controller.abort.before_append"]
    assert kept("controller-skips-abort", "metadata.controller.before_end,metadata.controller.abort.before_append") == [
        "metadata.controller.before_end"]
    assert kept(REAL, "metadata.controller.after_end@2,metadata.controller.after_end,kill@5,kill@2") == [
        "metadata.controller.after_end@2", "kill@2"]
    assert all(reachable_faults(s.system, s.schedule, s.commands) == s.schedule and (s.schedule or s.system != REAL)
               for s in itertools.islice(plan(7), 200))


def test_a_driver_kill_lands_after_its_nth_event_however_late_the_driver_reads_them(tmp_path):
    # kill@3 counts the controller's events (activated, then one a command): the controller waits after its
    # third for the driver's kill, so a driver that reads its events late (a loaded machine) still kills it
    # there, two commands written and the rest not. Before, the controller had written every command and
    # ended by then, and the scenario was an error: "kill@3 never fired" (chaos --suite metadata --scenarios
    # 2000 --seed 7, index 1973, under load only).
    from eos_harness.broker.spec import EMBEDDED
    from eos_harness.history import History
    from eos_harness.metadata import LogSpec, MetadataLog
    from eos_harness.suites.metadata.instance import ControllerInstance
    from eos_harness.suites.metadata.runner import commands_for

    spec = LogSpec(EMBEDDED.at_file(tmp_path / "broker.sqlite").text, "metadata", "metadata-controller")
    commands = commands_for(160370185, 8, 2048)
    history = History(tmp_path / "history.jsonl")
    with MetadataLog(spec) as log:
        log.create()
        controller = ControllerInstance(spec, [c.to_json() for c in commands], 2048, None,
                                        parse_metadata_schedule("kill@3")[0], 1, history)
        time.sleep(1.0)  # the driver, descheduled, reads nothing yet
        ended = controller.collect()
        written = sorted({entry.command for entry in log.read(0)})
    history.close()
    assert ended == "crash"
    assert [e["type"] for e in history.events][-4:] == ["activated", "committed", "committed", "crash"]
    assert history.events[-1]["point"] == "kill"
    assert written == [0, 1]


def test_the_metadata_crash_points_are_listed(cli):
    done = cli.invoke("points", "--json")
    names = {row["name"] for row in json.loads(done.stdout)}
    assert set(POINTS) <= names


@pytest.mark.parametrize("schedule, why", [("task.commit.after_eos", "not a point of the metadata controller"),
                                           ("broker-kill@2", "not a fault of the metadata suite"),
                                           ("metadata.controller.nowhere", "unknown crash point")])
def test_a_schedule_the_metadata_suite_cannot_run_is_refused(schedule, why):
    with pytest.raises(ValueError, match=why):
        parse_metadata_schedule(schedule)


@pytest.mark.kafka
def test_failover_and_mutants_on_kafka(eos_kafka_cluster, tmp_path):
    """A few scenarios with the log on a real Kafka topic: a crash mid-transaction, a crash during the
    new controller's abort, a zombie controller; a mutant of the reader and one of the controller."""
    spec = eos_kafka_cluster.spec
    chosen = [
        Scenario(REAL, 21, parse_metadata_schedule("metadata.controller.between_batches@2"), 4096, 6),
        Scenario(REAL, 22, parse_metadata_schedule("metadata.controller.after_begin,"
                                                   "metadata.controller.abort.before_append"), 4096, 6),
        Scenario(REAL, 23, parse_metadata_schedule("freeze:metadata.controller.before_end"), 4096, 6),
        Scenario("reader-publishes-batches", 24, (), 4096, 6),
        Scenario("controller-skips-abort", 25, parse_metadata_schedule("metadata.controller.after_begin"), 4096, 6),
    ]
    for n, scenario in enumerate(chosen):
        result = run_scenario(replace(scenario, broker=spec), tmp_path / f"run-{n}")
        fired = {v["check"] for v in result["violations"]}
        if scenario.system == REAL:
            assert result["verdict"] == "pass", f"{result['violations'][:3]}\nreplay: {result['repro']}"
            assert result["crash_points"] and result["log"]["aborts"], result["repro"]
        else:
            assert MUTANTS[scenario.system][1] in fired, f"{scenario.system}: caught by {fired}; {result['repro']}"


@pytest.mark.kafka
def test_the_chaos_campaign_on_a_local_kafka_catches_every_mutant_by_its_check_and_keeps_the_clients_logs_off_the_terminal(
        cli, tmp_path):
    """``chaos --suite metadata --broker kafka-local`` as a user runs it: the controller passes, each of the
    five mutants is caught by the check that names its mistake, and what the controllers' Kafka clients
    log (a fenced zombie's fatal error) goes to the run's children.log, not to the terminal."""
    done = cli("chaos", "--suite", "metadata", "--broker", "kafka-local", "--scenarios", "14", "--seed", "7",
               "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    campaign = json.loads((tmp_path / "out" / "chaos.json").read_text())
    systems = campaign["summary"]["systems"]
    assert campaign["broker"] == "kafka-local" and systems[REAL]["status"] == "ok"
    assert {s: (t["status"], t["caught_by_its_check"] > 0) for s, t in systems.items() if s != REAL} == {
        mutant: ("caught", True) for mutant in MUTANTS}
    assert "rdkafka" not in done.stdout + done.stderr
    assert (tmp_path / campaign["log"]) == tmp_path / "out" / "children.log" and campaign["log"] in done.stdout


@pytest.mark.kafka
def test_run_on_a_local_kafka_keeps_a_fenced_zombies_client_log_in_the_run_directory(cli, tmp_path):
    """A controller frozen inside its transaction, fenced by its successor: what its Kafka client logs
    about the fencing is in RUN_DIR/children.log, not on the terminal under the verdict."""
    done = cli("run", "--suite", "metadata", "--broker", "kafka-local", "--crash-at",
               "freeze:metadata.controller.after_begin", "--seed", "1", "--out", "out", "--json", "run.json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    result = json.loads((tmp_path / "run.json").read_text())
    events = [json.loads(line) for line in (tmp_path / result["history"]).read_text().splitlines()]
    assert result["verdict"] == "pass" and any(e.get("type") == "fenced" for e in events)
    assert "rdkafka" not in done.stdout + done.stderr
    log = tmp_path / "out" / "children.log"
    assert result["children_log"] == "out/children.log" and "fenced" in log.read_text()
    assert f"the controllers' and readers' output: {result['children_log']}" in done.stdout
