"""The window store suite: a window store, run in a real child process, compared with the KIP-428 model.

Three parts, driving the store through :mod:`eos_harness.process.window_server` and crashing it
for real:

- argument validation: the store's factory called with every invalid combination of KIP-428;
- a Hypothesis ``RuleBasedStateMachine``: puts at timestamps drawn near the retention and grace
  edges (exactly at, one before, one after) and out of order, deletes, fetches of every shape
  (forward and backward) with bounds at the fetch lower bound, read-committed fetches, an
  iterator held open across expiry, commits, a crash at every commit point the store reaches, a
  SIGKILL at any moment, a clean close and reopen; compared with the model after every step;
- the fixed matrix: every crash point the store reaches × a few workloads.

After a restart the harness does what Kafka's runtime does: ``recover`` with the committed offset;
a persistent non-transactional store must answer False and is wiped; a store that is wiped or not
persistent is then restored from the committed changelog (``restore``), and must come back with
stream time rebuilt (check ``stream_time_rebuilt``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from eos_harness.models.windows import KIP428_PROPOSAL, NO_TIMESTAMP, WindowConfig, WindowStoreModel
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import ChildCrashed, StoreCallError, children_output
from eos_harness.process.window_server import WindowStoreServer
from eos_harness.seeding import seed_only
from eos_harness.store import StoreContext
from eos_harness.stores import StoreRef
from eos_harness.stores.child_probe import ChildFailed, run_in_child, store_ref
from eos_harness.stores.probe import reached_window_points as reached_points
from eos_harness.stores.registry import resolve_window
from eos_harness.suites.conformance.driver import step_of
from eos_harness.suites.conformance.runner import verify_repro
from eos_harness.suites.store_faults import crash_then_check, finish_case, store_fault_rules
from eos_harness.suites.windows.checks import (
    CHECKS,
    CONDITIONS,
    WAIVABLE,
    check_validation,
    compare_records,
    recovered_windows,
    show,
)
from eos_harness.suites.windows.plan import KEYS, VALUES, edge_deltas, matrix_cases, workload_puts
from eos_harness.verdict import Violation, check_coverage, finding_violation, verdict_of
from eos_harness.verdict import error_result as verdict_error_result
from eos_harness.window_store import WindowCapabilities
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

__all__ = ["WAIVABLE", "WindowViolation", "machine_for", "run_case", "verify", "window_facts"]

TP = StoreContext(directory=Path()).changelog
TOP = 2**62


class WindowViolation(AssertionError):
    """Raised at the first broken promise; Hypothesis shrinks the steps that raise it."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(f"{violation.check}: {violation.key!r}: expected {violation.expected!r}, "
                         f"observed {violation.observed!r}")
        self.violation = violation


class WindowStoreUnderTest:
    """The live window store (in its child) and the model of what it must hold."""

    def __init__(self, server: WindowStoreServer, spec: str, case: str, allowed: frozenset[str] = frozenset(),
                 waived: Counter | None = None) -> None:
        self.server, self.spec, self.case = server, spec, case
        self.allowed, self.waived = allowed, waived if waived is not None else Counter()
        self.proc = None
        self.root = Path(tempfile.mkdtemp(prefix="eos-windows-"))
        self.directory = self.root / "store"
        try:
            self._open(server, spec)
        except BaseException:  # a store that cannot start leaves no process and no directory behind
            if getattr(self, "proc", None) is not None:
                self.proc.kill()
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _open(self, server: WindowStoreServer, spec: str) -> None:
        self.proc = server.start(spec, self.directory)
        declared: WindowConfig = self.proc.call("window_config")
        # The model keeps the rules of the declared semantics itself (never the store's own code).
        config = WindowConfig(declared.name, declared.retention_period, declared.window_size,
                              declared.grace_period, declared.semantics)
        capabilities = self.proc.call("capabilities") if self._has("capabilities") else WindowCapabilities()
        self.capabilities: WindowCapabilities = capabilities
        self.model = WindowStoreModel(config, transactional=self.proc.call("transactional"),
                                      persistent=self.proc.call("persistent"),
                                      manages_offsets=self.proc.call("manages_offsets"))
        self.next_offset = 1
        self.checkpoint: int | None = None
        self.iterator: tuple[int, list, set, list] | None = None  # (id, snapshot, written since, seen)
        # After a restart: the stream time a store that lost its own would have (the greatest window start
        # put since), until a put reaches the stream time of the restart (then None).
        self.restarted: int | None = None
        self.exercised: set[str] = {"store_error"}  # the checks whose condition this case met (checks.CONDITIONS)
        # A store whose commits are durable only once flushed (WindowCapabilities(commit_durable=False)): the
        # committed states (records, stream time, offsets, changelog length) of every commit since it was
        # last closed cleanly or recovered, oldest first; after a crash it may hold any of them.
        self.unflushed: list[tuple] = []
        self._flushed()
        self.written: set[int] = set()  # the window starts of every put the store took

    def _flushed(self) -> None:
        """The store's state is on disk: only the current committed state may come back after a crash."""
        self.unflushed = [self._committed_state()]

    def _committed_state(self) -> tuple:
        model = self.model
        return (model.all(committed_only=True), model.committed_stream_time, dict(model.offsets), len(model.changelog))

    def _has(self, method: str) -> bool:
        try:
            self.proc.call(method)
        except StoreCallError:
            return False
        return True

    # -- plumbing ---------------------------------------------------------------------------------
    def fail(self, violation: Violation) -> None:
        raise WindowViolation(replace(violation, case=self.case))

    def call(self, method: str, *args):
        try:
            return self.proc.call(method, *args)
        except StoreCallError as exc:
            self.fail(Violation("store_error", None, f"{method} succeeds", str(exc)))

    def dispose(self) -> None:
        self.proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def met(self, *checks: str) -> None:
        """This case met the condition of ``checks`` (:data:`.checks.CONDITIONS`)."""
        self.exercised.update(checks)

    def _expired_stored(self, committed: bool = False) -> bool:
        """Whether a window once written now lies at or before stream time - retention (a read must not
        show it)."""
        model = self.model
        now = model.committed_stream_time if committed or not model.transactional else model.stream_time
        return bool(self.written) and min(self.written) < model.config.lower_bound(now)

    def _read(self) -> None:
        """A read: it meets the conditions of the checks about expired windows."""
        if self._expired_stored():
            self.met("expired_never_fetched", *(["stream_time_rebuilt"] if self.restarted is not None else []))

    def expect(self, what: str, expected: list, observed: list, **how) -> None:
        if len(expected) > 1:
            self.met("fetch_order")
        found = compare_records(self.model, what, expected, observed, restarted=self.restarted, **how)
        if found is not None and found.check in self.allowed:  # --allow: counted, and the case goes on
            self.waived[found.check] += 1
        elif found is not None:
            self.fail(found)

    # -- operations -------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None, start: int) -> None:
        self.call("put", key, value, start)
        if self.restarted is not None:
            self.restarted = max(self.restarted, start)
            if self.restarted >= self.model.stream_time:  # the store's own stream time is no longer in question
                self.restarted = None
        live = self.model.fetch_window(key, start) is not None
        dropped = self.model.put(key, value, start)
        if dropped is None and value is not None:
            self.written.add(start)
        self.met({"late": "late_write_dropped", "expired": "expired_write_dropped"}.get(dropped, "read_your_own_writes"))
        if dropped is None and value is None and live:
            self.met("tombstone_deletes_window")
        if self.iterator is not None:
            self.iterator[2].add((key, start))
        got = self.call("fetch_window", key, start)
        want = self.model.fetch_window(key, start)
        if got != want:
            observed = [] if got is None else [(key, start, got)]
            expected = [] if want is None else [(key, start, want)]
            self.expect(f"fetch_window({show(key)}, {start}) after put", expected, observed)

    def check_all(self, after_restore: bool = False, default: str = "read_your_own_writes") -> None:
        self._read()
        if after_restore and self._expired_stored():
            self.met("stream_time_rebuilt")
        self.expect("all()", self.model.all(), self.call("all"), after_restore=after_restore, default=default)

    def check_fetches(self, key: bytes, time_from: int, time_to: int) -> None:
        model = self.model
        self._read()
        expected = model.fetch(key, time_from, time_to)
        self.expect(f"fetch({show(key)}, {time_from}, {time_to})", expected,
                    self.call("fetch", key, time_from, time_to), single_key=key)
        lo, hi = KEYS[0], key
        checks = [(f"fetch_range({show(lo)}, {show(hi)}, {time_from}, {time_to})",
                   model.fetch_range(lo, hi, time_from, time_to), "fetch_range", (lo, hi, time_from, time_to)),
                  (f"fetch_all({time_from}, {time_to})", model.fetch_all(time_from, time_to), "fetch_all",
                   (time_from, time_to))]
        if self.capabilities.range_fetch:
            for what, want, method, args in checks:
                self.expect(what, want, self.call(method, *args))
        if self.capabilities.backward_fetch:
            self.expect(f"backward_fetch({show(key)}, {time_from}, {time_to})", expected[::-1],
                        self.call("backward_fetch", key, time_from, time_to), single_key=key)
            if self.capabilities.range_fetch:
                for what, want, method, args in checks:
                    self.expect("backward_" + what, want[::-1], self.call("backward_" + method, *args))
                self.expect("backward_all()", model.all()[::-1], self.call("backward_all"))

    def check_read_committed(self) -> None:
        model = self.model
        if model.overlay if model.transactional else model.committed:
            self.met("read_committed_isolation")
        default = "read_committed_isolation"
        self.expect("read_committed().all()", model.all(committed_only=True), self.call("rc_all"),
                    committed=True, default=default)
        for key in KEYS[:2]:
            self.expect(f"read_committed().fetch({show(key)}, 0, max)", model.fetch(key, 0, TOP, committed_only=True),
                        self.call("rc_fetch", key, 0, TOP), committed=True, default=default, single_key=key)

    def commit(self) -> None:
        offset = self.next_offset
        self.next_offset += 1
        self.call("commit", {TP: offset})
        self.model.commit({TP: offset})
        self.unflushed.append(self._committed_state())
        if not self.model.manages_offsets:
            self.checkpoint = offset
        self.check_offset()

    def check_offset(self) -> None:
        if self.model.committed_offset(TP) is not None:
            self.met("committed_offset_durable")
        got = self.call("committed_offset", TP)
        if got != self.model.committed_offset(TP):
            self.fail(Violation("committed_offset_durable", str(TP), self.model.committed_offset(TP), got))

    # -- held iterators -----------------------------------------------------------------------------
    def open_iterator(self) -> None:
        number = self.call("iter_open", "fetch_all", 0, TOP)
        self.iterator = (number, self.model.all(), set(), list(self.call("iter_next", number, 1)))

    def drain_iterator(self) -> None:
        number, snapshot, written, seen = self.iterator
        self.iterator = None
        seen = seen + list(self.call("iter_next", number, 10**9))
        self.call("iter_close", number)
        seen = [tuple(r) for r in seen]
        model = self.model
        applied = model.stream_time if not model.transactional else model.committed_stream_time
        if any(model.config.lower_bound(applied) > start and (key, start) not in written for key, start, _ in snapshot):
            self.met("held_iterator")
        if seen != sorted(seen, key=lambda r: (r[1], r[0])):
            if "fetch_order" in self.allowed:  # waived: what it yields is still judged below
                self.waived["fetch_order"] += 1
            else:
                self.fail(Violation("fetch_order", "iterator held open", "by window start, then key", show(seen)))
        for record in snapshot:
            if (record[0], record[1]) not in written and record not in seen:
                self.fail(Violation("held_iterator", f"{show(record[0])}@{record[1]}",
                                    f"yielded (live when the iterator opened): {show(record[2])}", show(seen)))
        for record in seen:
            if record not in snapshot and (record[0], record[1]) not in written:
                self.fail(Violation("held_iterator", f"{show(record[0])}@{record[1]}",
                                    "not yielded (neither live at open nor written since)", show(record[2])))

    # -- faults -----------------------------------------------------------------------------------
    def crash_in_commit(self, point: str, hit: int) -> None:
        offset = self.next_offset
        self.next_offset += 1
        self.call("arm", point, hit)
        try:
            self.proc.call("commit", {TP: offset})
        except ChildCrashed:
            if self.model.overlay or self.model.pending:
                self.met("atomic_commit")
            self.recover_after_crash(in_flight=offset)
            return
        except StoreCallError as exc:
            self.fail(Violation("store_error", None, "commit succeeds", str(exc)))
        self.call("disarm")
        self.model.commit({TP: offset})
        self.unflushed.append(self._committed_state())
        if not self.model.manages_offsets:
            self.checkpoint = offset

    def kill(self) -> None:
        self.proc.kill()
        self.recover_after_crash(in_flight=None)

    def _restart(self) -> None:
        self.proc = self.server.start(self.spec, self.directory)
        self.iterator = None
        self.restarted = NO_TIMESTAMP

    def _restore(self) -> None:
        """The runtime's restore: replay the committed changelog; stream time must be rebuilt."""
        self.call("restore", list(self.model.changelog))
        self.model.restore()
        self.check_all(after_restore=True)

    def _restore_since(self, state: tuple) -> None:
        """The store came back at an earlier commit (``state``, one of :attr:`unflushed`): the runtime restores
        the changelog written after it, as Kafka's does from the store's committed offset."""
        records, stream_time, offsets, length = state
        model = self.model
        tail = list(model.changelog[length:])
        model.adopt(records, stream_time, offsets)
        transactional, model.transactional = model.transactional, False
        try:
            for key, window_start, value in tail:  # each a put, as the store's restore applies it
                model.put(key, value, window_start)
        finally:
            model.transactional = transactional
            model.pending = []
        self.call("restore", tail)
        self.check_all(after_restore=True)

    def recover_after_crash(self, in_flight: int | None) -> None:
        model = self.model
        if model.overlay or model.pending:
            self.met("no_uncommitted_survives")
        if model.committed and self.capabilities.commit_durable:
            self.met("committed_durable")
        if model.persistent:
            self.met("recover_trust")
        self._restart()
        if in_flight is not None and not model.persistent:
            model.commit({TP: in_flight})  # the EOS transaction (changelog) commits before the store does
        offset = self.call("committed_offset", TP) if model.manages_offsets else self.checkpoint
        trusted = self.call("recover", offset)
        if model.persistent and not model.transactional:
            if trusted:
                self.fail(Violation("recover_trust", None, "recover() returns False (contents not trusted)", "True"))
            self.proc.call("close")
            shutil.rmtree(self.directory, ignore_errors=True)
            self._restart()
            model.wipe()
            self.checkpoint = None
            self._restore()
            self._flushed()
            return
        if not model.persistent:
            model.crash()
            self._restore()
            self._flushed()
            return
        if not trusted:
            self.fail(Violation("recover_trust", None, "recover() returns True for a transactional store", "False"))
        pre = (model.all(committed_only=True), model.committed_stream_time, model.committed_offset(TP))
        outcomes = [pre]
        if in_flight is not None:
            records, stream_time, offsets = model.committed_after({TP: in_flight})
            outcomes.append((records, stream_time, offsets.get(TP)))
        earlier = [] if self.capabilities.commit_durable else list(reversed(self.unflushed[:-1]))
        outcomes += [(records, stream_time, offsets.get(TP)) for records, stream_time, offsets, _ in earlier]
        data = [tuple(r) for r in self.call("all")]
        got_offset = self.call("committed_offset", TP)
        for number, (records, _stream_time, off) in enumerate(outcomes):
            if data == records and got_offset == off:
                if number == 1 and in_flight is not None:
                    model.commit({TP: in_flight})
                model.crash()
                first_earlier = len(outcomes) - len(earlier)
                if number >= first_earlier:  # an earlier commit: the runtime restores the rest from the changelog
                    state = earlier[number - first_earlier]
                    self._restore_since(state)
                    self.unflushed = [state, self._committed_state()]  # on disk still that commit
                else:
                    self._flushed()
                return
        if any(data == o[0] for o in outcomes):
            self.fail(Violation("atomic_commit" if len(outcomes) > 1 else "committed_offset_durable", str(TP),
                                [o[2] for o in outcomes], got_offset))
        found = recovered_windows(model, outcomes, data, got_offset, self.restarted, "all() after a crash and recover")
        if found is not None:  # one state whole, but for windows a tombstone or a stream time explains
            self.fail(found)
        if len(outcomes) > 1:
            self.fail(Violation("atomic_commit", "all()", "all of the commit or none of it",
                                f"partial: {show(data)}"))
        staged = {(k, s) for (s, k) in model.overlay}
        extra = [r for r in data if r not in pre[0]]
        check = "no_uncommitted_survives" if any((k, s) in staged for k, s, _ in extra) else "committed_durable"
        if extra and check == "committed_durable":
            found = compare_records(model, "all() after recovery", pre[0], data, committed=True,
                                    default="committed_durable", restarted=self.restarted)
            check = found.check if found is not None else check
        self.fail(Violation(check, "all() after recovery", show(pre[0]), show(data)))

    def close_and_reopen(self) -> None:
        self.call("close")
        self._restart()
        model = self.model
        model.overlay, model.pending = {}, []
        model.stream_time = model.committed_stream_time
        self._flushed()  # a clean close flushes
        if model.persistent:
            if model.committed:
                self.met("clean_close_durable")
            data = [tuple(r) for r in self.call("all")]
            if data != model.all(committed_only=True):
                found = compare_records(model, "all() after a clean close", model.all(committed_only=True), data,
                                        committed=True, default="clean_close_durable", restarted=self.restarted)
                if found.check in self.allowed:  # a read of what the reopened store holds: the case goes on
                    self.waived[found.check] += 1
                else:
                    self.fail(found)
            self.check_offset()
            self.call("recover", self.call("committed_offset", TP) if model.manages_offsets else self.checkpoint)
        else:
            model.crash()
            self.call("recover", None)
            self._restore()
        self.check_all()


# -- the state machine ------------------------------------------------------------------------------

def machine_for(spec: str, server: WindowStoreServer, crash_points: list[str],
                config: WindowConfig, exercised: Counter | None = None, allowed: frozenset[str] = frozenset(),
                waived: Counter | None = None) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one window store spec (``config``: the store's own);
    ``exercised`` counts, per check, the examples that met its condition."""
    deltas = st.sampled_from(edge_deltas(config))
    keys, values = st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(VALUES))
    spans = st.sampled_from(sorted({0, 1, config.window_size, config.retention_period}))

    class WindowConformance(store_fault_rules(crash_points)):  # commit and the faults: suites/store_faults.py
        def __init__(self) -> None:
            super().__init__()
            self.sut = WindowStoreUnderTest(server, spec, "hypothesis", allowed, waived)

        def teardown(self) -> None:
            finish_case(self.sut, exercised)

        def check_contents(self) -> None:
            self.sut.check_all()

        def now(self) -> int:
            return max(self.sut.model.stream_time, 0)

        @rule(key=keys, value=values, delta=deltas)
        def put(self, key, value, delta):
            self.sut.put(key, value, max(0, self.now() + delta))

        @rule(key=keys, value=st.sampled_from(VALUES), start=st.integers(0, 3 * config.retention_period))
        def put_anywhere(self, key, value, start):
            self.sut.put(key, value, start)

        @rule(key=keys, delta=deltas, span=spans, at_bound=st.booleans())
        def fetch(self, key, delta, span, at_bound):
            if at_bound:  # the fetch lower bound itself, one before or one after it
                start = max(0, config.lower_bound(self.now()) + max(-1, min(1, delta)))
            else:
                start = max(0, self.now() + delta)
            self.sut.check_fetches(key, start, start + span)

        @rule()
        def everything(self):
            self.sut.check_all()

        @rule()
        def read_committed(self):
            self.sut.check_read_committed()

        @precondition(lambda self: self.sut.iterator is None and self.sut.capabilities.held_iterators)
        @rule()
        def open_iterator(self):
            self.sut.open_iterator()

        @precondition(lambda self: self.sut.iterator is not None)
        @rule()
        def drain_iterator(self):
            self.sut.drain_iterator()

        # held_iterator's condition: stream time moves past the windows an open iterator is still to
        # yield (a put far ahead, committed: a transactional store expires at its commit).
        @precondition(lambda self: self.sut.iterator is not None)
        @rule(key=keys, value=st.sampled_from(VALUES))
        def expire_under_iterator(self, key, value):
            self.sut.put(key, value, self.now() + config.retention_period + 1)
            self.sut.commit()

    WindowConformance.__name__ = f"WindowConformance[{spec}]"
    return WindowConformance


# -- the matrix --------------------------------------------------------------------------------------

def run_case(server: WindowStoreServer, spec: str, workload: str, point: str | None,
             exercised: Counter | None = None, allowed: frozenset[str] = frozenset(),
             waived: Counter | None = None) -> None:
    """One matrix case: commit a base, write a workload (edges, out of order), check every fetch,
    crash (at ``point`` inside commit, or a kill before it), recover, check; commit again, check, close and
    reopen; then hold an iterator open while a committed put far ahead expires every window it is still
    to yield. Raises WindowViolation. ``exercised``: counts the checks whose condition the case met."""
    sut = WindowStoreUnderTest(server, spec, f"{workload} × {point or 'kill before commit'}", allowed, waived)
    try:
        for key in KEYS:
            sut.put(key, b"v1", 100)
        sut.put(b"a", b"v2", 95)
        sut.commit()
        for key, start, value in workload_puts(workload, sut.model.config):
            sut.put(key, value, start)
        sut.check_all()
        for key in KEYS:
            sut.check_fetches(key, 0, TOP)
        sut.check_read_committed()
        crash_then_check(sut, point, sut.check_all)
        # Then the workload committed (its edges now in the changelog) and read at once (the commit applied its
        # writes, tombstones included, to the live store: a store rebuilt from the changelog would hide a commit
        # that lost some), a restart, and one more put.
        for key, start, value in workload_puts(workload, sut.model.config):
            sut.put(key, value, start)
        sut.commit()
        sut.check_all()
        sut.check_read_committed()
        sut.close_and_reopen()
        sut.put(b"c", b"v2", max(sut.model.stream_time, 0) + 1)
        sut.check_all()
        if sut.capabilities.held_iterators:  # an iterator held open while every window it is to yield expires
            sut.open_iterator()
            sut.put(b"a", b"v3", max(sut.model.stream_time, 0) + sut.model.config.retention_period + 1)
            sut.commit()
            sut.drain_iterator()
    finally:
        finish_case(sut, exercised)


# -- verify -------------------------------------------------------------------------------------------

def window_facts(spec: str | StoreRef, timeout: float = STORE_TIMEOUT_S) -> tuple:
    """The window store's own ``window_config()``, its capabilities, and what :func:`check_validation`
    finds, learned in a child under ``timeout`` (the store's code never runs in the harness's process);
    raises :class:`~eos_harness.stores.child_probe.ChildFailed` with the finding when it broke the protocol."""
    return run_in_child(_window_facts, (str(spec),), timeout, "probe")


def _window_facts(spec: str) -> tuple:
    """In a child: :func:`window_facts`."""
    factory = resolve_window(spec)
    probe = factory()
    capabilities = probe.capabilities() if callable(getattr(probe, "capabilities", None)) else WindowCapabilities()
    return probe.window_config(), capabilities, check_validation(factory) if capabilities.argument_validation else []


def verify(spec: str | StoreRef, seed: int, examples: int = 40, steps: int = 25, shrink: bool = True,
           store_timeout: float = STORE_TIMEOUT_S, allow: Iterable[str] = ()) -> dict:
    """Run validation, the matrix and the state machine against the window store ``spec``; return
    the verdict object (the shape of the key-value suite's, with ``suite: windows``). The store runs
    in children only, every call bounded by ``store_timeout``; one that broke the protocol while it
    was probed fails the verdict with that finding."""
    allowed = tuple(dict.fromkeys(allow))
    unknown = [c for c in allowed if c not in WAIVABLE]
    if unknown:
        raise ValueError(f"cannot allow {', '.join(map(repr, unknown))} for a window store: the checks that can be "
                         f"allowed are {', '.join(WAIVABLE)}")
    waived: Counter = Counter()
    ref = store_ref(spec, store_timeout)
    spec = ref.spec
    repro = verify_repro(spec, seed, examples, steps, store_timeout, allowed)
    cases: list[str] = ["probe: KIP-428's argument validation, the crash points reached"]
    try:
        reached = reached_points(ref, store_timeout)
        config, capabilities, validation = window_facts(ref, store_timeout)
    except ChildFailed as exc:
        violation = finding_violation(exc.finding, cases[0])
        return {"store": spec, "suite": "windows", "semantics": ref.semantics, "verdict": verdict_of([violation]),
                "seed": seed, "cases": cases, "not_checked": [],
                "violations": [{**violation.to_json(), "replay": repro}], "repro": repro}
    # The suite crashes a store inside its commit: a point reached only while the store opens or closes (Kafka
    # Streams' status marker and database close, eos_harness.kafka_streams.points) never fires in a commit.
    crash_points = [point for point in reached if step_of(point) == "commit"]
    outside = [point for point in reached if point not in crash_points]
    violations: list[Violation] = [replace(v, case="validation") for v in validation]
    cases = ["validation: KIP-428's invalid argument combinations"]
    exercised: Counter = Counter({"argument_validation": 1} if capabilities.argument_validation else {})
    with WindowStoreServer(timeout=store_timeout) as server:
        for workload, point in matrix_cases(crash_points):
            name = f"matrix: {workload} × {point or 'kill before commit'}"
            cases.append(name)
            try:
                run_case(server, spec, workload, point, exercised, frozenset(allowed), waived)
            except WindowViolation as exc:
                violations.append(exc.violation)
        machine = machine_for(spec, server, crash_points, config, exercised, frozenset(allowed), waived)
        hypothesis_seed(seed)(machine)
        report: list[str] = []
        cases.append(f"hypothesis: state machine, {examples} examples × {steps} steps, seed {seed}")
        try:
            with with_reporter(report.append), seed_only():  # the steps depend on the seed alone
                run_state_machine_as_test(machine, settings=settings(
                    max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
                    derandomize=False, suppress_health_check=list(HealthCheck),
                    phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                    print_blob=False, report_multiple_bugs=False))
        except WindowViolation as exc:
            lines = [*report, *getattr(exc, "__notes__", [])]
            steps_text = "\n".join(line for line in lines if line.strip())
            label = "hypothesis (shrunk)" if shrink else "hypothesis (not shrunk)"
            violations.append(replace(exc.violation, case=f"{label}:\n{steps_text}"))
        kind = _kind_of(server, spec)
    for violation in violations:  # a check that fired met its condition, whatever the case recorded before it raised
        exercised[violation.check] = exercised.get(violation.check) or 1
    lacking = capabilities.lacking()
    coverage = {} if kind is None else {"coverage": check_coverage(
        CHECKS, CONDITIONS, exercised, not_applicable(kind, config, capabilities, crash_points))}
    return {
        "store": spec,
        "suite": "windows",
        "semantics": config.semantics,
        "verdict": verdict_of(violations),
        "seed": seed,
        "cases": cases,
        "not_checked": [f"{name} (the store declares it lacks it)" for name in lacking]
        + ([f"crash points {', '.join(outside)}: reached while the store opens or closes, never inside a commit, "
            "not armed (the window suite crashes stores inside their commit; the conformance suite arms them "
            "around a close and reopen)"] if outside else []),
        "violations": [{**v.to_json(), "replay": repro} for v in violations],
        "repro": repro,
        **({"allowed": list(allowed), "waived": {c: waived[c] for c in allowed if waived[c]}} if allowed else {}),
        **coverage,
    }


# -- a campaign's scenario (``eos-harness chaos --suite windows``) -------------------------------------

def run_one(scenario, directory: Path) -> dict:
    """One scenario of a campaign (:class:`eos_harness.suites.store_subjects.StoreRun`): :func:`verify`, the store's
    output (its processes', and its JVM's for Kafka's stores) in ``directory/store.log``, not on the terminal."""
    started = time.monotonic()
    directory.mkdir(exist_ok=True)
    with children_output(directory / "store.log"):
        result = verify(scenario.store, scenario.seed, scenario.examples, scenario.steps, allow=scenario.allow,
                        **({} if scenario.store_timeout is None else {"store_timeout": scenario.store_timeout}))
    return {**result, "log": str(directory / "store.log"), "seconds": round(time.monotonic() - started, 3)}


def error_result(scenario, exc: BaseException) -> dict:
    """The result of a campaign's scenario that could not be run to its end."""
    return verdict_error_result({"store": scenario.store}, scenario.seed, verify_repro(
        scenario.store, scenario.seed, scenario.examples, scenario.steps,
        STORE_TIMEOUT_S if scenario.store_timeout is None else scenario.store_timeout, scenario.allow), exc)


def _kind_of(server: WindowStoreServer, spec: str) -> WindowStoreModel | None:
    """The (empty) model of the store's kind: its answers to ``persistent()``, ``transactional()`` and
    ``manages_offsets()``, asked in a child; None when it cannot even be opened and asked."""
    try:
        sut = WindowStoreUnderTest(server, spec, "kind")
    except (StoreCallError, ChildCrashed):
        return None
    try:
        return sut.model
    finally:
        sut.dispose()


def not_applicable(model: WindowStoreModel, config: WindowConfig, capabilities: WindowCapabilities,
                   crash_points: list[str]) -> dict[str, str]:
    """The window checks that cannot fire on a store of ``model``'s kind (what it is, or declares it
    lacks), with why."""
    found = {}
    if not crash_points:
        found["atomic_commit"] = "the store reaches no crash point inside its commit"
    if config.semantics != KIP428_PROPOSAL:
        found["late_write_dropped"] = (f"the store declares {config.semantics} semantics: grace is the "
                                       "processor's, the store drops no late write")
    if not model.persistent:
        found.update({check: "the store is not persistent: it is restored from the changelog after a restart"
                      for check in ("clean_close_durable", "recover_trust")})
    if not model.manages_offsets:
        found["committed_offset_durable"] = ("the store does not manage its offsets: the runtime keeps them "
                                             "in the task's .checkpoint")
    if not capabilities.held_iterators:
        found["held_iterator"] = "the store declares it lacks held iterators"
    if not capabilities.argument_validation:
        found["argument_validation"] = ("the store declares it lacks KIP-428's argument validation (its arguments "
                                        "are another system's)")
    if not capabilities.commit_durable and model.persistent:
        found["committed_durable"] = ("the store's commits are durable only once flushed (WindowCapabilities("
                                      "commit_durable=False)): after a crash it may hold any commit since it was last "
                                      "closed or recovered, and the runtime restores the rest from the changelog")
    return found
