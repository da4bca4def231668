"""The ``eos_spark_pipeline`` fixture as a team uses it in its CI: its own query, written here as a user would,
verified under driver kills against its crash-free run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from eos_harness.suites.spark.pipeline_fixture import PipelineVerification

pytestmark = pytest.mark.spark


def build_join(source):
    """Impressions joined with their clicks (within 20 s, watermarks of 10 s), written by a foreachBatch that is
    idempotent: each micro-batch replaces its own file, so a replayed batch writes the same file again."""
    from pyspark.sql import functions as F

    events = source.withColumn("at", F.timestamp_seconds("ts"))
    impressions = (events.where("side = 'imp'").select(F.col("id").alias("imp_id"), F.col("at").alias("imp_at"))
                   .withWatermark("imp_at", "10 seconds"))
    clicks = (events.where("side = 'click'").select(F.col("id").alias("click_id"), F.col("at").alias("click_at"))
              .withWatermark("click_at", "10 seconds"))
    joined = impressions.join(clicks, F.expr("click_id = imp_id AND click_at >= imp_at AND "
                                             "click_at <= imp_at + interval 20 seconds"))
    out = joined.select(F.col("imp_id").alias("id"), F.col("imp_at").cast("long").alias("imp"),
                        F.col("click_at").cast("long").alias("click"))

    def write(frame, batch_id):
        folder = os.path.join(frame.sparkSession.conf.get("eos.output.dir"), "clicks")
        os.makedirs(folder, exist_ok=True)
        lines = frame.toJSON().collect()
        tmp = os.path.join(folder, f".{batch_id}.tmp")
        with open(tmp, "w") as f:
            f.writelines(line + "\n" for line in lines)
        os.replace(tmp, os.path.join(folder, f"batch-{batch_id}.json"))

    return out.writeStream.foreachBatch(write)


def read_clicks(spark, output_dir):
    return spark.read.schema("id long, imp long, click long").json(os.path.join(output_dir, "clicks"))


def impressions_and_clicks(batches: int = 4) -> list[list[dict]]:
    """Four impressions a batch, 10 s apart per batch; a click on one of them in the same batch and one on an
    impression of the batch before (joined across micro-batches, from the join's state)."""
    out = []
    for n in range(batches):
        base = 1_000_000 + n * 10
        rows = [{"side": "imp", "id": n * 4 + i, "ts": base + i} for i in range(4)]
        rows.append({"side": "click", "id": n * 4, "ts": base + 5})
        if n:
            rows.append({"side": "click", "id": (n - 1) * 4 + 1, "ts": base + 3})
        out.append(rows)
    return out


@pytest.mark.slow  # opt-in with the full Spark tier (make test-spark-full): make test keeps test_spark_user_pipelines
def test_a_stream_stream_join_into_an_idempotent_foreach_batch_survives_a_kill_after_its_sink(eos_spark_pipeline):
    found = eos_spark_pipeline.verify(build_join, batches=impressions_and_clicks(), windows=("sink", "state"),
                                      schema="side string, id long, ts long", read_output=read_clicks)
    result, killed_in_state = found.results
    assert found.verdict == "pass" and result["sink"] == "foreachBatch", found.explain()
    assert [c["window"] for c in result["crash_windows"]] == ["after_sink"]
    # the join keeps a store per side and kind below each partition (state/0/P/left-keyToNumValues/2.zip, …): a
    # kill after its state files lands there (it never fired before the watcher knew them)
    assert [c["window"] for c in killed_in_state["crash_windows"]] == ["after_state"], found.explain()
    assert result["checks"]["output_rows_compared"] == 7  # 4 same-batch clicks, 3 across batches
    # the join's state, read by joinSide (Spark's state data source), equals the crash-free run's
    assert result["checks"]["state_matches_crash_free"].startswith("pass (batches 0.."), result["checks"]
    state = json.loads(Path(result["runs"][-1]["state"]).read_text())
    assert [(o["name"], o["store"]) for o in state["operators"]] == [
        ("symmetricHashJoin", "joinSide=left"), ("symmetricHashJoin", "joinSide=right")], state
    assert all(o.get("rows") for o in state["operators"]), state


GAP_S = 8  # a user's session ends after this long without an event


def _sessionizer():
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class Sessionizer(StatefulProcessor):
        """Sessions per user: (start, last event, events) in value state, an event-time timer at last + gap."""

        def init(self, handle) -> None:
            self.handle = handle
            self.session = handle.getValueState("session", "start long, last long, events long")

        def handleInputRows(self, key, rows, timerValues):
            times = sorted(int(t) for frame in rows for t in frame["ts"])
            start, last, events = self.session.get() if self.session.exists() else (None, None, 0)
            ended = []
            for t in times:
                if last is not None and t > last + GAP_S:
                    ended.append((key[0], start, last, events))
                    start, events = None, 0
                start = t if start is None else start
                last, events = t if last is None else max(last, t), events + 1
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.session.update((start, last, events))
            self.handle.registerTimer((last + GAP_S) * 1000)
            if ended:
                yield pd.DataFrame(ended, columns=["user", "start", "end", "events"])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            start, last, events = self.session.get()
            self.session.clear()
            yield pd.DataFrame([(key[0], start, last, events)], columns=["user", "start", "end", "events"])

        def close(self) -> None:
            pass

    return Sessionizer()


def build_sessions(source):
    """User sessions with transformWithStateInPandas (value state and an event-time timer), to a JSON file sink."""
    from pyspark.sql import functions as F

    events = source.withColumn("at", F.timestamp_seconds("ts")).withWatermark("at", "5 seconds")
    return (events.groupBy("user").transformWithStateInPandas(
        statefulProcessor=_sessionizer(), outputStructType="user string, start long, end long, events long",
        outputMode="Append", timeMode="EventTime").writeStream.outputMode("append").format("json"))


@pytest.mark.slow
def test_a_sessionizer_on_a_state_provider_spark_refuses_for_it_is_not_applicable_with_sparks_reason(
        eos_spark_pipeline):
    # transformWithState needs RocksDB: the crash-free run on the HDFS provider ends with Spark's refusal before its
    # first commit; the configuration is not the query's, so no window of it is judged (and the fixture says so)
    found = eos_spark_pipeline.verify(build_sessions, batches=[[{"user": "u1", "ts": 1_000_000}]] * 3,
                                      windows=("sink", "commit"), schema="user string, ts long",
                                      state_provider="hdfs", fail=False)
    assert [r["verdict"] for r in found.results] == ["not_applicable"] * 2 and found.verdict == "not_applicable"
    assert all("STORE_BACKEND_NOT_SUPPORTED_FOR_TWS" in r["reason"] for r in found.results), found.explain()
    assert "not applicable: Spark refuses this state configuration for the query" in found.explain()


@pytest.mark.slow
def test_a_transform_with_state_sessionizer_survives_a_kill_after_its_state(eos_spark_pipeline):
    # u1 active in batches 0, 1 and 3 (its first session ends in the gap of batch 2); u2 only in batch 0
    base = 1_000_000
    batches = [[{"user": "u1", "ts": base}, {"user": "u1", "ts": base + 4}, {"user": "u2", "ts": base + 2}],
               [{"user": "u1", "ts": base + 10}, {"user": "u1", "ts": base + 15}],
               [{"user": "u3", "ts": base + 30}],
               [{"user": "u1", "ts": base + 40}, {"user": "u3", "ts": base + 45}],
               [{"user": "u3", "ts": base + 70}]]
    found = eos_spark_pipeline.verify(build_sessions, batches=batches, windows=("state",),
                                      schema="user string, ts long")
    [result] = found.results
    assert found.verdict == "pass", found.explain()
    assert [c["window"] for c in result["crash_windows"]] == ["after_state"]
    assert result["checks"]["output_rows_compared"] >= 3  # u2's session, u1's first, u3's first at least
    # its state read by state variable (named in the operator's metadata) and its event-time timers: as crash-free
    assert result["checks"]["state_matches_crash_free"].startswith("pass (batches 0.."), result["checks"]
    state = json.loads(Path(result["runs"][-1]["state"]).read_text())
    assert [o["store"] for o in state["operators"]] == ["stateVarName=session", "readRegisteredTimers=true"], state
    assert all(o.get("rows") for o in state["operators"]), state  # u3's open session and its timer


def test_a_failed_verification_says_what_and_how_to_replay_it():
    result = {"verdict": "fail", "schedule": ["sink@1"], "repro": "eos-harness run --suite spark ...",
              "configuration": {"state_provider": "rocksdb", "changelog_checkpointing": False, "checkpoint_format": 1},
              "crash_windows": [{"window": "after_sink", "batch": 1}], "duplicates": {"count": 8},
              "violations": [{"check": "exactly_once_output", "key": "{\"id\": 6}", "expected": "1×",
                              "observed": "2× (duplicate, after after_sink of batch 1)"}]}
    found = PipelineVerification("my_jobs:build", [result, {**result, "verdict": "pass", "schedule": ["commit@1"]}])
    assert found.verdict == "fail"
    text = found.explain()
    assert "after_sink(1)" in text and "(8 duplicates)" in text and "replay: eos-harness run --suite spark" in text
    assert text.count("replay:") == 1  # only the window that did not pass


def test_a_build_defined_inside_a_test_is_refused_before_anything_runs(eos_spark_pipeline):
    def build(source):
        return source.writeStream.format("parquet")

    with pytest.raises(ValueError, match="define build at module level"):
        eos_spark_pipeline.verify(build, batches=[[{"a": 1}]], windows=("sink",))
