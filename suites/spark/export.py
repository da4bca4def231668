"""``--export-repro DIR``: a failure in Spark itself, found on a user's query, written as a standalone report.

A run's verdict names a Spark failure when a restart after a kill fails with Spark's own error
(``restart_liveness`` with the run's error) while the crash-free run of the same query over the same input
ended well: the query is fine, Spark cannot restart it. The export writes, into a new directory:

- ``input/``: the micro-batches, one JSON-lines file each, in name order; of a query over a Kafka topic, the
  micro-batches Spark's Kafka source read (the topic read again, its digest the judged one; :func:`topic_files`),
  so the script gives ``build(source)`` the same columns from files (:data:`_TOPIC_SOURCES`);
- the user's module file, imported by the script (their query, unchanged); a module of a package: the package's
  folder, whole (its sibling modules with it);
- ``repro.py``: the same Spark confs (state provider, changelog checkpointing, checkpoint format), the same
  source (one file per micro-batch, ``availableNow``), the same sink; it runs the query in a child process
  group, SIGKILLs that group (the driver and its JVM) right after the file of the kill's step appears (inotify,
  through ctypes; a state file: looked for), restarts on the same checkpoint and prints Spark's error. A random
  kill is written as a kill after the step of the window it landed in (:func:`exported_kills`). Only PySpark and
  the standard library: nothing of the harness;
- ``README.md``: what fails, the steps, the versions.
"""

from __future__ import annotations

import base64
import json
import platform
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from eos_harness.faults.spark import parse_target
from eos_harness.suites.spark.kafka_input import KafkaRecord

__all__ = ["Query", "built_in_query", "check_export_dir", "export_repro", "exported_kills", "spark_failure",
           "topic_files", "user_query"]

# where the file of each step appears, relative to the script's work directory (state: the first file of the
# batch's state version, N+1, in any operator's partition below it)
_STEP_DIRS = {"offsets": "checkpoint/offsets", "state": "checkpoint/state", "commit": "checkpoint/commits",
              "sink": "output/_spark_metadata"}
# the crash window a random kill landed in (what the files on disk showed) → the step the script kills after
_WINDOW_STEPS = {"after_offsets": "offsets", "after_state": "state", "after_sink": "sink", "after_commit": "commit"}
FILE_SINKS = ("parquet", "json", "csv", "orc", "text", "avro")


def check_export_dir(path: str) -> Path:
    """The export directory, refused (a ValueError: a usage error) when it exists and is not an empty directory:
    an export never overwrites anything."""
    folder = Path(path).absolute()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"--export-repro {path}: exists and is not an empty directory (an export never "
                         "overwrites: give a new directory)")
    if not folder.parent.is_dir():
        raise ValueError(f"--export-repro {path}: its parent directory {folder.parent} does not exist")
    return folder


def spark_failure(result: dict) -> dict | None:
    """The ``restart_liveness`` violation a failure of Spark itself shows (a restart after a kill failed with
    Spark's error, the crash-free run having ended well), or None."""
    if result.get("verdict") != "fail" or ("reference" in result and result["reference"].get("exit") != 0):
        return None
    for v in result.get("violations", []):
        if v["check"] == "restart_liveness" and str(v["key"]).startswith("run ") and v["key"] != "run 0":
            return v
    return None


def _marker(observed: str) -> str:
    """The line of Spark's error the script looks for in the restarted driver's log."""
    import re

    for line in observed.splitlines():
        m = re.search(r"assertion failed: [^\n]+", line)
        if m:
            return m.group(0).split(" SQLSTATE:")[0].strip()
    for line in observed.splitlines():
        m = re.search(r"\[[A-Z][A-Z_]{5,}(\.[A-Z_]+)?\]", line)
        if m and "STREAM_FAILED" not in m.group(0):
            return m.group(0)
    return observed.strip().splitlines()[0][:200]


@dataclass(frozen=True)
class Query:
    """What the script runs: the query's module (a file to copy, or its text), its function, its input files and
    schema, the state configuration and the sink it names."""

    ref: str  # how the harness named it (module:function, or a built-in pipeline)
    module: str  # the module's name beside the script
    function: str
    inputs: tuple[Path, ...]
    schema: str | None
    provider: str
    changelog: bool
    checkpoint_format: int
    sink: str | None
    module_file: Path | None = None
    module_text: str | None = None
    package: Path | None = None  # the top-level package the module is of, copied whole beside the script
    topic: str | None = None  # a query over a Kafka topic: its URL (kafka://HOST:PORT/TOPIC)
    max_offsets: int | None = None  # and its maxOffsetsPerTrigger
    # its micro-batches' records, in batch order (each batch's by partition and offset): written as input/'s files
    topic_batches: tuple[tuple[KafkaRecord, ...], ...] | None = None

    @property
    def batches(self) -> int:
        return len(self.topic_batches) if self.topic_batches is not None else len(self.inputs)


def _top_package(module_file: Path) -> Path | None:
    """The top-level package folder of a module of a package, None for a top-level module."""
    folder = module_file.resolve().parent
    if not (folder / "__init__.py").is_file():
        return None
    while (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    return folder


def user_query(scenario) -> Query | str:
    """What the export runs of a user's query; why there is none (a str). A query over a Kafka topic: the topic is
    read again (:func:`~.kafka_input.read_micro_batches`) into the micro-batches the harness counted, refused when it
    cannot be read or changed since ``scenario.topic`` was taken."""
    from eos_harness.suites.spark.kafka_input import read_micro_batches
    from eos_harness.suites.spark.user import input_files

    module_file = Path(scenario.module_file or "")
    package = _top_package(module_file) if module_file.is_file() else None
    # a module of a package is imported by its dotted name (its sibling modules with it); a top-level one by its file's
    module = scenario.ref.partition(":")[0] if package is not None else module_file.stem
    query = Query(scenario.ref, module, scenario.ref.partition(":")[2], (), scenario.schema, scenario.provider,
                  scenario.changelog, scenario.checkpoint_format, None, module_file=module_file, package=package)
    if not scenario.kafka:
        return replace(query, inputs=tuple(input_files(Path(scenario.input))))
    if scenario.topic is None or not scenario.max_offsets:
        return f"the input topic {scenario.input} was not read by this command"
    try:
        batches = read_micro_batches(scenario.kafka, scenario.topic, scenario.max_offsets)
    except ValueError as exc:
        return f"the input topic's micro-batches cannot be read again: {exc}"
    return replace(query, topic=scenario.kafka.url, max_offsets=scenario.max_offsets,
                   topic_batches=tuple(tuple(b) for b in batches))


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _a_line(value: bytes | None) -> bool:
    """A value the text source reads back as it is, a line of its own: not empty, UTF-8, no line break, no
    byte-order mark."""
    if not value or b"\n" in value or b"\r" in value or value.startswith(b"\xef\xbb\xbf"):
        return False
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def topic_files(query: Query) -> tuple[str, list[bytes]]:
    """The files of a query over a topic, one a micro-batch, and how the script reads them (a key of
    :data:`_TOPIC_SOURCES`): with ``--schema``, the values themselves, a line each (``values``: the text source,
    then ``from_json`` as the harness's Kafka input); without, or when a value is no line (none, empty, a line break,
    not UTF-8), each record as a JSON object of Spark's Kafka columns, key and value in base64 (``records``)."""
    assert query.topic_batches is not None
    if query.schema and all(_a_line(r.value) for batch in query.topic_batches for r in batch):
        return "values", [b"".join(r.value + b"\n" for r in batch) for batch in query.topic_batches]
    files = []
    for batch in query.topic_batches:
        files.append("".join(json.dumps({"key": _b64(r.key), "value": _b64(r.value), "topic": r.topic,
                                         "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                                         "timestampType": r.timestamp_type}) + "\n" for r in batch).encode())
    return "records", files


_BUILT_IN = '''"""The eos-harness built-in pipeline {pipeline}, written out (the harness's own code, inline): event time
from ts (unix seconds), a watermark of {delay} s, counts per key in {window}, appended as JSON."""

from pyspark.sql import functions as F


def build(source):
    timed = source.withColumn("et", F.timestamp_seconds("ts")).withWatermark("et", "{delay} seconds")
    return (timed.groupBy({window_expr}.alias("window"), "key").count()
            .select("key", F.col("window.start").cast("long").alias("start"),
                    F.col("window.end").cast("long").alias("end"), "count")
            .writeStream.outputMode("append").format("json"))
'''


_BUILT_IN_STATEFUL = '''"""The eos-harness built-in pipeline {pipeline}, written out (the harness's own code, inline): event time
from ts (unix seconds), a watermark of {delay} s, per key a count and its last event times kept in
{api}'s state with an event-time timeout, each update and expiry appended as JSON."""

from collections.abc import Iterator

from pyspark.sql import functions as F

KEEP_TIMES = {keep_times}  # the last event times kept per key
TIMEOUT_S = {timeout_s}  # a key expires this long after its last event time (event time, by the watermark)


{functions}

def build(source):
    timed = source.withColumn("et", F.timestamp_seconds("ts")).withWatermark("et", "{delay} seconds")
    return (timed.groupBy("key").{call}
            .writeStream.outputMode("append").format("json"))
'''

_STATEFUL_CALLS = {
    "pandas-state": ("applyInPandasWithState", ("_timer_ms", "_pandas_state_func"),
                     'applyInPandasWithState(\n        _pandas_state_func, outputStructType="key string, count long, '
                     'kind string",\n        stateStructType="count long, times string, timer long", '
                     'outputMode="append", timeoutConf="EventTimeTimeout")'),
    "tws": ("transformWithStateInPandas", ("_timer_ms", "_tws_processor"),
            'transformWithStateInPandas(\n        statefulProcessor=_tws_processor(), outputStructType="key string, '
            'count long, kind string",\n        outputMode="Append", timeMode="EventTime")'),
}


def _built_in_text(pipeline: str) -> str:
    """The module text of a built-in pipeline, its functions copied from the harness's own source."""
    import inspect

    from eos_harness.models.spark import KEEP_TIMES, TIMEOUT_S, WATERMARK_DELAY_S
    from eos_harness.spark import pipelines

    if pipeline in _STATEFUL_CALLS:
        api, names, call = _STATEFUL_CALLS[pipeline]
        functions = "\n\n".join(inspect.getsource(getattr(pipelines, name)) for name in names)
        return _BUILT_IN_STATEFUL.format(pipeline=pipeline, delay=WATERMARK_DELAY_S, api=api, keep_times=KEEP_TIMES,
                                         timeout_s=TIMEOUT_S, functions=functions, call=call)
    tumbling = pipeline == "window-tumbling"
    return _BUILT_IN.format(pipeline=pipeline, delay=WATERMARK_DELAY_S,
                            window="10-second windows" if tumbling else "20-second windows sliding every 10 s",
                            window_expr='F.window("et", "10 seconds")' if tumbling else
                            'F.window("et", "20 seconds", "10 seconds")')


def built_in_query(scenario, run_dir: Path) -> Query | str:
    """The built-in pipeline's query, inline, or why it cannot be exported."""
    if scenario.pipeline not in ("window-tumbling", "window-sliding", *_STATEFUL_CALLS) or scenario.sink != "file" \
            or scenario.source != "file":
        return (f"the built-in {scenario.pipeline} with the {scenario.sink} sink and the {scenario.source} source: "
                "the export writes window-tumbling, window-sliding, pandas-state and tws to the file sink from the "
                "file source only")
    text = _built_in_text(scenario.pipeline)
    inputs = tuple(sorted((run_dir / "input").glob("part-*.json")))
    if not inputs:
        return f"the run's input files are not in {run_dir / 'input'}"
    return Query(scenario.pipeline, "pipeline", "build", inputs, "key string, ts long", scenario.provider,
                 scenario.changelog, scenario.checkpoint_format, "json", module_text=text)


def exported_kills(result: dict) -> list[tuple[str, int]] | str:
    """The script's kills, one a run: (step, micro-batch) for each kill of ``result``'s schedule; a random kill
    (``random@MS``) is exported as a kill right after the step of the crash window it landed in (the files on
    disk it left, ``after_sink`` of batch 1: right after the sink's file of batch 1), so the script kills where
    the harness's kill landed, every time. A string: why they cannot be exported."""
    crashes = {c.get("target"): c for c in result.get("crash_windows", [])}
    kills = []
    for text in result.get("schedule", []):
        target = parse_target(text)
        if target.kind != "random":
            kills.append((target.kind, target.number))
            continue
        crash = crashes.get(text)
        if crash is None:
            return f"the kill at {text} did not fire"
        if crash.get("window") not in _WINDOW_STEPS:
            return f"the kill at {text} landed {crash.get('window')}, in no micro-batch's commit window"
        kills.append((_WINDOW_STEPS[crash["window"]], int(crash["batch"])))
    return kills


def unsupported(result: dict, query: Query) -> str | None:
    """Why this failure cannot be exported (yet), or None."""
    sink = query.sink or result.get("sink")
    if query.module_file is not None and (not query.module_file.is_file() or query.module_file.suffix != ".py"):
        return f"the query's module ({query.module_file}) is not a .py file to copy beside the script"
    kills = exported_kills(result)
    if isinstance(kills, str):
        return kills
    for kind, batch in kills:
        if kind == "sink" and sink not in FILE_SINKS:
            return f"a kill after the sink of batch {batch} on a {sink} sink: the export kills after a file sink's " \
                   "metadata only"
    return None


def export_repro(result: dict, query: Query, folder: Path) -> Path:
    """Write the standalone reproduction of ``result``'s Spark failure (:func:`spark_failure`) into ``folder``
    (new or empty); returns ``folder``."""
    import pyspark

    violation = spark_failure(result)
    assert violation is not None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "input").mkdir()
    kind = "files"
    if query.topic_batches is not None:  # the topic's micro-batches, a file each
        kind, contents = topic_files(query)
        for n, data in enumerate(contents):
            (folder / "input" / f"part-{n:05d}.json").write_bytes(data)
    for n, path in enumerate(query.inputs):
        shutil.copyfile(path, folder / "input" / f"part-{n:05d}.json")
    module_name = f"{query.module}.py"
    if query.package is not None:  # the package's modules, whole (the query may import any of them)
        module_name = f"{query.package.name}/"
        shutil.copytree(query.package, folder / query.package.name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    elif query.module_file is not None:
        shutil.copyfile(query.module_file, folder / module_name)
    else:
        (folder / module_name).write_text(query.module_text or "")
    kills = exported_kills(result)
    assert not isinstance(kills, str), kills
    marker = _marker(violation["observed"])
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.stateStore.providerClass": {
            "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"}[query.provider],
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": str(query.changelog).lower(),
        "spark.sql.streaming.stateStore.checkpointFormatVersion": str(query.checkpoint_format),
        "spark.sql.session.timeZone": "UTC",
    }
    sink = query.sink or result.get("sink")
    note = None if query.topic is None else _topic_note(query.topic)
    source = (_FILE_SOURCE if kind == "files" else _TOPIC_SOURCES[kind]).format(
        schema=repr(query.schema), topic=repr(query.topic), max_offsets=query.max_offsets, note=repr(note))
    script = _SCRIPT.format(
        title=f"Spark {pyspark.__version__}: the restart of a streaming query killed "
              f"{', '.join(result['schedule'])} fails",
        conf=_pretty(conf), module=query.module, function=query.function, source=source,
        file_sink=repr(sink in FILE_SINKS), kills=repr(kills), marker=repr(marker), step_dirs=repr(_STEP_DIRS))
    (folder / "repro.py").write_text(script)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    (folder / "README.md").write_text(_README.format(
        title=f"Spark {pyspark.__version__}: {marker}", schedule=", ".join(result["schedule"]),
        kills="\n".join(f"   - run {n}: killed (SIGKILL of the driver and its JVM) right after {_kill_file(k, b)} "
                        f"appears" + (f" (the harness killed it at {t}: it landed there)" if t.startswith("random") else "")
                        for n, ((k, b), t) in enumerate(zip(kills, result["schedule"], strict=True))),
        restart=len(kills), observed=violation["observed"].split("=== Streaming Query ===")[0].strip(),
        module=module_name, ref=query.ref, conf="\n".join(f"    {k}={v}" for k, v in conf.items()), sink=sink,
        pyspark=pyspark.__version__, python=platform.python_version(), java=java[0] if java else "?",
        system=f"{platform.system()} {platform.release()} {platform.machine()}", marker=marker,
        input_step=_input_step(query, kind), topic_note="" if note is None else f"\n{_wrap(note)}\n",
        repro=result.get("repro", "")))
    return folder


def _topic_note(url: str) -> str:
    return (f"The query read the Kafka topic {url}; here the topic is replaced by files holding the same micro-batches "
            "(the same records, the same batch boundaries), read by Spark's file source: a failure that depends on "
            "Spark's Kafka source itself may not reproduce.")


def _wrap(text: str, indent: str = "") -> str:
    import textwrap

    return textwrap.fill(text, 110, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _input_step(query: Query, kind: str) -> str:
    """The README's first step: what ``input/`` holds."""
    if query.topic is None:
        return f"copies the {query.batches} input files of `input/` (one micro-batch each, JSON lines) to `work/input`;"
    assert query.topic_batches is not None
    lines = []
    for n, batch in enumerate(query.topic_batches):
        spans = {}
        for record in batch:
            first, last = spans.get(record.partition, (record.offset, record.offset))
            spans[record.partition] = (min(first, record.offset), max(last, record.offset))
        where = ", ".join(f"partition {p} offset{f' {a}' if a == b else f's {a}..{b}'}"
                          for p, (a, b) in sorted(spans.items()))
        count = f"{len(batch)} record{'' if len(batch) == 1 else 's'}"
        lines.append(f"   - `part-{n:05d}.json`: micro-batch {n}, {count}" + (f" ({where})" if where else ""))
    what = ("each record's value, a line each (the script parses them with `from_json` and the schema, as the "
            "harness did)" if kind == "values" else
            "each record as a JSON object of Spark's Kafka source's columns, `key` and `value` in base64 (the script "
            "maps them back to `key`, `value` binary, `topic`, `partition`, `offset`, `timestamp`, `timestampType`"
            + (", then parses the value with `from_json` and the schema, as the harness did)" if query.schema else ")"))
    text = (f"copies the {query.batches} files of `input/` to `work/input`: the micro-batches Spark's Kafka source "
            f"read from the topic `{query.topic}` (`maxOffsetsPerTrigger` {query.max_offsets}, `read_committed`), a "
            f"file each, in order, holding {what}:")
    return _wrap(text, "   ") + "\n" + "\n".join(lines)


# the script's source(spark): the DataFrame the query's build(source) gets (a template filled by str.format)
_FILE_SOURCE = '''SCHEMA = {schema}  # the input's schema as DDL (None: inferred from the first file)
NOTE = None


def source(spark):
    """The query's input: one JSON-lines file per micro-batch (maxFilesPerTrigger 1), in name order."""
    first = sorted((WORK / "input").iterdir())[0]
    schema = SCHEMA or spark.read.json(str(first)).schema
    return spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(str(WORK / "input"))
'''

_TOPIC_HEAD = '''# The query read a Kafka topic, TOPIC, with Spark's Kafka source (maxOffsetsPerTrigger {max_offsets}, read_committed);
# here each of its micro-batches is a file of input/ (the same records, the same batch boundaries).
TOPIC = {topic}
SCHEMA = {schema}  # DDL: each value parsed as a JSON object of it (from_json), its columns only; None: Kafka's columns
NOTE = {note}
'''

_TOPIC_SOURCES = {
    # each record's value, a line each: read by the text source, parsed as the harness parsed the topic's values
    "values": _TOPIC_HEAD + '''

def source(spark):
    """Each record's value parsed as a JSON object of SCHEMA (from_json of the value as a string), from one file of
    values per micro-batch (maxFilesPerTrigger 1), in name order."""
    from pyspark.sql import functions as F

    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(WORK / "input"))
    return lines.select(F.from_json(F.col("value"), SCHEMA).alias("r")).select("r.*")
''',
    # each record as a JSON object of Spark's Kafka source's columns, key and value in base64
    "records": _TOPIC_HEAD + '''RECORD = "key string, value string, topic string, partition int, offset long, timestamp long, timestampType int"


def source(spark):
    """Spark's Kafka source's columns as it gives them (key and value binary, topic string, partition int, offset
    long, timestamp timestamp, timestampType int; no headers), from one file of records per micro-batch
    (maxFilesPerTrigger 1), in name order: key and value from base64, the timestamp from milliseconds."""
    from pyspark.sql import functions as F

    records = spark.readStream.format("json").schema(RECORD).option("maxFilesPerTrigger", 1).load(str(WORK / "input"))
    kafka = records.select(F.unbase64("key").alias("key"), F.unbase64("value").alias("value"), "topic", "partition",
                           "offset", F.timestamp_millis("timestamp").alias("timestamp"), "timestampType")
    if SCHEMA is None:
        return kafka
    return kafka.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")).select("r.*")
''',
}


def _kill_file(step: str, batch: int) -> str:
    if step == "state":
        return f"the first file of state version {batch + 1} (batch {batch}) in `{_STEP_DIRS[step]}/<operator>/<partition>/`"
    return f"`{_STEP_DIRS[step]}/{batch}`"


def _pretty(conf: dict) -> str:
    return "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in conf.items()) + "}"


_README = """# {title}

A Structured Streaming query whose driver was killed ({schedule}) cannot be restarted on its checkpoint:
the restarted query fails in Spark itself.
{topic_note}
## Steps

    python repro.py

needs only PySpark {pyspark} (`pip install pyspark=={pyspark}`), Java 17 and Linux (the script watches
the checkpoint with inotify). It works in `./work` (removed first), and:

1. {input_step}
2. runs the query of `{module}` (`{ref}`) with `trigger(availableNow=True)` and
   `maxFilesPerTrigger=1` on the checkpoint `work/checkpoint`, its {sink} sink writing `work/output`, in a
   process group of its own;
{kills}
3. restarts it (run {restart}) on the same checkpoint: it fails, and the script prints Spark's error and
   `REPRODUCED` (exit 1); `NOT REPRODUCED` (exit 0) when the restart did not fail with that error.

The Spark confs:

{conf}

## What fails

    {marker}

Observed by the harness:

```
{observed}
```

## Versions

- PySpark {pyspark}, Python {python}
- {java}
- {system}

Found by eos-harness (`{repro}`).
"""

_SCRIPT = '''#!/usr/bin/env python3
"""{title}.

Standalone: PySpark and the Python standard library only. Runs the query batch by batch (one input
file per micro-batch), kills its driver (SIGKILL of the driver's process group: the Python driver and its
JVM) right after a file of a micro-batch's commit appears, restarts it on the same checkpoint and prints
the failure. See README.md."""

import ctypes
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"
CONF = {conf}
FILE_SINK = {file_sink}  # the query's sink is a file sink: its path is work/output
KILLS = {kills}  # one run per kill: (step, micro-batch)
STEP_DIRS = {step_dirs}
EXPECTED = {marker}

{source}

def driver():
    """One run of the query on WORK's checkpoint, to its end (or its kill)."""
    from pyspark.sql import SparkSession

    # Spark's own temporary files (native libraries it unpacks, shuffle files) go under WORK too: a killed
    # JVM never deletes them, and /tmp is not this script's to fill.
    temp = WORK / "tmp"
    temp.mkdir(parents=True, exist_ok=True)
    builder = (SparkSession.builder.master("local[2]").appName("repro").config("spark.ui.enabled", "false")
               .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={{temp}}").config("spark.local.dir", str(temp)))
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.config("eos.output.dir", str(WORK / "output")).getOrCreate()
    sys.path.insert(0, str(HERE))
    from {module} import {function} as build

    writer = build(source(spark)).option("checkpointLocation", str(WORK / "checkpoint"))
    if FILE_SINK:
        writer = writer.option("path", str(WORK / "output"))
    writer.trigger(availableNow=True).start().awaitTermination()
    spark.stop()


IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x8, 0x80, 0x100


def run(number, kill=None):
    """Run the driver in a process group of its own; with kill=(step, batch), SIGKILL the group right after that
    step's file of that micro-batch appears. Returns (exit code, killed, log)."""
    log_path = WORK / f"run-{{number}}.log"
    libc = ctypes.CDLL(None, use_errno=True)
    fd = wd = None
    if kill and kill[0] != "state":
        folder = WORK / STEP_DIRS[kill[0]]
        folder.mkdir(parents=True, exist_ok=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        wd = libc.inotify_add_watch(fd, str(folder).encode(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE)
        if fd < 0 or wd < 0:
            sys.exit(f"inotify: {{os.strerror(ctypes.get_errno())}}")
    # the query's module importable by Spark's Python workers too (a Python function in it, a UDF or a stateful
    # processor, is pickled by reference to its module)
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    env = {{**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": path}}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--driver"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    killed = None
    try:
        while proc.poll() is None and kill and not killed:
            if kill[0] == "state":  # operators' partition folders appear as the query runs: looked for, not watched
                found = state_file(kill[1])
                if found:
                    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
                    killed = found
                time.sleep(0.005)
                continue
            if not select.select([fd], [], [], 0.5)[0]:
                continue
            data = os.read(fd, 65536)
            at = 0
            while at < len(data):
                _, mask, _, size = struct.unpack_from("iIII", data, at)
                name = data[at + 16:at + 16 + size].rstrip(b"\\0").decode()
                at += 16 + size
                if mask & (IN_CLOSE_WRITE | IN_MOVED_TO) and name.split(".")[0] == str(kill[1]):
                    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
                    killed = f"{{STEP_DIRS[kill[0]]}}/{{name}}"
                    break
        proc.wait()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run is left running
        except ProcessLookupError:
            pass
        if fd is not None:
            os.close(fd)
    return proc.returncode, killed, log_path.read_text(errors="replace")


STATE_FILE = re.compile(r"^(\\d+)(?:_[0-9a-fA-F-]+)?\\.(delta|snapshot|changelog|zip)$")


def state_file(batch):
    """A final file of the state version of ``batch`` (``batch + 1``) in any operator's partition, or None."""
    for folder, _, names in os.walk(WORK / "checkpoint" / "state"):
        for name in names:
            found = STATE_FILE.match(name)
            if found and int(found.group(1)) == batch + 1:
                return os.path.relpath(os.path.join(folder, name), WORK)
    return None


def on_disk(batch):
    steps = {{"offsets": WORK / "checkpoint" / "offsets" / str(batch),
             "sink": WORK / "output" / "_spark_metadata" / str(batch),
             "commit": WORK / "checkpoint" / "commits" / str(batch)}}
    found = [f"{{step}}/{{batch}} {{'yes' if path.exists() else 'no'}}" for step, path in steps.items()]
    found.insert(1, f"state/{{batch}} {{'yes' if state_file(batch) else 'no'}}")
    return ", ".join(found)


def main():
    if sys.argv[1:] == ["--driver"]:
        driver()
        return 0
    if NOTE:
        print(NOTE)
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "input").mkdir(parents=True)
    for n, path in enumerate(sorted((HERE / "input").iterdir())):
        shutil.copyfile(path, WORK / "input" / path.name)
        os.utime(WORK / "input" / path.name, (1_700_000_000 + n, 1_700_000_000 + n))  # the source's order
    for number, kill in enumerate(KILLS):
        code, killed, log = run(number, kill)
        if not killed:
            print(f"run {{number}}: ended (exit {{code}}) before the kill after {{kill[0]}} of batch {{kill[1]}}; log:")
            print(log[-3000:])
            return 3
        print(f"run {{number}}: killed right after {{killed}} appeared; on disk: {{on_disk(kill[1])}}")
    number = len(KILLS)
    code, _, log = run(number)
    print(f"run {{number}} (the restart on the same checkpoint): exit {{code}}")
    errors = [line.strip() for line in log.splitlines()
              if re.search(r"Error|Exception|assertion failed|Caused by", line) and not line.strip().startswith("at ")]
    if EXPECTED in log:
        print("\\n".join(dict.fromkeys(errors[:8])))
        print(f"REPRODUCED: {{EXPECTED}} (log: {{WORK / f'run-{{number}}.log'}})")
        return 1
    print("\\n".join(dict.fromkeys(errors[:8])))
    print(f"NOT REPRODUCED: the restart did not fail with {{EXPECTED!r}} (log: {{WORK / f'run-{{number}}.log'}})")
    if NOTE:
        print(NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
