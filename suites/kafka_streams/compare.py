"""Transactional state stores on and off, side by side: a kafka-streams campaign's results grouped by the
application's configuration (its topology and store) with ``enable.transactional.statestores`` on (``-tx``)
and off, each with its scenarios, verdicts, and the records each store partition restored after a crash
(median, max) and how long it took: the saving KIP-892 (transactional state stores) is about. A pure function
of the results: the campaign's JSON (``transactional_stores``), its terminal table and its report read it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

__all__ = ["number_text", "transactional_comparison", "verdicts_text"]


def _configuration(result: Mapping) -> tuple[str, bool] | None:
    """(the application without its ``-tx``, transactional) of a result; None for a mutant, the zombie (it is
    frozen, not killed and restored) or a result that does not say."""
    conf = result.get("configuration")
    system = result.get("system")
    if not isinstance(conf, Mapping) or not isinstance(system, str) or conf.get("mutant") or conf.get("zombie"):
        return None
    tx = conf.get("enable.transactional.statestores")
    if not isinstance(tx, bool):
        return None
    return (system[:-len("-tx")] if tx and system.endswith("-tx") else system), tx


def _numbers(values: object) -> list[float]:
    return [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)] \
        if isinstance(values, list) else []


def _middle(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def transactional_comparison(results: Iterable[Mapping]) -> list[dict]:
    """One row per configuration (``rocksdb``, ``memory``, ``window-rocksdb``, ``join-rocksdb``, …) that a
    result of either side ran, in the order first seen: ``{"configuration", "on": {...}, "off": {...}}``, each
    side ``{"system", "scenarios", "verdicts": {verdict: n}, "restorations": restorations after a crash that
    finished, "restored_median", "restored_max", "restore_ms_median", "restore_ms_max"}`` (None where that side
    restored nothing, or never ran: ``scenarios`` 0). Mutants and the zombie are left out (their own rows in
    the tallies). A restoration is one store partition's, in an instance started after a kill."""
    rows: dict[str, dict] = {}
    for result in results:
        found = _configuration(result)
        if found is None:
            continue
        name, tx = found
        row = rows.setdefault(name, {"configuration": name, "on": None, "off": None,
                                     "_restored": {True: [], False: []}, "_ms": {True: [], False: []}})
        side = "on" if tx else "off"
        if row[side] is None:
            row[side] = {"system": result["system"], "scenarios": 0, "verdicts": {}}
        row[side]["scenarios"] += 1
        verdict = str(result.get("verdict", "?"))
        row[side]["verdicts"][verdict] = row[side]["verdicts"].get(verdict, 0) + 1
        row["_restored"][tx] += _numbers(result.get("restored_per_crash"))
        row["_ms"][tx] += [ms for ms in _numbers(result.get("restore_ms")) if ms >= 0]
    out = []
    for row in rows.values():
        for tx, side in ((True, "on"), (False, "off")):
            restored, ms = row["_restored"][tx], row["_ms"][tx]
            if row[side] is None:
                row[side] = {"system": None, "scenarios": 0, "verdicts": {}}
            row[side].update({"restorations": len(restored), "restored_median": _middle(restored),
                              "restored_max": max(restored) if restored else None,
                              "restore_ms_median": _middle(ms), "restore_ms_max": max(ms) if ms else None})
        out.append({k: v for k, v in row.items() if not k.startswith("_")})
    return out


def verdicts_text(verdicts: Mapping[str, int]) -> str:
    """``{"pass": 3, "fail": 1}`` → ``3 pass, 1 fail`` (``—`` for none)."""
    return ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items(), key=lambda kv: (kv[0] != "pass", kv[0]))) or "—"


def number_text(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"
