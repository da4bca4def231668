"""The pipelines and sinks of the Spark suite, as PySpark code (runs inside the pipeline's driver).

Every pipeline reads ``(key string, ts long seconds)`` rows; ``models.spark`` has the model of each.
Output rows: ``count`` → (key, count); windows → (key, start, end, count) with unix seconds;
processors → (key, count, kind).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from eos_harness.models.spark import KEEP_TIMES, TIMEOUT_S, WATERMARK_DELAY_S

PIPELINES = ("count", "window-tumbling", "window-sliding", "pandas-state", "tws")
SINKS = ("file", "foreach", "foreach-nocheck", "foreach-return-early", "kafka")
OUTPUT_MODE = {"count": "update", "window-tumbling": "append", "window-sliding": "append",
               "pandas-state": "append", "tws": "append"}
OUTPUT_COLUMNS = {"count": ("key", "count"), "window-tumbling": ("key", "start", "end", "count"),
                  "window-sliding": ("key", "start", "end", "count"), "pandas-state": ("key", "count", "kind"),
                  "tws": ("key", "count", "kind")}
HOLD_AFTER_SINK_S = 30.0  # a run killed at sink@N: how long the foreachBatch sink waits for the kill after its marker
BATCH_TP_TOPIC = "spark-batches"  # the offsets key of the foreachBatch sink in the store


def unsupported(pipeline: str, sink: str, provider: str, checkpoint_format: int = 1) -> str | None:
    """Why Spark refuses this combination (None: it runs). Checked before starting a JVM."""
    if sink == "file" and OUTPUT_MODE[pipeline] == "update":
        return "the file sink supports only append mode; a streaming aggregation without a watermark cannot append"
    if pipeline == "tws" and provider != "rocksdb":
        return "transformWithStateInPandas needs the RocksDB state store provider"
    return unsupported_state(provider, checkpoint_format)


# Every state configuration Spark runs, whatever the query: (state store provider, RocksDB changelog checkpointing,
# checkpoint format), format 1's first; the HDFS provider has no format 2 (:func:`unsupported_state`).
STATE_CONFIGURATIONS = (("hdfs", False, 1), ("rocksdb", False, 1), ("rocksdb", True, 1), ("rocksdb", False, 2),
                        ("rocksdb", True, 2))


def unsupported_state(provider: str, checkpoint_format: int) -> str | None:
    """Why Spark refuses this state store provider with this checkpoint format, whatever the query (None: it runs)."""
    if provider == "hdfs" and checkpoint_format > 1:
        # what Spark 4.1.1 says on the first batch (seen in chaos seed 7)
        return ("[STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED] HDFSBackedStateStoreProvider does not support "
                "checkpointFormatVersion > 1")
    return None


# Spark's error classes that refuse a state configuration for a query's operators (what the query allows is
# known only once Spark plans it: transformWithState and state TTL need RocksDB, so does more than one column
# family); a user's query whose crash-free run ends with one of them before its first commit does not run in
# that configuration (``not_applicable``, with Spark's words), as the combinations :func:`unsupported` names
REFUSED_CONFIGURATION_ERRORS = ("UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS",
                                "UNSUPPORTED_FEATURE.STATE_STORE_MULTIPLE_COLUMN_FAMILIES",
                                "UNSUPPORTED_FEATURE.STATE_STORE_TTL",
                                "UNSUPPORTED_FEATURE.STATE_STORE_REMOVING_COLUMN_FAMILIES",
                                "STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED")


def refused_configuration(error: str) -> str | None:
    """Spark's words when ``error`` (a failed run's) is Spark refusing the run's state configuration, else None."""
    for line in error.splitlines():
        for name in REFUSED_CONFIGURATION_ERRORS:
            at = line.find(f"[{name}]")
            if at >= 0:
                return line[at:].split(" SQLSTATE:")[0].strip()
    return None


def _timer_ms(times: list[int]) -> int:
    return (max(times) + TIMEOUT_S) * 1000 + 500


def _pandas_state_func(key, pdfs, state):
    import pandas as pd

    if state.hasTimedOut:
        count = state.get[0]
        state.remove()
        yield pd.DataFrame({"key": [key[0]], "count": [count], "kind": ["expired"]})
        return
    watermark = state.getCurrentWatermarkMs()
    times = sorted(int(t) for pdf in pdfs for t in pdf["ts"] if int(t) * 1000 > watermark)
    out = []
    count, kept = 0, []
    if state.exists:
        count, text, timer = state.get
        kept = [int(t) for t in text.split(",") if t]
        if timer <= watermark:
            out.append((key[0], count, "expired"))
            count, kept = 0, []
    if not times:
        if count:
            state.update((count, ",".join(map(str, kept)), _timer_ms(kept)))
            state.setTimeoutTimestamp(_timer_ms(kept))
        else:
            state.remove()
    else:
        kept = (kept + times)[-KEEP_TIMES:]
        count += len(times)
        state.update((count, ",".join(map(str, kept)), _timer_ms(kept)))
        state.setTimeoutTimestamp(_timer_ms(kept))
        out.append((key[0], count, "update"))
    if out:
        yield pd.DataFrame({"key": [r[0] for r in out], "count": [r[1] for r in out], "kind": [r[2] for r in out]})


def _tws_processor():
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class KeyedProcessor(StatefulProcessor):
        """Count (value state), last event times (list state) and an event-time timer per key."""

        def init(self, handle) -> None:
            self.handle = handle
            self.count = handle.getValueState("count", "count long")
            self.times = handle.getListState("times", "ts long")

        def _expire(self, key: str) -> list[tuple]:
            count = self.count.get()[0] if self.count.exists() else 0
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.count.clear()
            self.times.clear()
            return [(key, count, "expired")]

        def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
            watermark = timerValues.getCurrentWatermarkInMs()
            times = sorted(int(t) for pdf in rows for t in pdf["ts"] if int(t) * 1000 > watermark)
            out = []
            if any(t <= watermark for t in self.handle.listTimers()):
                out += self._expire(key[0])
            if times:
                count = (self.count.get()[0] if self.count.exists() else 0) + len(times)
                kept = ([int(r[0]) for r in self.times.get()] if self.times.exists() else [])
                kept = (kept + times)[-KEEP_TIMES:]
                for timer in list(self.handle.listTimers()):
                    self.handle.deleteTimer(timer)
                self.count.update((count,))
                self.times.put([(t,) for t in kept])
                self.handle.registerTimer(_timer_ms(kept))
                out.append((key[0], count, "update"))
            if out:
                yield pd.DataFrame({"key": [r[0] for r in out], "count": [r[1] for r in out],
                                    "kind": [r[2] for r in out]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
            out = self._expire(key[0])
            yield pd.DataFrame({"key": [r[0] for r in out], "count": [r[1] for r in out], "kind": [r[2] for r in out]})

        def close(self) -> None:
            pass

    return KeyedProcessor()


def build(spark, pipeline: str, source):
    """The streaming DataFrame of ``pipeline`` over ``source`` (columns key, ts)."""
    from pyspark.sql import functions as F

    delay = f"{WATERMARK_DELAY_S} seconds"
    if pipeline == "count":
        return source.groupBy("key").count()
    timed = source.withColumn("et", F.timestamp_seconds("ts")).withWatermark("et", delay)
    if pipeline.startswith("window-"):
        window = F.window("et", "10 seconds") if pipeline == "window-tumbling" else F.window("et", "20 seconds", "10 seconds")
        return (timed.groupBy(window.alias("window"), "key").count()
                .select("key", F.col("window.start").cast("long").alias("start"),
                        F.col("window.end").cast("long").alias("end"), "count"))
    if pipeline == "pandas-state":
        return timed.groupBy("key").applyInPandasWithState(
            _pandas_state_func, outputStructType="key string, count long, kind string",
            stateStructType="count long, times string, timer long", outputMode="append",
            timeoutConf="EventTimeTimeout")
    if pipeline == "tws":
        return timed.groupBy("key").transformWithStateInPandas(
            statefulProcessor=_tws_processor(), outputStructType="key string, count long, kind string",
            outputMode="Append", timeMode="EventTime")
    raise ValueError(f"unknown pipeline {pipeline!r}; known: {', '.join(PIPELINES)}")


def mark_sink_step(folder: Path, batch_id: int, text: str = "", hold: bool = False) -> None:
    """A ``foreachBatch`` sink is done with ``batch_id``: its marker ``folder/<batch_id>`` is renamed into place
    (the sink's step the harness's watcher kills after). ``hold`` (a run killed at ``sink@N``, this batch): then
    wait up to :data:`HOLD_AFTER_SINK_S` for the kill, so that it lands between the sink and ``commits/N`` on a
    loaded machine too (the watcher's SIGKILL otherwise races Spark writing ``commits/N``)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{batch_id}.tmp"
    tmp.write_text(text)
    os.replace(tmp, folder / str(batch_id))
    if hold:
        time.sleep(HOLD_AFTER_SINK_S)


class StoreSink:
    """``foreachBatch`` into the ``rocksdb-indexed`` store, idempotent by batch id.

    Each batch writes ``out/<batch>/<row key>`` → the row (JSON) and increments ``applied/<batch>``,
    then ``commit({spark-batches-0: batch_id})``; a batch at or below ``committed_offset`` is
    skipped (unless ``check_committed`` is False: the mutant). After the commit it renames a
    marker ``<dir>/_batches/<batch>`` into place: the sink's step the watcher can see.

    Spark 4.1 commits the state stores of a batch only when its DataFrame is computed, and fails
    the query (``STATE_STORE_COMMIT_VALIDATION_FAILED``) when a ``foreachBatch`` returns without
    computing every partition; so a skipped batch is still computed (a ``noop`` write).
    ``consume_skipped=False`` is the naive sink that just returns (the ``foreach-return-early`` sink).
    ``hold_after=N`` (a run killed at ``sink@N``): after the marker of batch N it waits for the kill
    (:func:`mark_sink_step`).
    """

    def __init__(self, directory: str, check_committed: bool = True, consume_skipped: bool = True,
                 hold_after: int | None = None) -> None:
        from eos_harness.store import StoreContext, TopicPartition
        from eos_harness.stores.registry import resolve

        self.directory = Path(directory)
        self.tp = TopicPartition(BATCH_TP_TOPIC, 0)
        self.check_committed = check_committed
        self.consume_skipped = consume_skipped
        self.hold_after = hold_after
        self.store = resolve("rocksdb-indexed")()
        (self.directory / "_batches").mkdir(parents=True, exist_ok=True)
        self.store.init(StoreContext(directory=self.directory / "store", store_name="spark-sink"))
        self.store.recover(self.store.committed_offset(self.tp))

    def __call__(self, batch_df, batch_id: int) -> None:
        committed = self.store.committed_offset(self.tp)
        if self.check_committed and committed is not None and batch_id <= committed:
            if self.consume_skipped:
                batch_df.write.format("noop").mode("overwrite").save()
            return
        rows = [tuple(r) for r in batch_df.collect()]
        applied_key = b"applied/%08d" % batch_id
        applied = int(self.store.get(applied_key) or b"0") + 1
        for row in rows:
            self.store.put(b"out/%08d/%s" % (batch_id, json.dumps(list(row)).encode()), b"1")
        self.store.put(applied_key, str(applied).encode())
        self.store.commit({self.tp: batch_id})
        mark_sink_step(self.directory / "_batches", batch_id, str(len(rows)), hold=batch_id == self.hold_after)

    def close(self) -> None:
        self.store.close()


def validate_state_options(provider: str, checkpoint_format: int, changelog: bool) -> None:
    """The state store options of a Spark scenario (built-in or a user's query); ValueError names the option."""
    if provider not in ("hdfs", "rocksdb"):
        raise ValueError("--state-provider must be hdfs or rocksdb")
    if checkpoint_format not in (1, 2):
        raise ValueError("--checkpoint-format must be 1 or 2")
    if changelog and provider != "rocksdb":
        raise ValueError("changelog checkpointing is a RocksDB provider option")
