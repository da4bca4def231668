"""The metadata suite's driver: one scenario of KIP-868 metadata transactions under failover.

A scenario creates the metadata log (a topic on the broker port), starts a live reader process
that follows it (taking snapshots every few batches), then controller processes one after another,
each with the next fault of the schedule armed (a crash point of the controller, ``freeze:POINT``
for a zombie controller, ``kill@n``), until one runs every command to its end. A frozen controller
is woken at the end and must find itself fenced. Then the live reader reads to the end, a reader
replays the whole log and one starts from the last snapshot; the driver records the committed log,
and the checks judge the history against the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.commands import command_line
from eos_harness.faults import kinds
from eos_harness.history import History
from eos_harness.metadata import DEFAULT_MAX_BATCH_BYTES, LogSpec, MetadataLog
from eos_harness.metadata.controller import MISTAKES as CONTROLLER_MISTAKES
from eos_harness.metadata.controller import POINTS
from eos_harness.metadata.reader import MISTAKES as READER_MISTAKES
from eos_harness.metadata.reader import Reader
from eos_harness.models.metadata import BEGIN, END, Command
from eos_harness.process.zombies import zombies
from eos_harness.rundir import claim
from eos_harness.suites.lifecycle.schedule import Fault, ScheduleError, parse_schedule
from eos_harness.suites.metadata.checks import check_all
from eos_harness.suites.metadata.instance import ControllerInstance, LiveReader
from eos_harness.verdict import PASS, Violation, error_reason, unfired_is_error, verdict_of

__all__ = ["CHILDREN_LOG", "FATAL", "REAL", "SYSTEMS", "Scenario", "campaign_session", "ScheduleError", "commands_for", "error_result", "error_verdict",
           "parse_metadata_schedule", "run_one", "run_scenario"]

REAL = "controller"  # the real controller and readers
SYSTEMS = (REAL, *READER_MISTAKES, *CONTROLLER_MISTAKES)
SNAPSHOT_EVERY = 3  # the live reader snapshots every this many batches


@dataclass(frozen=True)
class Scenario:
    system: str
    seed: int
    schedule: tuple[Fault, ...] = ()
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    commands: int = 10
    broker: BrokerSpec = EMBEDDED  # a started kafka-local's CLI text stays kafka-local (see BrokerSpec)

    def __post_init__(self) -> None:
        object.__setattr__(self, "broker", parse(self.broker, internal=True))

    def repro(self) -> str:
        words: list[object] = ["run", "--suite", "metadata", "--system", self.system]
        if self.schedule:
            words += ["--crash-at", ",".join(map(str, self.schedule))]
        if self.max_batch_bytes != DEFAULT_MAX_BATCH_BYTES:
            words += ["--max-batch-bytes", self.max_batch_bytes]
        if self.commands != 10:
            words += ["--commands", self.commands]
        if self.broker.is_kafka:
            words += ["--broker", self.broker.cli_text]
        return command_line(*words, "--seed", self.seed)


def parse_metadata_schedule(text: str | list[str] | tuple[str, ...]) -> tuple[Fault, ...]:
    """A schedule of the metadata suite: the controller's crash points (``POINT[@n]``,
    ``freeze:POINT[@n]``) and ``kill@n``, spelled as :mod:`eos_harness.faults.kinds` says."""
    faults = parse_schedule(text)
    for fault in faults:
        kind = kinds.kind_of(fault)
        if kind.at_point and fault.point not in POINTS:
            raise ScheduleError(f"{fault.point!r} is not a point of the metadata controller: use one of "
                                f"{', '.join(POINTS)}")
        if not kind.at_point and (kind.armed != kinds.BY_DRIVER or kind.needs):
            raise ScheduleError(f"{kind.spelling}: not a fault of the metadata suite (its faults: a controller "
                                "crash point POINT[@n], freeze:POINT[@n], kill@n)")
    return faults


def commands_for(seed: int, count: int, max_batch_bytes: int) -> list[Command]:
    """The scenario's commands, from its seed: topics big enough to need a transaction (several
    batches) and small ones, config changes, deletions. The first two are big, so the crash points
    of a transaction and the interleaving mutant meet them early."""
    rng = random.Random(seed)
    per_batch = max(1, max_batch_bytes // 90)  # about 90 bytes an entry
    commands: list[Command] = []
    topics: list[str] = []
    for index in range(count):
        roll = rng.random()
        if index < 2 or roll < 0.35:
            name = f"t{index:02d}"
            commands.append(Command("create_topic", topic=name, partitions=rng.randint(2 * per_batch, 5 * per_batch)))
            topics.append(name)
        elif roll < 0.55:
            name = f"t{index:02d}"
            commands.append(Command("create_topic", topic=name, partitions=rng.randint(1, per_batch // 2 or 1)))
            topics.append(name)
        elif roll < 0.85 or not topics:
            resource = rng.choice(["cluster"] + [f"topic:{t}" for t in topics])
            value = None if rng.random() < 0.2 else str(rng.randint(1, 1000))
            commands.append(Command("set_config", resource=resource, key=rng.choice(["retention.ms", "segment.bytes",
                                                                                     "min.insync.replicas"]),
                                    value=value))
        else:
            commands.append(Command("delete_topic", topic=rng.choice(topics)))
    return commands


def broker_spec(scenario: Scenario, run_dir: Path) -> str:
    """The runtime text of the scenario's broker: on the embedded broker, its own SQLite file."""
    if scenario.broker.kind == "embedded":
        return scenario.broker.at_file(run_dir / "broker.sqlite").text
    return scenario.broker.text


def run_scenario(scenario: Scenario, run_dir: Path, keep: bool = True, faults_must_fire: bool = False) -> dict:
    """Run one scenario in ``run_dir`` (created, or emptied of the harness's earlier results) and
    return its verdict object. ``faults_must_fire``: a scheduled fault never reached makes the verdict
    ``error`` (``run`` and ``chaos``: the plan draws only faults a scenario reaches); else it is listed in
    ``not_fired`` only."""
    if scenario.system not in SYSTEMS:
        raise ValueError(f"unknown system {scenario.system!r}: choose among {', '.join(SYSTEMS)}")
    for fault in scenario.schedule:
        kinds.kind_of(fault)
    claim(run_dir)
    started, started_at = time.perf_counter(), time.time()
    unique = f"{scenario.seed}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    spec = LogSpec(broker_spec(scenario, run_dir), f"eos-metadata-{unique}", f"eos-metadata-controller-{unique}")
    commands = commands_for(scenario.seed, scenario.commands, scenario.max_batch_bytes)
    reader_mistake = scenario.system if scenario.system in READER_MISTAKES else None
    controller_mistake = scenario.system if scenario.system in CONTROLLER_MISTAKES else None
    snapshots = run_dir / "snapshots"
    snapshots.mkdir(exist_ok=True)
    history = History(run_dir / "history.jsonl")
    history.add(0, {"type": "scenario", "system": scenario.system, "seed": scenario.seed,
                    "schedule": [str(f) for f in scenario.schedule], "broker": spec.broker, "topic": spec.topic,
                    "max_batch_bytes": scenario.max_batch_bytes, "commands": [c.to_json() for c in commands]})
    with MetadataLog(spec) as log:
        log.create()
        live = LiveReader(spec, history, reader_mistake, str(snapshots), SNAPSHOT_EVERY, scenario.seed,
                          poll_interval=0.005 if spec.broker.startswith("embedded:") else 0.05)
        try:
            with zombies() as frozen:
                schedule = list(scenario.schedule)
                wire = [c.to_json() for c in commands]
                for epoch in range(1, len(schedule) + 4):
                    fault = schedule.pop(0) if schedule else None
                    instance = ControllerInstance(spec, wire, scenario.max_batch_bytes, controller_mistake, fault,
                                                  epoch, history)
                    ended = instance.collect()
                    if ended == "frozen":
                        frozen.append(instance)
                        continue
                    if ended in ("done", "error", "hang"):
                        break
        finally:
            live.stop()
        replay = Reader(log, "replay", lambda e: history.add(0, e))
        replay.poll()
        history.add(0, replay.final())
        taken = [e for e in live.events if e["type"] == "snapshot"]
        if taken:
            from_snapshot = Reader(log, "from-snapshot", lambda e: history.add(0, e))
            from_snapshot.start_from(taken[-1]["file"])
            from_snapshot.poll()
            history.add(0, from_snapshot.final())
        entries = log.read(0)
    history.add(0, {"type": "log", "entries": [[e.offset, e.to_json()] for e in entries]})
    history.close()
    violations = check_all(history.events, commands)
    result = verdict(scenario, history.events, violations)
    if faults_must_fire:
        result = unfired_is_error(result)
    result["log"] = {"entries": len(entries), "batches": len({e.batch for e in entries}),
                     "transactions": sum(e.kind == BEGIN for e in entries),
                     "ended": sum(e.kind == END for e in entries),
                     "aborts": [e.offset for e in entries if e.kind == "abort"]}
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["started_at"] = round(started_at, 3)
    result["history"] = str(run_dir / "history.jsonl")
    (run_dir / "verdict.json").write_text(json.dumps(result, indent=2))
    if not keep and result["verdict"] == PASS:
        shutil.rmtree(snapshots, ignore_errors=True)
    return result


def verdict(scenario: Scenario, events: list[dict], violations: list[Violation], error: str | None = None) -> dict:
    hit = [e["point"] if e["type"] == "crash" else kinds.FREEZE.prefix + e["point"]
           for e in events if e["type"] in ("crash", "frozen")]
    # Faults fire in their order, one per controller: those past the ones that fired were never reached
    # (a scenario cut short, an error, says so itself).
    not_fired = [str(f) for f in scenario.schedule][len(hit):] if error is None else []
    result = {
        "suite": "metadata",
        "system": scenario.system,
        "expected": "pass" if scenario.system == REAL else "fail",  # a mutant must be caught
        "broker": scenario.broker.cli_text,
        "seed": scenario.seed,
        "schedule": [str(f) for f in scenario.schedule],
        "max_batch_bytes": scenario.max_batch_bytes,
        "crash_points": hit,
        "fault_errors": [],
        "not_fired": not_fired,  # scheduled faults never reached (an error: unfired_is_error)
        "verdict": verdict_of(violations, error=error),
        "violations": [v.to_json() for v in violations],
        "repro": scenario.repro(),
    }
    if scenario.broker.is_kafka:
        from eos_harness.cluster.local import version_of

        result["kafka_version"] = version_of(scenario.broker)  # the log's Kafka release (None: not ours to ask)
    if error is not None:
        result["error"] = error
    return result


def error_verdict(scenario: Scenario, exc: BaseException) -> dict:
    """The verdict object of a scenario that could not be run to its end."""
    return verdict(scenario, [], [], error=error_reason(exc))


CHILDREN_LOG = "children.log"  # in the run directory: the controllers' and readers' stdout and stderr
FATAL = (ScheduleError,)  # a campaign whose schedule cannot be read stops: its input is wrong


@contextlib.contextmanager
def campaign_session(options: Mapping, say: Callable[[str], object] = lambda text: None) -> Iterator[dict]:
    """The campaign's broker (the metadata log's), opened once for every scenario: ``kafka-local`` and
    ``kafka-quorum`` started and always stopped, ``kafka://`` checked to answer."""
    from eos_harness.broker.opening import open_broker

    with open_broker(options["broker"], say=say) as opened:
        yield {**options, "opened": opened.spec}


def run_one(scenario: Scenario, directory: Path) -> dict:
    """One scenario of a campaign (the suite contract): its snapshots dropped when it passed; a scheduled
    fault that never fired makes it an error (the plan draws only faults a scenario reaches)."""
    return run_scenario(scenario, directory, keep=False, faults_must_fire=True)


error_result = error_verdict  # the suite contract's name for it
