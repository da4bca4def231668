"""A user's own Structured Streaming query in a pipeline run's driver (imported by :mod:`eos_harness.spark.app`
only for a run whose config names ``user``: the user's module is imported here, in the driver child, never
in the harness).

The user's ``build(source)`` gets the streaming DataFrame of the run's input (one JSON-lines file per
micro-batch, or a Kafka topic: :func:`kafka_source`) and returns a
:class:`~pyspark.sql.streaming.DataStreamWriter`, not started. The harness sets its checkpoint location, its
trigger (``availableNow``) and, for a file sink, its ``path``; the run's output directory is the Spark conf ``eos.output.dir``. A ``foreachBatch`` function is wrapped so that, once it
returned for batch N, a marker ``_batches/N`` is renamed into place in ``config["marks"]``: the sink's step
the harness's watcher kills after (in a run killed at ``sink@N``, ``config["hold_after_sink"]``, the wrapper
then waits for the kill, as the harness's own sink does, so that it lands before ``commits/N``). At the end of a run meant to end, the output is read back (the module's
``read_output(spark, output_dir)`` or the function ``config["user"]["reader"]`` names, else the file sink's own
format) and written as JSON lines
(``config["rows"]``), and the state after each committed batch (from ``config["user"]["state_from"]``, by
default the first) is read back with Spark's state data source (:func:`read_state`, written to
``config["user"]["state"]``).
"""

from __future__ import annotations

import importlib
import json
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


def _wrap_writer(marks: Path, seen: dict, hold_after: int | None = None) -> None:
    """Record the sink the user's writer names, and mark each batch a ``foreachBatch`` function returned from;
    after the marker of batch ``hold_after`` wait for the watcher's kill (the user's function has returned:
    Spark would write ``commits/N`` next; :func:`~eos_harness.spark.pipelines.mark_sink_step`)."""
    from eos_harness.spark.pipelines import mark_sink_step
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
            mark_sink_step(marks / "_batches", batch_id, hold=batch_id == hold_after)

        return original_foreach_batch(self, marked)

    def foreach(self, f):
        seen["sink"] = "foreach"
        return original_foreach(self, f)

    DataStreamWriter.format = format
    DataStreamWriter.foreachBatch = foreach_batch
    DataStreamWriter.foreach = foreach


def source(spark, config: dict):
    """The streaming DataFrame of the run's input: a directory, one file per micro-batch (``config["schema"]``, a
    DDL string, else the schema Spark infers from the first file); a Kafka topic (:func:`kafka_source`)."""
    if config.get("source") == "kafka":
        return kafka_source(spark, config)
    schema = config.get("schema") or spark.read.json(config["first_file"]).schema
    return spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(config["input"])


def kafka_source(spark, config: dict):
    """The topic ``config["kafka"]`` names read with Spark's Kafka connector from its earliest offsets,
    ``maxOffsetsPerTrigger`` offsets a micro-batch, ``read_committed``: Spark's own columns (``key``, ``value``,
    ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType``) as a query reading the topic itself
    gets them; with ``config["schema"]``, each value parsed as a JSON object of that schema (its columns only, as
    from a directory's files)."""
    from pyspark.sql import functions as F

    kafka = config["kafka"]
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka["bootstrap"])
           .option("subscribe", kafka["topic"]).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", kafka["max_offsets"]).option("kafka.isolation.level", "read_committed")
           .load())
    if not config.get("schema"):
        return raw
    return raw.select(F.from_json(F.col("value").cast("string"), config["schema"]).alias("r")).select("r.*")


def run(spark, config: dict, report) -> None:
    """Build the user's query, start it on the run's checkpoint, wait for its end, read its output back."""
    user = config["user"]
    seen: dict = {}
    _wrap_writer(Path(user["marks"]), seen, config.get("hold_after_sink"))
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
    if user.get("state"):
        state = read_state(spark, config["checkpoint"], user.get("state_from") or 0)
        Path(user["state"]).write_text(json.dumps(state))
        report({"event": "state", "batch": state["batch"], "operators": len(state["operators"]),
                "batches": [b["batch"] for b in state["batches"]]})


JOIN_OPERATORS = ("symmetricHashJoin",)
# stateful operators whose state the state data source reads by state variable (stateVarName): their names
# are in the operator's properties (state-metadata's operatorProperties, its stateVariables)
NEEDS_STATE_VARIABLE = ("transformWithState",)


def _commits(checkpoint: str) -> list[int]:
    commits = Path(checkpoint) / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def _state_rows(frame) -> list[str]:
    """A state frame's rows (its key and value structs, a list element, a map's key and value, a timer's
    expiry), without the partition id, one JSON object (keys sorted) per row."""
    columns = [c for c in frame.columns if c != "partition_id"]
    if not columns:
        raise ValueError(f"no column but the partition id (columns: {', '.join(frame.columns)})")
    return sorted(json.dumps(json.loads(r), sort_keys=True) for r in frame.select(*columns).toJSON().collect())


def read_state(spark, checkpoint: str, from_batch: int = 0) -> dict:
    """The state of every stateful operator after each committed batch from ``from_batch`` on, read with Spark's
    state data source (``batchId``): the operators and their stores from ``state-metadata``, each store's rows
    from ``statestore`` (a stream-stream join by ``joinSide`` left and right, as Spark's guide says).
    ``{"batch", "operators", "batches": [{"batch", "operators": [{"operator", "name", "store", "rows"}…]}…]}``
    (``batch`` and ``operators``: the last committed batch's); an operator whose state cannot be read (it needs
    options the harness cannot derive, or the data source failed) has ``"not_read"`` with the reason instead of
    rows."""
    commits = _commits(checkpoint)
    batch = commits[-1] if commits else None
    if batch is None or not (Path(checkpoint) / "state").is_dir():
        return {"batch": batch, "operators": [], "batches": []}
    spark.streams.active  # creates the StateStoreCoordinator the state data source asks for  # noqa: B018
    try:
        meta = spark.read.format("state-metadata").load(checkpoint).collect()
    except Exception as exc:  # the checkpoint has no operator metadata Spark can read
        error = f"state-metadata: {type(exc).__name__}: {exc}"[:1000]
        return {"batch": batch, "operators": [], "error": error, "batches": []}
    stores: dict[int, tuple[str, list[str], str | None]] = {}
    for row in meta:
        properties = row.asDict().get("operatorProperties")
        name, names, _ = stores.setdefault(int(row["operatorId"]), (row["operatorName"], [], properties))
        names.append(row["stateStoreName"])
    reads: list[tuple[dict, str | None, str | None]] = []  # (entry, option, value); no option: not read
    for operator_id, (name, names, properties) in sorted(stores.items()):
        if any(name.startswith(p) for p in NEEDS_STATE_VARIABLE):
            options, skipped = _state_variables(properties)
            reads += [({"operator": operator_id, "name": name, "store": store, "not_read": why}, None, None)
                      for store, why in skipped]
        elif name in JOIN_OPERATORS:
            options = [("joinSide", side) for side in ("left", "right")]
        else:
            options = [("storeName", store) for store in sorted(names)]
        reads += [({"operator": operator_id, "name": name,
                    "store": value if option == "storeName" else f"{option}={value}"}, option, value)
                  for option, value in options]
    batches = []
    for number in (n for n in commits if n >= from_batch):
        operators = []
        for template, option, value in reads:
            entry = dict(template)
            if option is not None:
                try:
                    frame = (spark.read.format("statestore").option("operatorId", entry["operator"])
                             .option(option, value).option("batchId", number).load(checkpoint))
                    entry["rows"] = _state_rows(frame)
                except Exception as exc:  # Spark's state data source failed on this store
                    entry["not_read"] = f"Spark's state data source failed: {type(exc).__name__}: {exc}"[:1000]
            operators.append(entry)
        batches.append({"batch": number, "operators": operators})
    last = batches[-1]["operators"] if batches and batches[-1]["batch"] == batch else []
    return {"batch": batch, "operators": last, "batches": batches}


def _state_variables(properties: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """How to read a transformWithState operator's state: each state variable of its properties by
    ``stateVarName``, its event-time timers by ``readRegisteredTimers``; and what is not read, with why (a
    variable with a time to live, or processing-time timers: they depend on the clock, not on the input)."""
    try:
        described = json.loads(properties or "")
        variables = described["stateVariables"]
    except (ValueError, KeyError, TypeError):
        return [], [("?", "its state variables are not in the operator's metadata (operatorProperties), and the "
                          "state data source reads this operator only by stateVarName")]
    reads, skipped = [], []
    for variable in variables:
        name, kind = variable.get("stateName", "?"), variable.get("stateVariableType", "")
        if kind == "TimerState":
            continue
        if variable.get("ttlEnabled"):
            skipped.append((f"stateVarName={name}", "a time to live: its expiry follows the clock, not the input"))
        else:
            reads.append(("stateVarName", name))
    if any(v.get("stateVariableType") == "TimerState" for v in variables):
        if described.get("timeMode") == "EventTime":
            reads.append(("readRegisteredTimers", "true"))
        else:
            skipped.append(("readRegisteredTimers=true", f"{described.get('timeMode')} timers follow the clock"))
    return reads, skipped

