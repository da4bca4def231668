"""The kafka-streams suite's plan (``eos-harness chaos --suite kafka-streams``): the applications in turn,
each scenario a seed drawn from the campaign seed, and its kills (a named step of Streams' commit, at its Nth
hit, per instance) drawn from that seed.

An application (the suite's subject) is a configuration of the one topology: its store (RocksDB or in
memory) with ``enable.transactional.statestores`` on (``-tx``) or off, under ``exactly_once_v2``; or a
mutant (:data:`eos_harness.kafka_streams.app_points.APP_MUTANTS`), which must be caught by its check.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from eos_harness.commands import command_line
from eos_harness.kafka_streams.app_points import APP_MUTANTS, APP_POINTS, POINTS_BY_NAME, RANDOM_KILL

from ..rotation import in_turn
from .checks import TABLE_EVERY, WINDOW_RETENTION_MS

__all__ = ["APPS", "BROKER_FAULTS", "Scenario", "Settings", "campaign", "check_options", "draw_broker_faults",
           "draw_kills", "expected", "known_subjects", "parse_broker_faults", "settings_of", "subjects"]


@dataclass(frozen=True)
class Settings:
    store: str  # rocksdb | memory
    transactional: bool
    guarantee: str = "exactly_once_v2"
    mutant: str | None = None
    zombie: bool = False  # one instance frozen inside its commit past transaction.timeout.ms, then resumed
    window_ms: int = 0  # the windowed aggregate: tumbling windows of this size (0: the key-value aggregate)
    join: bool = False  # the stream-table join: the input joined with a KTable of rates, then summed
    global_table: bool = False  # with join: the table a GlobalKTable (every instance holds all of it)
    # upgrade.from (a rolling upgrade from 4.2: each task's close also writes KIP-1035's downgrade .checkpoint)
    upgrade_from: str | None = None

    @property
    def mutant_rules(self) -> bool:
        return self.mutant is not None and bool(APP_MUTANTS[self.mutant].rules)

    def to_json(self) -> dict:
        return {"store": self.store, "enable.transactional.statestores": self.transactional,
                "processing.guarantee": self.guarantee, "mutant": self.mutant, "zombie": self.zombie,
                **({"window_ms": self.window_ms, "retention_ms": WINDOW_RETENTION_MS} if self.window_ms else {}),
                **({"join": "stream-globaltable (leftJoin with a GlobalKTable of rates)" if self.global_table
                    else "stream-table (leftJoin with a KTable of rates)"} if self.join else {}),
                **({"upgrade.from": self.upgrade_from} if self.upgrade_from else {})}


APPS = {"rocksdb-tx": Settings("rocksdb", True), "rocksdb": Settings("rocksdb", False),
        "memory-tx": Settings("memory", True), "memory": Settings("memory", False),
        "zombie": Settings("rocksdb", True, zombie=True),
        # a window store of a segment per minute (retention 2 min: Streams' segment interval is half of it,
        # at least 60 s), fed records 0.4 s apart: each instance's input spans a segment or two
        "window-rocksdb-tx": Settings("rocksdb", True, window_ms=10_000),
        "window-rocksdb": Settings("rocksdb", False, window_ms=10_000),
        "window-memory-tx": Settings("memory", True, window_ms=10_000),
        # a KStream left-joined with a KTable (its own store and changelog) built from a second topic of the
        # same partitions; the joined deltas summed as above
        "join-rocksdb-tx": Settings("rocksdb", True, join=True),
        "join-rocksdb": Settings("rocksdb", False, join=True),
        "join-memory-tx": Settings("memory", True, join=True),
        # the same with a GlobalKTable of a third topic (no changelog: restored from its topic by the global
        # thread, which is not synchronised with the tasks: its updates are sent, and seen in the global store,
        # between batches)
        "global-rocksdb-tx": Settings("rocksdb", True, join=True, global_table=True),
        "global-rocksdb": Settings("rocksdb", False, join=True, global_table=True),
        "global-memory-tx": Settings("memory", True, join=True, global_table=True),
        # a rolling upgrade from 4.2 (upgrade.from=4.2): 4.4.0 keeps the changelog offsets in its RocksDB stores and
        # also writes the task's .checkpoint at each close, for a downgrade (LegacyCheckpointingStateStore.
        # maybeDowngradeOffsets); read back into the stores, and deleted, at the next start (migrateLegacyOffsets)
        "upgrade-rocksdb-tx": Settings("rocksdb", True, upgrade_from="4.2"),
        "upgrade-rocksdb": Settings("rocksdb", False, upgrade_from="4.2")}

# Each mutant on the configuration where its check can catch it.
_MUTANT_BASE = {"output-twice": "rocksdb-tx", "output-value-altered": "rocksdb-tx", "at-least-once": "rocksdb", "restore-from-zero": "rocksdb-tx", "restore-skips-record": "memory",
                "restore-hangs": "memory", "changelog-write-dropped": "rocksdb-tx"}
DEFAULT_APPS = ("rocksdb-tx", "rocksdb", "memory-tx", "memory", "zombie", "window-rocksdb-tx", "window-rocksdb",
                "join-rocksdb-tx", "join-rocksdb", "global-rocksdb-tx")


def settings_of(app: str) -> Settings:
    if app in APPS:
        return APPS[app]
    mutant = APP_MUTANTS[app]
    base = APPS[_MUTANT_BASE[app]]
    return Settings(base.store, base.transactional, mutant.guarantee, app)


def known_subjects() -> list[str]:
    return [*APPS, *APP_MUTANTS]


def subjects(given: list[str] | None) -> list[str]:
    return list(given) if given is not None else [*DEFAULT_APPS, *APP_MUTANTS]


def expected(app: str) -> tuple[bool, tuple[str, ...]]:
    return (True, (APP_MUTANTS[app].caught_by,)) if app in APP_MUTANTS else (False, ())


# The share of kills made in a clean close (a graceful stop and restart) instead: drawn by their own generator,
# so that the other kills of a seed are those it drew before the close points existed.
CLOSE_SHARE = 0.25
CLOSE_HITS = 2  # a close point's hit: one of the instance's 2 tasks (each task's close passes it once)


def draw_kills(app: str, seed: int, kills: int) -> tuple[tuple[str, int], ...]:
    """``kills`` (point, hit) drawn from ``seed`` among the points this application reaches: the restoration's
    only after a first kill and only where a restart restores the whole changelog (in-memory stores,
    RocksDB without transactions: with them, the tail to restore may be empty); about a quarter of them in a
    clean close of the instance (:data:`CLOSE_SHARE`, the points of phase ``close``)."""
    s = settings_of(app)
    rng = random.Random(seed)
    closing = random.Random(f"{seed}:close")
    close = [p for p in APP_POINTS if p.phase == "close" and p.applies(s.guarantee, s.store, s.transactional, s.upgrade_from)]
    if s.zombie:  # frozen (not killed) inside one commit, between its transaction and the producer's commit
        return (("streams.commit.before_producer_commit", rng.randint(1, 3)),)
    drawn = []
    for number in range(kills):
        allowed = [p for p in APP_POINTS if p.applies(s.guarantee, s.store, s.transactional, s.upgrade_from)
                   and (p.phase == "commit" or (number > 0 and p.phase == "start")
                        or (number > 0 and p.phase == "restore" and not (s.store == "rocksdb" and s.transactional)))]
        if s.mutant and APP_MUTANTS[s.mutant].points:  # the steps where its mistake shows
            allowed = [p for p in allowed if p.name in APP_MUTANTS[s.mutant].points]
        if not (s.mutant and APP_MUTANTS[s.mutant].points) and rng.random() < 1 / (len(allowed) + 1):
            drawn.append((RANDOM_KILL, rng.randint(50, 1500)))  # kill -9 at a random time: its hit in ms
        else:
            point = rng.choice(allowed)
            # a small changelog restores in one batch: a restoration's point at its first
            drawn.append((point.name, rng.randint(1, 3) if point.phase == "commit" else 1))
        if close and not (s.mutant and APP_MUTANTS[s.mutant].points) and closing.random() < CLOSE_SHARE:
            drawn[-1] = (closing.choice(close).name, closing.randint(1, CLOSE_HITS))
    return tuple(drawn)


@dataclass(frozen=True)
class Scenario:
    """One application run through its kills on the campaign's broker (``broker``: as asked, for the replay;
    ``opened``: where it runs)."""

    system: str  # the application (a configuration, or a mutant)
    seed: int
    kills: tuple[tuple[str, int], ...]
    broker: str = "kafka-local"
    records: int = 60  # input records per batch (one batch per instance)
    keys: int = 8
    partitions: int = 2
    memtable_kb: int = 64  # RocksDB's write buffer (0: Kafka Streams' default): small, so commits reach disk
    pad: int = 4000  # bytes beside each sum in the store (RocksDB's memtable fills within a run)
    liveness_s: float = 60.0
    threads: int = 1  # stream threads per instance (num.stream.threads): the tasks of the 2 partitions spread over them
    instances: int = 1  # instances running at once: with 2, instance 1 runs beside each life of instance 0 (killed)
    opened: str | None = None
    point: str | None = None  # the one point every kill arms (given on the command line), else drawn
    # the broker's faults (``--crash-at broker-kill@N``): (fault, N), each once the N-th input record is acknowledged
    broker_faults: tuple[tuple[str, int], ...] = ()

    def repro(self) -> str:
        return command_line("run", "--suite", "kafka-streams", "--app", self.system, "--seed", self.seed, "--kills",
                            len(self.kills), "--broker", self.broker, "--records", self.records,
                            "--memtable-kb", self.memtable_kb, "--liveness", f"{self.liveness_s:g}",
                            *(("--threads", self.threads) if self.threads != 1 else ()),
                            *(("--instances", self.instances) if self.instances != 1 else ()),
                            *(("--point", self.point) if self.point else ()),
                            *(("--crash-at", ",".join(f"{f}@{n}" for f, n in self.broker_faults))
                              if self.broker_faults else ()))


# The harness's broker faults this suite schedules (:mod:`eos_harness.faults.kafka`), each on the broker that
# coordinates the application's transactions, while the application processes its input.
BROKER_FAULTS = {"broker-kill": "SIGKILL the broker coordinating the application's transactions, restart it",
                 "broker-pause": "SIGSTOP the broker coordinating the application's transactions for a while"}


def parse_broker_faults(text: str | None) -> tuple[tuple[str, int], ...]:
    """``broker-kill@N[,broker-pause@N…]`` as (fault, N): each once the broker acknowledged the scenario's N-th
    input record (while the instance is given the rest of its batch). Raises ValueError saying what is wrong."""
    if not text:
        return ()
    faults = []
    for item in (part.strip() for part in text.split(",")):
        name, at, hit = item.partition("@")
        if name not in BROKER_FAULTS:
            raise ValueError(f"--crash-at {item!r}: the kafka-streams suite schedules the broker faults "
                             f"{', '.join(f'{k}@N' for k in BROKER_FAULTS)} (N: once the N-th input record is "
                             "acknowledged); its kills are --kills and --point")
        if not at or not hit.isdigit() or int(hit) < 1:
            raise ValueError(f"--crash-at {item!r}: give {name}@N, N a positive number (once the N-th input "
                             "record is acknowledged)")
        faults.append((name, int(hit)))
    return tuple(faults)


def scenario(app: str, seed: int, kills: int, point: str | None = None, **options) -> Scenario:
    """The scenario of ``app`` and ``seed``: its kills drawn (or each at ``point``, its hit drawn)."""
    if options.get("instances", 1) not in (1, 2):
        raise ValueError(f"--instances {options['instances']}: 1 or 2")
    if settings_of(app).zombie and options.get("instances", 1) != 1:
        raise ValueError(f"the application {app} runs its own two instances (one frozen): --instances applies to "
                         "the others")
    if settings_of(app).join and not settings_of(app).global_table and options.get("records", TABLE_EVERY) < TABLE_EVERY:
        raise ValueError(f"the join application {app} updates its table before every {TABLE_EVERY}th record: "
                         f"give --records {TABLE_EVERY} or more (else a batch may join without a table update)")
    drawn = draw_kills(app, seed, kills)
    if point == RANDOM_KILL:
        rng = random.Random(seed)
        drawn = tuple((RANDOM_KILL, rng.randint(50, 1500)) for _ in drawn)
    elif point is not None:
        if point not in POINTS_BY_NAME:
            raise ValueError(f"no point {point!r} of the Kafka Streams application; one of: "
                             f"{', '.join(POINTS_BY_NAME)}")
        s = settings_of(app)
        if not POINTS_BY_NAME[point].applies(s.guarantee, s.store, s.transactional, s.upgrade_from):
            raise ValueError(f"point {point} is never reached by the application {app}")
        if POINTS_BY_NAME[point].phase in ("start", "restore"):  # the first instance restores nothing: killed as drawn
            if kills < 2:
                raise ValueError(f"point {point} is reached while a restarted instance starts: give --kills 2 "
                                 "or more (the first kill, drawn, makes the restart)")
            drawn = (drawn[0], *((point, 1) for _ in drawn[1:]))
        elif POINTS_BY_NAME[point].phase == "close":  # each instance closed cleanly, killed inside its close
            closing = random.Random(f"{seed}:close")
            drawn = tuple((point, closing.randint(1, CLOSE_HITS)) for _ in drawn)
        else:
            drawn = tuple((point, hit if POINTS_BY_NAME[drawn_point].phase == "commit" else 1)
                          for drawn_point, hit in drawn)
    if options.get("instances", 1) == 2:  # instance 0 may hold one task of the two: its close passes a point once
        drawn = tuple((p, 1 if p in POINTS_BY_NAME and POINTS_BY_NAME[p].phase == "close" else hit) for p, hit in drawn)
    return Scenario(app, seed, drawn, point=point, **options)


def draw_broker_faults(seed: int, count: int, inputs: int) -> tuple[tuple[str, int], ...]:
    """``count`` broker faults drawn from ``seed`` (their own generator: the kills stay as drawn), each once one of
    the scenario's ``inputs`` records is acknowledged, in the order they fire."""
    rng = random.Random(f"{seed}:broker")
    drawn = [(rng.choice(sorted(BROKER_FAULTS)), rng.randint(1, max(1, inputs))) for _ in range(count)]
    return tuple(sorted(drawn, key=lambda fault: fault[1]))


def check_options(options: Mapping) -> None:
    """chaos's own check, before anything runs: broker faults need a cluster the harness starts."""
    from eos_harness.broker.spec import STARTED_HERE, parse

    if options.get("broker_faults") and parse(options["broker"]).kind not in STARTED_HERE:
        raise ValueError(f"--broker-faults {options['broker_faults']}: a broker fault kills or stops a broker: it "
                         f"needs a cluster the harness starts (--broker kafka-local or kafka-quorum), not "
                         f"{parse(options['broker']).cli_text!r}")


def campaign(seed: int, options: Mapping) -> Iterator[Scenario]:
    for app, _, drawn in in_turn(seed, options["systems"]):
        kills = options["kills"]
        # the instances given a batch: one per kill, the last, and the zombie's two
        inputs = options["records"] * (kills + 1 if not settings_of(app).zombie else 2)
        yield scenario(app, drawn, kills, broker=options["broker"], records=options["records"],
                       memtable_kb=options["memtable_kb"], liveness_s=options["liveness"],
                       threads=options.get("threads", 1), instances=options.get("instances", 1),
                       opened=options.get("opened"),
                       broker_faults=draw_broker_faults(drawn, options.get("broker_faults", 0), inputs))
