"""The offsets suite's runner: :func:`verify_offsets` runs every scenario of every scenario module
against one store, each in a fresh work directory, and returns a verdict in the conformance
verdict's shape (``eos-harness verify`` runs it after the conformance suite and joins the verdicts).

Scenario modules register themselves by existing: :data:`SCENARIO_MODULES` are imported in order and
their ``SCENARIOS`` run in order (a module not written yet is skipped). A scenario that does not
apply to the store (its ``applies`` gives a reason) is listed under ``not_applicable`` with that
reason; one that checks a capability the store declares it lacks (``harness/store.Capabilities``:
``legacy_offsets_import``, ``legacy_downgrade``) is listed under ``not_checked``; a check none of
whose scenarios ran is ``not_applicable`` in ``checks``.

Each distinct check is reported once (its first, smallest case, and in how many cases it fired),
with a replay command that runs its scenario alone (``eos-harness verify STORE --seed N
--offsets-scenario NAME``).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from eos_harness.commands import command_line
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang, children_output
from eos_harness.process.zygote import ZygoteError
from eos_harness.verdict import (
    FAIL,
    NOT_APPLICABLE,
    PASS,
    Violation,
    error_reason,
    finding_violation,
    verdict_of,
)

from .checks import CAPABILITIES, PROMISES
from .scenario import Scenario, features_of

__all__ = ["SCENARIO_MODULES", "error_result", "replay_command", "run_one", "scenarios", "verify_offsets"]

SCENARIO_MODULES = ("partitions", "migration", "closing", "kafka_upgrade")


def scenarios() -> list[Scenario]:
    """Every scenario of every scenario module that exists, in module order."""
    found: list[Scenario] = []
    for name in SCENARIO_MODULES:
        qualified = f"{__package__}.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name != qualified:
                raise
            continue
        found.extend(module.SCENARIOS)
    return found


def _guard_violation(exc: StoreCallError | StoreHang, case: str) -> Violation:
    if exc.finding is not None:
        return finding_violation(exc.finding, case)
    return Violation("store_error", None, "the call succeeds", str(exc), case=case)


def replay_command(spec: str, seed: int, store_timeout: float = STORE_TIMEOUT_S, scenario: str | None = None,
                   allow: Iterable[str] = ()) -> str:
    """The ``eos-harness verify`` command that runs the offsets suite (only ``scenario``, when given:
    ``--offsets-scenario``) with the same seed, bound and waived checks."""
    words: list[object] = ["verify", spec, "--seed", seed]
    if store_timeout != STORE_TIMEOUT_S:
        words += ["--store-timeout", f"{store_timeout:g}"]
    if scenario is not None:
        words += ["--offsets-scenario", scenario]
    return command_line(*words, *(word for c in dict.fromkeys(allow) for word in ("--allow", c)))


def _in_scenario(v: Violation, scenario: str) -> Violation:
    """``v`` with its case named ``offsets: SCENARIO: CASE`` (the scenario alone when it has one case)."""
    case = v.case or ""
    if not case.startswith("offsets:"):
        case = f"offsets: {scenario}: {case}" if case else f"offsets: {scenario}"
    return Violation(**{**v.to_json(), "case": case})


def _with_capability_hint(v: Violation, scenario: Scenario) -> Violation:
    """A finding of a scenario that checks an optional capability says what the store should do and
    how to declare it does not offer it."""
    hints = [CAPABILITIES[name][1] for name in scenario.needs if v.check in scenario.checks and CAPABILITIES[name][1]]
    if not hints:
        return v
    return Violation(**{**v.to_json(), "detail": "\n".join([*([v.detail] if v.detail else []), *hints])})


def verify_offsets(spec: str, seed: int, store_timeout: float = STORE_TIMEOUT_S, allow: Iterable[str] = (),
                   only: Iterable[str] | None = None, repro: str | None = None) -> dict:
    """Run the offsets suite against ``spec``; the verdict object (``verdict``; ``violations``: each
    distinct check ONCE, the first (smallest) case that shows it, with ``fired`` ``{"cases": N, "of":
    M}`` (it fired in N of the M cases that check it) and its own ``replay``, which runs only its
    scenario (``--offsets-scenario``) with the other checks that fired there waived; ``cases``: the
    scenarios run; ``not_applicable``: each scenario that does not apply and why; ``not_checked``:
    each scenario not run because the store declares it lacks what it checks (``Capabilities``);
    ``notes``: what a scenario left out; ``checks``: each check's verdict; ``repro``). ``allow``:
    checks waived (their violations dropped, counted in ``waived``); ``only``: run only the
    scenarios of these names."""
    allowed = tuple(dict.fromkeys(allow))
    repro = repro or replay_command(spec, seed, store_timeout, allow=allowed)
    chosen = [s for s in scenarios() if only is None or s.name in set(only)]
    root = Path(tempfile.mkdtemp(prefix="eos-offsets-"))
    found: list[tuple[Scenario, Violation]] = []  # every violation, in the order found
    cases: list[str] = []
    cases_checking: dict[str, int] = {}  # check -> cases run by the scenarios that check it
    not_applicable: list[dict] = []
    not_checked: list[dict] = []
    notes: list[str] = []
    waived: dict[str, int] = {}
    error = None
    ran_checks: set[str] = set()
    try:
        try:
            features = features_of(spec, root / "features", store_timeout)
        except (StoreCallError, StoreHang) as exc:
            found.append((None, _guard_violation(exc, "offsets: asking the store what it is")))
            features = None
        except (ChildCrashed, ZygoteError, OSError) as exc:
            error = f"the offsets suite could not ask the store what it is: {error_reason(exc)}"
            features = None
        for number, scenario in enumerate(chosen if features is not None else []):
            lacking = scenario.lacking(features)
            if lacking:
                not_checked.append({"scenario": scenario.name, "checks": list(scenario.checks), "lacks": lacking,
                                    "reason": "; ".join(CAPABILITIES[name][0] for name in lacking)})
                continue
            reason = scenario.applies(features)
            if reason is None and scenario.applies_to is not None:
                reason = scenario.applies_to(spec)
            if reason is not None:
                not_applicable.append({"scenario": scenario.name, "checks": list(scenario.checks), "reason": reason})
                continue
            cases.append(f"offsets: {scenario.name}")
            checked = scenario.checked(features)
            ran_checks.update(checked)
            if len(checked) < len(scenario.checks):  # a task's store: the checks of several partitions left out
                not_checked.append({"scenario": scenario.name,
                                    "checks": [c for c in scenario.checks if c not in checked],
                                    "lacks": ["several_changelog_partitions"],
                                    "reason": CAPABILITIES["several_changelog_partitions"][0]})
            workdir = root / f"{number:02d}-{scenario.name}"
            workdir.mkdir()
            try:
                violations = scenario.run(spec, workdir, seed, store_timeout)
            except (StoreCallError, StoreHang) as exc:
                violations = [_guard_violation(exc, f"offsets: {scenario.name}")]
            except (ChildCrashed, ZygoteError, OSError) as exc:
                error = error or f"offsets scenario {scenario.name} could not be run to its end: {error_reason(exc)}"
                violations = []
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            for check in checked:
                cases_checking[check] = cases_checking.get(check, 0) + getattr(violations, "cases", 1)
            notes += [f"{scenario.name}: {note}" for note in getattr(violations, "notes", [])]
            for v in violations:
                if v.check in allowed:
                    waived[v.check] = waived.get(v.check, 0) + 1
                else:
                    found.append((scenario, _in_scenario(v, scenario.name)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    reported = _once_per_check(spec, seed, store_timeout, allowed, found, cases_checking)
    fired = {v["check"] for v in reported}
    checks = {name: (FAIL if name in fired else PASS if name in ran_checks else NOT_APPLICABLE) for name in PROMISES}
    return {
        "suite": "offsets",
        "store": spec,
        "verdict": verdict_of([Violation.from_json(v) for v in reported], error=error),
        "seed": seed,
        "features": None if features is None else {"persistent": features.persistent,
                                                    "transactional": features.transactional,
                                                    "manages_offsets": features.manages_offsets},
        "cases": cases,
        "violations": reported,
        "not_applicable": not_applicable,
        "not_checked": not_checked,
        "notes": notes,
        "checks": checks,
        "waived": waived,
        "repro": repro,
        **({"error": error} if error else {}),
    }


def _once_per_check(spec: str, seed: int, store_timeout: float, allowed: tuple[str, ...],
                    found: list[tuple[Scenario | None, Violation]], cases_checking: dict[str, int]) -> list[dict]:
    """Each distinct check once: its first violation (scenarios run their smallest case first), how
    many cases it fired in, and a replay of its scenario alone with the other checks found there waived."""
    reported: dict[str, dict] = {}
    fired_in: dict[str, set[str]] = {}
    for scenario, v in found:
        fired_in.setdefault(v.check, set()).add(v.case or "")
        if v.check in reported:
            continue
        if scenario is None:  # asking the store what it is
            replay = replay_command(spec, seed, store_timeout, allow=allowed)
        else:
            others = [o.check for s, o in found if s is scenario and o.check != v.check and o.check in PROMISES]
            replay = replay_command(spec, seed, store_timeout, scenario.name, [*allowed, *others])
            v = _with_capability_hint(v, scenario)
        reported[v.check] = {**v.to_json(), "replay": replay}
    for check, v in reported.items():
        times = len(fired_in[check])
        v["fired"] = {"cases": times, "of": max(times, cases_checking.get(check, times))}
    return list(reported.values())


# -- a campaign's scenario (``eos-harness chaos --suite offsets``) -------------------------------------

def run_one(scenario, directory: Path) -> dict:
    """One scenario of a campaign (:class:`eos_harness.suites.store_subjects.StoreRun`): the offsets scenario it names, alone."""
    started = time.monotonic()
    directory.mkdir(exist_ok=True)
    with children_output(directory / "store.log"):  # the store's output (its JVM's for Kafka's), not the terminal
        result = verify_offsets(scenario.store, scenario.seed, scenario.store_timeout, allow=scenario.allow,
                                only=[scenario.name], repro=replay_command(scenario.store, scenario.seed,
                                                                           scenario.store_timeout, scenario.name,
                                                                           scenario.allow))
    allowed = {"allowed": list(scenario.allow)} if scenario.allow else {}
    return {**result, **allowed, "scenario": scenario.name, "log": str(directory / "store.log"),
            "seconds": round(time.monotonic() - started, 3)}


def error_result(scenario, exc: BaseException) -> dict:
    """The result of a campaign's scenario that could not be run to its end."""
    from eos_harness.verdict import error_result as verdict_error_result

    return verdict_error_result({"store": scenario.store, "scenario": scenario.name}, scenario.seed,
                                replay_command(scenario.store, scenario.seed, scenario.store_timeout, scenario.name,
                                               scenario.allow), exc)
