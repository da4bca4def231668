"""The lifecycle suite's per-key checks as Spark DataFrame jobs over a campaign's Parquet histories
(``eos-harness check --engine spark RUN_DIR``): the rules of ``check_recovered_state``, ``check_reads`` and
``check_output`` (:mod:`eos_harness.suites.lifecycle.checks`) written again as joins and aggregations, so that
histories too large for one process are judged on a cluster, with the same answer (:mod:`.at_scale`).

The model of each scenario comes as rows (:func:`eos_harness.suites.lifecycle.at_scale.model_rows`, built on the
executors): per key, the committed positions over which it held each value, and the expected output records.
Each rule is then a join of the history's events with those rows on (scenario, key) and position:

- a recovery at committed position ``p`` must hold exactly the values held at ``p``; a key whose value differs is
  classified by the positions where it held the value observed: only after ``p`` (``no_uncommitted_survives``),
  only before (``committed_rolls_forward``), …, as ``check_recovered_state`` does;
- a read must see, for its key, the value after its own record (``read_your_own_writes``) and, from the committed
  view of a transactional store, the value at the store's committed position (``read_committed_isolation``);
- the last read-committed output must hold each record as many times as the model's output up to the committed
  position (duplicate, unexpected, lost), in the model's order (``exactly_once_output``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eos_harness.suites.lifecycle.at_scale import model_of, model_rows, scenario_answer

__all__ = ["check_frames"]

SHOW_LIMIT = 60  # as the in-process checkers show a key or value
_NULL = "\u0100null"  # stands for a None value in an equi-join (a latin-1 string never holds \u0100)
_COUNT = "\u0100count"  # a row of the collected frame that is a count, not a violation


def _model_rows_of(item: tuple[int, str, str | None]) -> Iterator[tuple]:
    """On an executor: one scenario's model as ``(scenario, kind, key, value, start, end)`` rows."""
    scenario, first, semantics = item
    model = model_of(json.loads(first), semantics)
    rows = model_rows(model)
    for key, value, start, end in rows["states"]:
        yield scenario, "state", key.decode("latin-1"), None if value is None else value.decode("latin-1"), start, end
    for position, ordinal, key, value in rows["outputs"]:
        yield scenario, "output", key.decode("latin-1"), value.decode("latin-1"), position, ordinal
    for key, value, start, end in rows["expired"]:
        yield scenario, "expired", key.decode("latin-1"), value.decode("latin-1"), start, end
    yield scenario, "last", None, None, len(model.records), len(model.records)


def check_frames(spark: Any, path: Path, semantics: Callable[[str, str], str | None]) -> list[dict]:
    """Every lifecycle scenario of the histories at ``path`` judged as DataFrames on ``spark``: one
    :func:`eos_harness.suites.lifecycle.at_scale.scenario_answer` each, in plan order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def show(column):
        return F.when(column.isNull() | (F.length(column) <= SHOW_LIMIT), column).otherwise(
            F.concat(F.substring(column, 1, SHOW_LIMIT), F.lit("… ("), F.length(column).cast("string"), F.lit(" bytes)")))

    def violation(frame, check, key, expected, observed, detail=None):
        return frame.select("scenario", check.alias("check"), key.alias("key"), expected.alias("expected"),
                            observed.alias("observed"), F.col("seq").alias("event"),
                            (detail if detail is not None else F.lit(None).cast("string")).alias("detail"))

    events = (spark.read.parquet(str(path)).where(F.col("suite") == "lifecycle")
              .select(F.col("index").alias("scenario"), F.col("subject").alias("store"), "seq", "instance", "type",
                      "event"))
    firsts = sorted(events.where(F.col("type") == "scenario").select("scenario", "store", "event").collect(),
                    key=lambda row: row.scenario)
    plan = []
    for row in firsts:
        first = json.loads(row.event)
        plan.append((row.scenario, row.event, semantics(first["store"], first["workload"])))
    if not plan:
        return []
    stores = {row.scenario: row.store for row in firsts}
    context = spark.sparkContext
    slices = max(context.defaultParallelism, len(plan) // 500)
    model = spark.createDataFrame(
        context.parallelize(plan, slices).flatMap(_model_rows_of),
        "scenario long, kind string, key string, value string, start long, end long").cache()
    model.count()  # built once; its size known, a small model is broadcast to the joins
    planned = spark.createDataFrame([(s,) for s, _, _ in plan], "scenario long")
    events = events.join(F.broadcast(planned), "scenario", "left_semi")  # a history without its first event: not judged
    states = model.where(F.col("kind") == "state").select("scenario", "key", "value", "start", "end")
    held = states.where(F.col("value").isNotNull())
    last = model.where(F.col("kind") == "last").select("scenario", F.col("start").alias("last"))

    def value_at(frame, at: str, name: str):
        """``frame`` with ``name``: the model's value of its (scenario, key) at committed position ``at``."""
        h = held.select(F.col("scenario").alias("_s"), F.col("key").alias("_k"), F.col("value").alias(name),
                        F.col("start").alias("_a"), F.col("end").alias("_b"))
        return frame.join(h, (frame["scenario"] == h["_s"]) & (frame["key"] == h["_k"]) & (h["_a"] <= frame[at])
                          & (frame[at] < h["_b"]), "left").drop("_s", "_k", "_a", "_b")

    # -- what a recovery left: check_recovered_state -------------------------------------------------------------
    recover_all = events.where(F.col("type") == "recover").select(
        "scenario", "seq", "instance",
        F.from_json("event", "input_position long, contents array<array<string>>, transactional boolean").alias("e"),
        F.json_array_length(F.get_json_object("event", "$.store_offsets")).alias("partitions"))
    crashed_in_recovery = (events.where(F.col("type") == "crash").select("scenario", "instance").distinct()
                           .join(recover_all.select("scenario", "instance"), ["scenario", "instance"], "left_anti")
                           .select("scenario", (F.col("instance") + 1).alias("instance"),
                                   F.lit(True).alias("after_crash")))
    recoveries = (recover_all.where(F.col("e.contents").isNotNull())
                  .select("scenario", "seq", "instance", F.col("e.input_position").alias("position"),
                          F.col("e.contents").alias("contents"), "partitions")
                  .join(crashed_in_recovery, ["scenario", "instance"], "left")
                  .fillna(False, subset=["after_crash"]).cache())
    expected = (recoveries.select("scenario", "seq", "position").join(held, "scenario")
                .where((F.col("start") <= F.col("position")) & (F.col("position") < F.col("end")))
                .select("scenario", "seq", "key", F.col("value").alias("exp")))
    observed = (recoveries.select("scenario", "seq", "position", F.explode("contents").alias("c"))
                .select("scenario", "seq", "position", F.col("c")[0].alias("key"), F.col("c")[1].alias("obs")))
    # a retention-only window store may still hold an expired window (what the model dropped or held there)
    expired = model.where(F.col("kind") == "expired").select("scenario", "key", F.col("value").alias("obs"),
                                                              "start", "end")
    kept_expired = (observed.join(expired, ["scenario", "key", "obs"])
                    .where((F.col("start") <= F.col("position")) & (F.col("position") < F.col("end")))
                    .select("scenario", "seq", "key").distinct()
                    .join(expected.select("scenario", "seq", "key"), ["scenario", "seq", "key"], "left_anti"))
    observed = observed.join(kept_expired, ["scenario", "seq", "key"], "left_anti")
    differ = (expected.join(observed.select("scenario", "seq", "key", "obs"), ["scenario", "seq", "key"], "full_outer")
              .where(~F.col("exp").eqNullSafe(F.col("obs")))
              .join(recoveries.select("scenario", "seq", "position", "after_crash", "partitions"), ["scenario", "seq"])
              .join(last, "scenario"))
    s = states.select(F.col("scenario").alias("_s"), F.col("key").alias("_k"), F.col("value").alias("_v"),
                      F.col("start").alias("_a"), F.col("end").alias("_b"))
    # where the model held the observed value: after the recovery's position (up to the input's end), before it
    later = F.greatest(s["_a"], differ["position"] + 1) < F.least(s["_b"], differ["last"] + 1)
    earlier = s["_a"] < differ["position"]
    classified = (differ.join(s, (differ["scenario"] == s["_s"]) & (differ["key"] == s["_k"])
                              & s["_v"].eqNullSafe(differ["obs"]), "left")
                  .groupBy("scenario", "seq", "key", "exp", "obs", "after_crash", "partitions")
                  .agg(F.coalesce(F.max(later), F.lit(False)).alias("later"),
                       F.coalesce(F.max(earlier), F.lit(False)).alias("earlier")))
    check = (F.when(F.col("after_crash"), "recovery_idempotent")
             .when(F.col("later") & ~F.col("earlier"), "no_uncommitted_survives")
             .when(F.col("earlier") & ~F.col("later"), "committed_rolls_forward")
             .when(F.col("obs").isNotNull() & F.col("later"), "no_uncommitted_survives")
             .otherwise("state_matches_model"))
    partition = F.crc32(F.encode(F.col("key"), "ISO-8859-1")) % F.col("partitions")
    detail = F.when(F.col("partitions") > 1, F.concat(F.lit("changelog partition "), partition.cast("string")))
    found = [violation(classified, check, show(F.col("key")), show(F.col("exp")), show(F.col("obs")), detail)]

    # -- what reads saw: check_reads ---------------------------------------------------------------------------
    first_recover = Window.partitionBy("scenario").orderBy("seq")
    transactional = (recover_all.withColumn("n", F.row_number().over(first_recover)).where(F.col("n") == 1)
                     .select("scenario", F.col("e.transactional").alias("transactional")))
    reads = (events.where(F.col("type") == "read").select(
        "scenario", "seq", F.from_json("event", "index long, key string, own string, committed string, "
                                                "store_committed_position long").alias("r"))
        .select("scenario", "seq", F.col("r.key").alias("key"), F.col("r.own").alias("own"),
                F.col("r.committed").alias("committed"), (F.col("r.index") + 1).alias("after_own"),
                F.col("r.store_committed_position").alias("committed_at"))
        .join(transactional, "scenario", "left")
        .withColumn("transactional", F.coalesce(F.col("transactional"), F.lit(True))))
    reads = value_at(value_at(reads, "after_own", "exp_own"), "committed_at", "exp_committed").cache()
    found.append(violation(reads.where(~F.col("own").eqNullSafe(F.col("exp_own"))), F.lit("read_your_own_writes"),
                           show(F.col("key")), show(F.col("exp_own")), show(F.col("own"))))
    found.append(violation(reads.where(F.col("transactional") & ~F.col("committed").eqNullSafe(F.col("exp_committed"))),
                           F.lit("read_committed_isolation"), show(F.col("key")), show(F.col("exp_committed")),
                           show(F.col("committed"))))

    # -- the read-committed output: check_output -----------------------------------------------------------------
    newest = Window.partitionBy("scenario").orderBy(F.col("seq").desc())
    finished = events.where(F.col("type") == "done").select("scenario").distinct().withColumn("finished", F.lit(True))
    outputs = (events.where(F.col("type") == "output")
               .select("scenario", "seq", F.from_json("event", "committed_position long, records array<array<string>>")
                       .alias("o"))
               .withColumn("n", F.row_number().over(newest)).where(F.col("n") == 1)
               .join(finished, "scenario", "left").join(last, "scenario")
               .select("scenario", "seq", F.col("o.records").alias("records"),
                       F.when(F.col("finished"), F.col("last"))
                       .otherwise(F.coalesce(F.col("o.committed_position"), F.lit(0))).alias("upto")).cache())
    want = (model.where(F.col("kind") == "output").select("scenario", F.col("start").alias("due"),
                                                            F.col("end").alias("ordinal"), "key", "value")
            .join(outputs.select("scenario", "upto"), "scenario").where(F.col("due") <= F.col("upto"))
            .select("scenario", "ordinal", "key", F.coalesce(F.col("value"), F.lit(_NULL)).alias("value")))
    got = (outputs.select("scenario", F.posexplode("records").alias("ordinal", "record"))
           .select("scenario", F.col("ordinal").cast("long").alias("ordinal"), F.col("record")[0].alias("key"),
                   F.coalesce(F.col("record")[1], F.lit(_NULL)).alias("value")))
    counts = (want.groupBy("scenario", "key", "value").agg(F.count("*").alias("exp_n"))
              .join(got.groupBy("scenario", "key", "value").agg(F.count("*").alias("obs_n")),
                    ["scenario", "key", "value"], "full_outer")
              .fillna(0, subset=["exp_n", "obs_n"]).where(F.col("exp_n") != F.col("obs_n"))
              .join(outputs.select("scenario", "seq"), "scenario").cache())
    value = F.when(F.col("value") == _NULL, F.lit(None)).otherwise(F.col("value"))
    shown = F.concat(F.col("exp_n").cast("string"), F.lit("x "), F.coalesce(show(value), F.lit("None")))
    what = F.when(F.col("exp_n") > 0, "duplicate").otherwise("unexpected")
    found.append(violation(counts.where(F.col("obs_n") > F.col("exp_n")), F.lit("exactly_once_output"),
                           show(F.col("key")), shown,
                           F.concat(F.col("obs_n").cast("string"), F.lit("x ("), what, F.lit(")"))))
    found.append(violation(counts.where(F.col("obs_n") < F.col("exp_n")), F.lit("exactly_once_output"),
                           show(F.col("key")), shown, F.concat(F.col("obs_n").cast("string"), F.lit("x (lost)"))))
    same_counts = outputs.join(counts.select("scenario").distinct(), "scenario", "left_anti").select("scenario", "seq")
    w, g = want.alias("w"), got.alias("g")
    misplaced = (w.join(g, (F.col("w.scenario") == F.col("g.scenario")) & (F.col("w.ordinal") == F.col("g.ordinal")),
                        "full_outer")
                 .where(~(F.col("w.key").eqNullSafe(F.col("g.key")) & F.col("w.value").eqNullSafe(F.col("g.value"))))
                 .select(F.coalesce(F.col("w.scenario"), F.col("g.scenario")).alias("scenario"),
                         F.coalesce(F.col("w.ordinal"), F.col("g.ordinal")).alias("ordinal"), F.col("w.key").alias("key"))
                 .withColumn("n", F.row_number().over(Window.partitionBy("scenario").orderBy("ordinal")))
                 .where(F.col("n") == 1).join(same_counts, "scenario"))
    found.append(violation(misplaced, F.lit("exactly_once_output"), show(F.col("key")),
                           F.concat(F.lit("output #"), F.col("ordinal").cast("string"), F.lit(" in input order")),
                           F.lit("out of order")))

    # -- what each check judged, per scenario (as rows of the same shape: one job collects everything) -----------
    def tally(frame, **counts):
        return frame.groupBy("scenario").agg(*(F.sum(c.cast("long")).alias(n) for n, c in counts.items())).select(
            "scenario", F.explode(F.array(*(F.struct(F.lit(n).alias("n"), F.col(n).alias("v")) for n in counts)))
            .alias("t")).select("scenario", F.lit(_COUNT).alias("check"), F.col("t.n").alias("key"),
                                *(F.lit(None).cast("string").alias(c) for c in ("expected", "observed")),
                                F.col("t.v").alias("event"), F.lit(None).cast("string").alias("detail"))

    found += [tally(recoveries, recoveries=F.lit(1), recoveries_after_a_crash_in_recovery=F.col("after_crash")),
              tally(reads, reads=F.lit(1), read_committed_reads=F.col("transactional")),
              tally(outputs, outputs=F.lit(1))]
    every = found[0]
    for frame in found[1:]:
        every = every.unionByName(frame)
    counted: dict[int, dict[str, int]] = {s: {} for s, _, _ in plan}
    violations: dict[int, list[dict]] = {s: [] for s, _, _ in plan}
    for row in every.collect():
        if row.check == _COUNT:
            counted[row.scenario][row.key] = row.event
        else:
            violations[row.scenario].append({k: v for k, v in row.asDict().items() if k != "scenario"})
    model.unpersist()
    return [scenario_answer(s, stores[s], violations[s], counted[s]) for s, _, _ in plan]
