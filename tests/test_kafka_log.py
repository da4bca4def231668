"""The Kafka log checks (``eos_harness.suites.kafka_log``): each anomaly on a hand-built history, a
clean history passes; the CLI's exit codes. The workload against a real broker is the suite's own pytest
entry, suites/kafka_log/test_kafka_log.py."""

from __future__ import annotations

import json

import pytest
from eos_harness.suites.kafka_log.checks import ANOMALIES, LogEnd, Read, Sent, Transaction, check
from eos_harness.suites.kafka_log.runner import WorkloadResult

from tests.test_printed_commands import shell

# Partition 0's log: t1 committed at 0-1, t2 aborted at 2 (its marker at 3), t3 committed at 4,
# t1's and t3's markers at 5-6 (the exact layout does not matter to the checker; offsets do).
T1 = Transaction("t1", "committed", (Sent(0, "a", 0), Sent(0, "b", 1)))
T2 = Transaction("t2", "aborted", (Sent(0, "x", 2),))
T3 = Transaction("t3", "committed", (Sent(0, "c", 4),))
CLEAN_READS = [Read(0, 0, "a"), Read(0, 1, "b"), Read(0, 4, "c")]
END = [LogEnd(0, end=7, stable=7, position=7)]


def kinds(anomalies) -> list[str]:
    return [a.kind for a in anomalies]


def test_a_clean_history_has_no_anomaly():
    assert check([T1, T2, T3], CLEAN_READS, END) == []


def test_a_committed_record_read_twice_is_a_duplicate():
    found = check([T1, T2, T3], [*CLEAN_READS, Read(0, 6, "c")], END)
    assert "duplicate" in kinds(found)
    dup = next(a for a in found if a.kind == "duplicate")
    assert dup.value == "c" and dup.transaction == "t3"


def test_a_record_of_an_aborted_transaction_read_is_an_aborted_read():
    found = check([T1, T2, T3], [*CLEAN_READS, Read(0, 2, "x")], END)
    assert kinds(found) == ["aborted_read"]
    assert (found[0].offset, found[0].value, found[0].transaction) == (2, "x", "t2")


def test_an_offset_holding_two_values_is_inconsistent():
    # The delivery report put "c" at 4, a reader found "z" of nobody's transaction there too.
    found = check([T1, T2, T3], [Read(0, 0, "a"), Read(0, 1, "b"), Read(0, 4, "c"), Read(0, 4, "z")], END)
    assert "inconsistent_offsets" in kinds(found)
    # Two readers disagreeing about one offset, without any delivery report.
    found = check([], [Read(1, 9, "p"), Read(1, 9, "q")])
    assert kinds(found) == ["inconsistent_offsets"] and found[0].offset == 9


def test_a_committed_record_skipped_below_the_highest_offset_read_is_a_lost_write():
    found = check([T1, T2, T3], [Read(0, 0, "a"), Read(0, 4, "c")], END)
    assert "lost_write" in kinds(found)
    lost = next(a for a in found if a.kind == "lost_write")
    assert (lost.offset, lost.value) == (1, "b")
    assert "partial_transaction" in kinds(found)  # t1 read in part


def test_a_committed_record_never_read_though_the_end_was_reached():
    found = check([T1, T2, T3], [Read(0, 0, "a"), Read(0, 1, "b")], END)
    assert kinds(found) == ["committed_not_read"] and found[0].value == "c"
    # A consumer that stopped short says nothing about records past what it read (only that it stopped).
    assert kinds(check([T1, T2, T3], [Read(0, 0, "a"), Read(0, 1, "b")], [LogEnd(0, 7, 7, 2)])) == ["hanging_transaction"]


def test_a_transaction_of_unknown_outcome_read_in_part_breaks_atomicity():
    unknown = Transaction("t4", "unknown", (Sent(1, "u1", 0), Sent(1, "u2", 1)))
    assert check([unknown], [Read(1, 0, "u1"), Read(1, 1, "u2")]) == []  # all of it: fine
    assert check([unknown], []) == []  # none of it: fine
    assert kinds(check([unknown], [Read(1, 0, "u1")])) == ["partial_transaction"]


def test_a_stable_offset_below_the_log_end_once_all_transactions_finished_is_a_hanging_transaction():
    found = check([T1, T2, T3], CLEAN_READS, [LogEnd(0, end=7, stable=3, position=3)])
    assert kinds(found) == ["hanging_transaction"]
    found = check([T1, T2, T3], CLEAN_READS, [LogEnd(0, end=7, stable=7, position=5)])
    assert kinds(found) == ["hanging_transaction"]


def test_a_value_sent_twice_is_a_broken_workload_not_an_anomaly():
    with pytest.raises(ValueError, match="sent twice"):
        check([T1, Transaction("t9", "committed", (Sent(0, "a", 8),))], [])
    with pytest.raises(ValueError, match="outcome"):
        Transaction("t0", "maybe", ())


def test_the_report_says_each_anomaly_as_a_violation_and_its_verdict_follows_them():
    clean = WorkloadResult("t", "read_committed", [T1, T2, T3], CLEAN_READS, END).to_json()
    assert (clean["verdict"], clean["violations"], clean["anomalies"], clean["summary"]) == ("pass", [], [], {})
    report = WorkloadResult("t", "read_uncommitted", [T1, T2, T3], [*CLEAN_READS, Read(0, 2, "x")], END).to_json()
    assert report["verdict"] == "fail" and report["summary"] == {"aborted_read": 1}
    assert report["anomalies"] == [{"kind": "aborted_read", "partition": 0, "offset": 2, "value": "x",
                                    "transaction": "t2", "detail": "a record of an aborted transaction was read (G1a)"}]
    [violation] = report["violations"]
    assert (violation["check"], violation["key"], violation["expected"], violation["observed"], violation["detail"]) == (
        "aborted_read", "partition 0 offset 2", ANOMALIES["aborted_read"],
        "a record of an aborted transaction was read (G1a)", "value x, transaction t2")
    # a finding about a whole transaction is keyed by the transaction
    partial = next(a for a in check([T1], [Read(0, 0, "a")], END) if a.kind == "partial_transaction")
    assert partial.violation().key == "transaction t1"


@pytest.mark.kafka
def test_the_cli_exit_code_follows_the_verdict(cli, eos_kafka_cluster, tmp_path):
    out = tmp_path / "log.json"
    ok = cli("kafka-log", "--broker", eos_kafka_cluster.spec, "--seed", "3", "--transactions", "20", "--json", out)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(out.read_text())["verdict"] == "pass"
    broken = cli("kafka-log", "--broker", eos_kafka_cluster.spec, "--seed", "3", "--transactions", "20",
                 "--isolation", "read_uncommitted", "--json", tmp_path / "broken.json")
    assert broken.returncode == 1 and "aborted_read" in broken.stdout
    # Its replay, pasted into a shell in a directory whose path holds a space and an accent: the same verdict.
    here = tmp_path / "dir with space" / "é"
    here.mkdir(parents=True)
    replayed = shell(json.loads((tmp_path / "broken.json").read_text())["repro"], here)
    assert replayed.returncode == 1 and "aborted_read" in replayed.stdout, replayed.stdout + replayed.stderr


def test_the_cli_refuses_the_embedded_broker(cli):
    proc = cli("kafka-log", "--broker", "embedded")
    assert proc.returncode == 2 and "needs Kafka" in proc.stderr
