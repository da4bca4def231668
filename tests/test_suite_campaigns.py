"""``chaos --suite S`` for the suites whose campaign is written once against the suite contract
(``eos_harness.suite_campaign``): conformance, offsets, windows, and on real Kafka kafka-log and
kafka-metadata. Each campaign is short (a real store and a mutant), and shows what a user reads: the
real store passes, the mutant is caught by the check that names its mistake, the JSON has ``suite``,
``seconds``, ``repro`` and ``summary.errors`` (a list), the JUnit file has a testsuite per subject, the
exit code follows, and a campaign stopped by ``--until-failure`` is resumed with its plan."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

NOISE = "slow_noisy_store: heavy dependency loaded"  # what tests/fixtures/slow_noisy_store.py writes as it is imported


def _campaign(cli, tmp_path: Path, suite: str, *args: str) -> tuple[dict, ET.Element]:
    out, junit = tmp_path / "run", tmp_path / "junit.xml"
    done = cli("chaos", "--suite", suite, "--seed", "5", "--out", out, "--junit", junit, "--no-report", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert NOISE not in done.stdout + done.stderr  # a store's output is in its scenario's log (see below)
    campaign = json.loads((out / "chaos.json").read_text())
    assert campaign["suite"] == suite and isinstance(campaign["seconds"], float)
    assert campaign["summary"]["errors"] == [] and campaign["summary"]["unexpected"] == []
    assert campaign["repro"].startswith(f"eos-harness chaos --suite {suite} --seed 5 ")
    for result in campaign["scenarios"]:
        assert result["suite"] == suite and result["repro"].startswith("eos-harness ")
        assert isinstance(result["seconds"], float) and result["expected"] in ("pass", "fail")
    return campaign, ET.parse(junit).getroot()


@pytest.mark.parametrize(("suite", "stores", "mutant_check", "args"), [
    ("conformance", "memory,mutant-read-committed-sees-overlay", "read_committed_isolation",
     ("--examples", "3", "--steps", "10")),
    ("windows", "memory-window,mutant-window-grace-off-by-one", "late_write_dropped",
     ("--examples", "3", "--steps", "10")),
    # (a user's store that prints and warns as it is imported: rocksdb-indexed underneath)
    ("offsets", "slow_noisy_store:make_store,mutant-offsets-first-partition-only", "partition_offset_survives_reopen",
     ()),
])
def test_a_store_suites_campaign_passes_its_store_and_catches_its_mutant(cli, tmp_path, suite, stores,
                                                                         mutant_check, args):
    real, mutant = stores.split(",")
    campaign, junit = _campaign(cli, tmp_path, suite, "--stores", stores, "--scenarios", "2", *args)
    tallies = campaign["summary"]["stores"]
    assert (tallies[real]["status"], tallies[mutant]["status"]) == ("ok", "caught")
    assert tallies[mutant]["checks"].get(mutant_check) == 1 and tallies[mutant]["caught_by_its_check"] == 1
    failing = next(r for r in campaign["scenarios"] if r["store"] == mutant)
    assert mutant_check in {v["check"] for v in failing["violations"]}
    assert f"eos-harness verify {mutant} --seed {failing['seed']}" in failing["repro"]
    assert {s.get("name") for s in junit.iter("testsuite")} == {real, mutant}
    caught = junit.find(f"./testsuite[@name='{mutant}']/testcase[@name='caught']")
    assert caught is not None and len(caught) == 0  # passed: the mutant was caught
    report = cli.invoke("report", tmp_path / "run")  # from the run's files: no history to draw, none missing
    assert report.returncode == 0 and "No unexpected result" in report.stdout, report.stdout
    # without --allow nothing is waived, and no replay waives anything
    assert "allowed" not in campaign["summary"] and "waived" not in tallies[mutant]
    assert "--allow" not in campaign["repro"] + "".join(r["repro"] for r in campaign["scenarios"])
    # what the stores' processes (and JVMs) write goes to each scenario's log, never to the terminal
    for result in campaign["scenarios"]:
        assert result["log"] == str(tmp_path / "run" / f"scenario-{result['index']:05d}" / "store.log"), result
    if real.startswith("slow_noisy_store"):
        assert any(NOISE in Path(r["log"]).read_text() for r in campaign["scenarios"] if r["store"] == real)


def test_a_campaign_that_allows_a_known_difference_passes_and_says_what_it_waived(cli, tmp_path):
    """``chaos --allow CHECK`` as ``verify --allow``: a campaign of a mutant caught by one check, that check
    allowed. The mutant whose mistake only that check names is not exercised (neither caught nor a hole in the
    harness: its JUnit testcase ``caught`` skipped with why); the summary, the terminal and the report say what
    was waived and how often; every replay carries --allow. A check the suite cannot waive is a usage error
    before anything runs."""
    mutant = "mutant-read-committed-range-sees-overlay"  # caught by read_committed_isolation alone
    campaign, junit = _campaign(cli, tmp_path, "conformance", "--stores", mutant, "--scenarios", "1",
                                "--examples", "1", "--steps", "5", "--allow", "read_committed_isolation")
    summary = campaign["summary"]
    tally = summary["stores"][mutant]
    assert tally["status"] == "not exercised" and "read_committed_isolation was allowed" in tally["not_exercised_why"]
    assert tally["failed"] == 0 and tally["checks"] == {}  # its only violations were waived: its scenario passed
    assert summary["allowed"] == ["read_committed_isolation"] and summary["waived"]["read_committed_isolation"] > 0
    assert summary["waived_scenarios"] == {"read_committed_isolation": 1} and list(summary["not_exercised"]) == [mutant]
    assert "--allow read_committed_isolation" in campaign["repro"]
    mutants = campaign["scenarios"]
    assert mutants[0]["repro"].endswith(" --allow read_committed_isolation")
    assert mutants[0]["waived"]["read_committed_isolation"] == summary["waived"]["read_committed_isolation"]
    caught = junit.find(f"./testsuite[@name='{mutant}']/testcase[@name='caught']/skipped")
    assert caught is not None and "read_committed_isolation was allowed" in caught.get("message")
    waived = junit.find(f"./testsuite[@name='{mutant}']/testcase[@name='read_committed_isolation']/skipped")
    assert waived is not None and waived.get("message").startswith("waived: --allow read_committed_isolation")
    report = cli.invoke("report", tmp_path / "run")
    assert report.returncode == 0 and "Waived: read_committed_isolation (--allow; fired" in report.stdout
    assert "waived: read_committed_isolation (--allow; fired" in (tmp_path / "run" / "report.html").read_text()
    assert mutants[0]["verdict"] == "pass"  # its only violations were waived (a replay: the lifecycle's test)
    wrong = cli.invoke("chaos", "--suite", "conformance", "--stores", "memory", "--allow", "store_hang", "--out",
                       tmp_path / "no")
    assert wrong.returncode == 2 and "seed:" not in wrong.stdout and not (tmp_path / "no").exists()
    assert "store's own calls" in wrong.stderr and "read_committed_isolation, read_your_own_writes" in wrong.stderr


def test_a_campaign_stopped_at_its_first_failure_is_resumed_with_its_plan(cli, tmp_path):
    out = tmp_path / "run"
    mutant = "mutant-offsets-first-partition-only"
    first = cli("chaos", "--suite", "offsets", "--stores", mutant, "--scenarios", "3", "--seed", "9",
                "--workers", "1", "--until-failure", "--out", out, "--no-report")
    assert first.returncode == 0, first.stdout + first.stderr
    stopped = json.loads((out / "chaos.json").read_text())
    assert stopped["stopped"]["why"] == "until-failure" and len(stopped["scenarios"]) == 1
    assert f"eos-harness chaos --suite offsets --resume {out}" in first.stdout
    refused = cli("chaos", "--suite", "offsets", "--resume", out, "--stores", "memory")
    assert refused.returncode == 2 and "--stores" in refused.stderr
    refused = cli("chaos", "--suite", "offsets", "--resume", out, "--allow", "partition_offset_survives_reopen")
    assert refused.returncode == 2 and "started with no --allow, this command gives --allow partition_offset_" \
        "survives_reopen" in refused.stderr
    resumed = cli("chaos", "--suite", "offsets", "--resume", out, "--no-report")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = json.loads((out / "chaos.json").read_text())
    assert [r["index"] for r in again["scenarios"]] == [0, 1]
    assert again["scenarios"][0] == stopped["scenarios"][0]  # kept, not run again
    assert again["scenarios"][1]["scenario"] != again["scenarios"][0]["scenario"]  # the plan's next scenario


def test_a_store_of_another_kind_or_a_directory_not_ours_is_refused_before_anything_runs(cli, tmp_path):
    done = cli.invoke("chaos", "--suite", "conformance", "--stores", "memory-window", "--out", tmp_path / "run")
    assert done.returncode == 2 and "--suite windows" in done.stdout + done.stderr
    assert not (tmp_path / "run").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    done = cli.invoke("chaos", "--suite", "offsets", "--stores", "memory", "--out", tmp_path / "mine")
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


@pytest.mark.kafka
def test_a_kafka_log_campaign_catches_the_uncommitted_reader(cli, eos_kafka_cluster, tmp_path):
    campaign, junit = _campaign(cli, tmp_path, "kafka-log", "--broker", eos_kafka_cluster.spec,
                                "--scenarios", "2", "--transactions", "12")
    tallies = campaign["summary"]["systems"]
    assert (tallies["read_committed"]["status"], tallies["read_uncommitted"]["status"]) == ("ok", "caught")
    # To the command, the session's broker is a kafka:// cluster someone else runs: its release is not asked.
    assert {r["kafka_version"] for r in campaign["scenarios"]} == {None}
    broken = next(r for r in campaign["scenarios"] if r["system"] == "read_uncommitted")
    assert broken["repro"] == (f"eos-harness kafka-log --broker {eos_kafka_cluster.spec} --seed {broken['seed']} "
                               "--transactions 12 --partitions 2 --abort-ratio 0.3 --isolation read_uncommitted")
    assert {s.get("name") for s in junit.iter("testsuite")} == {"read_committed", "read_uncommitted"}
    # Each scenario recorded its history (what its producers sent, what its reader read, where each log ended):
    # judged again from it, the scenario's own anomalies (what `check RUN_DIR` judges from its Parquet copy).
    from eos_harness.suites.kafka_log.at_scale import parts_of
    from eos_harness.suites.kafka_log.checks import check

    for result in campaign["scenarios"]:
        events = [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]
        assert events[0]["type"] == "scenario" and events[0]["system"] == result["system"]
        assert [a.violation().to_json() for a in check(*parts_of(events))] == result["violations"]
        assert sum(e["type"] == "read" for e in events) == result["records_read"]


@pytest.mark.kafka
def test_a_kafka_metadata_campaign_runs_on_a_kraft_quorum(cli, tmp_path):
    campaign, junit = _campaign(cli, tmp_path, "kafka-metadata", "--scenarios", "1", "--topics", "1",
                                "--partitions", "10", "--brokers", "1", "--bootstrap-kills", "0")
    [result] = campaign["scenarios"]
    assert result["verdict"] == "pass" and result["controller_kills"] == 1
    assert campaign["summary"]["systems"]["kraft"]["status"] == "ok"
    assert result["repro"].startswith(f"eos-harness kafka-metadata --seed {result['seed']} --topics 1 --partitions 10")
    assert [s.get("name") for s in junit.iter("testsuite")] == ["kraft"]
