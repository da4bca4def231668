"""The offsets suite's runner: :func:`verify_offsets` runs every scenario of every scenario module
against one store, each in a fresh work directory, and returns a verdict in the conformance
verdict's shape (``eos-harness verify`` runs it after the conformance suite and joins the verdicts).

Scenario modules register themselves by existing: :data:`SCENARIO_MODULES` are imported in order and
their ``SCENARIOS`` run in order (a module not written yet is skipped). A scenario that does not
apply to the store (its ``applies`` gives a reason) is listed under ``not_applicable`` with that
reason; a check none of whose scenarios applied is ``not_applicable`` in ``checks``.
"""

from __future__ import annotations

import importlib
import shlex
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from eos_harness.process.guard import STORE_TIMEOUT_S, finding_violation
from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang
from eos_harness.process.zygote import ZygoteError
from eos_harness.verdict import FAIL, NOT_APPLICABLE, PASS, Violation, error_reason, verdict_of

from .checks import PROMISES
from .scenario import Scenario, features_of

__all__ = ["SCENARIO_MODULES", "scenarios", "verify_offsets"]

SCENARIO_MODULES = ("partitions", "migration", "closing")


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


def verify_offsets(spec: str, seed: int, store_timeout: float = STORE_TIMEOUT_S, allow: Iterable[str] = (),
                   only: Iterable[str] | None = None, repro: str | None = None) -> dict:
    """Run the offsets suite against ``spec``; the verdict object (``verdict``, ``violations`` with
    their ``replay``, ``cases``: the scenarios run, ``not_applicable``: each scenario that does not
    apply and why, ``checks``: each check's verdict, ``repro``). ``allow``: checks waived (their
    violations dropped, counted in ``waived``); ``only``: run only the scenarios of these names."""
    allowed = set(allow)
    repro = repro or f"eos-harness verify {shlex.quote(spec)} --seed {seed}"
    chosen = [s for s in scenarios() if only is None or s.name in set(only)]
    root = Path(tempfile.mkdtemp(prefix="eos-offsets-"))
    violations: list[Violation] = []
    cases: list[str] = []
    not_applicable: list[dict] = []
    waived: dict[str, int] = {}
    error = None
    ran_checks: set[str] = set()
    try:
        try:
            features = features_of(spec, root / "features", store_timeout)
        except (StoreCallError, StoreHang) as exc:
            violations.append(_guard_violation(exc, "offsets: asking the store what it is"))
            features = None
        except (ChildCrashed, ZygoteError, OSError) as exc:
            error = f"the offsets suite could not ask the store what it is: {error_reason(exc)}"
            features = None
        for number, scenario in enumerate(chosen if features is not None else []):
            reason = scenario.applies(features)
            if reason is not None:
                not_applicable.append({"scenario": scenario.name, "checks": list(scenario.checks), "reason": reason})
                continue
            cases.append(f"offsets: {scenario.name}")
            ran_checks.update(scenario.checks)
            workdir = root / f"{number:02d}-{scenario.name}"
            workdir.mkdir()
            try:
                found = scenario.run(spec, workdir, seed, store_timeout)
            except (StoreCallError, StoreHang) as exc:
                found = [_guard_violation(exc, f"offsets: {scenario.name}")]
            except (ChildCrashed, ZygoteError, OSError) as exc:
                error = error or f"offsets scenario {scenario.name} could not be run to its end: {error_reason(exc)}"
                found = []
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            for v in found:
                if v.check in allowed:
                    waived[v.check] = waived.get(v.check, 0) + 1
                else:
                    violations.append(v if v.case else Violation(**{**v.to_json(), "case": f"offsets: {scenario.name}"}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    fired = {v.check for v in violations}
    checks = {name: (FAIL if name in fired else PASS if name in ran_checks else NOT_APPLICABLE) for name in PROMISES}
    return {
        "suite": "offsets",
        "store": spec,
        "verdict": verdict_of(violations, error=error),
        "seed": seed,
        "features": None if features is None else {"persistent": features.persistent,
                                                    "transactional": features.transactional,
                                                    "manages_offsets": features.manages_offsets},
        "cases": cases,
        "violations": [{**v.to_json(), "replay": repro} for v in violations],
        "not_applicable": not_applicable,
        "checks": checks,
        "waived": waived,
        "repro": repro,
        **({"error": error} if error else {}),
    }

