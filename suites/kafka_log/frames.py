"""Kafka's log anomalies as Spark DataFrame jobs over a campaign's Parquet histories (``eos-harness check --engine
spark RUN_DIR``): the rules of :func:`eos_harness.suites.kafka_log.checks.check` written again as joins and
aggregations over every scenario at once, so that histories too large for one process are judged on a cluster,
with the same answer as the in-process checker (:mod:`.at_scale`).

The history's events become four frames, each keyed by its scenario: the records sent (with their transaction's
outcome and their place in it), the records read (in the order read), each partition's log end, and the
scenarios. Then each anomaly is a query: how many times each value was read and where first (a group by value);
``inconsistent_offsets``, the values known at each (partition, offset); ``aborted_read``, ``duplicate``,
``lost_write``, ``committed_not_read``, the records sent joined with those counts (and the highest offset read in
their partition, the partitions read to their end); ``partial_transaction``, a group by transaction;
``hanging_transaction``, the log ends. The anomalies come out as the in-process checker says them (the same key,
promise, words and record).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eos_harness.suites.kafka_log.at_scale import SUITE, scenario_answer
from eos_harness.suites.kafka_log.checks import ANOMALIES

__all__ = ["check_frames"]

_COUNT = "\u0100count"  # a row of the collected frame that is a count, not a violation
_SENT_TWICE = "\u0100sent twice"  # a row naming a value sent twice: the workload is broken, nothing is judged


def check_frames(spark: Any, path: Path) -> list[dict]:
    """Every kafka-log scenario of the histories at ``path`` judged as DataFrames on ``spark``: one
    :func:`eos_harness.suites.kafka_log.at_scale.scenario_answer` each, in plan order. A value sent twice in a
    scenario is a ValueError, as in the in-process checker (the workload must send unique values)."""
    from pyspark.sql import functions as F

    events = (spark.read.parquet(str(path)).where(F.col("suite") == SUITE)
              .select(F.col("index").alias("scenario"), F.col("subject").alias("system"), "seq", "type", "event"))
    firsts = sorted(events.where(F.col("type") == "scenario").select("scenario", "system").collect(),
                    key=lambda row: row.scenario)
    if not firsts:
        return []
    systems = {row.scenario: row.system for row in firsts}
    planned = spark.createDataFrame([(s,) for s in systems], "scenario long")
    events = events.join(F.broadcast(planned), "scenario", "left_semi")  # a history without its first event: not judged

    txn = (events.where(F.col("type") == "transaction")
           .select("scenario", F.col("seq").alias("txn_seq"),
                   F.from_json("event", "id string, outcome string, records array<array<string>>").alias("t")))
    sent = (txn.select("scenario", "txn_seq", F.col("t.id").alias("txn"), F.col("t.outcome").alias("outcome"),
                       F.posexplode("t.records").alias("ordinal", "r"))
            .select("scenario", "txn_seq", "txn", "outcome", "ordinal", F.col("r")[0].cast("long").alias("partition"),
                    F.col("r")[1].alias("value"), F.col("r")[2].cast("long").alias("offset")).cache())
    reads = (events.where(F.col("type") == "read")
             .select("scenario", "seq", F.from_json("event", "partition long, offset long, value string").alias("r"))
             .select("scenario", "seq", "r.partition", "r.offset", "r.value").cache())
    ends = (events.where(F.col("type") == "end")
            .select("scenario", F.from_json("event", "partition long, end long, stable long, position long").alias("e"))
            .select("scenario", "e.partition", "e.end", "e.stable", "e.position"))

    def anomaly(frame, kind: str, partition, offset, value, transaction, detail):
        """Rows of violations as :meth:`Anomaly.violation` says them (key, promise, words, record)."""
        key = F.when(partition.isNotNull(), F.concat(
            F.lit("partition "), partition.cast("string"),
            F.when(offset.isNotNull(), F.concat(F.lit(" offset "), offset.cast("string"))).otherwise(F.lit(""))
        )).otherwise(F.concat(F.lit("transaction "), transaction))
        record = F.concat_ws(", ", F.when(value.isNotNull(), F.concat(F.lit("value "), value)),
                             F.when(transaction.isNotNull(), F.concat(F.lit("transaction "), transaction)))
        return frame.select("scenario", F.lit(kind).alias("check"), key.alias("key"),
                            F.lit(ANOMALIES[kind]).alias("expected"), detail.alias("observed"),
                            F.lit(None).cast("long").alias("event"),
                            F.when(record != "", record).alias("detail"))

    none = F.lit(None).cast("string")
    found = []
    # -- one value per offset: delivery reports of committed records, and every read ------------------------------
    known = (sent.where((F.col("outcome") == "committed") & F.col("offset").isNotNull())
             .select("scenario", "partition", "offset", "value")
             .unionByName(reads.select("scenario", "partition", "offset", "value"))
             .groupBy("scenario", "partition", "offset").agg(F.sort_array(F.collect_set("value")).alias("values"))
             .where(F.size("values") > 1))
    found.append(anomaly(known, "inconsistent_offsets", F.col("partition"), F.col("offset"), none, none,
                         F.concat(F.lit("offset holds "), F.size("values").cast("string"), F.lit(" values: "),
                                  F.array_join("values", ", "))))

    # -- each record sent, with how many times it was read, and where first ----------------------------------------
    first = F.min(F.struct("seq", "partition", "offset"))
    times = reads.groupBy("scenario", "value").agg(F.count("*").alias("n"), first.alias("first"),
                                                   F.sort_array(F.collect_set("offset")).alias("offsets"))
    top = reads.groupBy("scenario", "partition").agg(F.max("offset").alias("top"))
    reached = (ends.where(F.col("position") >= F.col("end")).select("scenario", "partition").distinct()
               .withColumn("reached", F.lit(True)))
    records = (sent.join(times, ["scenario", "value"], "left").fillna(0, subset=["n"])
               .join(top, ["scenario", "partition"], "left").fillna(-1, subset=["top"])
               .join(reached, ["scenario", "partition"], "left").fillna(False, subset=["reached"]).cache())
    found.append(anomaly(records.where((F.col("outcome") == "aborted") & (F.col("n") > 0)), "aborted_read",
                         F.col("first.partition"), F.col("first.offset"), F.col("value"), F.col("txn"),
                         F.lit("a record of an aborted transaction was read (G1a)")))
    committed = F.col("outcome") == "committed"
    found.append(anomaly(records.where(committed & (F.col("n") > 1)), "duplicate", F.col("partition"),
                         F.col("offsets")[0], F.col("value"), F.col("txn"),
                         F.concat(F.lit("read "), F.col("n").cast("string"), F.lit(" times (offsets ["),
                                  F.array_join("offsets", ", "), F.lit("])"))))
    unread = records.where(committed & (F.col("n") == 0))
    lost = F.col("offset").isNotNull() & (F.col("offset") < F.col("top"))
    found.append(anomaly(unread.where(lost), "lost_write", F.col("partition"), F.col("offset"), F.col("value"),
                         F.col("txn"), F.concat(F.lit("committed at offset "), F.col("offset").cast("string"),
                                                F.lit(", never read, though offset "), F.col("top").cast("string"),
                                                F.lit(" was"))))
    found.append(anomaly(unread.where(~lost.eqNullSafe(F.lit(True)) & F.col("reached")), "committed_not_read",
                         F.col("partition"), F.col("offset"), F.col("value"), F.col("txn"),
                         F.lit("committed, never read, though the consumer reached the end of the log")))

    # -- all or none of a transaction's records read (whatever its outcome, but an aborted one's are aborted reads) --
    parts = (records.where(F.col("outcome") != "aborted")
             .groupBy("scenario", "txn_seq", "txn", "outcome")  # a transaction is its event, whatever its id
             .agg(F.count("*").alias("total"), F.sum((F.col("n") > 0).cast("long")).alias("got"),
                  F.sort_array(F.collect_list(F.when(F.col("n") == 0, F.struct("ordinal", "value")))).alias("missing"))
             .where((F.col("got") > 0) & (F.col("got") < F.col("total"))))
    found.append(anomaly(parts, "partial_transaction", F.lit(None).cast("long"), F.lit(None).cast("long"), none,
                         F.col("txn"),
                         F.concat(F.col("outcome"), F.lit(" transaction read in part: "), F.col("got").cast("string"),
                                  F.lit(" of "), F.col("total").cast("string"), F.lit(" records; never read: "),
                                  F.array_join(F.transform("missing", lambda m: m["value"]), ", "))))

    # -- the last stable offset and the consumer's position reach the log end ----------------------------------------
    below = F.col("stable") < F.col("end")
    found.append(anomaly(ends.where(below | (F.col("position") < F.col("end"))), "hanging_transaction",
                         F.col("partition"), F.when(below, F.col("stable")).otherwise(F.col("position")), none, none,
                         F.when(below, F.concat(F.lit("every transaction finished, but the last stable offset "),
                                                F.col("stable").cast("string"), F.lit(" stays below the log end "),
                                                F.col("end").cast("string")))
                         .otherwise(F.concat(F.lit("the consumer's position "), F.col("position").cast("string"),
                                             F.lit(" never reached the log end "), F.col("end").cast("string")))))

    # -- a value sent twice (a broken workload), and what each check judged ------------------------------------------
    repeated = sent.groupBy("scenario", "value").count().where(F.col("count") > 1).select(
        "scenario", F.lit(_SENT_TWICE).alias("check"), F.col("value").alias("key"), none.alias("expected"),
        none.alias("observed"), F.lit(None).cast("long").alias("event"), none.alias("detail"))
    found.append(repeated)

    def tally(frame, **counts):
        return frame.groupBy("scenario").agg(*(F.sum(c.cast("long")).alias(n) for n, c in counts.items())).select(
            "scenario", F.explode(F.array(*(F.struct(F.lit(n).alias("n"), F.col(n).alias("v")) for n in counts)))
            .alias("t")).select("scenario", F.lit(_COUNT).alias("check"), F.col("t.n").alias("key"),
                                none.alias("expected"), none.alias("observed"), F.col("t.v").alias("event"),
                                none.alias("detail"))

    found += [tally(txn, transactions=F.lit(1)),
              tally(sent, committed_records=committed, aborted_records=F.col("outcome") == "aborted",
                    offsets=committed & F.col("offset").isNotNull()),
              tally(reads, reads=F.lit(1), offsets=F.lit(1)),
              tally(ends, log_ends=F.lit(1))]
    every = found[0]
    for frame in found[1:]:
        every = every.unionByName(frame)
    counted: dict[int, dict[str, int]] = {s: {} for s in systems}
    violations: dict[int, list[dict]] = {s: [] for s in systems}
    twice_sent: dict[int, str] = {}
    for row in every.collect():
        if row.check == _COUNT:
            counted[row.scenario][row.key] = counted[row.scenario].get(row.key, 0) + (row.event or 0)
        elif row.check == _SENT_TWICE:
            twice_sent.setdefault(row.scenario, row.key)
        else:
            violations[row.scenario].append({k: v for k, v in row.asDict().items() if k != "scenario"})
    sent.unpersist()
    reads.unpersist()
    records.unpersist()
    if twice_sent:
        scenario, value = min(twice_sent.items())
        raise ValueError(f"scenario {scenario}: value {value!r} sent twice; the workload must send unique values")
    return [scenario_answer(s, systems[s], violations[s], counted[s]) for s in sorted(systems)]
