"""The driver of one Spark pipeline run: ``python -m eos_harness.spark.app CONFIG.json``.

Started by :mod:`eos_harness.spark.process` in its own process group (the JVM and Python workers are
its children in that group). It reads the committed state (Spark's state data source) before and
after the query, runs the query with ``trigger(availableNow=True)`` and one input file per
micro-batch (``source: kafka``: the input topic, ``maxOffsetsPerTrigger`` records of its one
partition per micro-batch), and reports to ``config["report"]`` as JSON lines (``state``,
``query_done``, ``error``). The harness, not this process, keeps the history. Sinks: the file
sink, ``foreachBatch`` into the ``rocksdb-indexed`` store, Spark's Kafka sink (each row the JSON of
its columns). ``config["jars"]`` go to ``spark.jars`` (Spark's Kafka connector, when Kafka is used).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from eos_harness.spark.pipelines import OUTPUT_MODE, StoreSink, build

PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
TWS_STATE_VARS = ("count", "times")


def _report(path: str, event: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"t": time.time(), **event}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def session(config: dict):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]").appName(f"eos-harness-{config.get('pipeline', 'user')}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # no progress bars in the run's log
        # PySpark's daemon with pandas and pyarrow imported once, before it forks the workers
        .config("spark.python.daemon.module", "eos_harness.spark.daemon")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", str(config.get("partitions", 2)))
        .config("spark.sql.streaming.stateStore.providerClass", PROVIDERS[config["provider"]])
        .config("eos.output.dir", config["output"])  # where a user's foreachBatch sink writes
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
                "true" if config.get("changelog") else "false")
        .config("spark.sql.streaming.stateStore.checkpointFormatVersion", str(config["format"]))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if config.get("jars"):
        builder = builder.config("spark.jars", ",".join(config["jars"]))
    if config.get("java_options"):  # eos_harness.spark.jvm: class-data sharing and C1 for a fast start;
        # eos_harness.spark.process: java.io.tmpdir in the run's temp directory (the JVM ignores TMPDIR)
        builder = builder.config("spark.driver.extraJavaOptions", config["java_options"])
    if config.get("local_dir"):  # blockmgr-*, spark-*: in the run's temp directory, not /tmp
        builder = builder.config("spark.local.dir", config["local_dir"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def last_commit(checkpoint: str) -> int | None:
    commits = Path(checkpoint) / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(ids) if ids else None


def _plain(value):
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "timestamp"):
        return int(value.timestamp())
    return value


def read_state(spark, config: dict) -> dict:
    """The state of the last committed batch, read with Spark's state data source (``statestore``)."""
    batch = last_commit(config["checkpoint"])
    if batch is None:
        return {"batch": None, "rows": []}
    spark.streams.active  # creates the StateStoreCoordinator the state data source asks for  # noqa: B018
    rows = []
    variables = TWS_STATE_VARS if config["pipeline"] == "tws" else (None,)
    for var in variables:
        reader = spark.read.format("statestore").option("batchId", batch)
        if var is not None:
            reader = reader.option("stateVarName", var)
        for row in reader.load(config["checkpoint"]).collect():
            d = _plain(row)
            rows.append({"var": var, **{k: d.get(k) for k in ("key", "value", "list_element", "partition_id")}})
    return {"batch": batch, "rows": rows}


def _read_and_report(spark, config: dict, phase: str) -> None:
    try:
        state = read_state(spark, config)
    except Exception as exc:  # Spark's state data source failed: the harness reports it, the query still runs
        error = f"{type(exc).__name__}: {exc}"
        _report(config["report"], {"event": "state_error", "phase": phase, "batch": last_commit(config["checkpoint"]),
                                   "error": error[:3000]})
        return
    _report(config["report"], {"event": "state", "phase": phase, **state})


INPUT_SCHEMA = "key string, ts long"


def file_source(spark, config: dict):
    return (spark.readStream.format("json").schema(INPUT_SCHEMA)
            .option("maxFilesPerTrigger", 1).load(config["input"]))


def kafka_source(spark, config: dict):
    """The input topic (one partition), ``maxOffsetsPerTrigger`` records per micro-batch: batch n is
    input batch n, as with one file per trigger."""
    from pyspark.sql import functions as F

    kafka = config["kafka"]
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka["bootstrap"])
           .option("subscribe", kafka["input_topic"]).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", kafka["per_batch"]).load())
    return raw.select(F.from_json(F.col("value").cast("string"), INPUT_SCHEMA).alias("r")).select("r.*")


def source(spark, config: dict):
    return kafka_source(spark, config) if config.get("source", "file") == "kafka" else file_source(spark, config)


def run(config: dict) -> int:
    report = config["report"]
    spark = session(config)
    # Where the JVM itself puts its temporary files (it ignores TMPDIR): the run's temp directory.
    _report(report, {"event": "session", "java_tmpdir": spark._jvm.java.lang.System.getProperty("java.io.tmpdir"),
                     "local_dir": spark.sparkContext.getConf().get("spark.local.dir", None)})
    if config.get("user"):  # a user's own query (module:function), imported only here
        from eos_harness.spark import user_app

        user_app.run(spark, config, lambda event: _report(report, event))
        spark.stop()
        if "ArchiveClassesAtExit" in config.get("java_options", ""):
            _wait_for_jvm()
        return 0
    if config.get("read_state", True):
        _read_and_report(spark, config, "before")
    frame = build(spark, config["pipeline"], source(spark, config))
    if config["sink"] == "kafka":  # each output row as the JSON object of its columns
        from pyspark.sql import functions as F

        frame = frame.select(F.to_json(F.struct(*frame.columns)).alias("value"))
    writer = frame.writeStream.outputMode(OUTPUT_MODE[config["pipeline"]]).option("checkpointLocation", config["checkpoint"])
    sink = None
    if config["sink"] == "file":
        writer = writer.format("json").option("path", config["output"])
    elif config["sink"] in ("foreach", "foreach-nocheck", "foreach-return-early"):
        sink = StoreSink(config["output"], check_committed=config["sink"] != "foreach-nocheck",
                         consume_skipped=config["sink"] != "foreach-return-early",
                         hold_after=config.get("hold_after_sink"))
        writer = writer.foreachBatch(sink)
    elif config["sink"] == "kafka":  # Spark's Kafka sink: at least once
        writer = (writer.format("kafka").option("kafka.bootstrap.servers", config["kafka"]["bootstrap"])
                  .option("topic", config["kafka"]["output_topic"]))
    else:
        raise ValueError(f"sink {config['sink']!r} is not available in this run")
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    _report(report, {"event": "query_done", "last_commit": last_commit(config["checkpoint"])})
    if sink is not None:
        sink.close()
    if config.get("read_state", True):
        _read_and_report(spark, config, "after")
    spark.stop()
    if "ArchiveClassesAtExit" in config.get("java_options", ""):
        _wait_for_jvm()
    return 0


def _wait_for_jvm(timeout: float = 120) -> None:
    """Let the driver JVM exit on its own (it writes its class archive on the way out) before this
    process ends and the runner kills what is left of the group."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    try:  # best effort: the run itself is done; without the archive the next run only starts slower
        gateway.shutdown()
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits when its stdin closes
        proc.wait(timeout)
    except Exception:  # noqa: BLE001
        pass


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    try:
        return run(config)
    except BaseException as exc:  # report Spark's error to the harness, then fail
        _report(config["report"], {"event": "error", "error": f"{type(exc).__name__}: {exc}"[:4000],
                                   "traceback": traceback.format_exc()[-4000:]})
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
