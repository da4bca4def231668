"""A user's own Structured Streaming query in a pipeline run's driver (imported by :mod:`eos_harness.spark.app`
only for a run whose config names ``user``: the user's module is imported here, in the driver child, never
in the harness).

The user's ``build(source)`` gets the streaming DataFrame of the run's input (one JSON-lines file per
micro-batch) and returns a :class:`~pyspark.sql.streaming.DataStreamWriter`, not started. The harness sets
its checkpoint location, its trigger (``availableNow``) and, for a file sink, its ``path``; the run's output
directory is the Spark conf ``eos.output.dir``. A ``foreachBatch`` function is wrapped so that, once it
returned for batch N, a marker ``_batches/N`` is renamed into place in ``config["marks"]``: the sink's step
the harness's watcher kills after. At the end of a run meant to end, the output is read back (the module's
``read_output(spark, output_dir)`` or the function ``config["user"]["reader"]`` names, else the file sink's own
format) and written as JSON lines
(``config["rows"]``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

FILE_SINKS = ("parquet", "json", "csv", "orc", "text", "avro")
AT_LEAST_ONCE_SINKS = ("kafka",)  # Spark documents its Kafka sink as at least once


def load(ref: str, python_path: list[str]):
    """The user's module and its ``build`` function (``module:function``)."""
    for entry in reversed(python_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    module_name, _, function = ref.partition(":")
    module = importlib.import_module(module_name)
    target = module
    for part in function.split("."):
        target = getattr(target, part)
    return module, target


def _wrap_writer(marks: Path, seen: dict) -> None:
    """Record the sink the user's writer names, and mark each batch a ``foreachBatch`` function returned from."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    original_format, original_foreach_batch = DataStreamWriter.format, DataStreamWriter.foreachBatch
    original_foreach = DataStreamWriter.foreach

    def format(self, source: str):  # noqa: A001 - the method's own name
        seen["sink"] = source
        return original_format(self, source)

    def foreach_batch(self, func):
        seen["sink"] = "foreachBatch"

        def marked(frame, batch_id: int) -> None:
            func(frame, batch_id)
            folder = marks / "_batches"
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".{batch_id}.tmp"
            tmp.write_text("")
            os.replace(tmp, folder / str(batch_id))

        return original_foreach_batch(self, marked)

    def foreach(self, f):
        seen["sink"] = "foreach"
        return original_foreach(self, f)

    DataStreamWriter.format = format
    DataStreamWriter.foreachBatch = foreach_batch
    DataStreamWriter.foreach = foreach


def source(spark, config: dict):
    """The streaming DataFrame of the run's input directory, one file per micro-batch (``config["schema"]``, a
    DDL string, else the schema Spark infers from the first file)."""
    schema = config.get("schema") or spark.read.json(config["first_file"]).schema
    return spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(config["input"])


def run(spark, config: dict, report) -> None:
    """Build the user's query, start it on the run's checkpoint, wait for its end, read its output back."""
    user = config["user"]
    seen: dict = {}
    _wrap_writer(Path(user["marks"]), seen)
    module, build = load(user["ref"], user.get("python_path", []))
    spark.conf.set("eos.output.dir", config["output"])
    frame = source(spark, config)
    writer = build(frame)
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    if not isinstance(writer, DataStreamWriter):
        raise TypeError(f"{user['ref']} returned {type(writer).__name__}, not a DataStreamWriter (return "
                        "df.writeStream…, not started)")
    sink = seen.get("sink") or spark.conf.get("spark.sql.sources.default", "parquet")
    writer = writer.option("checkpointLocation", config["checkpoint"])
    if sink in FILE_SINKS:
        writer = writer.option("path", config["output"])
    reader = load(user["reader"], [])[1] if user.get("reader") else getattr(module, "read_output", None)
    report({"event": "user_query", "sink": sink, "read_output": callable(reader)})
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    report({"event": "query_done"})
    if not config.get("read_output"):
        return
    if callable(reader):
        out = reader(spark, config["output"])
    elif sink in FILE_SINKS:
        # the file sink's metadata log names the files of committed batches; Spark reads only those
        out = spark.read.format(sink).load(config["output"]) if Path(config["output"], "_spark_metadata").exists() \
            else None
    else:
        raise ValueError(f"the {sink} sink cannot be read back by the harness: give the module a "
                         "read_output(spark, output_dir) function")
    rows = [] if out is None else out.toJSON().collect()
    Path(user["rows"]).write_text("".join(json.dumps(json.loads(r), sort_keys=True) + "\n" for r in rows))
    report({"event": "rows", "count": len(rows)})

