"""The conformance suite: a store, run in a real child process, compared with the KV model.

Two parts, both driving the store through :mod:`harness.server` and crashing it for real:

- a Hypothesis ``RuleBasedStateMachine`` (put, delete, put_all, get, range, read-committed reads,
  commit, a crash at a crash point inside commit, a SIGKILL at any moment, a clean close and
  reopen), compared with :class:`models.kv.KVModel` after every step; failures shrink to a
  minimal sequence of steps;
- an explicit matrix: every crash point the store reaches × a few fixed workloads.

Which promises are checked follows the store's own answers (see ``harness/store.py``). After a
crash the harness does what Kafka's runtime does: ``recover`` with the committed offset; a
persistent non-transactional store must answer False and is then wiped.

Checks: ``read_your_own_writes``, ``read_committed_isolation``, ``no_uncommitted_survives``,
``atomic_commit``, ``committed_durable``, ``committed_offset_durable``, ``clean_close_durable``,
``recover_trust``; and about the store's calls themselves (:mod:`eos_harness.process.guard`):
``store_hang`` (a call did not return within ``store_timeout``: the suite stops there, with the
store's stack), ``store_raised`` (with the store's traceback), ``store_return_type``.
A crash point the store reaches but never declared is declared for the run (a warning names it and
says how to declare it) and used like any other. The verdict lists the points reached and how often
the store crashed at each (``points``); every child's output goes to a log file (``log``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from eos_harness.models.kv import KVModel
from eos_harness.process.guard import STORE_TIMEOUT_S, finding_violation
from eos_harness.process.server import (
    ChildCrashed,
    StoreCallError,
    StoreHang,
    StoreServer,
    children_output,
    own_output_to,
)
from eos_harness.store import StoreContext
from eos_harness.stores import probe_store, resolve
from eos_harness.verdict import Violation, verdict_of
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

__all__ = ["CHECKS", "ConformanceViolation", "StoreAbandoned", "machine_for", "matrix_cases", "run_case", "verify"]

# The checks (promises) of the suite, by their public names (violations' ``check``; JUnit testcases):
# the model's, then those about the store's calls themselves (:mod:`eos_harness.process.guard`).
CHECKS = ("read_your_own_writes", "read_committed_isolation", "no_uncommitted_survives", "atomic_commit",
          "committed_durable", "committed_offset_durable", "clean_close_durable", "recover_trust", "store_error",
          "store_raised", "store_return_type", "store_hang")

# The changelog partition the store's context names (the store server opens every store with the
# default context): the suite commits offsets for it, as a task commits for its store's changelog.
TP = StoreContext(directory=Path()).changelog
PROBE = "probe"  # the pytest matrix case of a store whose probe found it broke the protocol
KEYS = [b"a", b"b", b"c", b"d", b"e"]
VALUES = [b"v1", b"v2", b"v3", b"xx"]


class ConformanceViolation(AssertionError):
    """Raised at the first broken promise of a case; Hypothesis shrinks the steps that raise it."""

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


def _show(data) -> object:
    if isinstance(data, bytes):
        return data.decode("latin-1")
    if isinstance(data, list | tuple):
        return [_show(x) for x in data]
    if isinstance(data, dict):
        return {_show(k): _show(v) for k, v in sorted(data.items())}
    return data


def _first_diff(expected: dict, observed: dict) -> bytes | None:
    for key in sorted(set(expected) | set(observed)):
        if expected.get(key) != observed.get(key):
            return key
    return None


class StoreUnderTest:
    """The live store (in its child) plus the model of what it must hold."""

    def __init__(self, server: StoreServer, spec: str, case: str) -> None:
        self.server, self.spec, self.case = server, spec, case
        self.root = Path(tempfile.mkdtemp(prefix="eos-conformance-"))
        self.directory = self.root / "store"
        try:
            self._restart()
            self.model = KVModel(
                transactional=self.call("transactional"),
                persistent=self.call("persistent"),
                manages_offsets=self.call("manages_offsets"),
            )
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.next_offset = 1
        self.checkpoint: int | None = None  # the .checkpoint the harness keeps for non-managing stores

    # -- plumbing -------------------------------------------------------------------------------
    def fail(self, check: str, key, expected, observed) -> None:
        raise ConformanceViolation(Violation(check, _show(key), _show(expected), _show(observed), case=self.case))

    def store_failed(self, method: str, exc: StoreCallError | StoreHang) -> None:
        """Raise the violation for a call the store did not answer as the protocol says."""
        if isinstance(exc, StoreHang):
            raise StoreAbandoned(finding_violation(exc.finding, self.case)) from None
        if exc.finding is not None:
            raise ConformanceViolation(finding_violation(exc.finding, self.case)) from None
        self.fail("store_error", None, f"{method} succeeds", str(exc))

    def call(self, method: str, *args):
        try:
            return self.proc.call(method, *args)
        except (StoreCallError, StoreHang) as exc:
            self.store_failed(method, exc)

    def dispose(self) -> None:
        if getattr(self, "proc", None) is not None:
            self.proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- operations -------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None) -> None:
        self.call("put", key, value)
        self.model.put(key, value)

    def delete(self, key: bytes) -> None:
        expected = self.model.delete(key)
        old = self.call("delete", key)
        if old != expected:
            self.fail("read_your_own_writes", key, f"delete returns {_show(expected)}", f"{_show(old)}")

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self.call("put_all", entries)
        self.model.put_all(entries)

    def check_reads(self) -> None:
        model = self.model
        for key in KEYS:
            got = self.call("get", key)
            if got != model.get(key):
                self.fail("read_your_own_writes", key, model.get(key), got)
        observed = dict(self.call("all"))
        expected = dict(model.all())
        if observed != expected:
            key = _first_diff(expected, observed)
            self.fail("read_your_own_writes", key, expected.get(key), observed.get(key))

    def check_range(self, lo: bytes, hi: bytes) -> None:
        got = self.call("range", lo, hi)
        if got != self.model.range(lo, hi):
            self.fail("read_your_own_writes", f"range {lo!r}..{hi!r}", self.model.range(lo, hi), got)

    def check_read_committed(self) -> None:
        model = self.model
        expected = dict(model.read_committed_all() if model.transactional else model.all())
        observed = dict(self.call("rc_all"))
        if observed != expected:
            key = _first_diff(expected, observed)
            self.fail("read_committed_isolation", key, expected.get(key), observed.get(key))
        for key in KEYS[:3]:
            got = self.call("rc_get", key)
            if got != expected.get(key):
                self.fail("read_committed_isolation", key, expected.get(key), got)
        lo, hi = KEYS[1], KEYS[3]
        got = self.call("rc_range", lo, hi)
        want = [(k, v) for k, v in sorted(expected.items()) if lo <= k <= hi]
        if got != want:
            self.fail("read_committed_isolation", "range b..d", want, got)

    def commit(self) -> None:
        offset = self.next_offset
        self.next_offset += 1
        self.call("commit", {TP: offset})
        self.model.commit({TP: offset})
        if not self.model.manages_offsets:
            self.checkpoint = offset
        self.check_offset("committed_offset_durable")

    def check_offset(self, check: str) -> None:
        got = self.call("committed_offset", TP)
        if got != self.model.committed_offset(TP):
            self.fail(check, str(TP), self.model.committed_offset(TP), got)

    # -- faults -----------------------------------------------------------------------------------
    def crash_in_commit(self, point: str, hit: int) -> None:
        offset = self.next_offset
        self.next_offset += 1
        self.call("arm", point, hit)
        try:
            self.proc.call("commit", {TP: offset})
        except ChildCrashed:
            self.recover_after_crash(in_flight=offset)
            return
        except (StoreCallError, StoreHang) as exc:
            self.store_failed("commit", exc)
        self.call("disarm")  # the point was not reached often enough: the commit simply happened
        self.model.commit({TP: offset})
        if not self.model.manages_offsets:
            self.checkpoint = offset

    def kill(self) -> None:
        self.proc.kill()
        self.recover_after_crash(in_flight=None)

    def _restart(self) -> None:
        """Open the store in its directory, in a new child (a store that cannot: a finding)."""
        self.proc = None
        try:
            self.proc = self.server.start(self.spec, self.directory)
        except (StoreCallError, StoreHang) as exc:
            self.store_failed("init", exc)

    def recover_after_crash(self, in_flight: int | None) -> None:
        model = self.model
        self._restart()
        offset = self.call("committed_offset", TP) if model.manages_offsets else self.checkpoint
        trusted = self.call("recover", offset)
        if model.persistent and not model.transactional:
            if trusted:
                self.fail("recover_trust", None, "recover() returns False (contents not trusted)", "True")
            # Kafka's rule under EOS: wipe the untrusted store and restore it from the changelog.
            self.call("close")
            shutil.rmtree(self.directory, ignore_errors=True)
            self._restart()
            model.wipe()
            self.checkpoint = None
            return
        if model.persistent and not trusted:
            self.fail("recover_trust", None, "recover() returns True for a transactional store", "False")
        pre_data, pre_offset = dict(model.committed), model.committed_offset(TP)
        if not model.persistent:
            pre_data, pre_offset = {}, None
        outcomes = [(pre_data, pre_offset)]
        if in_flight is not None and model.persistent:
            post_data, post_offsets = model.committed_after({TP: in_flight})
            outcomes.append((post_data, post_offsets.get(TP) if model.manages_offsets else None))
        data = dict(self.call("all"))
        got_offset = self.call("committed_offset", TP)
        if (data, got_offset) in outcomes:
            chosen = outcomes.index((data, got_offset))
            if chosen == 1 and not model.manages_offsets:
                self.checkpoint = in_flight
            model.adopt(data, {TP: got_offset} if got_offset is not None else {})
            if not model.persistent:
                model.adopt({}, {})
            return
        datas = [o[0] for o in outcomes]
        if data in datas:
            self.fail("atomic_commit" if len(outcomes) > 1 else "committed_offset_durable", str(TP),
                      [o[1] for o in outcomes], got_offset)
        if len(outcomes) > 1:
            key = _first_diff(outcomes[1][0], data)
            self.fail("atomic_commit", key, "all of the commit or none of it",
                      f"partial: {_show(data)}")
        key = _first_diff(pre_data, data)
        uncommitted = model.overlay
        if key in uncommitted and data.get(key) == uncommitted[key]:
            self.fail("no_uncommitted_survives", key, pre_data.get(key), data.get(key))
        self.fail("committed_durable", key, pre_data.get(key), data.get(key))

    def close_and_reopen(self) -> None:
        self.call("close")
        self._restart()
        self.model.close_and_reopen()
        if self.model.persistent:
            data = dict(self.call("all"))
            if data != self.model.committed:
                key = _first_diff(self.model.committed, data)
                self.fail("clean_close_durable", key, self.model.committed.get(key), data.get(key))
            self.check_offset("committed_offset_durable")
        self.call("recover", self.call("committed_offset", TP) if self.model.manages_offsets else self.checkpoint)
        self.check_reads()


# -- the state machine ------------------------------------------------------------------------------

def machine_for(spec: str, server: StoreServer, crash_points: list[str]) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one store spec."""
    keys, values = st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(VALUES))

    class StoreConformance(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sut = StoreUnderTest(server, spec, "hypothesis")

        def teardown(self) -> None:
            self.sut.dispose()

        @rule(key=keys, value=values)
        def put(self, key, value):
            self.sut.put(key, value)
            self.sut.check_reads()

        @rule(key=keys)
        def delete(self, key):
            self.sut.delete(key)

        @rule(entries=st.lists(st.tuples(keys, values), min_size=1, max_size=4))
        def put_all(self, entries):
            self.sut.put_all(entries)
            self.sut.check_reads()

        @rule(bounds=st.tuples(keys, keys).map(sorted))
        def range_scan(self, bounds):
            self.sut.check_range(*bounds)

        @rule()
        def read_committed(self):
            self.sut.check_read_committed()

        @rule()
        def commit(self):
            self.sut.commit()
            self.sut.check_read_committed()

        @precondition(lambda self: bool(crash_points))
        @rule(point=st.sampled_from(crash_points or ["none"]), hit=st.integers(1, 2))
        def crash_in_commit(self, point, hit):
            self.sut.crash_in_commit(point, hit)
            self.sut.check_reads()
            self.sut.check_read_committed()

        @rule()
        def kill(self):
            self.sut.kill()
            self.sut.check_reads()
            self.sut.check_read_committed()

        @rule()
        def close_and_reopen(self):
            self.sut.close_and_reopen()

    StoreConformance.__name__ = f"Conformance[{spec}]"
    return StoreConformance


# -- the matrix --------------------------------------------------------------------------------------

WORKLOADS = {
    "overwrite": [("put", b"a", b"v2"), ("put", b"d", b"v1"), ("put", b"e", b"v3")],
    "tombstones": [("delete", b"a"), ("put", b"b", None), ("put", b"e", b"v1")],
    "put_all": [("put_all", [(b"c", b"xx"), (b"d", b"v2"), (b"a", None), (b"e", b"v1"), (b"b", b"v3")])],
}


def matrix_cases(crash_points: list[str]) -> list[tuple[str, str | None]]:
    """(workload, crash point or None for a SIGKILL before commit) for every point and workload."""
    cases: list[tuple[str, str | None]] = []
    for workload in WORKLOADS:
        cases.append((workload, None))
        cases.extend((workload, point) for point in crash_points)
    return cases


def run_case(server: StoreServer, spec: str, workload: str, point: str | None) -> None:
    """One matrix case: commit a base, write a workload, crash (at ``point`` inside commit, or a
    kill before it), recover, check; then commit again and close/reopen. Raises ConformanceViolation."""
    case = f"{workload} × {point or 'kill before commit'}"
    sut = StoreUnderTest(server, spec, case)
    try:
        sut.put_all([(b"a", b"v1"), (b"b", b"v1"), (b"c", b"v1")])
        sut.commit()
        for op, *args in WORKLOADS[workload]:
            getattr(sut, op)(*args)
        sut.check_reads()
        sut.check_range(b"a", b"e")
        sut.check_read_committed()
        if point is None:
            sut.kill()
        else:
            sut.crash_in_commit(point, 1)
        sut.check_reads()
        sut.check_read_committed()
        sut.put(b"e", b"v2")
        sut.commit()
        sut.close_and_reopen()
    finally:
        sut.dispose()


# -- verify -------------------------------------------------------------------------------------------

def verify(spec: str, seed: int, examples: int = 40, steps: int = 25, shrink: bool = True,
           store_timeout: float = STORE_TIMEOUT_S, log: str | Path | None = None) -> dict:
    """Run the matrix and the state machine against ``spec``; return the verdict object.

    ``shrink=False`` reports the first failing sequence as found, without shrinking it (faster,
    for when only the verdict matters). Every call into the store is bounded by ``store_timeout``
    seconds; a store that hangs ends the suite with a ``store_hang`` violation. The store's output
    (its children's stdout and stderr, its module's import) goes to ``log`` (default: a temp file,
    removed at the end: the verdict's ``log`` is then None)."""
    if log is None:
        fd, temp_log = tempfile.mkstemp(prefix="eos-verify-", suffix=".log")
        os.close(fd)
        try:
            return {**verify(spec, seed, examples, steps, shrink, store_timeout, temp_log), "log": None}
        finally:
            os.unlink(temp_log)
    with own_output_to(log):
        resolve(spec)  # clear error for a bad spec before any process starts
    repro = f"eos-harness verify {spec} --seed {seed} --examples {examples} --steps {steps}"
    if store_timeout != STORE_TIMEOUT_S:
        repro += f" --store-timeout {store_timeout:g}"
    violations: list[Violation] = []
    cases: list[str] = ["probe: open, write, commit, close, reopen, recover (finds the crash points reached)"]
    crashes: Counter[str] = Counter()
    with children_output(log):
        probe = probe_store(spec, store_timeout)
        reached = [*probe.points, *probe.undeclared]
        if probe.finding is not None:
            violations.append(finding_violation(probe.finding, cases[0]))
        elif probe.error is None:
            try:
                _run_suite(spec, seed, examples, steps, shrink, store_timeout, reached, violations, cases, crashes)
            except StoreAbandoned as exc:
                violations.append(exc.violation)
    result = {
        "store": spec,
        "verdict": verdict_of(violations, error=probe.error),
        "seed": seed,
        "cases": cases,
        "violations": [v.to_json() for v in violations],
        "repro": repro,
        "points": [{"name": p, "declared": p not in probe.undeclared, "crashes": crashes[p]} for p in reached],
        "warnings": [w for w in [probe.undeclared_warning(spec)] if w],
        "log": str(log),
    }
    if probe.error:
        result["error"] = probe.error
    return result


def _run_suite(spec: str, seed: int, examples: int, steps: int, shrink: bool, store_timeout: float,
               crash_points: list[str], violations: list[Violation], cases: list[str], crashes: Counter) -> None:
    with StoreServer(timeout=store_timeout, crashes=crashes) as server:
        for workload, point in matrix_cases(crash_points):
            name = f"matrix: {workload} × {point or 'kill before commit'}"
            cases.append(name)
            try:
                run_case(server, spec, workload, point)
            except ConformanceViolation as exc:
                violations.append(exc.violation)
        machine = machine_for(spec, server, crash_points)
        hypothesis_seed(seed)(machine)
        report: list[str] = []
        cases.append(f"hypothesis: state machine, {examples} examples × {steps} steps, seed {seed}")
        try:
            with with_reporter(report.append):
                run_state_machine_as_test(
                    machine,
                    settings=settings(
                        max_examples=examples,
                        stateful_step_count=steps,
                        deadline=None,
                        database=None,
                        derandomize=False,
                        suppress_health_check=list(HealthCheck),
                        phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                        print_blob=False,
                        report_multiple_bugs=False,
                    ),
                )
        except ConformanceViolation as exc:
            # Hypothesis attaches the shrunk steps to the exception as notes (older versions report them).
            lines = [*report, *getattr(exc, "__notes__", [])]
            steps_text = "\n".join(line for line in lines if line.strip())
            label = "hypothesis (shrunk)" if shrink else "hypothesis (not shrunk)"
            violations.append(replace(exc.violation, case=f"{label}:\n{steps_text}"))
