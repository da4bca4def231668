"""The conformance suite's runner: ``verify`` (the command ``eos-harness verify``) and ``run_case``
(one case of the crash matrix), each store driven in a real child process and crashed for real.

Two parts (:mod:`.plan`): the explicit matrix, every crash point the store reaches × a few fixed
workloads; and a Hypothesis ``RuleBasedStateMachine`` (put, delete, put_all, get, range,
read-committed reads, commit, restore, a crash at a crash point inside commit, a SIGKILL at any
moment, a clean close and reopen), compared with :class:`models.kv.KVModel` after every step, whose
failures shrink to a minimal sequence of steps.

All findings, not the first: Hypothesis stops at the first failure of a run, so ``verify`` runs the
state machine again with each check it found waived, until no new check fires or ``max_findings``
is reached. Each distinct check is reported once, shrunk, with its own replay command (the same
command with the checks found before it allowed: that run finds exactly this one first). A check
the user allows (``--allow``) is waived from the start, and the verdict names it. What a store
declares it lacks (``harness/store.py``: ``Capabilities``) is not checked, and the verdict says so.

Then the offsets suite (``suites/offsets``: several changelog partitions, upgrade, downgrade, closed
stores) runs against the same store, and its violations join the verdict (its own view: the
verdict's ``offsets``, with each check's verdict and the scenarios that do not apply, and why): each
of its checks once, with the number of cases it fired in and a replay of its scenario alone
(``offsets_scenarios``: run only these offsets scenarios, nothing else: ``--offsets-scenario``).

Checks: :data:`.checks.CHECKS`. About the store's calls themselves (:mod:`eos_harness.process.guard`):
``store_hang`` (a call did not return within ``store_timeout``: the suite stops there, with the
store's stack), ``store_raised`` (with the store's traceback), ``store_return_type``; after one of
these the suite stops.

A crash point the store reaches but never declared is declared for the run (a warning names it and
says how to declare it) and used like any other. The verdict lists the points reached and how often
the store crashed at each (``points``); every child's output goes to a log file (``log``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from eos_harness.commands import command_line
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import StoreServer, children_output
from eos_harness.seeding import seed_only
from eos_harness.store import Capabilities
from eos_harness.stores import StoreRef
from eos_harness.stores.child_probe import store_ref
from eos_harness.stores.probe import probe_store
from eos_harness.stores.registry import not_a_store
from eos_harness.suites.offsets.checks import CAPABILITIES
from eos_harness.suites.offsets.runner import replay_command, verify_offsets
from eos_harness.suites.offsets.runner import scenarios as offsets_scenarios_known
from eos_harness.verdict import Violation, check_coverage, finding_violation, verdict_of
from eos_harness.verdict import error_result as verdict_error_result
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from ..store_faults import crash_then_check, finish_case
from . import checks
from .checks import ALLOWABLE, GUARD_CHECKS
from .driver import ConformanceViolation, StoreAbandoned, StoreUnderTest, features_and_kind_of, not_applicable
from .plan import WORKLOADS, machine_for, matrix_cases

__all__ = ["ALLOWABLE", "CHECKS", "MAX_FINDINGS", "PROBE", "ConformanceViolation", "StoreAbandoned", "error_result",
           "machine_for", "matrix_cases", "not_checked", "run_case", "run_one", "verify"]

# The checks (promises) of the suite, by their public names (violations' ``check``; JUnit testcases).
CHECKS = tuple(checks.CHECKS)
PROBE = "probe"  # the pytest matrix case of a store whose probe found it broke the protocol
MAX_FINDINGS = 5  # distinct checks the state machine looks for before it stops (--max-findings)

# What each capability a store may lack means for the checks (the verdict's ``not_checked``).
_NOT_CHECKED = {
    "range_scans": "range (the store declares no range scans): range() and all() are never called; "
                   "contents are read key by key",
    "put_all": "put_all (the store declares no put_all): writes go through put",
    "empty_commit_records_offset": "the offset of an empty commit (the store declares its empty commit "
                                   "records no offset)",
    **{name: lines[0] for name, lines in CAPABILITIES.items()},  # the offsets suite's (suites/offsets)
}


def not_checked(offers: Capabilities) -> list[str]:
    """What the verdict says is not checked, for what the store declares it lacks."""
    return [_NOT_CHECKED[name] for name in offers.lacking()]


def run_case(server: StoreServer, spec: str, workload: str, point: str | None,
             allowed: frozenset[str] = frozenset(), waived: Counter | None = None,
             exercised: Counter | None = None) -> None:
    """One matrix case: commit a base, write a workload, crash (at ``point`` inside commit, or a
    kill before it), recover, check; restore a few records (a store with its own ``restore``); then
    commit again and close/reopen. Raises ConformanceViolation (``allowed`` checks are waived);
    ``exercised`` counts the checks whose condition the case met."""
    case = f"{workload} × {point or 'kill before commit'}"
    sut = StoreUnderTest(server, spec, case, allowed, waived)
    try:
        sut.put_all([(b"a", b"v1"), (b"b", b"v1"), (b"c", b"v1")])
        sut.commit()
        for op, *args in WORKLOADS[workload]:
            getattr(sut, op)(*args)
        sut.check_reads()
        sut.check_range(b"a", b"e")
        sut.check_read_committed()
        crash_then_check(sut, point, sut.check_reads)
        if sut.has_restore:
            sut.restore([(b"d", b"v3"), (b"a", None)])
            sut.check_reads()
            sut.check_read_committed()
        sut.put(b"e", b"v2")
        sut.commit()
        sut.close_and_reopen()
    finally:
        finish_case(sut, exercised)


# -- verify -------------------------------------------------------------------------------------------

def verify_repro(spec: str, seed: int, examples: int, steps: int, store_timeout: float = STORE_TIMEOUT_S,
                 allow: Iterable[str] = ()) -> str:
    """The ``eos-harness verify`` line that runs the same state machine again: every option that decides
    its cases (the seed, the examples, the steps per example, the store timeout, the waived checks)."""
    words: list[object] = ["verify", spec, "--seed", seed, "--examples", examples, "--steps", steps]
    if store_timeout != STORE_TIMEOUT_S:
        words += ["--store-timeout", f"{store_timeout:g}"]
    return command_line(*words, *(word for c in allow for word in ("--allow", c)))


def verify(spec: str | StoreRef, seed: int, examples: int = 40, steps: int = 25, shrink: bool = True,
           store_timeout: float = STORE_TIMEOUT_S, log: str | Path | None = None, allow: Iterable[str] = (),
           max_findings: int = MAX_FINDINGS, offsets_scenarios: Iterable[str] = ()) -> dict:
    """Run the matrix and the state machine against ``spec``; return the verdict object.
    ``offsets_scenarios``: run only these scenarios of the offsets suite (a finding's replay), no
    conformance case.

    ``shrink=False`` reports failing sequences as found, without shrinking them (faster, for when
    only the verdict matters). ``allow``: checks waived (known differences); the verdict names them
    and how often they fired. The state machine looks for up to ``max_findings`` distinct checks.
    Every call into the store is bounded by ``store_timeout`` seconds; a store that hangs ends the
    suite with a ``store_hang`` violation. The store's output (its children's stdout and stderr, its
    module's import) goes to ``log`` (default: a temp file, removed at the end: the verdict's ``log``
    is then None)."""
    if log is None:
        fd, temp_log = tempfile.mkstemp(prefix="eos-verify-", suffix=".log")
        os.close(fd)
        try:
            return {**verify(spec, seed, examples, steps, shrink, store_timeout, temp_log, allow, max_findings,
                             offsets_scenarios), "log": None}
        finally:
            os.unlink(temp_log)
    with children_output(log):  # its module's output on import (in a child)
        ref = store_ref(spec, store_timeout)  # a usage error for a bad spec before anything runs
    if ref.builtin is not None and ref.builtin.kind == "unsafe-runtime":
        raise not_a_store(ref.builtin)
    spec = ref.spec
    allowed = tuple(dict.fromkeys(allow))
    unknown = [c for c in allowed if c not in ALLOWABLE]
    if unknown:
        raise ValueError(f"cannot allow {', '.join(map(repr, unknown))}: the checks that can be allowed are "
                         f"{', '.join(ALLOWABLE)}")
    offsets_only = tuple(dict.fromkeys(offsets_scenarios))
    if offsets_only:
        return _offsets_only(spec, seed, store_timeout, log, allowed, offsets_only)
    repro = verify_repro(spec, seed, examples, steps, store_timeout, allowed)
    violations: list[Violation] = []
    replays: list[str] = []
    waived: Counter = Counter()
    offers = Capabilities()
    cases: list[str] = ["probe: open, write, commit, close, reopen, recover (finds the crash points reached)"]
    crashes: Counter[str] = Counter()
    stopped = None
    offsets = None
    coverage = None
    with children_output(log):
        probe = probe_store(ref, store_timeout)
        reached = [*probe.points, *probe.undeclared]
        if probe.finding is not None:
            violations.append(finding_violation(probe.finding, cases[0]))
            replays.append(repro)
        elif probe.error is None:
            suite = _Suite(spec, seed, examples, steps, shrink, store_timeout, frozenset(allowed), waived, repro,
                           crashes)
            try:
                offers = suite.run(reached, cases, max_findings)
            except StoreAbandoned as exc:
                suite.add(exc.violation, suite.replay_now)
            violations, replays, stopped = suite.violations, suite.replays, suite.stopped
            if suite.exercised:  # the store could be opened and driven
                coverage = check_coverage(CHECKS, checks.CONDITIONS, suite.exercised, suite.not_applicable)
            if not any(v.check in GUARD_CHECKS for v in violations):  # a store that could be driven to the end
                offsets = verify_offsets(spec, seed, store_timeout, allow=allowed, repro=repro)
    error = probe.error
    found = [{**v.to_json(), "replay": replay} for v, replay in zip(violations, replays, strict=True)]
    if offsets is not None:  # the offsets suite's verdict joins this one (suites/offsets)
        cases += offsets["cases"]
        violations = [*violations, *(Violation.from_json(v) for v in offsets["violations"])]
        found += offsets["violations"]  # each with its own replay and how often it fired
        error = error or offsets.get("error")
        for check, times in offsets["waived"].items():
            waived[check] += times
    result = {
        "store": spec,
        "verdict": verdict_of(violations, error=error),
        "seed": seed,
        "cases": cases,
        "violations": found,
        "repro": repro,
        "not_checked": not_checked(offers),
        "allowed": list(allowed),
        "waived": {check: waived[check] for check in allowed if waived[check]},
        "points": [{"name": p, "declared": p not in probe.undeclared, "crashes": crashes[p]} for p in reached],
        "warnings": [w for w in [probe.undeclared_warning(spec)] if w],
        "log": str(log),
    }
    if coverage is not None:
        result["coverage"] = coverage
    if offsets is not None:
        result["offsets"] = {key: offsets[key] for key in _OFFSETS_VIEW}
        features = offsets.get("features") or {}
        if features.get("persistent") and not features.get("manages_offsets"):  # KIP-892's WARN at init
            from eos_harness.runtime.closing import unmanaged_offsets_warning

            result["warnings"].append(unmanaged_offsets_warning("store", spec))
    if stopped:
        result["stopped"] = stopped
    if error:
        result["error"] = error
    return result


def run_one(scenario, directory: Path) -> dict:
    """One scenario of a campaign (:class:`eos_harness.suites.store_subjects.StoreRun`): :func:`verify`, the store's output in
    ``directory/store.log``."""
    started = time.monotonic()
    directory.mkdir(exist_ok=True)
    result = verify(scenario.store, scenario.seed, scenario.examples, scenario.steps,
                    store_timeout=scenario.store_timeout, log=directory / "store.log", allow=scenario.allow)
    return {"suite": "conformance", **result, "seconds": round(time.monotonic() - started, 3)}


def error_result(scenario, exc: BaseException) -> dict:
    """The result of a campaign's scenario that could not be run to its end."""
    return verdict_error_result({"store": scenario.store}, scenario.seed, verify_repro(
        scenario.store, scenario.seed, scenario.examples, scenario.steps, scenario.store_timeout,
        scenario.allow), exc)


_OFFSETS_VIEW = ("verdict", "cases", "checks", "not_applicable", "not_checked", "notes")


def _offsets_only(spec: str, seed: int, store_timeout: float, log: str | Path, allowed: tuple[str, ...],
                  names: tuple[str, ...]) -> dict:
    """``verify --offsets-scenario NAME``: only these offsets scenarios (a finding's replay), in the
    verdict's shape."""
    known = [s.name for s in offsets_scenarios_known()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no offsets scenario {unknown[0]!r}; the offsets scenarios are {', '.join(known)}")
    repro = replay_command(spec, seed, store_timeout, allow=allowed) + "".join(
        f" --offsets-scenario {n}" for n in names)
    with children_output(log):
        offsets = verify_offsets(spec, seed, store_timeout, allow=allowed, only=names, repro=repro)
    offers = Capabilities(**{name: False for n in offsets["not_checked"] for name in n["lacks"]})
    result = {
        "store": spec,
        "verdict": offsets["verdict"],
        "seed": seed,
        "cases": offsets["cases"],
        "violations": offsets["violations"],
        "repro": repro,
        "not_checked": not_checked(offers),
        "allowed": list(allowed),
        "waived": {check: offsets["waived"][check] for check in allowed if offsets["waived"].get(check)},
        "points": [],
        "warnings": [],
        "log": str(log),
        "offsets": {key: offsets[key] for key in _OFFSETS_VIEW},
    }
    if offsets.get("error"):
        result["error"] = offsets["error"]
    return result


class _Suite:
    """One verify's matrix and state-machine rounds, collecting one finding per check."""

    def __init__(self, spec: str, seed: int, examples: int, steps: int, shrink: bool, store_timeout: float,
                 allowed: frozenset[str], waived: Counter, repro: str, crashes: Counter) -> None:
        self.spec, self.seed, self.examples, self.steps, self.shrink = spec, seed, examples, steps, shrink
        self.store_timeout, self.allowed, self.waived, self.repro = store_timeout, allowed, waived, repro
        self.crashes = crashes  # crash point -> times the store crashed there
        self.violations: list[Violation] = []
        self.replays: list[str] = []
        self.found_by_machine: list[str] = []  # checks the state machine found, in order (waived after)
        self.stopped: str | None = None
        self.exercised: Counter = Counter()  # per check, the cases that met its condition
        self.not_applicable: dict[str, str] = {}  # the checks that cannot fire on this store, with why

    @property
    def replay_now(self) -> str:
        """The command that replays the current state-machine round."""
        return self.repro + "".join(f" --allow {c}" for c in self.found_by_machine)

    def add(self, violation: Violation, replay: str, replace_matrix: bool = False) -> None:
        """Keep one finding per check: a shrunk state-machine one replaces the matrix's."""
        for i, known in enumerate(self.violations):
            if known.check == violation.check:
                if replace_matrix:
                    self.violations[i], self.replays[i] = violation, replay
                return
        self.violations.append(violation)
        self.replays.append(replay)

    def run(self, crash_points: list[str], cases: list[str], max_findings: int) -> Capabilities:
        self._points = crash_points
        with StoreServer(timeout=self.store_timeout, crashes=self.crashes) as server:
            try:
                offers, self._has_restore, kind = features_and_kind_of(server, self.spec)
            except ConformanceViolation as exc:  # the store cannot even be opened and asked
                self.add(exc.violation, self.repro)
                return Capabilities()
            self._offers = offers
            self.not_applicable = not_applicable(kind, self._has_restore, offers)
            for workload, point in matrix_cases(crash_points):
                cases.append(f"matrix: {workload} × {point or 'kill before commit'}")
                try:
                    run_case(server, self.spec, workload, point, self.allowed, self.waived, self.exercised)
                except ConformanceViolation as exc:
                    self.add(exc.violation, self.repro)
            cases.append(f"hypothesis: state machine, {self.examples} examples × {self.steps} steps, "
                         f"seed {self.seed}")
            for _ in range(max_findings):
                replay = self.replay_now
                found = self._machine_round(server, self.allowed | set(self.found_by_machine))
                if found is None:
                    return offers
                self.add(found, replay, replace_matrix=True)
                if found.check in GUARD_CHECKS:
                    return offers  # the store cannot be driven past it
                self.found_by_machine.append(found.check)
            self.stopped = (f"the state machine stopped after {max_findings} distinct findings (--max-findings); "
                            f"more may follow: replay with {self.replay_now}")
            return offers

    def _machine_round(self, server: StoreServer, allowed: frozenset[str]) -> Violation | None:
        machine = machine_for(self.spec, server, self._points, allowed, self.waived, self._offers, self._has_restore,
                              self.exercised)
        hypothesis_seed(self.seed)(machine)
        report: list[str] = []
        try:
            with with_reporter(report.append), seed_only():  # the steps depend on the seed alone
                run_state_machine_as_test(
                    machine,
                    settings=settings(
                        max_examples=self.examples,
                        stateful_step_count=self.steps,
                        deadline=None,
                        database=None,
                        derandomize=False,
                        suppress_health_check=list(HealthCheck),
                        phases=[Phase.generate, Phase.shrink] if self.shrink else [Phase.generate],
                        print_blob=False,
                        report_multiple_bugs=False,
                    ),
                )
        except ConformanceViolation as exc:
            # Hypothesis attaches the shrunk steps to the exception as notes (older versions report them).
            lines = [line for line in [*report, *getattr(exc, "__notes__", [])] if line.strip()]
            first = next((i for i, line in enumerate(lines) if line.startswith("Failing test case")), 0)
            steps_text = "\n".join(lines[first:])  # without Hypothesis's own warnings before the steps
            label = "hypothesis (shrunk)" if self.shrink else "hypothesis (not shrunk)"
            return replace(exc.violation, case=f"{label}:\n{steps_text}")
        return None

