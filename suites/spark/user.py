"""A user's own Structured Streaming query (``--pipeline module:function``) judged against its own crash-free run.

The query has no model, but it has an oracle: the output of a crash-free run of the same query over the same
input batches (run once per configuration and kept by the hash of the input, the schema, the module's source
and the configuration). A scenario kills the driver right after a step of a micro-batch (``offsets@N``,
``state@N``, ``sink@N``, ``commit@N``, ``random@MS``), restarts it on the same checkpoint until it finishes,
reads the output back and judges it against the crash-free run's:

- a sink expected to be exactly once (a file sink, ``foreachBatch``: the default but for the Kafka sink) holds
  the crash-free output as a multiset (``exactly_once_output``, ``no_loss``);
- a sink declared at least once (``--sink-guarantee at-least-once``) holds a superset of it: each duplicate
  is counted and attributed to the crash window (``strict_only``, as the built-in Kafka sink's);
- every restart commits a batch within the restart bound, with Spark's error class when it does not
  (``restart_liveness``); the watermark Spark recorded is never ahead of the crash-free run's;
- the state of each stateful operator, read back with Spark's state data source after each committed batch,
  equals the crash-free run's after the same batch, as a multiset of key and value rows; the first batch where
  they differ is the violation's (``state_matches_crash_free``).

The input is a directory (one JSON-lines file per micro-batch) or a Kafka topic (``--input kafka://HOST:PORT/
TOPIC``, :mod:`.kafka_input`: read by Spark's Kafka connector, a fixed ``maxOffsetsPerTrigger``; the crash-free run
kept by the digest of the topic's records, and a topic that changed before or during a scenario an error verdict).
Rows are compared whole, or by the columns of ``--key`` only (other columns, a processing time or a batch
id, may differ between runs). The user's module is imported only in a child: the probe before anything
runs (a bad reference is a usage error) and the driver of each run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from eos_harness.commands import command_line
from eos_harness.faults.spark import final_files, parse_target
from eos_harness.rundir import claim
from eos_harness.spark.pipelines import STATE_CONFIGURATIONS, refused_configuration, validate_state_options
from eos_harness.spark.process import PipelineProcess
from eos_harness.suites.spark.checks import check_restarts, recorded_watermarks
from eos_harness.suites.spark.driver_run import RUN_TIMEOUT_S, committed_batches, run_driver
from eos_harness.suites.spark.kafka_input import (
    KafkaInput,
    TopicSnapshot,
    default_limit,
    is_kafka_input,
    micro_batches,
    parse_input,
    snapshot,
)
from eos_harness.verdict import ERROR, NOT_APPLICABLE, Violation, error_reason, unfired_is_error, verdict_of

__all__ = ["GUARANTEES", "UserScenario", "parse_ddl", "probe", "run_user_scenario"]

GUARANTEES = ("exactly-once", "at-least-once")
WINDOWS = ("offsets", "state", "sink", "commit")
RESTART_BOUND_S = 120.0
PROBE_TIMEOUT_S = 60.0
EPOCH = 1_700_000_000  # input files get modification times EPOCH+n: the file source takes them in that order
_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_COLUMN = re.compile(r"^[A-Za-z_][\w]*$")


# -- the schema: a DDL string checked before anything runs --------------------------------------------------

_PRIMITIVES = {"string", "varchar", "char", "int", "integer", "long", "bigint", "short", "smallint", "tinyint",
               "byte", "double", "float", "real", "boolean", "bool", "date", "timestamp", "timestamp_ntz",
               "timestamp_ltz", "binary", "decimal", "dec", "numeric", "void", "variant", "interval"}
_TOKEN = re.compile(r"\s*(`[^`]+`|[A-Za-z_][\w]*|\d+|'(?:[^'\\]|\\.)*'|[<>(),:])")


def _tokens(text: str) -> list[str]:
    out, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        m = _TOKEN.match(text, at)
        if not m:
            raise ValueError(f"unexpected {text[at:].strip()[:20]!r}")
        out.append(m.group(1))
        at = m.end()
    return out


def parse_ddl(text: str) -> list[tuple[str, str]]:
    """``"key string, ts timestamp"`` → ``[("key", "string"), ("ts", "timestamp")]``; a ValueError saying what
    is wrong when it is not a Spark DDL schema (fields ``name type``, with ``array<…>``, ``map<…,…>``,
    ``struct<name: type, …>``, ``decimal(p, s)``, ``NOT NULL`` and ``COMMENT '…'``)."""
    tokens = _tokens(text)
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take(expected: str | None = None) -> str:
        nonlocal at
        token = peek()
        if token is None or (expected is not None and token.lower() != expected):
            raise ValueError(f"expected {expected or 'more'} at {' '.join(tokens[at:at + 3]) or 'the end'!r}")
        at += 1
        return token

    def name() -> str:
        token = take()
        if not (token.startswith("`") or _COLUMN.match(token)):
            raise ValueError(f"{token!r} is not a column name")
        return token.strip("`")

    def element_types(count: int) -> str:
        """``<T>`` (an array's) or ``<K, V>`` (a map's): ``count`` types, written back as ``<T>``, ``<K,V>``."""
        take("<")
        types = [data_type()]
        while len(types) < count:
            take(",")
            types.append(data_type())
        take(">")
        return f"<{','.join(types)}>"

    def data_type() -> str:
        token = take().lower()
        if token == "array":
            return "array" + element_types(1)
        if token == "map":
            return "map" + element_types(2)
        if token == "struct":
            take("<")
            fields = []
            while peek() != ">":
                fields.append(field_of(inner=True))
                if peek() == ",":
                    take(",")
            take(">")
            return "struct<" + ",".join(f"{n}:{t}" for n, t in fields) + ">"
        if token not in _PRIMITIVES:
            raise ValueError(f"{token!r} is not a Spark data type")
        if peek() == "(":
            take("(")
            args = [take()]
            while peek() == ",":
                take(",")
                args.append(take())
            take(")")
            if not all(a.isdigit() for a in args):
                raise ValueError(f"{token}({', '.join(args)}): the arguments must be numbers")
            return f"{token}({','.join(args)})"
        return token

    def field_of(inner: bool = False) -> tuple[str, str]:
        column = name()
        if peek() == ":":
            take(":")
        kind = data_type()
        if (peek() or "").lower() == "not":
            take("not")
            take("null")
        if (peek() or "").lower() == "comment":
            take("comment")
            if not (peek() or "").startswith("'"):
                raise ValueError("COMMENT takes a quoted string")
            take()
        return column, kind

    if not tokens:
        raise ValueError("the schema is empty")
    fields = [field_of()]
    while peek() == ",":
        take(",")
        fields.append(field_of())
    if peek() is not None:
        raise ValueError(f"unexpected {' '.join(tokens[at:at + 3])!r}")
    names = [n for n, _ in fields]
    if len(set(names)) != len(names):
        raise ValueError("a column is named twice")
    return fields


# -- the scenario --------------------------------------------------------------------------------------------


DECLARATIVE_SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml")


def declarative_refusal(ref: str) -> str | None:
    """Why ``--pipeline REF`` cannot run, when it names a Spark Declarative Pipelines project (a spec
    ``*.yml``/``*.yaml``, or a folder holding ``spark-pipeline.yml``): its flows run in the Spark Connect
    server ``spark-pipelines`` starts, which builds each streaming write itself, so the harness sets none of
    what it must (README, Spark pipelines, has the evidence). None for anything else."""
    path = Path(ref)
    if not (ref.endswith((".yml", ".yaml")) or (path.is_dir() and any((path / n).is_file()
                                                                       for n in DECLARATIVE_SPEC_NAMES))):
        return None
    return (f"--pipeline {ref}: a Spark Declarative Pipelines project (spark-pipelines) is not run by the harness "
            "yet: its flows run in the Spark Connect server spark-pipelines starts, which builds each streaming "
            "write itself (its checkpoint under the spec's storage, its own trigger), not a DataStreamWriter the "
            "harness's driver starts, and a restart needs a persistent catalog. Wrap the query in a "
            "module:function instead (README: Spark pipelines)")


def input_files(directory: Path) -> list[Path]:
    """The input's files (one micro-batch each), in name order; hidden files are not input."""
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def python_path() -> list[str]:
    """Where the driver child looks for the user's module besides its own packages: the current directory
    (as ``python -m`` does) and this process's own folders outside the installation (pytest's rootdir)."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = [os.getcwd()]
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if not os.path.isdir(real) or "site-packages" in real or any(real.startswith(p + os.sep) or real == p
                                                                     for p in prefixes):
            continue
        if real not in found:
            found.append(real)
    return found


@dataclass(frozen=True)
class UserScenario:
    """One judged scenario of a user's query: the query, its input, how its output is compared, the state
    configuration and the kills (one run per kill, then one to the end)."""

    ref: str
    input: str
    schema: str | None = None
    key: tuple[str, ...] = ()
    guarantee: str | None = None  # None: by the sink (the Kafka sink at least once, every other exactly once)
    provider: str = "rocksdb"
    checkpoint_format: int = 1
    changelog: bool = False
    schedule: tuple[str, ...] = ()
    seed: int = 0
    python_path: tuple[str, ...] = field(default=(), compare=False)
    module_file: str | None = field(default=None, compare=False)  # the module's source (the probe's), for the cache
    reader: str | None = None  # module:function reading the output back (default: the module's read_output)
    max_offsets: int | None = None  # a Kafka input's maxOffsetsPerTrigger (None: by the topic, :meth:`resolved`)
    # a Kafka input's records when the command began (:meth:`resolved`); its digest keys the crash-free run
    topic: TopicSnapshot | None = field(default=None, compare=False)

    @property
    def kafka(self) -> KafkaInput | None:
        """The topic of a Kafka input (``kafka://HOST:PORT/TOPIC``), None for a directory."""
        return parse_input(self.input) if is_kafka_input(self.input) else None

    def resolved(self) -> UserScenario:
        """A Kafka input's scenario with the topic read (:func:`~.kafka_input.snapshot`: a ValueError, a usage
        error, when it cannot be) and its ``maxOffsetsPerTrigger`` (by default the topic's offsets in
        :data:`~.kafka_input.DEFAULT_BATCHES` micro-batches); a directory's, itself."""
        if self.kafka is None:
            return self
        topic = snapshot(self.kafka)
        return replace(self, topic=topic, max_offsets=self.max_offsets or default_limit(topic))

    def batch_count(self) -> int | None:
        """The input's micro-batches (a Kafka input's: as Spark plans them; None before :meth:`resolved`)."""
        if self.kafka is None:
            return len(input_files(Path(self.input)))
        if self.topic is None or not self.max_offsets:
            return None
        return len(micro_batches(self.topic, self.max_offsets))

    def validate(self) -> None:
        """What can be checked without running anything (a ValueError: a usage error)."""
        if not _REF.match(self.ref):
            raise ValueError(f"--pipeline {self.ref!r}: give a built-in pipeline or module:function")
        if self.reader is not None and not _REF.match(self.reader):
            raise ValueError(f"--read-output {self.reader!r}: give module:function")
        if is_kafka_input(self.input):
            self.kafka  # noqa: B018 - a malformed URL is a ValueError
            if self.max_offsets is not None and self.max_offsets < 1:
                raise ValueError(f"--max-offsets-per-trigger {self.max_offsets}: at least 1")
        else:
            if self.max_offsets is not None:
                raise ValueError("--max-offsets-per-trigger: only with a Kafka topic as --input (kafka://HOST:PORT/"
                                 "TOPIC); a directory's micro-batches are its files")
            folder = Path(self.input)
            if not folder.is_dir():
                raise ValueError(f"--input {self.input!r} is neither a directory nor a Kafka topic "
                                 "(kafka://HOST:PORT/TOPIC)")
            if not input_files(folder):
                raise ValueError(f"--input {self.input!r} has no input file (one JSON-lines file per micro-batch)")
        batches = self.batch_count()
        if self.schema is not None:
            try:
                parse_ddl(self.schema)
            except ValueError as exc:
                raise ValueError(f"--schema {self.schema!r} is not a Spark DDL schema: {exc}") from None
        for column in self.key:
            if not _COLUMN.match(column):
                raise ValueError(f"--key {','.join(self.key)!r}: {column!r} is not a column name")
        if self.guarantee is not None and self.guarantee not in GUARANTEES:
            raise ValueError(f"--sink-guarantee must be one of {', '.join(GUARANTEES)}")
        validate_state_options(self.provider, self.checkpoint_format, self.changelog)
        for text in self.schedule:
            target = parse_target(text)
            if target.kind != "random" and batches is not None and target.number >= batches:
                raise ValueError(f"--crash-at {text}: the input has {batches} micro-batches (0..{batches - 1})"
                                 + (f" with --max-offsets-per-trigger {self.max_offsets}" if self.kafka else ""))

    @property
    def configuration(self) -> dict:
        return {"state_provider": self.provider, "changelog_checkpointing": self.changelog,
                "checkpoint_format": self.checkpoint_format, "source": "kafka" if self.kafka else "file"}

    def repro(self) -> str:
        words: list[object] = ["run", "--suite", "spark", "--pipeline", self.ref, "--input", self.input]
        if self.kafka and self.max_offsets:
            words += ["--max-offsets-per-trigger", self.max_offsets]
        if self.schema:
            words += ["--schema", self.schema]
        if self.key:
            words += ["--key", ",".join(self.key)]
        if self.guarantee:
            words += ["--sink-guarantee", self.guarantee]
        if self.reader:
            words += ["--read-output", self.reader]
        words += ["--state-provider", self.provider, "--checkpoint-format", self.checkpoint_format]
        if self.changelog:
            words.append("--changelog")
        if self.schedule:
            words += ["--crash-at", ",".join(self.schedule)]
        return command_line(*words, "--seed", self.seed)

    def header(self, sink: str = "?") -> dict:
        return {"suite": "spark", "pipeline": self.ref, "sink": sink, "expected": "pass",
                "configuration": self.configuration, "seed": self.seed, "schedule": list(self.schedule),
                "strict": False, "input": self.input, "key": list(self.key), "repro": self.repro(),
                **({"topic": {**self.topic.to_json(), "max_offsets_per_trigger": self.max_offsets}}
                   if self.topic is not None else {})}


def drawn_schedule(seed: int, batches: int) -> tuple[str, ...]:
    """The kill of a ``run`` given no ``--crash-at``: a window and a batch drawn from the seed (a batch with one
    before and one after it when the input has three or more)."""
    rng = random.Random(seed)
    window = rng.choice(WINDOWS)
    batch = rng.randrange(1, batches - 1) if batches >= 3 else rng.randrange(batches)
    return (f"{window}@{batch}",)


_PROBE = """
import importlib, json, sys
ref, paths = sys.argv[1], json.loads(sys.argv[2])
sys.path[:0] = paths
module_name, _, function = ref.partition(":")
try:
    module = importlib.import_module(module_name)
except ModuleNotFoundError as exc:
    print(json.dumps({"error": f"module {module_name!r} not found: {exc}"})); sys.exit(0)
except BaseException as exc:
    print(json.dumps({"error": f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"})); sys.exit(0)
target = module
for part in function.split("."):
    if not hasattr(target, part):
        print(json.dumps({"error": f"module {module_name!r} has no attribute {function!r}"})); sys.exit(0)
    target = getattr(target, part)
if not callable(target):
    print(json.dumps({"error": f"{ref} is a {type(target).__name__}, not a function"})); sys.exit(0)
reader = getattr(module, "read_output", None)
if reader is not None and not callable(reader):
    print(json.dumps({"error": f"{module_name}.read_output is a {type(reader).__name__}, not a function"}))
    sys.exit(0)
print(json.dumps({"file": getattr(module, "__file__", None), "read_output": reader is not None}))
"""


def probe(ref: str, paths: list[str], timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Import the user's module in a child (its code bounded by ``timeout``): its file and whether it has
    ``read_output``; a ValueError (a usage error) when the module or the function is not there."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, ref, json.dumps(paths)], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ValueError(f"--pipeline {ref}: importing its module took more than {timeout:g} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise ValueError(f"--pipeline {ref}: importing its module ended the process (exit {done.returncode}): "
                         f"{done.stderr.strip()[-500:]}") from None
    if "error" in answer:
        raise ValueError(f"--pipeline {ref}: {answer['error']}")
    return answer


# -- the crash-free reference, once per configuration ----------------------------------------------------------


def query_sources(module_file: str | None) -> list[Path]:
    """The source files the query may import besides its module: every ``.py`` file of its top-level package
    (a module of a package), or of its own folder (a top-level module, whose siblings it may import by name)."""
    if not module_file or not Path(module_file).is_file():
        return []
    folder = Path(module_file).resolve().parent
    if not (folder / "__init__.py").is_file():
        return sorted(folder.glob("*.py"))
    while (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def reference_key(scenario: UserScenario, module_file: str | None) -> str:
    digest = hashlib.sha256()
    digest.update(b"with state by batch\0")  # a crash-free run kept before its state was read back after each
    # batch is not reused
    digest.update(json.dumps({"ref": scenario.ref, "reader": scenario.reader, "schema": scenario.schema,
                              **scenario.configuration}).encode())
    for path in query_sources(module_file):
        digest.update(str(path).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    if scenario.kafka:  # the topic's records (and how they are cut into micro-batches), not where it is
        assert scenario.topic is not None, "a Kafka input is read (UserScenario.resolved) before its crash-free run"
        digest.update(f"kafka\0{scenario.topic.digest}\0{scenario.max_offsets}".encode())
    for path in [] if scenario.kafka else input_files(Path(scenario.input)):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def judged_inputs(scenario: UserScenario) -> dict[str, dict[str, str]]:
    """What a campaign of the user's query judges against, each as ``what`` it is, a ``digest`` and a ``detail``:
    ``query``, the query's source files (its module and those it may import); ``input``, its input files, or its
    topic's records and how they are cut into micro-batches (``scenario`` :meth:`~UserScenario.resolved`). Kept
    when the campaign starts: ``--resume`` refuses a campaign whose query or input changed (:func:`changed_inputs`)."""
    query = hashlib.sha256()
    sources = query_sources(scenario.module_file)
    for path in sources:
        query.update(str(path).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    data = hashlib.sha256()
    if scenario.kafka:
        assert scenario.topic is not None, "a Kafka input is read (UserScenario.resolved) before it is kept"
        data.update(f"kafka\0{scenario.topic.digest}\0{scenario.max_offsets}".encode())
        what = f"the input topic {scenario.kafka.url}"
        detail = f"{scenario.topic.describe()}; {scenario.max_offsets} offsets a micro-batch"
    else:
        files = input_files(Path(scenario.input))
        for path in files:
            data.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        what, detail = f"the input files in {scenario.input}", f"{len(files)} files"
    return {"query": {"what": f"the query's source files ({scenario.module_file or scenario.ref} and those beside it)",
                      "digest": query.hexdigest()[:20], "detail": f"{len(sources)} files"},
            "input": {"what": what, "digest": data.hexdigest()[:20], "detail": detail}}


def changed_inputs(kept: object, now: dict[str, dict[str, str]]) -> str | None:
    """Why a campaign that kept ``kept`` (:func:`judged_inputs` when it started) cannot go on with ``now``: the
    scenarios it finished were judged against a crash-free run of another query or input. None when nothing
    changed, or when the campaign kept nothing (started by an eos-harness before this check)."""
    if not isinstance(kept, dict):
        return None
    said = []
    for name in ("query", "input"):
        then = kept.get(name) if isinstance(kept.get(name), dict) else {}
        if then.get("digest") != now[name]["digest"]:
            said.append(f"{now[name]['what']} changed since it began (then: {then.get('detail', 'unknown')}, digest "
                        f"{then.get('digest', 'unknown')}; now: {now[name]['detail']}, digest {now[name]['digest']})")
    if not said:
        return None
    return ("; ".join(said) + ": the scenarios it finished were judged against the crash-free run of what it read "
            "then, and a campaign judges one query over one input; put it back, or start a new campaign")


def _copy_input(scenario: UserScenario, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    copied: list[Path] = []
    if scenario.kafka:  # the topic is read where it is
        return copied
    for n, path in enumerate(input_files(Path(scenario.input))):
        target = directory / f"part-{n:05d}.json"
        shutil.copyfile(path, target)
        os.utime(target, (EPOCH + n, EPOCH + n))
        copied.append(target)
    return copied


def _config(scenario: UserScenario, run_dir: Path, name: str, read_output: bool) -> dict:
    files = sorted((run_dir / "input").iterdir())
    config = {"pipeline": "user", "user": {"ref": scenario.ref, "reader": scenario.reader,
                                           "python_path": list(scenario.python_path),
                                           "marks": str(run_dir / "marks"),
                                           "rows": str(run_dir / f"{name}.rows.jsonl"),
                                           "state": str(run_dir / f"{name}.state.json")},
              "provider": scenario.provider, "changelog": scenario.changelog, "format": scenario.checkpoint_format,
              "input": str(run_dir / "input"), "first_file": str(files[0]) if files else None,
              "schema": scenario.schema, "checkpoint": str(run_dir / "checkpoint"), "output": str(run_dir / "output"),
              "report": str(run_dir / f"{name}.report.jsonl"), "partitions": 2, "read_output": read_output}
    if scenario.kafka:
        from eos_harness.suites.spark.kafka_input import kafka_jars

        config.update(source="kafka", jars=kafka_jars(), kafka={
            "bootstrap": scenario.kafka.bootstrap, "topic": scenario.kafka.topic, "max_offsets": scenario.max_offsets})
    return config


def topic_changed(scenario: UserScenario, during: str) -> str | None:
    """Why a Kafka input's micro-batches are not those of the crash-free run any more: the topic read again
    differs from :attr:`UserScenario.topic` (``during``: when), or cannot be read; None when it is the same (or
    the input is a directory)."""
    if scenario.kafka is None or scenario.topic is None:
        return None
    try:
        now = snapshot(scenario.kafka)
    except ValueError as exc:
        return f"the input topic could not be read again {during}: {exc}"
    if now.digest == scenario.topic.digest:
        return None
    return (f"the input topic {scenario.kafka.url} changed {during} ({scenario.topic.describe()} when the command "
            f"began; {now.describe()} now): its micro-batches are not the crash-free run's, so nothing is judged. "
            "Run the harness on a topic nothing writes to")


def _roots(run_dir: Path) -> dict[str, Path]:
    return {"checkpoint": run_dir / "checkpoint", "output": run_dir / "output", "marks": run_dir / "marks"}


def _commits(roots: dict[str, Path]) -> list[int]:
    return sorted(committed_batches(final_files({"checkpoint": roots["checkpoint"]})["checkpoint"]))


def reference(scenario: UserScenario, root: Path, module_file: str | None) -> dict:
    """The crash-free run of ``scenario``'s query over its input (its schedule ignored), kept in ``root`` by
    :func:`reference_key`: run once, whoever asks first (a lock per key), read from disk after."""
    key = reference_key(scenario, module_file)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"reference-{key}"
    with open(root / f".reference-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = folder / "reference.json"
        if kept.exists():
            return {**json.loads(kept.read_text()), "cached": True}
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        _copy_input(scenario, folder / "input")
        roots = _roots(folder)
        for path in roots.values():
            path.mkdir(parents=True, exist_ok=True)
        config = _config(scenario, folder, "run-0", read_output=True)
        started = time.monotonic()
        with PipelineProcess(config, folder, "run-0", to_the_end=True) as proc:
            code = proc.wait(RUN_TIMEOUT_S)
            if code is None:
                proc.kill()
            reports = proc.reports()
            causes = proc.causes() if code != 0 else ""
        if changed := topic_changed(scenario, "during the crash-free run"):
            shutil.rmtree(folder, ignore_errors=True)  # not kept: its batches are not the topic's
            return {"key": key, "folder": str(folder), "exit": code, "error": changed, "cached": False, "commits": [],
                    "topic_changed": True}
        found = {"key": key, "folder": str(folder), "exit": code, "seconds": round(time.monotonic() - started, 3),
                 "sink": next((e["sink"] for e in reports if e["event"] == "user_query"), None),
                 "commits": _commits(roots), "watermarks": recorded_watermarks(roots["checkpoint"]),
                 "stateful": (roots["checkpoint"] / "state").is_dir()}
        errors = [e["error"] for e in reports if e["event"] == "error"]
        if code != 0 or errors:
            reason = errors[0] if errors else f"no exit within {RUN_TIMEOUT_S:g} s" if code is None else f"exit {code}"
            found["error"] = f"{causes}\n{reason}".strip()
        else:
            found["rows"] = config["user"]["rows"]
            found["state"] = config["user"]["state"]
        kept.write_text(json.dumps(found, indent=2))
        return {**found, "cached": False}


def _rows(path: str | Path, key: tuple[str, ...]) -> Counter:
    """The output rows (JSON lines, keys sorted), whole or only the ``key`` columns, as a multiset."""
    text = Path(path).read_text() if Path(path).exists() else ""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if key:
        return Counter(json.dumps({k: r.get(k) for k in key}, sort_keys=True) for r in rows)
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


# -- one scenario ----------------------------------------------------------------------------------------------


def _read_state(path: str | None) -> dict | None:
    if not path or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text())


def compare_state(expected: dict | None, observed: dict | None, seq: int | None = None,
                  shown: int = 3) -> tuple[list[Violation], str]:
    """The state read back after the last batch of the run after the kills (``observed``) against the crash-free
    run's (``expected``), both as :func:`eos_harness.spark.user_app.read_state` wrote them: each operator's store
    as a multiset of key and value rows. A difference is a ``state_matches_crash_free`` violation naming the
    operator, store and batch and a few differing rows. Returns the violations and the check's status: ``pass``,
    ``fail``, or ``not exercised (why)`` when nothing could be compared (no state read, different batches, no
    operator read on both sides); operators not read are named in it."""
    if expected is None or observed is None:
        return [], "not exercised (the state was not read back " + \
            ("in the crash-free run)" if expected is None else "after the last run)")
    if expected.get("batch") != observed.get("batch"):
        return [], (f"not exercised (the last batch differs: {observed.get('batch')} after the kills, "
                    f"{expected.get('batch')} crash-free)")
    batch = expected["batch"]
    if expected.get("error") or observed.get("error"):
        return [], f"not exercised ({expected.get('error') or observed.get('error')})"

    def by_store(state: dict) -> dict:
        return {(o["operator"], o["store"]): o for o in state.get("operators", [])}

    exp, obs = by_store(expected), by_store(observed)
    if not exp and not obs:
        return [], "not exercised (the query keeps no state)"
    violations: list[Violation] = []
    compared, skipped = 0, []
    for store in sorted(set(exp) | set(obs)):
        e, o = exp.get(store), obs.get(store)
        label = f"operator {store[0]} ({(e or o)['name']}) store {store[1]} at batch {batch}"
        if e is None or o is None:
            violations.append(Violation("state_matches_crash_free", label, "present" if e else "absent",
                                        "present" if o else "absent", seq))
            continue
        if "rows" not in e or "rows" not in o:
            skipped.append(f"{label}: {e.get('not_read') or o.get('not_read')}")
            continue
        compared += 1
        want, got = Counter(e["rows"]), Counter(o["rows"])
        if want == got:
            continue
        missing, extra = sorted((want - got).elements()), sorted((got - want).elements())
        violations.append(Violation(
            "state_matches_crash_free", label,
            f"{sum(want.values())} rows (crash-free run); missing after the kills: {missing[:shown]}"
            + (f" and {len(missing) - shown} more" if len(missing) > shown else ""),
            f"{sum(got.values())} rows; not in the crash-free state: {extra[:shown]}"
            + (f" and {len(extra) - shown} more" if len(extra) > shown else ""), seq))
    if violations:
        return violations, "fail"
    if not compared:
        return [], "not exercised (" + "; ".join(skipped) + ")"
    return [], "pass" + (f" (not read: {'; '.join(skipped)})" if skipped else "")


def _guarantee(scenario: UserScenario, sink: str | None) -> str:
    if scenario.guarantee:
        return scenario.guarantee
    return "at-least-once" if sink == "kafka" else "exactly-once"


def run_user_scenario(scenario: UserScenario, run_dir: Path, reference_root: Path | None = None,
                      faults_must_fire: bool = True) -> dict:
    """Run ``scenario`` in ``run_dir`` and judge it against the crash-free run (kept under ``reference_root``,
    by default ``run_dir``); returns the verdict object (also ``run_dir/verdict.json``)."""
    started = time.monotonic()
    started_at = round(time.time(), 3)
    run_dir = claim(Path(run_dir))
    if scenario.kafka and scenario.topic is None:  # not read by the command (a fixture's, an API caller's)
        scenario = scenario.resolved()
    if changed := topic_changed(scenario, "before this scenario"):
        return {**scenario.header(), "verdict": ERROR, "error": changed, "violations": [], "crash_points": [],
                "crash_windows": [], "seconds": round(time.monotonic() - started, 3), "started_at": started_at}
    ref = reference(scenario, Path(reference_root or run_dir), scenario.module_file)
    base = {**scenario.header(ref.get("sink") or "?"), "sink_guarantee": _guarantee(scenario, ref.get("sink")),
            "reference": {k: ref.get(k) for k in ("folder", "seconds", "cached", "commits", "exit")}}
    refused = ref.get("error") and not ref.get("commits") and refused_configuration(ref["error"])
    if refused:  # the query does not run in this configuration: nothing to kill, nothing broken
        return {**base, "verdict": NOT_APPLICABLE, "reason": f"Spark refuses this state configuration for the "
                f"query: {refused}", "violations": [], "crash_points": [], "crash_windows": [], "seconds": 0.0,
                "started_at": started_at}
    if ref.get("error"):
        return {**base, "verdict": ERROR, "violations": [], "crash_points": [], "crash_windows": [],
                "error": ref["error"] if ref.get("topic_changed") else
                f"the crash-free run of the query failed, so there is nothing to judge against: {ref['error']}",
                "seconds": round(time.monotonic() - started, 3), "started_at": started_at}
    kinds = {parse_target(t).kind for t in scenario.schedule}
    if "state" in kinds and not ref["stateful"]:
        return {**base, "verdict": NOT_APPLICABLE, "reason": "the query keeps no state: no state@N window",
                "violations": [], "crash_points": [], "crash_windows": [], "seconds": 0.0, "started_at": started_at}
    _copy_input(scenario, run_dir / "input")
    roots = _roots(run_dir)
    runs, crash_windows, events = _run_all(scenario, run_dir, roots, started)
    result = _judge(scenario, base, ref, runs, crash_windows, roots, events)
    if changed := topic_changed(scenario, "during this scenario"):  # its verdict would judge other batches
        result.update(verdict=ERROR, error=changed, judged_verdict=result["verdict"])
    result.update({"runs": runs, "seconds": round(time.monotonic() - started, 3), "started_at": started_at})
    (run_dir / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    result["history"] = str(run_dir / "history.jsonl")
    if faults_must_fire:
        result = unfired_is_error(result)
    (run_dir / "verdict.json").write_text(json.dumps(result, indent=2))
    return result


def _run_all(scenario: UserScenario, run_dir: Path, roots: dict[str, Path],
             started: float) -> tuple[list[dict], list[dict], list[dict]]:
    """One run per scheduled kill and one more to the end, on the same checkpoint (and once more after a run
    Spark failed that had committed a batch: the output after Spark's own recovery is judged too)."""
    targets = [parse_target(t) for t in scenario.schedule] + [None]
    runs: list[dict] = []
    crash_windows: list[dict] = []
    events: list[dict] = []
    killed_at: float | None = None
    for number, target in enumerate(targets):
        name = f"run-{number}"
        config = _config(scenario, run_dir, name, read_output=target is None)
        run: dict = {"run": number, "target": str(target) if target else None}
        driver = run_driver(config, run_dir, name, roots, target, started)
        proc = driver.process
        run["seq"] = len(events)
        events.append({"seq": len(events), "type": "start", "run": number, "target": run["target"],
                       "at": round(driver.started - started, 3)})
        if driver.hung:
            run["error"] = driver.hung
        code = driver.code
        errors = [e["error"] for e in proc.reports() if e["event"] == "error"]
        if errors and not driver.killed:
            causes = proc.causes()
            run["error"] = f"{causes}\n{errors[0]}".strip()
        elif code not in (0, None) and not driver.killed:
            run["log_tail"] = proc.log_tail()
        run["exit"] = code
        for at, label, rel in driver.file_events:
            events.append({"seq": len(events), "type": "file", "run": number, "at": at, "root": label, "path": rel})
        if driver.first_new_commit is not None:
            run["first_commit_s"] = driver.first_commit_s(killed_at, started)
        if driver.killed:
            run["killed"] = True
            killed_at = driver.killed["at"]
            crash = driver.crash(number)
            crash_windows.append(crash)
            events.append({"seq": len(events), "type": "crash", **crash, "at": killed_at})
        else:
            killed_at = None
        run["seconds"] = round(time.monotonic() - proc.started, 3)
        if target is None:
            run["rows"] = config["user"]["rows"]
            run["state"] = config["user"]["state"]
        runs.append(run)
        if code not in (0, None) and not driver.killed:
            if run.get("first_commit_s") is not None and not any(r.get("recovery") for r in runs):
                targets.append(None)
                runs[-1]["restarted_after_error"] = True
                continue
            break
    for number, run in enumerate(runs):
        if number >= len(scenario.schedule) + 1:
            run["recovery"] = True
    return runs, crash_windows, events


def _orphans(output: Path) -> list[str]:
    """Part files of a file sink on disk that its metadata log does not name."""
    log = output / "_spark_metadata"
    if not log.is_dir():
        return []
    named: set[str] = set()
    for entry in log.iterdir():
        if entry.name.startswith(".") or not entry.name.split(".")[0].isdigit():
            continue
        for line in entry.read_text(errors="replace").splitlines()[1:]:
            with contextlib.suppress(ValueError, KeyError):
                named.add(Path(json.loads(line)["path"].removeprefix("file:")).name)
    return sorted(p.name for p in output.glob("part-*") if not p.name.endswith(".crc") and p.name not in named)


def compare_output(expected: Counter, observed: Counter, guarantee: str, crash_windows: list[dict],
                   seq: int | None = None) -> tuple[list[Violation], dict]:
    """The output after the kills (``observed``) against the crash-free run's (``expected``), both multisets of
    rows. A row lost is ``no_loss``; a row the crash-free run never output is ``exactly_once_output`` (extra);
    a row more often than in the crash-free run is a duplicate, counted and attributed to the crash windows,
    an ``exactly_once_output`` violation (``strict_only`` for a sink declared ``at-least-once``).
    Returns the violations and ``{"count", "windows", "by_crash"}``."""
    violations: list[Violation] = []
    total = 0
    explained = ", ".join(f"{c['window']} of batch {c['batch']}" for c in crash_windows) or "no crash"
    for row in sorted(set(expected) | set(observed)):
        exp, obs = expected[row], observed[row]
        if obs == exp:
            continue
        if obs < exp:
            violations.append(Violation("no_loss", row, f"{exp}× (crash-free run)", f"{obs}× (lost)", seq))
        elif exp == 0:
            violations.append(Violation("exactly_once_output", row, "0× (not in the crash-free output)",
                                        f"{obs}× (extra)", seq))
        else:
            total += obs - exp
            violations.append(Violation("exactly_once_output", row, f"{exp}× (crash-free run)",
                                        f"{obs}× (duplicate, after {explained})", seq,
                                        strict_only=guarantee == "at-least-once"))
    duplicates: dict = {"count": total, "windows": sorted({c["window"] for c in crash_windows}) if total else []}
    if total:
        duplicates["by_crash"] = [{"run": c["run"], "target": c["target"], "after": c["after"], "window": c["window"],
                                   "batch": c["batch"], "count": total} for c in crash_windows]
    return violations, duplicates


def compare_states(expected: dict | None, observed: dict | None, seq: int | None = None,
                   watermarks: dict[int, tuple[int, int]] | None = None) -> tuple[list[Violation], str]:
    """The state after each committed batch of the run after the kills (``observed``) against the crash-free run's
    (``expected``), both as :func:`eos_harness.spark.user_app.read_state` wrote them (``batches``: one state per
    batch), compared batch by batch (:func:`compare_state`) in order up to the first batch where they differ:
    its violations, each naming that batch as the first whose state differs. Batches read on one side only are
    not compared (a batch not committed after the kills is ``restart_liveness``'s), nor batches whose watermark
    Spark recorded differs from the crash-free run's (``watermarks``: batch → (recorded, crash-free) ms): the
    watermark decides what state is evicted, so they are judged with the watermarks Spark recorded, by the
    batches after them. Returns the violations and the check's status: ``pass (batches A..B…)``,
    ``fail (the state first differs after batch N)``, or ``not exercised (why)``."""
    if expected is None or observed is None:
        return compare_state(expected, observed, seq)
    if expected.get("error") or observed.get("error"):
        return [], f"not exercised ({expected.get('error') or observed.get('error')})"
    exp = {b["batch"]: b for b in expected.get("batches", [])}
    obs = {b["batch"]: b for b in observed.get("batches", [])}
    common = sorted(set(exp) & set(obs))
    if not common:
        if not exp and not obs and not expected.get("operators") and not observed.get("operators"):
            return [], "not exercised (the query keeps no state)"
        return [], (f"not exercised (no batch whose state was read in both runs: {sorted(obs)} after the kills, "
                    f"{sorted(exp)} crash-free)")
    equal: list[int] = []
    unread: list[str] = []
    moved = {n: w for n, w in (watermarks or {}).items() if n in common}
    for batch in common:
        if batch in moved:
            continue
        found, status = compare_state(exp[batch], obs[batch], seq)
        if found:
            since = f"; its state after batches {_span(equal)} equal" if equal else ""
            return ([replace(v, key=f"{v.key} (the first batch whose state differs{since})") for v in found],
                    f"fail (the state first differs after batch {batch})")
        if status.startswith("pass"):
            equal.append(batch)
        elif status not in unread:
            unread.append(status)
    skipped = "; ".join(f"batch {n} not compared: its watermark {w[0]} ms recorded, {w[1]} ms crash-free"
                        for n, w in sorted(moved.items()))
    if not equal:
        return [], unread[0] if unread else f"not exercised ({skipped or 'no batch compared'})"
    notes = [s.split(" (not read: ", 1)[1].rstrip(")") for s in unread if " (not read: " in s]
    return [], (f"pass (batches {_span(equal)}" + (f"; {skipped}" if skipped else "") + ")"
                + (f" (not read: {notes[0]})" if notes else ""))


def _span(batches: list[int]) -> str:
    """``[0, 1, 2, 4]`` → ``0..2, 4``."""
    parts: list[str] = []
    for n in batches:
        if parts and parts[-1].split("..")[-1] == str(n - 1):
            parts[-1] = f"{parts[-1].split('..')[0]}..{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts)


def _judge(scenario: UserScenario, base: dict, ref: dict, runs: list[dict], crash_windows: list[dict],
           roots: dict[str, Path], events: list[dict]) -> dict:
    violations: list[Violation] = []
    violations += check_restarts(runs, RESTART_BOUND_S)
    commits = _commits(roots)
    expected_last = ref["commits"][-1] if ref["commits"] else -1
    last = commits[-1] if commits else -1
    if last < expected_last:
        violations.append(Violation("restart_liveness", "input", f"every batch 0..{expected_last} committed (as "
                                    "the crash-free run)", f"last committed batch {last}", None))
    # watermarks: never ahead of the crash-free run's (a lag is reported: Spark may then count late records)
    recorded = recorded_watermarks(roots["checkpoint"])
    plain = {int(k): v for k, v in ref["watermarks"].items()}
    ahead = [n for n in recorded if n in plain and recorded[n] > plain[n]]
    lagging = [n for n in recorded if n in plain and recorded[n] < plain[n]]
    violations += [Violation("watermark_not_ahead", f"batch {n}", f"<= {plain[n]} ms (crash-free run)",
                             f"{recorded[n]} ms recorded in offsets/{n}", None) for n in ahead]
    final = runs[-1]
    guarantee = base["sink_guarantee"]
    duplicates: dict = {"count": 0, "windows": []}
    orphans = _orphans(roots["output"]) if (base["sink"] or "") != "foreachBatch" else []
    compared = None
    if final.get("exit") == 0 and final.get("rows"):
        expected, observed = _rows(ref["rows"], scenario.key), _rows(final["rows"], scenario.key)
        seq = len(events)
        events.append({"seq": seq, "type": "output", "rows": sum(observed.values()),
                       "crash_free_rows": sum(expected.values()), "file": final["rows"]})
        found, duplicates = compare_output(expected, observed, guarantee, crash_windows, seq)
        violations += found
        compared = sum(expected.values())
    state_check = "not exercised (the last run did not end)"
    if final.get("exit") == 0 and final.get("state"):
        moved = {n: (recorded[n], plain[n]) for n in recorded if n in plain and recorded[n] != plain[n]}
        found, state_check = compare_states(_read_state(ref.get("state")), _read_state(final["state"]), len(events),
                                            moved)
        if found:
            events.append({"seq": len(events), "type": "state", "batch": int(state_check.rsplit(" ", 1)[1].rstrip(")")),
                           "file": final["state"], "crash_free_file": ref.get("state")})
        violations += found
    failed = {v.check for v in violations if v.counts(False)}
    unjudged = None if compared else ("not exercised (the crash-free run output no row)" if compared == 0 else
                                      "not exercised (the last run did not read its output back)")
    targeted = [r for r in runs if r["target"] is not None]
    not_fired = [r["target"] for r in targeted if not r.get("killed")] + list(scenario.schedule[len(targeted):])
    return {
        **base,
        "verdict": verdict_of(violations, False),
        "violations": [v.to_json() for v in violations],
        "crash_points": [c["target"] for c in crash_windows],
        "crash_windows": crash_windows,
        "not_fired": not_fired,
        "checks": {"restart_liveness": "fail" if "restart_liveness" in failed else "pass",
                   "exactly_once_output": unjudged or ("fail" if "exactly_once_output" in failed else "pass")
                   if guarantee == "exactly-once" else "n/a",
                   "no_loss": unjudged or ("fail" if "no_loss" in failed else "pass"),
                   # how many rows of the crash-free output the comparison had (0: the output judged nothing)
                   "output_rows_compared": compared,
                   "state_matches_crash_free": state_check,
                   "orphan_files": {"count": len(orphans), "files": orphans[:20]}},
        "duplicates": duplicates,
        "watermarks": {"recorded": recorded, "uninterrupted": plain, "lagging_batches": lagging,
                       "ahead_batches": ahead} if recorded and plain else {},
        "last_committed_batch": last,
    }


def user_error_result(scenario: UserScenario, exc: BaseException) -> dict:
    return {**scenario.header(), "verdict": ERROR, "error": error_reason(exc), "violations": [], "crash_points": [],
            "crash_windows": []}


# -- a campaign: every commit window under every state configuration ------------------------------------------

USER_SUBJECT = "user"  # the subject (``sink``) a campaign of a user's query tallies


def user_plan(seed: int, template: UserScenario, count: int | None = None,
              configurations: Collection[tuple[str, bool, int]] = STATE_CONFIGURATIONS) -> list[UserScenario]:
    """A campaign of the user's query, in four rounds: each round has every state configuration (of
    ``configurations``, :meth:`~eos_harness.suites.spark.plan.StateChoice.configurations`; default: every one),
    shuffled by ``seed``, each with a commit window of its own (rotated: every window in every round, a configuration
    a new window each round) at a batch drawn with one batch before and one after it; every fifth case gets a second
    kill at a random time (500 to 1000 ms after the restarted run's first offsets file)."""
    rng = random.Random(seed)
    batches = template.batch_count() or 1
    configs = list(configurations)
    rng.shuffle(configs)
    planned = []
    for round_number in range(len(WINDOWS)):
        for position, (provider, changelog, fmt) in enumerate(configs):
            window = WINDOWS[(position + round_number) % len(WINDOWS)]
            batch = rng.randrange(1, batches - 1) if batches >= 3 else rng.randrange(batches)
            schedule = [f"{window}@{batch}"]
            if len(planned) % 5 == 4:
                schedule.append(f"random@{rng.randint(500, 1000)}")
            planned.append(replace(template, provider=provider, changelog=changelog, checkpoint_format=fmt,
                                   schedule=tuple(schedule), seed=rng.randrange(2**31)))
    return planned[:count] if count else planned


def result_of_campaign(result: dict) -> dict:
    """A campaign tallies a user's query as the subject ``user``; the sink its writer named stays in ``sink_kind``."""
    return {**result, "sink_kind": result.get("sink"), "sink": USER_SUBJECT}
