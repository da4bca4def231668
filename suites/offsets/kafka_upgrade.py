"""The offsets suite's upgrade of a real Kafka Streams store directory: written by 4.3.1's RocksDB store
(KIP-1035 offsets), opened by 4.4.0's (KIP-892's transactions on, or off), and back, under crashes.

What Kafka's code does (``RocksDBStore.openDB`` and ``AbstractColumnFamilyAccessor``, 4.3.1 and 4.4.0): both
versions keep the data in RocksDB's default column family and the changelog offsets, the position and the
status marker in the ``offsets`` column family, so 4.4.0 opens 4.3.1's directory as its own: nothing is
migrated and no file is written. The status marker is OPEN while a store without transactions is open and
CLOSED after its clean close; 4.4.0 with ``enable.transactional.statestores`` writes none (it keeps
whatever marker is there). Opening under exactly-once a directory whose marker is not CLOSED raises
``TaskCorruptedException`` ("State store ... didn't find a valid state, since under EOS it has the risk of
getting uncommitted data in stores"): Kafka Streams closes the task dirty, deletes its state directory and
restores it from the changelog (the harness: ``IncompatibleStoreDirectory`` from ``init``). Writes go with
the write-ahead log off, so a store reopens at its last flush (a clean close, a full memtable), never at a
commit the crash made unflushed: the changelog restores the rest (``Capabilities(commit_durable=False)``).

The cases, each in a directory of its own (``CHANGELOGS``' three partitions, as a global store):

* 4.3.1 commits and closes cleanly; the upgraded store opens it (its offsets and keys as 4.3.1 left them:
  ``migration_keeps_offsets``, ``migration_keeps_keys``), commits twice and closes; reopened it holds its
  last commit. Back: 4.3.1 (and 4.4.0 without transactions, from the transactional store) opens that
  directory with the same commit (``downgrade_keeps_offsets``).
* The same with a crash at each Byteman point of the upgraded store that case reached (its open, its
  first commits, its close), then a restart: the store holds the data and offsets of one commit since
  the last flush, never an uncommitted write (``offsets_match_data``); so does 4.3.1 opened after it.
* 4.3.1 killed with uncommitted writes, none flushed: the upgraded store opens 4.3.1's last clean close.
* 4.3.1 killed after RocksDB flushed uncommitted writes (more than a memtable): the marker on disk says
  OPEN; the upgraded store must refuse the directory or hold no uncommitted write (``offsets_match_data``).
  A refusal is noted with what Kafka Streams does with it (:data:`_NOT_WIPED`).

It applies to Kafka Streams 4.4.0's RocksDB stores (``kafka-streams-4.4.0-rocksdb[-tx]``) and their mutants.
``eos-harness verify kafka-streams-4.4.0-rocksdb-tx --offsets-scenario kafka_streams_upgrade`` runs it alone.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from eos_harness.process.server import ChildCrashed, StoreCallError, StoreProcess, StoreServer
from eos_harness.store import TopicPartition
from eos_harness.verdict import Violation

from .migration import _Dir
from .scenario import CHANGELOGS, KEYS, Findings, Scenario, show_offsets

__all__ = ["FROM", "SCENARIOS", "applies_to"]

FROM = "kafka-streams-4.3.1-rocksdb"  # the earlier release: KIP-1035's offsets, no KIP-892
_UPGRADED = ("kafka-streams-4.4.0-rocksdb", "kafka-streams-4.4.0-rocksdb-tx")  # and the mutants of the latter
BIG = 1 << 20  # one uncommitted value of 1 MiB; FLUSHED of them fill Kafka's 16 MiB memtable
FLUSHED = 18
UNCOMMITTED = (b"e", b"never committed")

State = tuple[dict[bytes, bytes], dict[TopicPartition, int | None]]


# What Kafka Streams 4.4.0 does with that refusal when enable.transactional.statestores is on (its code; a real
# application on a real broker shows it: tests/test_kafka_streams_finding.py): RocksDBStore.init throws in openDB before it registers
# the store with the task's ProcessorStateManager, so TaskManager.handleCorruption's markChangelogAsCorrupted finds
# no store to mark (its IllegalStateException is swallowed) and StateManagerUtil.closeStateManager's wipe,
# "!closeClean && eosEnabled && (!transactionalStateStoresEnabled || stateMgr.hasCorruptedStores())", is false: the
# task directory is kept and the revived task meets the same marker (4.3.1, and 4.4.0 without transactions, wipe).
_NOT_WIPED = ("; but Kafka Streams 4.4.0 with transactional stores does not wipe the task here (its store is "
              "refused before the task registers it, so no store is marked corrupted and closeStateManager keeps the "
              "directory): by Kafka's code, each restart of the task meets the same refusal")


def applies_to(spec: str) -> str | None:
    if spec not in _UPGRADED and not (spec.startswith("mutant-kafka-streams-4.4.0-rocksdb-tx-") and "window" not in spec):
        return (f"not one of Kafka Streams 4.4.0's RocksDB stores: the upgrade of a directory {FROM} wrote is "
                "Kafka's own")
    return None


def _applies(features) -> str | None:
    del features  # which stores: by name (applies_to)
    return None


def _back_stores(spec: str) -> tuple[str, ...]:
    """The stores that open the upgraded directory again: 4.3.1, and 4.4.0 without transactions after the
    transactional store (enable.transactional.statestores turned off)."""
    return (FROM, "kafka-streams-4.4.0-rocksdb") if "-rocksdb-tx" in spec else (FROM,)


class _Case:
    """One directory: the commits made in it (their states, oldest first) and the last flushed one."""

    def __init__(self, server: StoreServer, workdir: Path, name: str, rng: random.Random, number: int) -> None:
        self.server, self.rng, self.name = server, rng, name
        self.d = _Dir(server, FROM, workdir / f"case-{number}")
        self.data: dict[bytes, bytes] = {}
        self.offsets: dict[TopicPartition, int | None] = dict.fromkeys(CHANGELOGS)
        self.states: list[State] = []  # every commit since the last flush (the first: the flushed one)
        self.story: list[str] = []
        self.next = 10

    def start(self, spec: str, **kw) -> StoreProcess:
        return self.server.start(spec, self.d.directory, context={"changelogs": CHANGELOGS}, **kw)

    def write_and_commit(self, proc: StoreProcess, who: str) -> None:
        for key in self.rng.sample(KEYS[:4], 2):  # UNCOMMITTED's key is never committed
            value = b"%s-%d" % (who.encode(), self.rng.randrange(1000))
            proc.call("put", key, value)
            self.data[key] = value
        self.next += self.rng.randrange(1, 20)
        self.offsets = {tp: self.next + 100 * i for i, tp in enumerate(CHANGELOGS)}
        self.story.append(f"{who}: put and commit {show_offsets(self.offsets)}")
        self.states.append((dict(self.data), dict(self.offsets)))  # a crash inside it: seen whole or not at all
        proc.call("commit", self.offsets)

    def flushed(self) -> None:
        """A clean close: the last commit is on disk, the earlier ones no longer a possible outcome."""
        self.states = self.states[-1:]

    def held(self, proc: StoreProcess) -> State:
        return self.d.contents(proc), self.d.offsets(proc, CHANGELOGS)  # KEYS: UNCOMMITTED's key too

    def judge(self, held: State, check: str, exact: bool = False) -> list[Violation]:
        """``held`` must be one of the commits since the last flush (``exact``: the last one)."""
        allowed = self.states[-1:] if exact else self.states
        if held in allowed:
            return []
        data, offsets = held
        survived = UNCOMMITTED[0] in data
        want = " or ".join(f"keys {sorted(d.items())!r}, offsets {show_offsets(o)}" for d, o in allowed)
        return [Violation(check, None, want, f"keys {sorted(data.items())!r}, offsets {show_offsets(offsets)}"
                          + (", an uncommitted write among them" if survived else ""), case=self.name,
                          detail="; ".join(self.story))]


def _open_from(case: _Case) -> None:
    """4.3.1 writes and commits, closes cleanly."""
    proc = case.start(FROM)
    case.write_and_commit(proc, FROM)
    proc.call("close")
    case.flushed()
    case.story.append(f"{FROM}: close()")


def _upgrade(spec: str, workdir: Path, seed: int, store_timeout: float) -> Findings:
    rng = random.Random(seed)
    found = Findings(cases=0)
    with StoreServer(timeout=store_timeout) as server:
        reached: list[tuple[str, int]] = []  # the points the case without a crash reached (each hit to crash)
        found += _clean(server, spec, workdir, rng, found, reached)
        for point, hit in reached:
            found += _crashed(server, spec, workdir, rng, found, point, hit)
        found += _from_killed(server, spec, workdir, rng, found, flushed=False)
        found += _from_killed(server, spec, workdir, rng, found, flushed=True)
    return found


def _clean(server, spec, workdir, rng, found: Findings, reached: list[tuple[str, int]]) -> list[Violation]:
    """No crash: the upgrade, two commits, a clean close, a reopen, and back to the earlier stores."""
    found.cases += 1
    case = _Case(server, workdir, f"{FROM} -> {spec} -> back, no crash", rng, found.cases)
    _open_from(case)
    violations = []
    proc = case.start(spec, trace=True)
    data, offsets = case.held(proc)
    if offsets != case.offsets:
        violations.append(Violation("migration_keeps_offsets", None, show_offsets(case.offsets),
                                    show_offsets(offsets), case=case.name, detail="; ".join(case.story)))
    if data != case.data:
        violations.append(Violation("migration_keeps_keys", None, repr(sorted(case.data.items())),
                                    repr(sorted(data.items())), case=case.name, detail="; ".join(case.story)))
    case.write_and_commit(proc, spec)
    case.write_and_commit(proc, spec)
    for name, hits in _hits(proc.call("close") or []).items():
        reached.extend((name, hit) for hit in sorted({1, hits}))  # its first reach, and its last
    case.flushed()
    case.story.append(f"{spec}: close()")
    for who, check in ((spec, "offsets_match_data"), *((back, "downgrade_keeps_offsets") for back in _back_stores(spec))):
        proc = _open(case, who)
        if isinstance(proc, str):  # its own cleanly closed directory refused: every commit in it is gone
            data, offsets = case.states[-1]
            return [*violations, Violation(check, None, f"keys {sorted(data.items())!r}, offsets {show_offsets(offsets)}",
                                           f"init refused the directory ({proc}): the runtime wipes it",
                                           case=case.name, detail="; ".join(case.story))]
        case.story.append(f"{who} opens it")
        violations += case.judge(case.held(proc), check, exact=True)
        proc.call("close")
    return violations


def _open(case: _Case, who: str) -> StoreProcess | str:
    """``who`` opened on the case's directory, or the first line of its refusal (IncompatibleStoreDirectory:
    Kafka's TaskCorruptedException)."""
    try:
        return case.start(who)
    except StoreCallError as exc:
        if exc.kind != "IncompatibleStoreDirectory":
            raise
        return str(exc).splitlines()[0]


def _hits(trace: list) -> dict[str, int]:
    """How often each of Kafka's crash points was reached in a traced child."""
    hits: dict[str, int] = {}
    for name, *_ in trace:
        if name.startswith("ks."):
            hits[name] = hits.get(name, 0) + 1
    return hits


def _crashed(server, spec, workdir, rng, found: Findings, point: str, hit: int) -> list[Violation]:
    """A crash at ``point`` (its hit #``hit``) in the upgraded store's open, first commits or close."""
    found.cases += 1
    case = _Case(server, workdir, f"{FROM} -> {spec}, crash at {point} #{hit}", rng, found.cases)
    _open_from(case)
    try:
        proc = case.start(spec, init_arms=[(point, hit)])
        case.write_and_commit(proc, spec)
        case.write_and_commit(proc, spec)
        proc.call("put", *UNCOMMITTED)
        case.story.append(f"{spec}: put {UNCOMMITTED[0]!r} (never committed), close()")
        proc.call("close")
    except ChildCrashed:
        case.story.append(f"the process died at {point}")
    else:  # every point was reached by the case without a crash: not reaching it is a finding of its own
        return [Violation("offsets_match_data", None, f"a crash at {point} (hit #{hit})", "the point not reached",
                          case=case.name, detail="; ".join(case.story))]
    violations = []
    for who in (spec, *_back_stores(spec)):
        proc = _open(case, who)
        if isinstance(proc, str):  # after a crash, Kafka's wipe and restore: nothing uncommitted is kept
            case.story.append(f"{who} refused the directory ({proc}): wiped and restored")
            break
        case.story.append(f"{who} opens it")
        held = case.held(proc)
        violations += case.judge(held, "offsets_match_data")
        proc.call("close")
        if held in case.states:
            case.states = [held]  # a clean close by it flushed what it opened
    return violations


def _from_killed(server, spec, workdir, rng, found: Findings, flushed: bool) -> list[Violation]:
    """4.3.1 killed with uncommitted writes on top of a clean close: none flushed, or flushed (a full
    memtable, the OPEN marker with them); the upgraded store opens the directory."""
    found.cases += 1
    case = _Case(server, workdir, f"{FROM} killed with uncommitted writes{' flushed' if flushed else ''} -> {spec}",
                 rng, found.cases)
    _open_from(case)
    proc = case.start(FROM)
    proc.call("put", *UNCOMMITTED)
    if flushed:
        before = {p.name for p in case.d.directory.rglob("*.sst")}
        proc.call("put_all", [(b"big%02d" % i, bytes([65 + i]) * BIG) for i in range(FLUSHED)])
        proc.call("put", b"big-switch", b"1")  # RocksDB switches the full memtable at the next write
        deadline = time.monotonic() + 60
        while not {p.name for p in case.d.directory.rglob("*.sst")} - before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the flush's MANIFEST edit follows its table files
    case.story.append(f"{FROM}: put {UNCOMMITTED[0]!r}" + (f" and {FLUSHED} MiB more (flushed)" if flushed else "")
                      + ", SIGKILL")
    proc.kill()
    proc = _open(case, spec)
    if isinstance(proc, str):
        case.story.append(f"{spec} refused the directory: {proc}")
        found.notes.append(f"{case.name}: refused ({proc}); nothing uncommitted is exposed"
                           + (_NOT_WIPED if "-rocksdb-tx" in spec else "; Kafka Streams wipes the task and restores it"))
        return []  # the store's part: refuse what may hold uncommitted writes
    held = case.held(proc)
    proc.call("close")
    case.story.append(f"{spec} opened it")
    return case.judge(held, "offsets_match_data", exact=True)


SCENARIOS = [
    Scenario("kafka_streams_upgrade", ("migration_keeps_offsets", "migration_keeps_keys", "offsets_match_data",
                                       "downgrade_keeps_offsets"), _applies, _upgrade, applies_to=applies_to),
]
