"""The suite contract, and the one registry of suites (after Jepsen's test map: a suite is a value).

A :class:`Suite` says what the suite is called (``--suite NAME``), what it runs on (a store, a window
store, a metadata system, a Spark pipeline, a Kafka cluster), its checks with their meanings (read from
``suites/<package>/checks.py``), the field of a result that names its subject and, for a suite with
campaigns, the key of its campaign's tallies (``summary[tallies]``). Its commands are named, not
imported: ``run`` (one scenario, or the suite's one command) and ``chaos`` (a campaign), as
``module:attribute`` of a click command, so that this module imports no suite and no face.

The contract every suite keeps, so that a campaign is written once (:mod:`eos_harness.suite_campaign`):

- ``suites/<package>/plan.py``: ``campaign(seed, options)``, the campaign's scenarios in order, a pure
  function of the seed and the options (a dict: the suite's :class:`Option` values, and its subjects
  under the key ``tallies``; ``subjects_of(options)``, when defined, decides them from all the options);
  ``expected(subject)``, whether that subject must fail (a mutant) and the
  checks of which one must catch it (any one suffices; empty: any check); ``subjects(given)``, the
  subjects a campaign runs (those given, else its defaults); ``known_subjects()``, those it may be given.
  Optionally ``check_options(options)``: a ValueError for options the suite cannot run with (a usage
  error before anything runs; ``options`` also holds ``refs``, each store resolved at the edge, for a
  suite of stores); ``CONTROLS``: subjects every campaign runs besides those named (Spark's mutant sink,
  which shows its checks can fail); ``runs_alone(scenario)``: a scenario that must run by itself (a
  fault that stops a broker every scenario shares); ``judge(result)``: a result's verdict as the suite
  judges it (Spark: at-least-once duplicates count only under ``--strict``), else the recorded one.
- ``suites/<package>/runner.py``: ``run_one(scenario, directory)``, one scenario run to its complete
  result (``suite``, its subject field, ``expected``, ``verdict``, ``violations``, ``repro``, ``seed``,
  ``seconds``; ``directory`` is the scenario's own, for what it keeps); ``error_result(scenario, exc)``,
  the result of a scenario that could not be run to its end. Optionally ``campaign_session(options,
  say)``, a context manager around the whole campaign (``options`` with the campaign's ``seed`` and
  ``workers``) that yields the options the plan runs with (a broker started once for every scenario), or
  a :class:`CampaignSession` when it found more before the plan (a store's probe);
  ``campaign_fields(campaign)``, what the campaign JSON says besides, from its scenarios (per-store
  metrics; Spark's matrix size); ``CHILDREN_LOG`` (the file in the run directory that the processes its
  scenarios start write to) and ``FATAL`` (exceptions that mean the campaign's input is wrong).
- a suite with ``allowable_name`` (a store suite, whose replays, ``verify`` or ``run``, take ``--allow``):
  ``chaos --allow CHECK`` puts the checks under the option ``allow`` (a list, only when given), its plan runs
  each scenario with them and its runner waives them: its result names them (``allowed``) and how often each
  fired (``waived``), its ``repro`` carries ``--allow``.
- optionally ``suites/<package>/junit.py``: ``campaign_suites(campaign)``, its campaign as JUnit testsuites
  when a testsuite per subject (:func:`eos_harness.junit.tally_suites`) is not what it reports.

The CLI takes its ``run``/``chaos`` dispatch and ``eos-harness suites`` from :data:`SUITES`: a new
suite is one more entry here and its package (``checks.py``, ``plan.py``, ``runner.py``, its pytest
entry), and no command code: a suite whose ``chaos`` is :data:`GENERIC_CHAOS` gets its ``chaos``
command, options included, from its entry.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.models.workloads import CAMPAIGN_WORKLOADS, WORKLOADS
from eos_harness.process.guard import STORE_TIMEOUT_S

__all__ = ["BROKER_FORMS", "GENERIC_CHAOS", "SUITES", "CampaignSession", "Option", "Suite", "suite"]

GENERIC_CHAOS = "eos_harness.faces.chaos:chaos_command_for"  # the chaos command written once, for any suite


@dataclass(frozen=True)
class Option:
    """One of a suite's own campaign options (``--NAME``): its kind (``int``, ``float``, ``text``, ``list``: a
    comma-separated list of names, ``choice``, ``flag``, ``switch``: ``--NAME/--no-NAME``, None when neither is
    given, ``broker``, ``kafka-broker``: a broker that must be Kafka), its default, its help, and for ``int``/``float``
    its lower
    bound, for ``choice``/``list`` the values it may take (empty: any). ``plan``: whether it decides the
    plan (a resumed campaign keeps it); else it may be given anew on ``--resume``."""

    name: str
    kind: str
    default: object
    help: str
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    plan: bool = True
    replay: bool = True  # part of the campaign's replay command (not where it only says where to write)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Suite:
    name: str  # ``--suite NAME``, and the ``suite`` field of its JSON
    title: str
    runs_on: str  # what a user points it at
    package: str  # eos_harness.suites.<package>
    checks_name: str = "CHECKS"  # the checks' table in its checks module (name -> meaning)
    # the table (in its checks module) of the checks ``chaos --allow`` may waive, as ``verify``/``run --allow``
    # do: a difference a user knows about; None: its campaign has no ``--allow`` (its replays could not waive)
    allowable_name: str | None = None
    run: str | None = None  # "module:attribute" of the click command that runs one scenario (or the suite)
    chaos: str | None = None  # … that runs a campaign; None: the suite has none
    subject: str | None = None  # the field of a result naming what it ran (``store``, ``system``, ``sink``)
    tallies: str | None = None  # the key of its campaign summary's tallies (``stores``, ``systems``, ``sinks``)
    pytest_entry: bool = False  # ``pytest --pyargs eos_harness.suites.<package>`` runs it
    options: tuple[Option, ...] = ()  # its own campaign options (a chaos command written once reads them)
    workers: int = 2  # scenarios a campaign runs at once by default
    extras: tuple[str, ...] = ()  # the optional extras it needs installed (``kafka``)
    forks_children: bool = False  # its scenarios run processes forked by the zygote (its socket is under TMPDIR)
    minutes: float | None = 1.0  # a campaign's --minutes when neither it nor --scenarios is given (None: its whole plan)
    coverage: bool = False  # its results name the checks whose condition they met (``exercised``): tallied per subject
    show: str | None = None  # "module:attribute" of a face function printing what its campaign shows besides its tallies
    anywhere: bool = False  # its scenarios run on any machine: ``chaos --engine spark`` runs each as a Spark task
    on_spark: str = "every scenario of its plan"  # what ``--engine spark`` runs of it, when ``anywhere``

    def part(self, module: str):
        """The suite's ``plan`` or ``runner`` module."""
        return importlib.import_module(f"eos_harness.suites.{self.package}.{module}")

    def hook(self, module: str, name: str, default=None):
        """The suite's optional ``name`` in its ``module`` (see the module docstring), else ``default``."""
        try:
            found = self.part(module)
        except ModuleNotFoundError as exc:
            if exc.name != f"eos_harness.suites.{self.package}.{module}":
                raise
            return default
        return getattr(found, name, default)

    def plan(self, seed: int, options: Mapping) -> Iterable:
        """The campaign's scenarios, in order (see the module)."""
        return self.part("plan").campaign(seed, options)

    def run_one(self, scenario, directory: Path) -> dict:
        """One scenario's complete result (see the module)."""
        return self.part("runner").run_one(scenario, directory)

    def checks(self) -> Mapping[str, str]:
        """Each check the suite reports (a violation's ``check``), with the promise it tests."""
        module = importlib.import_module(f"eos_harness.suites.{self.package}.checks")
        return dict(getattr(module, self.checks_name))

    def allowable(self) -> tuple[str, ...]:
        """The checks ``chaos --allow`` may waive on this suite (empty: it has no ``--allow``)."""
        if self.allowable_name is None:
            return ()
        module = importlib.import_module(f"eos_harness.suites.{self.package}.checks")
        return tuple(getattr(module, self.allowable_name))

    def command(self, which: str):
        """The suite's ``run`` or ``chaos`` click command; None when it has none."""
        found = self.function(self.run if which == "run" else self.chaos)
        if found is None:
            return None
        return found if hasattr(found, "params") else found(self)  # a command, or one made for this suite

    def function(self, target: str | None):
        """What a ``module:attribute`` field names (``run``, ``chaos``, ``show``), or None."""
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    @property
    def engines(self) -> dict[str, str]:
        """The engines its campaign runs on (``chaos --engine``), each with what it runs there."""
        local = "every scenario, in a pool of this process"
        return {"local": local, **({"spark": self.on_spark} if self.anywhere and self.chaos else {})}

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "runs_on": self.runs_on,
                "package": f"eos_harness.suites.{self.package}", "subject": self.subject,
                "commands": {"run": self.run is not None, "chaos": self.chaos is not None},
                "engines": self.engines, "pytest_entry": self.pytest_entry, "checks": self.checks(),
                "allowable": list(self.allowable()),
                # its own chaos options (besides the subjects and those of every campaign), with what each does
                "chaos_options": {(f"{o.flag}/--no-{o.flag[2:]}" if o.kind == "switch" else o.flag): o.help
                                  for o in self.options} if self.chaos else {}}


_FACES = "eos_harness.faces"
_EXAMPLES = Option("examples", "int", 10, "Hypothesis examples of each scenario's state machine.", minimum=1)
_STEPS = Option("steps", "int", 25, "Steps per example.", minimum=1)
_STORE_TIMEOUT = Option("store_timeout", "float", STORE_TIMEOUT_S, "Bound on each call into the store (seconds); a "
                        "call that takes longer is a store_hang finding.", minimum=0, plan=False)
BROKER_FORMS = ("embedded (SQLite log) | kafka-local (start a local Kafka on 127.0.0.1) | kafka-local:3 (three brokers) "
                 "| kafka-quorum[:N] (3 dedicated KRaft controllers and N brokers) | kafka://HOST:PORT (a running cluster)")
_KAFKA_BROKER = Option("broker", "kafka-broker", "kafka-local", "kafka-local | kafka-local:3 | kafka-quorum[:N] | "
                       "kafka://HOST:PORT: started once for the campaign (the embedded broker is not Kafka).")
_EMBEDDED_ONLY = "every scenario, on the embedded broker only: a Kafka --broker is refused (usage error)"
SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("lifecycle", "EOS task lifecycle", "a store (key-value, or window with a windowed workload) under the "
          "EOS task runtime, its task killed between commit steps", "lifecycle",
          run=f"{_FACES}.lifecycle:run_command", chaos=GENERIC_CHAOS, subject="store", tallies="stores",
          pytest_entry=True, forks_children=True, coverage=True, show=f"{_FACES}.lifecycle:show_campaign", anywhere=True,
          allowable_name="WAIVABLE",
          on_spark="every scenario: on the embedded broker, or on a Kafka --broker the executors reach (one started "
                   "here, on 127.0.0.1, with a master on this machine); a scenario whose fault kills or stops a broker "
                   "runs in the driver, which started it",
          options=(
              Option("workloads", "list", tuple(CAMPAIGN_WORKLOADS), "Comma-separated workloads (global not on a "
                     "store that declares itself a task's); "
                     f"{', '.join(sorted(set(WORKLOADS) - set(CAMPAIGN_WORKLOADS)))} only when named: global is a "
                     "global store fed by 3 changelog partitions.", choices=tuple(WORKLOADS)),
              Option("broker", "broker", "embedded", f"{BROKER_FORMS}; on kafka-local or kafka-quorum the campaign "
                     "adds broker faults (broker-kill, broker-pause, coordinator-kill, txn-timeout)."),
              _STORE_TIMEOUT)),
    Suite("conformance", "store conformance (KIP-844/KIP-892)", "a key-value store (a built-in name or "
          "module:function)", "conformance", run=f"{_FACES}.cli:verify_command", chaos=GENERIC_CHAOS,
          subject="store", tallies="stores", pytest_entry=True, options=(_EXAMPLES, _STEPS, _STORE_TIMEOUT),
          forks_children=True, anywhere=True, allowable_name="ALLOWABLE"),
    Suite("offsets", "offsets in the store (KIP-892/KIP-1035)", "a key-value store that manages its offsets (run "
          "by verify beside conformance)", "offsets", checks_name="PROMISES", run=f"{_FACES}.cli:verify_command",
          chaos=GENERIC_CHAOS, subject="store", tallies="stores", pytest_entry=True, options=(_STORE_TIMEOUT,),
          forks_children=True, anywhere=True, allowable_name="PROMISES"),
    Suite("windows", "window store (KIP-428)", "a window store (a built-in window store or module:function)",
          "windows", run=f"{_FACES}.cli:verify_command", chaos=GENERIC_CHAOS, subject="store", tallies="stores",
          pytest_entry=True, options=(_EXAMPLES, _STEPS, _STORE_TIMEOUT), forks_children=True, anywhere=True,
          allowable_name="WAIVABLE"),
    Suite("metadata", "metadata transactions (KIP-868)", "a metadata system: the controller and its readers over "
          "a metadata log (embedded or Kafka), or a mutant", "metadata",
          run=f"{_FACES}.metadata:metadata_run_command", chaos=GENERIC_CHAOS,
          subject="system", tallies="systems", pytest_entry=True, options=(
              Option("broker", "broker", "embedded", "Where the metadata log lives: embedded (a topic of the SQLite "
                     "log) | kafka-local (start a local Kafka on 127.0.0.1) | kafka-quorum[:N] (start 3 dedicated "
                     "KRaft controllers and N brokers) | kafka://HOST:PORT (a running cluster)."),),
          forks_children=True, anywhere=True, on_spark=_EMBEDDED_ONLY),
    Suite("spark", "Spark Structured Streaming", "a Spark pipeline (pipeline x sink x state store x checkpoint "
          "format), its driver killed in each crash window", "spark",
          run=f"{_FACES}.spark:spark_run_command", chaos=GENERIC_CHAOS, subject="sink", tallies="sinks",
          pytest_entry=True, extras=("spark",), minutes=None, show=f"{_FACES}.spark:show_campaign", options=(
              Option("pipeline", "text", None, "Your own query as module:function (build(source) returns a "
                     "DataStreamWriter, not started): killed in every commit window under every state configuration "
                     "(or those --state-provider, --checkpoint-format, --changelog/--no-changelog choose), judged "
                     "against its own crash-free run (then --sinks is not given: its subject is 'user')."),
              Option("input", "text", None, "Your query's input: a directory of JSON-lines files, one micro-batch "
                     "each, in name order; or a Kafka topic, kafka://HOST:PORT/TOPIC (read from its earliest offsets, "
                     "read_committed; it must not change while the campaign runs)."),
              Option("schema", "text", None, "Your query's input schema as Spark DDL (default: inferred from the "
                     "first input file). With a Kafka topic: each value parsed as a JSON object of this schema "
                     "(default: Spark's Kafka columns)."),
              Option("max_offsets_per_trigger", "int", None, "A Kafka topic as input: Spark's maxOffsetsPerTrigger, "
                     "the same in every run (default: the topic's offsets in 5 micro-batches).", minimum=1),
              Option("key", "text", None, "Compare your query's output by these columns only (comma-separated)."),
              Option("read_output", "text", None, "module:function(spark, output_dir) reading your query's output "
                     "back (default: read_output in your query's module, else the file sink's own format)."),
              Option("sink_guarantee", "choice", None, "What your query's sink promises (default: at least once for "
                     "the Kafka sink, else exactly once).", choices=("exactly-once", "at-least-once")),
              Option("state_provider", "choice", None, "Only the state configurations of this state store provider, "
                     "as run --state-provider (default: every one: hdfs, and rocksdb with and without changelog "
                     "checkpointing).", choices=("hdfs", "rocksdb")),
              Option("checkpoint_format", "choice", None, "Only the state configurations of this checkpoint format, "
                     "as run --checkpoint-format (default: 1 and 2; the HDFS provider has format 1 only).",
                     choices=("1", "2")),
              Option("changelog", "switch", None, "Only RocksDB with changelog checkpointing (--changelog, as run's) "
                     "or only the configurations without it (--no-changelog; default: both)."),
              Option("source", "choice", "file", "Where the pipelines read their input.", choices=("file", "kafka")),
              Option("strict", "flag", False, "At-least-once duplicates fail the verdict."),
              Option("broker", "kafka-broker", "kafka-local", "Kafka for --source kafka / --sinks kafka: kafka-local "
                     "(one KRaft broker on 127.0.0.1 started for the campaign and stopped at its end; kafka-local:N "
                     "for N brokers), kafka-quorum[:N] (3 dedicated KRaft controllers and N brokers) or "
                     "kafka://HOST:PORT (a broker you run)."),
              Option("export_repro", "text", None, "When a scenario's verdict names a failure in Spark itself (a "
                     "restart after a kill fails with Spark's error), write the first one's standalone PySpark "
                     "reproduction into this new (or empty) directory, as run --export-repro does.", plan=False,
                     replay=False))),
    Suite("kafka-log", "Kafka's transactional log", "a Kafka cluster (kafka-local, kafka-quorum or kafka://)",
          "kafka_log", checks_name="ANOMALIES", run=f"{_FACES}.kafka_log:kafka_log_command", chaos=GENERIC_CHAOS,
          subject="system", tallies="systems", pytest_entry=True, extras=("kafka",), workers=1, anywhere=True,
          on_spark="every scenario, a client of a Kafka --broker the executors reach (one started here, on 127.0.0.1, "
          "with a master on this machine); its history written as Parquet for eos-harness check", options=(
              Option("transactions", "int", 30, "Transactions of each scenario's workload.", minimum=1),
              Option("partitions", "int", 2, "Partitions of each scenario's topic.", minimum=1),
              Option("abort_ratio", "float", 0.3, "About this share of the transactions is aborted.", minimum=0),
              _KAFKA_BROKER)),
    Suite("kafka-streams", "Kafka Streams applications (exactly_once_v2, KIP-892)", "a real Kafka Streams 4.4.0 "
          "application (a changelogged key-value aggregate, transactional state stores on or off, RocksDB or in "
          "memory) killed at named steps of Streams' own commit, or a mutant", "kafka_streams",
          run=f"{_FACES}.kafka_streams:kafka_streams_command", chaos=GENERIC_CHAOS, subject="system",
          tallies="systems", pytest_entry=True, extras=("kafka",), workers=1, coverage=True,
          show=f"{_FACES}.kafka_streams:show_campaign", options=(
              Option("kills", "int", 2, "Instances SIGKILLed at a named step in each scenario (each restarted).",
                     minimum=0),
              Option("records", "int", 60, "Input records per instance.", minimum=1),
              Option("memtable_kb", "int", 64, "RocksDB's write buffer in KiB (0: Kafka Streams' default).",
                     minimum=0),
              Option("liveness", "float", 60.0, "Bound (s) for an instance to reach RUNNING and process its input.",
                     minimum=1),
              Option("threads", "int", 1, "Stream threads per instance (num.stream.threads).", minimum=1),
              Option("instances", "int", 1, "Instances at once (1 or 2): with 2, a second one runs beside each "
                     "killed one.", minimum=1),
              Option("broker_faults", "int", 0, "Broker faults drawn in each scenario besides its kills "
                     "(broker-kill or broker-pause, once a drawn input record is acknowledged: run's --crash-at); "
                     "needs --broker kafka-local or kafka-quorum.", minimum=0),
              _KAFKA_BROKER)),
    Suite("kafka-metadata", "KIP-868 on a real KRaft quorum", "a KRaft quorum started here, its active controller "
          "killed while topics are created", "kafka_metadata", run=f"{_FACES}.kafka_metadata:kafka_metadata_command",
          chaos=GENERIC_CHAOS, subject="system", tallies="systems", extras=("kafka",), workers=1, options=(
              Option("topics", "int", 2, "Topics created while the active controller is killed.", minimum=0),
              Option("partitions", "int", 100, "Partitions of each topic.", minimum=1),
              Option("controller_kills", "int", 1, "SIGKILLs of the active controller while topics are created.",
                     minimum=0),
              Option("bootstrap_kills", "int", 0, "Fresh quorums whose first leader is SIGKILLed as it writes the "
                     "bootstrap records.", minimum=0),
              Option("brokers", "int", 3, "Brokers of each quorum.", minimum=1),
              Option("heap", "text", "384m", "JVM heap of each node."))),
)}

@dataclass
class CampaignSession:
    """What a suite's ``runner.campaign_session`` found before its plan, besides the options the plan runs
    with: ``results`` (a store's probe that found it broken: first in the campaign's scenarios, never run
    again), the subjects ``left_out`` (subject -> why none of its scenarios could catch what it is expected
    to fail on: not judged), per subject the checks that cannot fire on it with why (``not_applicable``),
    and what the campaign JSON says besides (``fields``: the broker faults it plans, warnings)."""

    options: dict
    results: list[dict] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    not_applicable: dict[str, dict[str, str]] = field(default_factory=dict)
    fields: dict = field(default_factory=dict)


def suite(name: str) -> Suite:
    """The suite called ``name``; a ValueError naming the suites for any other name."""
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"no suite {name!r}; one of: {', '.join(SUITES)}") from None
