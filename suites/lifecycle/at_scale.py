"""The lifecycle suite's per-key checks over a campaign's histories, read back from its Parquet dataset
(``RUN_DIR/parquet/histories``): ``eos-harness check RUN_DIR`` runs them in this process (``--engine local``:
the suite's own checkers, :mod:`eos_harness.suites.lifecycle.checks`) or as Spark DataFrame jobs (``--engine
spark``: :mod:`eos_harness.suites.lifecycle.frames`, an independent implementation of the same rules, for
histories too large for one process). Both give the same answer in the same shape (:func:`scenario_answer`).

The checks (:data:`CHECKS_AT_SCALE`): what a recovery left (``no_uncommitted_survives``,
``committed_rolls_forward``, ``recovery_idempotent``, ``state_matches_model``: ``check_recovered_state``), what
reads saw (``read_your_own_writes``, ``read_committed_isolation``: ``check_reads``) and the read-committed output
(``exactly_once_output``: ``check_output``). The model of each scenario is rebuilt from its history's first
event (workload, seed, number of input records) and the window semantics of its store.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path

from eos_harness.models.lifecycle import LifecycleModel
from eos_harness.models.workloads import workload
from eos_harness.results_parquet import events_by_scenario
from eos_harness.suites.lifecycle.checks import CHECKS, check_output, check_reads, check_recovered_state
from eos_harness.verdict import Violation

__all__ = ["CHECKS_AT_SCALE", "EXERCISED", "HistoryError", "check_in_process", "lifecycle_histories", "model_of",
           "model_rows", "semantics_resolver", "scenario_answer", "sorted_violations"]

CHECKS_AT_SCALE = ("no_uncommitted_survives", "committed_rolls_forward", "recovery_idempotent", "state_matches_model",
                   "read_your_own_writes", "read_committed_isolation", "exactly_once_output")
# What each check judges, counted per scenario: a check whose count is 0 was not exercised (never passed).
EXERCISED = {
    "no_uncommitted_survives": "recoveries", "committed_rolls_forward": "recoveries",
    "state_matches_model": "recoveries", "recovery_idempotent": "recoveries_after_a_crash_in_recovery",
    "read_your_own_writes": "reads", "read_committed_isolation": "read_committed_reads",
    "exactly_once_output": "outputs",
}
COUNTED = {
    "recoveries": "recover events that list the store's contents",
    "recoveries_after_a_crash_in_recovery": "such recoveries by the instance after one that crashed in recovery",
    "reads": "reads during processing", "read_committed_reads": "reads of a transactional store's committed view",
    "outputs": "read-committed outputs (the last one of each scenario)",
}
assert set(CHECKS_AT_SCALE) <= set(CHECKS)


class HistoryError(ValueError):
    """A run directory whose histories cannot be checked (none, not a lifecycle campaign's, unreadable)."""


def model_of(scenario_event: dict, semantics: str | None) -> LifecycleModel:
    """The lifecycle model of a scenario, from its history's ``scenario`` event (the input is generated
    from the workload and seed, as the runner generated it)."""
    wl = workload(scenario_event["workload"])
    records = wl.generate(random.Random(scenario_event["seed"]), scenario_event["records"])
    return LifecycleModel(wl, records, semantics)


def model_rows(model: LifecycleModel) -> dict[str, list[tuple]]:
    """The model as rows (what the DataFrame checker joins with): ``states``, for each key the model ever
    holds, ``(key, value, start, end)``: the key held ``value`` (None: absent) at every committed position
    ``start <= p < end``; ``outputs``, ``(position, ordinal, key, value)``: the ``ordinal``-th expected output
    record, due once ``position`` input records are committed; ``expired`` (a retention-only window store),
    ``(key, value, start, end)``: the store may still hold ``value`` in the expired window ``key`` there."""
    last = len(model.records)
    rows: list[tuple] = []
    opened_at: dict = {key: 0 for key in model.state_at(0)}  # key -> where its current value began
    previous = model.state_at(0)
    for p in range(1, last + 1):
        current = model.state_at(p)
        # a plain store changes only where the record wrote; a window store's expiry drops windows unwritten
        touched = set(previous) | set(current) if model.workload.windowed else {k for k, _ in model.effects[p - 1].writes}
        for key in touched:
            if previous.get(key) != current.get(key):
                rows.append((key, previous.get(key), opened_at.get(key, 0), p))
                opened_at[key] = p
        previous = current
    rows += [(key, previous.get(key), start, last + 1) for key, start in opened_at.items()]
    outputs = [(i + 1, n, key, value) for n, (i, (key, value)) in
               enumerate((i, out) for i, eff in enumerate(model.effects) for out in eff.outputs)]
    expired: list[tuple] = []
    opened: dict[tuple, int] = {}
    for p in range(last + 1):
        now = {(k, v) for k, values in model.expired_at(p).items() for v in values}
        for pair in [pair for pair in opened if pair not in now]:
            expired.append((*pair, opened.pop(pair), p))
        for pair in now:
            opened.setdefault(pair, p)
    expired += [(*pair, start, last + 1) for pair, start in opened.items()]
    return {"states": rows, "outputs": outputs, "expired": expired}


def semantics_resolver() -> Callable[[str, str], str | None]:
    """The window semantics of a store on a workload (None unless the workload is windowed), as the runner
    asks them (a user's store: in a child), each store once."""
    from eos_harness.runtime import TaskConfig
    from eos_harness.stores.child_probe import store_ref

    cache: dict[str, str | None] = {}

    def semantics(store: str, workload_name: str) -> str | None:
        if not workload(workload_name).windowed:
            return None
        if store not in cache:
            config = TaskConfig.for_store(store, broker="", state_dir="", workload=workload_name)
            cache[store] = store_ref(config.store).semantics
        return cache[store]

    return semantics


def sorted_violations(violations: Iterable[dict]) -> list[dict]:
    """Violations in one order whatever found them (by event, check, key, expected, observed)."""
    def key(v: dict) -> tuple:
        return tuple((x is None, "" if x is None else str(x))
                     for x in (v["event"], v["check"], v["key"], v["expected"], v["observed"], v["detail"]))
    return sorted(violations, key=lambda v: (v["event"] if v["event"] is not None else -1, key(v)))


def scenario_answer(index: int, store: str, violations: Iterable[dict], counted: dict[str, int]) -> dict:
    """One scenario's answer (the same shape from both engines): the violations of the checks, each
    check's verdict (``fail``; ``pass``; ``not exercised`` when nothing it judges was in the history)."""
    found = sorted_violations({k: v.get(k) for k in ("check", "key", "expected", "observed", "event", "detail")}
                              for v in violations)
    fired = {v["check"] for v in found}
    checks = {c: "fail" if c in fired else "pass" if counted.get(EXERCISED[c]) else "not exercised"
              for c in CHECKS_AT_SCALE}
    return {"index": index, "store": store, "verdict": "fail" if fired else "pass",
            "checks": checks, "counted": {name: int(counted.get(name, 0)) for name in COUNTED},
            "violations": found}


def lifecycle_histories(run_dir: Path) -> Path:
    """The Parquet histories of ``run_dir`` (a usage error, :class:`HistoryError`, when it has none)."""
    from eos_harness.results_parquet import HISTORIES_DATASET, PARQUET_DIR

    path = Path(run_dir) / PARQUET_DIR / HISTORIES_DATASET
    if not Path(run_dir).is_dir():
        raise HistoryError(f"{run_dir}: no such directory")
    if not path.is_dir() or not any(path.glob("suite=lifecycle/**/*.parquet")):
        raise HistoryError(f"{run_dir} holds no Parquet histories of the lifecycle suite ({path}/suite=lifecycle) "
                           "nor of the kafka-log suite: a campaign of either run with --engine spark writes them "
                           "(eos-harness chaos --suite lifecycle --engine spark --out RUN_DIR)")
    return path


def check_in_process(path: Path, semantics: Callable[[str, str], str | None]) -> list[dict]:
    """Every lifecycle scenario of the histories at ``path``, judged by the suite's own checkers in this
    process: one :func:`scenario_answer` each, in plan order."""
    answers = []
    for index, subject, events in events_by_scenario(path, "lifecycle"):
        first = next((e for e in events if e["type"] == "scenario"), None)
        if first is None:
            continue  # a history cut short before its first event: nothing to judge
        model = model_of(first, semantics(first["store"], first["workload"]))
        violations: list[Violation] = []
        for checker in (check_recovered_state, check_reads, check_output):
            violations += checker(events, model)
        answers.append(scenario_answer(index, subject, (v.to_json() for v in violations), _counted(events)))
    return answers


def _counted(events: list[dict]) -> dict[str, int]:
    recovered = {e["instance"] for e in events if e["type"] == "recover"}
    crashed_in_recovery = {e["instance"] for e in events if e["type"] == "crash" and e["instance"] not in recovered}
    recoveries = [e for e in events if e["type"] == "recover" and e.get("contents") is not None]
    transactional = next((e["transactional"] for e in events if e["type"] == "recover"), True)
    reads = sum(e["type"] == "read" for e in events)
    return {"recoveries": len(recoveries),
            "recoveries_after_a_crash_in_recovery": sum(e["instance"] - 1 in crashed_in_recovery for e in recoveries),
            "reads": reads, "read_committed_reads": reads if transactional else 0,
            "outputs": int(any(e["type"] == "output" for e in events))}
