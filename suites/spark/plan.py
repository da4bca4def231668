"""The Spark suite's plan: the matrix of (pipeline, sink, state configuration, format, crash window), seeded."""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from eos_harness.commands import command_line
from eos_harness.faults import kinds
from eos_harness.faults.spark import parse_target
from eos_harness.spark.pipelines import (
    PIPELINES,
    SINKS,
    STATE_CONFIGURATIONS,
    unsupported,
    unsupported_state,
    validate_state_options,
)
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, Violation, verdict_of

STATE_CONFIGS = (("hdfs", False), ("rocksdb", False), ("rocksdb", True))  # provider, changelog checkpointing
CONTROL_CONFIGURATION = ("rocksdb", False, 1)  # the mutant sink's, unless a campaign's choice leaves it out


WINDOWS = ("offsets", "state", "sink", "commit")


RANDOM = "random"  # the kill at a random time, added to every fifth case


def _hit(rng: random.Random, kind: str, batches: int) -> int:
    """The batch id (or milliseconds) of a kill, drawn by the rule of its kind's registry entry."""
    return kinds.named(kind, kinds.SPARK).draw_hit(rng, kind, batches)


MUTANT_SINK = "foreach-nocheck"


MATRIX_SINKS = ("file", "foreach", "kafka")


MIN_BATCHES = 3  # a kill hits a batch in 1 .. batches-2: one batch before it, one after it


@dataclass(frozen=True)
class SparkScenario:
    pipeline: str
    sink: str
    provider: str = "rocksdb"
    checkpoint_format: int = 1
    changelog: bool = False
    source: str = "file"
    schedule: tuple[str, ...] = ()
    seed: int = 0
    batches: int = 5
    strict: bool = False
    kafka: str | None = field(default=None, compare=False)  # the bootstrap servers of a campaign's Kafka, if any

    def validate(self) -> None:
        if self.pipeline not in PIPELINES:
            raise ValueError(f"unknown pipeline {self.pipeline!r}; known: {', '.join(PIPELINES)}")
        if self.sink not in SINKS:
            raise ValueError(f"unknown sink {self.sink!r}; known: {', '.join(SINKS)}")
        validate_state_options(self.provider, self.checkpoint_format, self.changelog)
        if self.source not in ("file", "kafka"):
            raise ValueError(f"unknown source {self.source!r}: use file or kafka")
        if self.batches < MIN_BATCHES:
            raise ValueError(f"--batches must be at least {MIN_BATCHES}, got {self.batches}")
        for target in self.schedule:
            parse_target(target)

    @property
    def uses_kafka(self) -> bool:
        return self.source == "kafka" or self.sink == "kafka"

    @property
    def configuration(self) -> dict:
        return {"state_provider": self.provider, "changelog_checkpointing": self.changelog,
                "checkpoint_format": self.checkpoint_format, "source": self.source}

    def header(self) -> dict:
        """The fields every verdict of this scenario starts with."""
        return {"suite": "spark", "pipeline": self.pipeline, "sink": self.sink,
                "expected": "caught" if self.sink == MUTANT_SINK else "pass", "configuration": self.configuration,
                "seed": self.seed, "schedule": list(self.schedule), "strict": self.strict, "repro": self.repro()}

    def repro(self) -> str:
        words: list[object] = ["run", "--suite", "spark", "--pipeline", self.pipeline, "--sink", self.sink,
                               "--state-provider", self.provider, "--checkpoint-format", self.checkpoint_format]
        if self.changelog:
            words.append("--changelog")
        if self.source != "file":
            words += ["--source", self.source]
        if self.schedule:
            words += ["--crash-at", ",".join(self.schedule)]
        if self.batches != 5:
            words += ["--batches", self.batches]
        if self.strict:
            words.append("--strict")
        return command_line(*words, "--seed", self.seed)


@dataclass(frozen=True)
class StateChoice:
    """The state configurations a campaign runs: ``chaos --state-provider``, ``--checkpoint-format`` and
    ``--changelog``/``--no-changelog`` (as ``run`` spells them), each given narrowing :data:`STATE_CONFIGURATIONS` to those
    that match it; none given: every one (the plan of a seed as it always was)."""

    provider: str | None = None
    checkpoint_format: int | None = None
    changelog: bool | None = None

    @classmethod
    def of(cls, options: Mapping) -> StateChoice:
        """The choice of a campaign's options (``state_provider``, ``checkpoint_format``, ``changelog``)."""
        fmt = options.get("checkpoint_format")
        return cls(options.get("state_provider"), None if fmt is None else int(fmt), options.get("changelog"))

    def admits(self, provider: str, changelog: bool, checkpoint_format: int) -> bool:
        return ((self.provider is None or provider == self.provider)
                and (self.checkpoint_format is None or checkpoint_format == self.checkpoint_format)
                and (self.changelog is None or changelog == self.changelog))

    def flags(self) -> str:
        """The options given, as the command line spells them."""
        words = [f"--state-provider {self.provider}"] if self.provider is not None else []
        if self.checkpoint_format is not None:
            words.append(f"--checkpoint-format {self.checkpoint_format}")
        if self.changelog is not None:
            words.append("--changelog" if self.changelog else "--no-changelog")
        return " ".join(words)

    def configurations(self) -> tuple[tuple[str, bool, int], ...]:
        """The configurations of :data:`STATE_CONFIGURATIONS` chosen, in its order; a ValueError (a usage error, before
        anything runs) when the choice leaves none, naming why."""
        chosen = tuple(c for c in STATE_CONFIGURATIONS if self.admits(*c))
        if chosen:
            return chosen
        provider = self.provider or "rocksdb"
        try:
            validate_state_options(provider, self.checkpoint_format or 1, bool(self.changelog))
            why = f"Spark refuses it: {unsupported_state(provider, self.checkpoint_format or 1)}"
        except ValueError as exc:
            why = str(exc)
        raise ValueError(f"{self.flags()}: no state configuration to run ({why}); the state configurations: hdfs "
                         "(format 1), rocksdb with --changelog or --no-changelog (format 1 or 2)")


def matrix(source: str = "file", sinks: tuple[str, ...] = MATRIX_SINKS,
           configurations: Collection[tuple[str, bool, int]] = STATE_CONFIGURATIONS) -> list[dict]:
    """Every (pipeline, sink, state configuration, checkpoint format, crash window) Spark accepts, of the state
    ``configurations`` given ((provider, changelog checkpointing, checkpoint format); default: every one)."""
    cases = []
    for pipeline in PIPELINES:
        for sink in sinks:
            for provider, changelog in STATE_CONFIGS:
                for fmt in (1, 2):
                    if unsupported(pipeline, sink, provider, fmt) or (provider, changelog, fmt) not in configurations:
                        continue
                    for window in WINDOWS:
                        cases.append({"pipeline": pipeline, "sink": sink, "provider": provider, "changelog": changelog,
                                      "checkpoint_format": fmt, "window": window, "source": source})
    return cases


def control(seed: int, source: str = "file", batches: int = 5,
            configurations: Collection[tuple[str, bool, int]] = STATE_CONFIGURATIONS) -> SparkScenario:
    """The campaign's first scenario: the mutant sink (it shows the checks can fail), killed after its sink of batch 2,
    in :data:`CONTROL_CONFIGURATION`, or the first of the state ``configurations`` when they leave that out."""
    provider, changelog, fmt = CONTROL_CONFIGURATION if CONTROL_CONFIGURATION in configurations else next(
        iter(configurations))
    return SparkScenario("count", MUTANT_SINK, provider, fmt, changelog, source, ("sink@2",), seed, batches)


def plan(seed: int, count: int | None, source: str = "file", batches: int = 5,
         sinks: tuple[str, ...] = MATRIX_SINKS, strict: bool = False,
         configurations: Collection[tuple[str, bool, int]] = STATE_CONFIGURATIONS) -> list:
    """The campaign's scenarios, in order: the mutant sink first, then the matrix in four rounds. Each
    round has every (pipeline, sink, state configuration, format), shuffled by ``seed``, each with a
    crash window of its own (rotated, so every window appears in every round and a combination gets a
    new window each round); the kill hits a random batch, and every fifth case gets a second kill at a
    random time. A campaign cut short by ``--minutes`` or ``count`` still covers every combination.
    ``configurations``: the state configurations it runs (:meth:`StateChoice.configurations`; default: every one)."""
    rng = random.Random(seed)
    combos = sorted({tuple((k, v) for k, v in case.items() if k != "window")
                     for case in matrix(source, sinks, configurations)})
    rng.shuffle(combos)
    scenarios = [control(seed, source, batches, configurations)]
    i = 0
    for round_number in range(len(WINDOWS)):
        for position, combo in enumerate(combos):
            case = dict(combo)
            window = WINDOWS[(position + round_number) % len(WINDOWS)]
            schedule = [f"{window}@{_hit(rng, window, batches)}"]
            if i % 5 == 4:
                schedule.append(f"{RANDOM}@{_hit(rng, RANDOM, batches)}")
            i += 1
            scenarios.append(SparkScenario(case["pipeline"], case["sink"], case["provider"], case["checkpoint_format"],
                                           case["changelog"], source, tuple(schedule), rng.randrange(2**31), batches,
                                           strict))
    return scenarios[:count] if count else scenarios


# The latest a second kill at a random time lands in a campaign (milliseconds after the restarted run's
# first offsets file): a restarted run has a batch or two left, done in a few seconds at most, and a kill
# after its end never fires (``random@8000`` did not, on a loaded 2-core machine).
RANDOM_REACHED_MS = 1000
RANDOM_FLOOR_MS = 500  # the earliest the plan draws it (faults.kinds: random@MS)


def campaign_plan(seed: int, count: int | None, source: str = "file", batches: int = 5,
                  sinks: tuple[str, ...] = MATRIX_SINKS, strict: bool = False,
                  configurations: Collection[tuple[str, bool, int]] = STATE_CONFIGURATIONS) -> list:
    """A campaign's scenarios: :func:`plan` (pinned seed for seed), each kill one its scenario reaches. The
    plan's second kill at a random time is drawn up to 8 s after the restarted run's first offsets file,
    often after that run ended, so that it never fired (and a scheduled kill that never fired makes the
    scenario an ``error``): here it lands within :data:`RANDOM_REACHED_MS`, as random as drawn."""
    def reached(target: str) -> str:
        kind, _, number = target.partition("@")
        if kind != RANDOM or int(number) <= RANDOM_REACHED_MS:
            return target
        return f"{RANDOM}@{RANDOM_FLOOR_MS + int(number) % (RANDOM_REACHED_MS - RANDOM_FLOOR_MS + 1)}"

    return [replace(s, schedule=tuple(map(reached, s.schedule))) for s in plan(seed, count, source, batches, sinks,
                                                                              strict, configurations)]


# -- the suite contract (:mod:`eos_harness.suite`) ------------------------------------------------------


CONTROLS = (MUTANT_SINK,)  # every campaign runs the mutant sink first: it shows the checks can fail


def known_subjects() -> list[str]:
    return [*MATRIX_SINKS, "user"]


def subjects_of(options: Mapping) -> list[str]:
    """The campaign's subjects: ``user`` for a user's query (``--pipeline module:function``), else the sinks given
    (:func:`subjects`). A ValueError (a usage error) for sinks given with a user's query, or ``user`` without one."""
    given = options.get("sinks")
    if options.get("pipeline"):
        if given and list(given) != ["user"]:
            raise ValueError(f"--sinks {','.join(given)}: not with --pipeline (your query's writer names its sink)")
        return ["user"]
    if given and "user" in given:
        raise ValueError("--sinks user: only with your own query (--pipeline module:function)")
    return subjects(given)


def subjects(given: list[str] | None) -> list[str]:
    """The sinks of the matrix given, every one by default (the mutant sink, a control, is always planned)."""
    return list(given or MATRIX_SINKS)


def expected(sink: str) -> tuple[bool, tuple[str, ...]]:
    """The mutant sink must be caught (by any check); every real sink must pass."""
    return sink == MUTANT_SINK, ()


def counted_violations(result: dict, strict: bool) -> list[dict]:
    """The violations of a scenario's result that fail its verdict (``strict_only`` ones only when ``strict``)."""
    return [v for v in result["violations"] if Violation.from_json(v).counts(strict)]


def judge(result: dict, strict: bool | None = None) -> str:
    """A scenario's verdict from its fields: ``not_applicable`` and ``error`` as recorded (nothing
    was judged), else :func:`verdict_of` its violations (duplicates of the at-least-once Kafka sink
    are ``strict_only``: they fail only under ``--strict``; ``strict`` None: as the scenario ran)."""
    if result["verdict"] in (NOT_APPLICABLE, ERROR):
        return result["verdict"]
    strict = bool(result.get("strict")) if strict is None else strict
    return verdict_of([Violation.from_json(v) for v in result["violations"]], strict)


def unexpected(result: dict, strict: bool) -> bool:
    """Whether a scenario's result is not the one expected: a real sink that failed, or the mutant
    sink (``expected: caught``) that was not caught."""
    verdict = judge(result, strict)
    if result["expected"] == "caught":
        return verdict != FAIL
    return verdict == FAIL


def check_options(options: Mapping) -> None:
    """The ``kafka`` extra, when the campaign's source or a sink of it is Kafka (MissingExtra, a usage error); a
    ValueError (a usage error) for a state choice that leaves no configuration (:meth:`StateChoice.configurations`),
    and for what cannot run (a user's query checked by a probe of its module, in a child)."""
    from eos_harness.extras import require

    StateChoice.of(options).configurations()
    user_options = [o for o in ("input", "schema", "key", "read_output", "sink_guarantee", "max_offsets_per_trigger")
                    if options.get(o)]
    if options.get("export_repro"):
        from eos_harness.suites.spark.export import check_export_dir

        check_export_dir(options["export_repro"])
    if options.get("pipeline"):
        from eos_harness.suites.spark.user import declarative_refusal

        if refusal := declarative_refusal(options["pipeline"]):
            raise ValueError(refusal)
        _user_template(options, probed=True)
        if options.get("source") == "kafka" or options.get("strict"):
            raise ValueError("--source kafka, --strict: not with --pipeline (--input is its source)")
        return
    if user_options:
        raise ValueError(f"{', '.join('--' + o.replace('_', '-') for o in user_options)}: only with your own query "
                         "(--pipeline module:function)")
    if options.get("source") == "kafka":
        require("kafka", "--source kafka")
    if "kafka" in options["sinks"]:
        require("kafka", "--sinks kafka")


def kept_inputs(options: Mapping) -> dict | None:
    """What a campaign judges besides its options, kept when it starts and checked again by ``--resume``
    (:func:`inputs_changed`): a user's query and its input, as digests
    (:func:`~eos_harness.suites.spark.user.judged_inputs`); None for the built-in pipelines (the plan makes their input)."""
    if not options.get("pipeline"):
        return None
    from eos_harness.suites.spark.user import judged_inputs

    return judged_inputs(_user_template(options, probed=True))


def inputs_changed(kept: object, now: dict) -> str | None:
    """Why a resumed campaign cannot go on: its query or its input changed since it began (None: neither did)."""
    from eos_harness.suites.spark.user import changed_inputs

    return changed_inputs(kept, now)


def _user_template(options: Mapping, probed: bool = False):
    """The campaign's user query as a :class:`~eos_harness.suites.spark.user.UserScenario` (no kill yet), checked
    (a ValueError: a usage error); ``probed``: its module imported in a child first (its source file kept)."""
    from pathlib import Path

    from eos_harness.suites.spark.kafka_input import is_kafka_input
    from eos_harness.suites.spark.user import UserScenario, probe, python_path

    if not options.get("input"):
        raise ValueError(f"--pipeline {options['pipeline']}: give its input with --input DIR")
    given = options["input"]
    template = UserScenario(options["pipeline"], given if is_kafka_input(given) else str(Path(given).absolute()),
                            options.get("schema"),
                            tuple(c.strip() for c in (options.get("key") or "").split(",") if c.strip()),
                            options.get("sink_guarantee"), python_path=tuple(python_path()),
                            reader=options.get("read_output"), max_offsets=options.get("max_offsets_per_trigger"))
    template.validate()
    if template.kafka:  # the topic read whole: unreachable, missing, empty: a usage error
        template = template.resolved()
        template.validate()
    if probed:
        template = replace(template, module_file=probe(template.ref, list(template.python_path)).get("file"))
        if template.reader:
            probe(template.reader, list(template.python_path))
    return template


def campaign(seed: int, options: Mapping) -> list:
    """:func:`campaign_plan` of the campaign's ``source``, ``sinks``, ``strict`` and state configurations
    (:class:`StateChoice`), its first ``scenarios``; ``kafka``: the bootstrap servers of the Kafka its campaign
    opened, for the scenarios that use it. A user's query (``pipeline``): the mutant sink first (it shows the checks
    can fail), then :func:`~eos_harness.suites.spark.user.user_plan`."""
    configurations = StateChoice.of(options).configurations()
    if options.get("pipeline"):
        from eos_harness.suites.spark.user import user_plan

        planned = [control(seed, "file", 5, configurations),
                   *user_plan(seed, _user_template(options, probed=True), configurations=configurations)]
        return planned[:options["scenarios"]] if options.get("scenarios") else planned
    planned = campaign_plan(seed, options.get("scenarios"), options.get("source", "file"),
                            sinks=tuple(s for s in options["sinks"] if s != MUTANT_SINK),
                            strict=bool(options.get("strict")), configurations=configurations)
    kafka = options.get("kafka")
    return planned if kafka is None else [replace(s, kafka=kafka) for s in planned]

