"""Kafka's log anomalies over a campaign's Parquet histories (``eos-harness check RUN_DIR`` on a kafka-log campaign):
the history a kafka-log scenario records, read back from Parquet, judged in this process gives the suite's own
checker's anomalies; as Spark DataFrame jobs (``--engine spark``, ``-m slow``) the same answer. The histories are
drawn at random (transactions of every outcome over a few partitions, read back, then broken in the ways the checker
names: a read twice, a read dropped, an aborted record read, another value at an offset, a log end not reached), so
that every anomaly is found in some and none in others."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from eos_harness.suites.kafka_log.at_scale import check_in_process, counted, record_history, scenario_answer
from eos_harness.suites.kafka_log.checks import ANOMALIES, LogEnd, Read, Sent, Transaction, check

SCENARIOS = 60


def _history(rng: random.Random) -> tuple[list[Transaction], list[Read], list[LogEnd]]:
    """A workload's history, drawn, then broken (or not) in a few of the ways the checker names."""
    partitions = rng.randint(1, 3)
    next_offset = dict.fromkeys(range(partitions), 0)
    transactions = []
    for number in range(rng.randint(1, 12)):
        outcome = rng.choices(("committed", "aborted", "unknown"), (6, 3, 1))[0]
        records = []
        for i in range(rng.randint(1, 4)):
            p = rng.randrange(partitions)
            delivered = rng.random() > 0.05
            records.append(Sent(p, f"t{number}-{i}", next_offset[p] if delivered else None))
            next_offset[p] += 1
        for p in {r.partition for r in records}:
            next_offset[p] += 1  # its marker
        transactions.append(Transaction(f"t{number}", outcome, tuple(records)))
    reads = []
    for txn in transactions:
        read = txn.outcome == "committed" or (txn.outcome == "unknown" and rng.random() < 0.7)
        for rec in txn.records:
            if read and rec.offset is not None:
                reads.append(Read(rec.partition, rec.offset, rec.value))
    reads.sort(key=lambda r: (r.partition, r.offset))
    ends = [LogEnd(p, next_offset[p], next_offset[p], next_offset[p]) for p in range(partitions)]
    aborted = [rec for t in transactions if t.outcome == "aborted" for rec in t.records if rec.offset is not None]
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        fault = rng.randrange(7)
        if fault == 0 and reads:  # a record read twice, at its offset or at another
            again = rng.choice(reads)
            reads.append(again if rng.random() < 0.5 else Read(again.partition, again.offset + 100, again.value))
        elif fault == 1 and reads:  # a record never read
            reads.pop(rng.randrange(len(reads)))
        elif fault == 2 and aborted:  # an aborted record read
            rec = rng.choice(aborted)
            reads.insert(rng.randrange(len(reads) + 1), Read(rec.partition, rec.offset, rec.value))
        elif fault == 3 and reads:  # another value read at an offset
            at = rng.choice(reads)
            reads.append(Read(at.partition, at.offset, f"stranger-{rng.randrange(100)}"))
        elif fault == 4:  # the last stable offset below the log end
            i = rng.randrange(len(ends))
            ends[i] = LogEnd(ends[i].partition, ends[i].end, ends[i].end - rng.randint(1, 2), ends[i].position)
        elif fault == 5:  # the consumer's position below the log end
            i = rng.randrange(len(ends))
            ends[i] = LogEnd(ends[i].partition, ends[i].end, ends[i].stable, ends[i].end - 1)
        elif fault == 6 and len(ends) > 1:  # a partition's end never measured
            ends.pop(rng.randrange(len(ends)))
    return transactions, reads, ends


@pytest.fixture(scope="module")
def histories(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A run directory holding the recorded histories as a campaign on Spark writes them (``results.jsonl``,
    ``parquet/histories``), and each scenario's answer from the checker on the history it was recorded from."""
    from eos_harness.results_parquet import write_histories

    run_dir = tmp_path_factory.mktemp("kafka-log-histories")
    rng = random.Random(26)
    results, answers = [], []
    for index in range(SCENARIOS):
        parts = _history(rng)
        system = "read_committed" if index % 2 == 0 else "read_uncommitted"
        directory = run_dir / f"scenario-{index:05d}"
        directory.mkdir()
        path = record_history(directory / "history.jsonl", {"system": system, "seed": index, "topic": f"t{index}"},
                              *parts)
        anomalies = check(*parts)
        answers.append(scenario_answer(index, system, (a.violation().to_json() for a in anomalies), counted(*parts)))
        results.append({"index": index, "suite": "kafka-log", "system": system,
                        "expected": "pass" if system == "read_committed" else "fail",
                        "verdict": "fail" if anomalies else "pass", "history": str(path)})
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    assert write_histories(run_dir, results, "system") is not None
    return run_dir, answers


def test_the_recorded_histories_read_back_from_parquet_give_the_checkers_own_anomalies(histories):
    run_dir, answers = histories
    from eos_harness.results_parquet import HISTORIES_DATASET, PARQUET_DIR

    judged = check_in_process(run_dir / PARQUET_DIR / HISTORIES_DATASET)
    assert judged == answers
    # The histories are not trivial: every anomaly in some, none in others, and a check with nothing to judge
    # is not exercised (never passed).
    fired = {v["check"] for a in answers for v in a["violations"]}
    assert fired == set(ANOMALIES)
    assert any(a["verdict"] == "pass" for a in answers) and any(a["verdict"] == "fail" for a in answers)
    assert any(a["checks"]["aborted_read"] == "not exercised" for a in answers)


def test_check_judges_a_kafka_log_campaigns_histories_and_names_the_unexpected_anomalies(cli, histories, tmp_path):
    run_dir, answers = histories
    code, output, answer = cli.check(run_dir, tmp_path / "local.json")
    assert (answer["suite"], answer["subject"]) == ("kafka-log", "system")
    assert answer["scenarios"] == answers
    unexpected = [a for a in answers if a["verdict"] == "fail" and a["system"] == "read_committed"]
    assert unexpected and code == 1, output
    assert f"log checks of {run_dir} (local): {SCENARIOS} kafka-log scenarios" in output
    for a in unexpected:
        assert f"scenario {a['index']} (read_committed): {a['violations'][0]['check']} key" in output


@pytest.mark.spark
@pytest.mark.slow
def test_the_dataframe_checker_gives_the_answer_of_the_in_process_checker(cli, histories, tmp_path):
    run_dir, answers = histories
    local = cli.check(run_dir, tmp_path / "local.json")
    spark = cli.check(run_dir, tmp_path / "spark.json", "--engine", "spark", "--master", "local[2]",
                   "--driver-memory", "1g")
    assert "engine: spark on local[2]" in spark[1]
    assert spark[0] == local[0] == 1, spark[1]
    assert spark[2]["scenarios"] == local[2]["scenarios"] == answers
    assert [line.replace(" (spark): ", " (local): ") for line in spark[1].splitlines()
            if not line.startswith("engine:")] == local[1].splitlines()


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_a_kafka_log_campaign_on_spark_keeps_its_histories_as_parquet_and_check_judges_them_as_it_did(
        cli, eos_kafka_cluster, tmp_path):
    """``chaos --suite kafka-log --engine spark`` on a real broker: each scenario a Spark task, its recorded history
    written as Parquet; ``check`` judges it again, in this process and as DataFrame jobs, with the campaign's own
    verdicts and anomalies (the uncommitted reader's aborted reads)."""
    out = tmp_path / "run"
    done = cli("chaos", "--suite", "kafka-log", "--engine", "spark", "--master", "local[2]", "--broker",
               eos_kafka_cluster.spec, "--scenarios", "4", "--transactions", "12", "--seed", "5", "--out", out,
               "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    tallies = campaign["summary"]["systems"]
    assert (tallies["read_committed"]["status"], tallies["read_uncommitted"]["status"]) == ("ok", "caught")
    assert any((out / "parquet" / "histories" / "suite=kafka-log").rglob("*.parquet"))
    local = cli.check(out, tmp_path / "local.json")
    spark = cli.check(out, tmp_path / "spark.json", "--engine", "spark", "--master", "local[2]",
                   "--driver-memory", "1g")
    assert spark[0] == local[0] == 0, spark[1]  # the uncommitted reader's anomalies are expected
    assert spark[2]["scenarios"] == local[2]["scenarios"]
    own = {r["index"]: r for r in campaign["scenarios"]}
    assert sorted(s["index"] for s in local[2]["scenarios"]) == sorted(own) == [0, 1, 2, 3]
    for scenario in local[2]["scenarios"]:
        result = own[scenario["index"]]
        assert (scenario["system"], scenario["verdict"]) == (result["system"], result["verdict"])
        assert [(v["check"], v["key"], v["observed"]) for v in scenario["violations"]] == sorted(
            (v["check"], v["key"], v["observed"]) for v in result["violations"])
    assert {v["check"] for s in local[2]["scenarios"] for v in s["violations"]} == {"aborted_read"}
