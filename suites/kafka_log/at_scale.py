"""Kafka's log anomalies over a campaign's histories: the history a kafka-log scenario records (what its producers
sent, what its consumer read, where each partition's log ended), read back from the campaign's Parquet dataset
(``RUN_DIR/parquet/histories``) and judged by ``eos-harness check RUN_DIR``: in this process (``--engine local``:
the suite's own checker, :func:`eos_harness.suites.kafka_log.checks.check`) or as Spark DataFrame jobs (``--engine
spark``: :mod:`eos_harness.suites.kafka_log.frames`, an independent implementation of the same rules, for histories
too large for one process). Both give the same answer in the same shape (:func:`scenario_answer`).

A history is JSON lines (:class:`eos_harness.history.History`), in this order:

- ``scenario``: the reader (``system``), the workload's seed, topic and size;
- ``transaction``: one per transaction, in the order they finished: ``id``, ``outcome`` (committed, aborted,
  unknown) and ``records``, each ``[partition, value, offset]`` (offset: from its delivery report, or null);
- ``read``: one per record the consumer read, in the order it read them: ``partition``, ``offset``, ``value``;
- ``end``: one per partition, measured once every transaction finished: ``partition``, ``end`` (the log end),
  ``stable`` (the last stable offset) and ``position`` (the consumer's, after it read everything).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from eos_harness.history import History
from eos_harness.results_parquet import events_by_scenario
from eos_harness.suites.kafka_log.checks import ANOMALIES, LogEnd, Read, Sent, Transaction, check

__all__ = ["CHECKS_AT_SCALE", "COUNTED", "EXERCISED", "SUITE", "check_in_process", "counted", "history_events",
           "parts_of", "record_history", "scenario_answer"]

SUITE = "kafka-log"
SUBJECT = "system"  # the field of a result naming the reader
CHECKS_AT_SCALE = tuple(ANOMALIES)
# What each check judges, counted per scenario: a check whose count is 0 was not exercised (never passed).
EXERCISED = {
    "duplicate": "committed_records", "aborted_read": "aborted_records", "inconsistent_offsets": "offsets",
    "lost_write": "committed_records", "committed_not_read": "committed_records",
    "partial_transaction": "transactions", "hanging_transaction": "log_ends",
}
COUNTED = {
    "transactions": "transactions of a known or unknown outcome",
    "committed_records": "records of committed transactions",
    "aborted_records": "records of aborted transactions",
    "offsets": "values known at an offset: committed records' delivery reports and the records read",
    "reads": "records the consumer read",
    "log_ends": "partitions whose log end was measured",
}


def history_events(scenario: dict, transactions: Iterable[Transaction], reads: Iterable[Read],
                   ends: Iterable[LogEnd]) -> Iterator[dict]:
    """The events of a scenario's history (without ``seq`` and ``instance``, which :class:`History` adds)."""
    yield {"type": "scenario", **scenario}
    for txn in transactions:
        yield {"type": "transaction", "id": txn.id, "outcome": txn.outcome,
               "records": [[rec.partition, rec.value, rec.offset] for rec in txn.records]}
    for read in reads:
        yield {"type": "read", "partition": read.partition, "offset": read.offset, "value": read.value}
    for end in ends:
        yield {"type": "end", "partition": end.partition, "end": end.end, "stable": end.stable,
               "position": end.position}


def record_history(path: Path, scenario: dict, transactions: Iterable[Transaction], reads: Iterable[Read],
                   ends: Iterable[LogEnd]) -> Path:
    """Write the history of a scenario to ``path`` (JSON lines); returns ``path``."""
    history = History(Path(path))
    try:
        for event in history_events(scenario, transactions, reads, ends):
            history.add(0, event)
    finally:
        history.close()
    return Path(path)


def parts_of(events: Iterable[dict]) -> tuple[list[Transaction], list[Read], list[LogEnd]]:
    """What :func:`~eos_harness.suites.kafka_log.checks.check` judges, from a history's events (in ``seq`` order)."""
    transactions: list[Transaction] = []
    reads: list[Read] = []
    ends: list[LogEnd] = []
    for event in events:
        if event["type"] == "transaction":
            transactions.append(Transaction(event["id"], event["outcome"],
                                            tuple(Sent(p, v, o) for p, v, o in event["records"])))
        elif event["type"] == "read":
            reads.append(Read(event["partition"], event["offset"], event["value"]))
        elif event["type"] == "end":
            ends.append(LogEnd(event["partition"], event["end"], event["stable"], event["position"]))
    return transactions, reads, ends


def counted(transactions: list[Transaction], reads: list[Read], ends: list[LogEnd]) -> dict[str, int]:
    """What each check judged in one history (:data:`COUNTED`)."""
    committed = [rec for t in transactions if t.outcome == "committed" for rec in t.records]
    return {"transactions": len(transactions), "committed_records": len(committed),
            "aborted_records": sum(len(t.records) for t in transactions if t.outcome == "aborted"),
            "offsets": sum(rec.offset is not None for rec in committed) + len(reads), "reads": len(reads),
            "log_ends": len(ends)}


def sorted_violations(violations: Iterable[dict]) -> list[dict]:
    """Violations in one order whatever found them (by check, key, expected, observed, detail)."""
    return sorted(violations, key=lambda v: tuple((v[k] is None, "" if v[k] is None else str(v[k]))
                                                  for k in ("check", "key", "expected", "observed", "detail")))


def scenario_answer(index: int, system: str, violations: Iterable[dict], counts: dict[str, int]) -> dict:
    """One scenario's answer (the same shape from both engines): the anomalies as violations, each check's verdict
    (``fail``; ``pass``; ``not exercised`` when nothing it judges was in the history)."""
    found = sorted_violations({k: v.get(k) for k in ("check", "key", "expected", "observed", "event", "detail")}
                              for v in violations)
    fired = {v["check"] for v in found}
    checks = {c: "fail" if c in fired else "pass" if counts.get(EXERCISED[c]) else "not exercised"
              for c in CHECKS_AT_SCALE}
    return {"index": index, SUBJECT: system, "verdict": "fail" if fired else "pass", "checks": checks,
            "counted": {name: int(counts.get(name, 0)) for name in COUNTED}, "violations": found}


def check_in_process(path: Path) -> list[dict]:
    """Every kafka-log scenario of the histories at ``path``, judged by the suite's own checker in this process: one
    :func:`scenario_answer` each, in plan order (a history without its ``scenario`` event is not judged)."""
    answers = []
    for index, subject, events in events_by_scenario(path, SUITE):
        if not any(e["type"] == "scenario" for e in events):
            continue
        parts = parts_of(events)
        anomalies = check(*parts)
        answers.append(scenario_answer(index, subject, (a.violation().to_json() for a in anomalies), counted(*parts)))
    return answers
