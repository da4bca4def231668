"""The conformance suite's driver: one store, live in its child process, beside the model of what it
must hold. It performs the operations the plan draws, asks the promises (:mod:`.checks`) after
each, and keeps what happened in a store implementer's words, so that a violation says what
happened just before it.

A check the user waived (``--allow``) does not stop the case: it is counted, and where the model
can take the store's answer as the truth (an offset, the state after a recovery) it does, so that
one known difference does not show up again as another check.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from eos_harness.models.kv import KVModel
from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang, StoreServer
from eos_harness.store import Capabilities, ChangelogRecord, StoreContext, TopicPartition
from eos_harness.verdict import Violation, finding_violation

from . import checks

__all__ = ["CONTEXT", "KEYS", "NEVER_COMMITTED", "PARTITIONS", "TASK_CONTEXT", "TP", "VALUES", "ConformanceViolation",
           "StoreAbandoned", "StoreUnderTest", "commit_offsets", "features_and_kind_of", "features_of", "not_applicable",
           "step_of"]

# The changelog partition the store's context names (the store server opens every store with the
# default context): the suite commits offsets for it, as a task commits for its store's changelog.
TP = StoreContext(directory=Path()).changelog
# A global store (KIP-1035): fed by three changelog partitions, TP first; the context names them and
# every commit gives offsets for them (partition 1 at each commit, partition 2 at every other one).
# NEVER_COMMITTED is never given to a commit: its committed_offset stays None.
PARTITIONS = (TP, TopicPartition(TP.topic, 1), TopicPartition(TP.topic, 2))
NEVER_COMMITTED = TopicPartition(TP.topic, 3)
OTHERS = (*PARTITIONS[1:], NEVER_COMMITTED)  # checked after TP, each time TP is
CONTEXT = {"changelogs": PARTITIONS}
# A task's store (it declares Capabilities(several_changelog_partitions=False)): its own partition alone.
TASK_CONTEXT = {"changelogs": (TP,)}


def commit_offsets(offset: int) -> dict[TopicPartition, int]:
    """The offsets of the commit whose TP offset is ``offset``: every partition of the global store."""
    offsets = {TP: offset, PARTITIONS[1]: 100 + 2 * offset}
    if offset % 2:
        offsets[PARTITIONS[2]] = 50 + offset
    return offsets


KEYS = [b"a", b"b", b"c", b"d", b"e"]
VALUES = [b"v1", b"v2", b"v3", b"xx"]
STORY_LINES = 8  # how much of what happened before a violation it carries


class ConformanceViolation(AssertionError):
    """Raised at the first broken promise of a case that is not waived; Hypothesis shrinks the steps
    that raise it."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(
            f"{violation.check}: key {violation.key!r}: expected {violation.expected!r}, observed {violation.observed!r}"
        )
        self.violation = violation


class StoreAbandoned(BaseException):
    """The store hung: the suite cannot go on with it. A BaseException, so that Hypothesis does not
    try to shrink it (every try would wait for the timeout again)."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(f"{violation.check}: {violation.observed}")
        self.violation = violation


def _entry(key: bytes, value: bytes | None) -> str:
    return f"{checks.show(key)}={checks.show(value)}" if value is not None else f"{checks.show(key)}=None (a tombstone)"


class StoreUnderTest:
    """The live store (in its child) plus the model of what it must hold.

    ``allowed``: the checks waived for this case; ``waived`` counts each waived check that fired."""

    def __init__(self, server: StoreServer, spec: str, case: str, allowed: frozenset[str] = frozenset(),
                 waived: Counter | None = None) -> None:
        self.server, self.spec, self.case = server, spec, case
        self.allowed, self.waived = allowed, waived if waived is not None else Counter()
        self.story: list[str] = []
        self.exercised: set[str] = set(checks.GUARD_CHECKS)  # checks whose condition this case met (CONDITIONS)
        self.commits = 0  # commits asked so far (commit #n in the story)
        self.writes = 0  # writes since the last commit, restart or restore
        self.root = Path(tempfile.mkdtemp(prefix="eos-conformance-"))
        self.directory = self.root / "store"
        self.context = CONTEXT
        try:
            self._restart()
            self.model = KVModel(
                transactional=self.call("transactional"),
                persistent=self.call("persistent"),
                manages_offsets=self.call("manages_offsets"),
            )
            self.offers: Capabilities = self.call("capabilities")
            self.has_restore: bool = self.call("offers_restore")
            if not self.offers.several_changelog_partitions:  # a task's store: reopened naming its partition alone
                self.call("close")
                self.context = TASK_CONTEXT
                self._restart()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.next_offset = 1
        self.checkpoint: int | None = None  # the .checkpoint the harness keeps for non-managing stores
        # A store whose commits are durable only once flushed (Capabilities(commit_durable=False)): the
        # states (data, offsets) of every commit since it was last closed cleanly or recovered, oldest first;
        # after a crash it may hold any of them.
        self.unflushed: list[tuple[dict, dict]] = [({}, {})]

    # -- partitions -----------------------------------------------------------------------------
    @property
    def several(self) -> bool:
        """Whether the store is fed by several changelog partitions (else a task's store: TP alone)."""
        return self.context is CONTEXT

    @property
    def others(self) -> tuple[TopicPartition, ...]:
        """The partitions asked after TP: a global store's further ones and one never committed."""
        return OTHERS if self.several else ()

    def commit_offsets(self, offset: int) -> dict[TopicPartition, int]:
        """The offsets a commit whose TP offset is ``offset`` gives: every partition of a global store,
        TP alone for a task's store."""
        return commit_offsets(offset) if self.several else {TP: offset}

    # -- plumbing -------------------------------------------------------------------------------
    def told(self, line: str) -> None:
        self.story.append(line)

    def met(self, *names: str) -> None:
        """This case met the condition of the checks ``names`` (:data:`.checks.CONDITIONS`)."""
        self.exercised.update(names)

    def judge(self, violation: Violation | None) -> bool:
        """Raise ``violation`` (with what happened just before) unless it is None or waived; True
        when a waived one fired (the caller may then resynchronise the model)."""
        if violation is None:
            return False
        if violation.check in self.allowed:
            self.waived[violation.check] += 1
            return True
        recent = self.story[-STORY_LINES:]
        before = "\n".join(f"  {line}" for line in recent)
        skipped = len(self.story) - len(recent)
        heading = "just before (oldest first" + (f", {skipped} earlier steps left out" if skipped else "") + "):"
        detail = f"{violation.detail}\n{heading}\n{before}" if recent else violation.detail
        raise ConformanceViolation(replace(violation, case=self.case, detail=detail))

    def store_failed(self, method: str, exc: StoreCallError | StoreHang) -> None:
        """Raise the violation for a call the store did not answer as the protocol says."""
        if isinstance(exc, StoreHang):
            raise StoreAbandoned(finding_violation(exc.finding, self.case)) from None
        if exc.finding is not None:
            raise ConformanceViolation(finding_violation(exc.finding, self.case)) from None
        raise ConformanceViolation(Violation("store_error", method, f"{method} succeeds", str(exc),
                                             case=self.case)) from None

    def call(self, method: str, *args):
        try:
            return self.proc.call(method, *args)
        except (StoreCallError, StoreHang) as exc:
            self.store_failed(method, exc)

    def calls(self, *calls: tuple) -> list:
        """The answers of several reads (``(method, *args)`` each), made in order in one request to the
        child (:meth:`StoreProcess.calls`): the same calls, answers and failures as one :meth:`call` each."""
        answers: list = []
        try:
            for answer in self.proc.calls([(method, tuple(args)) for method, *args in calls]):
                answers.append(answer)
        except (StoreCallError, StoreHang) as exc:
            self.store_failed(calls[len(answers)][0], exc)
        return answers

    def dispose(self) -> None:
        if getattr(self, "proc", None) is not None:
            self.proc.release()  # a store JVM it borrowed serves the next case
        shutil.rmtree(self.root, ignore_errors=True)

    # -- reads of the whole store (key by key for a store that declares no range scans) ---------------
    def contents(self) -> dict[bytes, bytes]:
        if self.offers.range_scans:
            return dict(self.call("all"))
        return {k: v for k, v in zip(KEYS, self.calls(*(("get", k) for k in KEYS)), strict=True) if v is not None}

    def committed_contents(self) -> dict[bytes, bytes]:
        if self.offers.range_scans:
            return dict(self.call("rc_all"))
        return {k: v for k in KEYS if (v := self.call("rc_get", k)) is not None}

    # -- operations -------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None) -> None:
        self.told(f"put {_entry(key, value)}")
        self.call("put", key, value)
        self.model.put(key, value)
        self.writes += 1

    def delete(self, key: bytes) -> None:
        self.told(f"delete {checks.show(key)}")
        expected = self.model.delete(key)
        self.writes += 1
        self.met("read_your_own_writes")
        self.judge(checks.delete_returns(key, expected, self.call("delete", key)))

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        if not self.offers.put_all:  # the store declares no put_all: the same writes, one by one
            for key, value in entries:
                self.put(key, value)
            return
        self.told(f"put_all [{', '.join(_entry(k, v) for k, v in entries)}]")
        self.call("put_all", entries)
        self.model.put_all(entries)
        self.writes += len(entries)

    def check_reads(self) -> None:
        if self.writes or self.model.committed:
            self.met("read_your_own_writes")
        expected = dict(self.model.all())
        scans = self.offers.range_scans
        answers = self.calls(*(("get", key) for key in KEYS), *([("all",)] if scans else []))
        gets = dict(zip(KEYS, answers, strict=False))
        listing = dict(answers[len(KEYS)]) if scans else None
        self.judge(checks.reads_match(expected, gets, listing))

    def check_range(self, lo: bytes, hi: bytes) -> None:
        if not self.offers.range_scans:
            return
        self.told(f"range({checks.show(lo)}, {checks.show(hi)})")
        if self.writes or self.model.committed:
            self.met("read_your_own_writes")
        self.judge(checks.range_matches(lo, hi, self.model.range(lo, hi), self.call("range", lo, hi)))

    def check_read_committed(self) -> None:
        model = self.model
        expected = dict(model.read_committed_all() if model.transactional else model.all())
        if model.overlay if model.transactional else expected:
            self.met("read_committed_isolation")
        scans = self.offers.range_scans
        keys = KEYS[:3] if scans else KEYS
        lo, hi = KEYS[1], KEYS[3]
        answers = self.calls(*([("rc_all",)] if scans else []), *(("rc_get", key) for key in keys),
                             *([("rc_range", lo, hi)] if scans else []))
        listing = dict(answers.pop(0)) if scans else None
        gets = dict(zip(keys, answers, strict=False))
        ranged = (lo, hi, answers[len(keys)]) if scans else None
        self.judge(checks.read_committed_matches(expected, gets, listing, ranged, model.overlay))

    def commit(self) -> None:
        offset = self.next_offset
        self.next_offset += 1
        self.commits += 1
        writes, previous = self.writes, self.model.committed_offset(TP)
        before = dict(self.model.offsets)
        self.told(f"commit #{self.commits} with offset {offset} "
                  f"({'no writes' if not writes else f'{writes} writes'} since the last commit)")
        self.call("commit", self.commit_offsets(offset))
        self._committed(offset, writes, previous, before)

    def _committed(self, offset: int, writes: int, previous: int | None, before: dict) -> None:
        """A commit returned: the model commits too, and ``committed_offset`` must say ``offset`` (and,
        for every other partition, what the model says; ``before``: the offsets before the commit)."""
        self.model.commit(self.commit_offsets(offset))
        self.writes = 0
        self._unflushed()
        if not self.model.manages_offsets:
            self.checkpoint = offset
        self.met("committed_offset_durable")
        got = self.call("committed_offset", TP)
        empty_may_keep = not self.offers.empty_commit_records_offset
        verdict = checks.commit_offset(str(TP), self.commits, writes, self.model.committed_offset(TP), got,
                                       previous, empty_may_keep)
        # An empty commit that kept its offset (declared), or a waived finding: the store's offset holds.
        if (verdict is None and got != self.model.committed_offset(TP)) or self.judge(verdict):
            self._adopt_offset(got)
        for tp in self.others:
            got = self.call("committed_offset", tp)
            expected = self.model.committed_offset(tp)
            verdict = checks.commit_offset(str(tp), self.commits, writes, expected, got, before.get(tp), empty_may_keep)
            if (verdict is None and got != expected) or self.judge(verdict):
                self._adopt_offset(got, tp)

    def _unflushed(self, since_durable: bool = False) -> None:
        """Record the committed state the model holds now (``since_durable``: as the one durable state)."""
        state = (dict(self.model.committed), dict(self.model.offsets))
        self.unflushed = [state] if since_durable else [*self.unflushed, state]

    def _adopt_offset(self, offset: int | None, tp: TopicPartition = TP) -> None:
        offsets = {k: v for k, v in self.model.offsets.items() if k != tp}
        self.model.adopt(self.model.committed, offsets if offset is None else {**offsets, tp: offset})

    def restore(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        """The store's own ``restore`` with ``entries`` as changelog records from the next offset on."""
        start = self.next_offset
        records = [ChangelogRecord(start + i, key, value) for i, (key, value) in enumerate(entries)]
        end = start + len(records)
        self.next_offset = max(end, start + 1)
        previous = self.model.committed_offset(TP)
        shown = ", ".join(f"{r.offset}: {_entry(r.key, r.value)}" for r in records) or "no records"
        self.told(f"restore([{shown}], end_offset={end})")
        self.call("restore", records, end)
        self.met("offset_convention")
        self.model.put_all(entries)
        self.model.commit({TP: end})
        self.writes = 0
        self._unflushed()
        if not self.model.manages_offsets:
            self.checkpoint = end
            return
        got = self.call("committed_offset", TP)
        empty_may_keep = not self.offers.empty_commit_records_offset
        verdict = checks.restore_offset(str(TP), start, len(records), end, got, previous, empty_may_keep)
        if (verdict is None and got != end) or self.judge(verdict):
            self._adopt_offset(got)

    # -- faults -----------------------------------------------------------------------------------
    def crash_in_commit(self, point: str, hit: int) -> None:
        """A crash at ``point`` inside the next commit; a point that sits in the store's close or open (its
        name holds ".close." or ".open.": :func:`step_of`) is armed around a close and reopen instead."""
        if step_of(point) != "commit":
            self.close_and_reopen(crash_at=(point, hit))
            return
        offset = self.next_offset
        self.next_offset += 1
        self.commits += 1
        writes, previous = self.writes, self.model.committed_offset(TP)
        before = dict(self.model.offsets)
        self.call("arm", point, hit)
        try:
            self.proc.call("commit", self.commit_offsets(offset))
        except ChildCrashed:
            self.told(f"commit #{self.commits} with offset {offset} ({writes} writes since the last commit): "
                      f"the process died at crash point {point} (armed for its hit #{hit})")
            self.met("atomic_commit")
            self.recover_after_crash(in_flight=offset)
            return
        except (StoreCallError, StoreHang) as exc:
            self.store_failed("commit", exc)
        self.told(f"commit #{self.commits} with offset {offset} ({writes} writes since the last commit); "
                  f"crash point {point} armed for its hit #{hit} was not reached that often")
        self.call("disarm")  # the point was not reached often enough: the commit simply happened
        self._committed(offset, writes, previous, before)

    def kill(self) -> None:
        self.told(f"SIGKILL of the store's process ({self.writes} writes since the last commit)")
        self.proc.kill()
        self.recover_after_crash(in_flight=None)

    def _restart(self, refusal: bool = False, init_arms: list[tuple[str, int]] | None = None) -> str | None:
        """Open the store in its directory, in a new child (a store that cannot: a finding). With
        ``refusal``, a store whose ``init`` refuses the directory (``IncompatibleStoreDirectory``, which
        Kafka's RocksDB store raises as ``TaskCorruptedException``) is wiped and opened empty, as the
        runtime and Kafka Streams do (:meth:`_wipe`), and the refusal's message is returned."""
        self.proc = None
        self.writes = 0
        try:
            self.proc = self.server.start(self.spec, self.directory, context=self.context, init_arms=init_arms)
        except (StoreCallError, StoreHang) as exc:
            if not (refusal and isinstance(exc, StoreCallError) and exc.kind == "IncompatibleStoreDirectory"):
                self.store_failed("init", exc)
            self._wipe()
            return str(exc).partition("\n")[0]
        return None

    def _wipe(self) -> None:
        """The runtime's rule for a store it cannot trust under exactly-once (and Kafka Streams': a task
        whose store raised TaskCorruptedException is closed dirty, its state directory deleted, and
        restored from the changelog): delete the directory, open the store empty."""
        if self.proc is not None:
            self.call("close")
        shutil.rmtree(self.directory, ignore_errors=True)
        self._restart()
        self.model.wipe()
        self._unflushed(since_durable=True)
        self.checkpoint = None

    def recover_after_crash(self, in_flight: int | None) -> None:
        model = self.model
        if model.overlay or self.writes:
            self.met("no_uncommitted_survives")
        if model.committed and self.offers.commit_durable:
            self.met("committed_durable")
        refused = self._restart(refusal=True)
        if refused is not None:
            # Under exactly-once Kafka Streams re-initialises a task whose store refuses its directory
            # after an unclean shutdown (TaskCorruptedException: "State store ... didn't find a valid state,
            # since under EOS it has the risk of getting uncommitted data in stores"): wiped and restored from
            # the changelog, which is what a non-transactional store is for. A transactional one promises
            # better (StreamsConfig, enable.transactional.statestores: "Under EOS, state stores will no
            # longer be wiped on-error and rebuilt from scratch"): it must trust what it kept.
            self.told(f"restarted the store: init refused its directory ({refused}); the runtime wiped it "
                      "and reopened it empty")
            if model.persistent and model.transactional:
                self.met("recover_trust")
                self.judge(checks.recover_refused(refused))
            return
        self.met("recover_trust")
        offset = self.call("committed_offset", TP) if model.manages_offsets else self.checkpoint
        trusted = self.call("recover", offset)
        self.told(f"restarted the store; recover({offset}) returned {trusted}")
        self.judge(checks.recover_trust(model.persistent, model.transactional, offset, trusted))
        if model.persistent and not model.transactional:
            # Kafka's rule under EOS: wipe the untrusted store and restore it from the changelog.
            self._wipe()
            self.told("closed it, wiped its directory and reopened it empty (the runtime's rule for an "
                      "untrusted store)")
            return
        # The recorded states the store may hold now (data, offsets by partition): the last committed
        # one, and after a crash inside a commit also that commit's; nothing for a store not persistent.
        outcomes: list[tuple[dict, dict]] = [({}, {})]
        if model.persistent:
            outcomes = [(dict(model.committed), dict(model.offsets) if model.manages_offsets else {})]
            if in_flight is not None:
                post_data, post_offsets = model.committed_after(self.commit_offsets(in_flight))
                outcomes.append((post_data, post_offsets if model.manages_offsets else {}))
            if not self.offers.commit_durable:  # any earlier commit since the store was last flushed
                outcomes += [(data, offsets if model.manages_offsets else {})
                             for data, offsets in reversed(self.unflushed[:-1])]
        data = self.contents()
        partitions = (TP, *self.others)  # what the store holds, by partition:
        held = dict(zip(partitions, self.calls(*(("committed_offset", tp) for tp in partitions)), strict=True))
        index, broken = checks.judge_recovery(outcomes, data, held, model.overlay, in_flight, offset)
        for violation in broken:
            self.judge(violation)  # waived: the model takes what the store holds as the truth
        if index == 1 and in_flight is not None and not model.manages_offsets:
            self.checkpoint = in_flight
        model.adopt(data, {tp: o for tp, o in held.items() if o is not None})
        if not model.persistent:
            model.adopt({}, {})
        self._unflushed(since_durable=True)

    def close_and_reopen(self, crash_at: tuple[str, int] | None = None) -> None:
        """A clean close and reopen; ``crash_at`` (a crash point of the close or of the open, its hit): the
        store's process is killed there, and the store recovers as after any crash."""
        point, hit = crash_at or (None, 0)
        step = step_of(point) if point is not None else None
        self.told("close() and reopen" + (f", crash point {point} armed for its hit #{hit}" if point else ""))
        uncommitted = dict(self.model.overlay)  # discarded by the close
        if step == "close":
            self.call("arm", point, hit)
        try:
            self.call("close")
        except ChildCrashed:
            self.told(f"close(): the process died at crash point {point}")
            self.recover_after_crash(in_flight=None)
            return
        committed = dict(self.model.committed)
        try:
            refused = self._restart(refusal=True, init_arms=[(point, hit)] if step == "open" else None)
        except ChildCrashed:
            self.told(f"closed cleanly; the reopen: the process died at crash point {point}")
            self.model.close_and_reopen()
            self._unflushed(since_durable=True)  # the clean close flushed every commit
            self.recover_after_crash(in_flight=None)
            return
        if point is not None:
            self.told(f"crash point {point} armed for its hit #{hit} was not reached that often")
        self.model.close_and_reopen()
        if refused is not None:
            self.told(f"the reopen: init refused the directory it had closed cleanly ({refused}); the runtime "
                      "wiped it and reopened it empty")
            if self.model.persistent and committed:
                self.met("clean_close_durable")
                self.judge(checks.clean_close_refused(committed, refused))
        elif self.model.persistent:
            if self.model.committed:
                self.met("clean_close_durable")
            data = self.contents()
            if self.judge(checks.clean_close_durable(self.model.committed, data, uncommitted)):
                self.model.adopt(data, self.model.offsets)
            got = self.call("committed_offset", TP)
            if self.judge(checks.reopened_offset(str(TP), self.model.committed_offset(TP), got)):
                self._adopt_offset(got)
            for tp in self.others:
                got = self.call("committed_offset", tp)
                if self.judge(checks.reopened_offset(str(tp), self.model.committed_offset(tp), got)):
                    self._adopt_offset(got, tp)
        offset = self.call("committed_offset", TP) if self.model.manages_offsets else self.checkpoint
        self.call("recover", offset)
        self.told(f"recover({offset}) after the reopen")
        self._unflushed(since_durable=True)  # a clean close flushes every commit
        self.check_reads()


def step_of(point: str) -> str:
    """Where a crash point sits: "close" or "open" when its name holds ".close." or ".open." (Kafka Streams'
    status marker and database close, :mod:`eos_harness.kafka_streams.points`), else "commit"."""
    for step in ("close", "open"):
        if f".{step}." in point:
            return step
    return "commit"


def features_of(server: StoreServer, spec: str) -> tuple[Capabilities, bool]:
    """What the store offers (its declared capabilities) and whether it has its own ``restore``, asked
    of the store in a child; raises ConformanceViolation when it cannot even be opened and asked."""
    offers, has_restore, _ = features_and_kind_of(server, spec)
    return offers, has_restore


def features_and_kind_of(server: StoreServer, spec: str) -> tuple[Capabilities, bool, KVModel]:
    """:func:`features_of`, and the (empty) model of the store's kind: its answers to ``persistent()``,
    ``transactional()`` and ``manages_offsets()``."""
    sut = StoreUnderTest(server, spec, "capabilities")
    try:
        return sut.offers, sut.has_restore, sut.model
    finally:
        sut.dispose()


def not_applicable(model: KVModel, has_restore: bool, offers: Capabilities | None = None) -> dict[str, str]:
    """The conformance checks that cannot fire on a store of this kind (and with what it declares), with why."""
    found = {}
    if offers is not None and not offers.commit_durable and model.persistent and model.transactional:
        found["committed_durable"] = ("the store declares its commits durable only once flushed "
                                      "(Capabilities(commit_durable=False)): after a crash it may hold any commit since "
                                      "its last clean close, and the changelog restores the rest")
    if not model.persistent:
        found.update(dict.fromkeys(("atomic_commit", "committed_durable", "clean_close_durable", "recover_trust"),
                                   "the store is not persistent: it is empty after a restart and restored from "
                                   "the changelog by the runtime"))
    elif not model.transactional:
        found.update(dict.fromkeys(("no_uncommitted_survives", "atomic_commit", "committed_durable"),
                                   "the store is not transactional: after a crash the runtime wipes it and restores "
                                   "it from the changelog"))
    if not has_restore:
        found["offset_convention"] = "the store has no restore of its own (the runtime restores it through put and commit)"
    elif not model.manages_offsets:
        found["offset_convention"] = "the store does not manage its offsets (the runtime keeps them in .checkpoint)"
    return found
