"""Checks of a Spark scenario: pure functions over what the driver recorded (history events, the
rows read back from the sink, the state rows read with Spark's state data source) and the model."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path

from eos_harness.models.spark import PipelineModel, model_for
from eos_harness.verdict import Violation

__all__ = ["CHECKS", "USER_STATE_CHECK", "check_at_least_once", "check_output", "check_watermarks", "recorded_watermarks", "check_restarts", "check_state", "normalise_state", "read_file_sink"]

# The checks (promises) of the suite, by their public names (violations' ``check``; JUnit testcases).
CHECKS = {
    "exactly_once_output": "the sink holds each row of every committed batch exactly once (the at-least-once Kafka "
                           "sink's duplicates a crash explains fail only under --strict)",
    "no_loss": "every row the model outputs for the committed batches is in the sink",
    "state_matches_model": "the state each run reads back is the model's state after the last committed batch",
    "restart_liveness": "every run after a kill starts and commits a new batch within the restart bound",
    "watermark_not_ahead": "after a restart, the watermark is never ahead of an uninterrupted run's",
}
# a user's query (suites/spark/user.py): its state is judged against its own crash-free run's
USER_STATE_CHECK = ("the state of each stateful operator, read back with Spark's state data source after the last "
                    "batch, equals the crash-free run's after the same batch")
EXACTLY_ONCE_SINKS = ("file", "foreach", "foreach-nocheck", "foreach-return-early")


def _find(d, name):
    """The first value named ``name`` in nested dicts (state rows nest values in structs)."""
    if isinstance(d, dict):
        if name in d:
            return d[name]
        for v in d.values():
            found = _find(v, name)
            if found is not None:
                return found
    return None


def normalise_state(pipeline: str, rows: list[dict]) -> dict[str, object]:
    """State rows of Spark's state data source → the model's state, keyed by ``json.dumps`` of the key."""
    out: dict[str, object] = {}
    if pipeline == "count":
        for r in rows:
            out[json.dumps(_find(r["key"], "key"))] = _find(r["value"], "count")
    elif pipeline.startswith("window-"):
        for r in rows:
            window = _find(r["key"], "window") or {}
            out[json.dumps([_find(r["key"], "key"), window.get("start"), window.get("end")])] = _find(r["value"], "count")
    elif pipeline == "pandas-state":
        for r in rows:
            state = r["value"] or {}
            times = sorted(int(t) for t in str(_find(state, "times") or "").split(",") if t)
            out[json.dumps(_find(r["key"], "key"))] = [_find(state, "count"), times]
    elif pipeline == "tws":
        counts: dict[str, int] = {}
        times: dict[str, list[int]] = {}
        for r in rows:
            key = json.dumps(_find(r["key"], "key"))
            if r["var"] == "count":
                counts[key] = _find(r["value"], "count")
            elif r["var"] == "times":
                element = r.get("list_element") or r.get("value")
                ts = _find(element, "ts")
                if isinstance(ts, list):
                    times.setdefault(key, []).extend(ts)
                elif ts is not None:
                    times.setdefault(key, []).append(ts)
        for key in set(counts) | set(times):
            out[key] = [counts.get(key), sorted(times.get(key, []))]
    return out


def model_state(pipeline: str, model: PipelineModel, batch: int | None) -> dict[str, object]:
    state = model.state(-1 if batch is None else batch)
    out: dict[str, object] = {}
    for key, value in state.items():
        k = json.dumps(list(key)) if isinstance(key, tuple) else json.dumps(key)
        if isinstance(value, tuple):
            value = [value[0], sorted(value[1])]
        out[k] = value
    return out


def check_state(pipeline: str, model: PipelineModel, state_events: list[dict]) -> list[Violation]:
    """``state_matches_model``: each state read (before and after every run) equals the model's
    state after the batch it was read at."""
    violations = []
    for event in state_events:
        observed = normalise_state(pipeline, event["rows"])
        expected = model_state(pipeline, model, event["batch"])
        for key in sorted(set(observed) | set(expected)):
            if observed.get(key) != expected.get(key):
                violations.append(Violation("state_matches_model", key, expected.get(key), observed.get(key),
                                            event["seq"]))
    return violations


def read_file_sink(output: Path) -> tuple[list[list], list[str]]:
    """Rows of the files the file sink's metadata log commits, and orphan part files (on disk, not in the log)."""
    log = output / "_spark_metadata"
    committed: set[str] = set()
    entries = sorted((p for p in log.iterdir() if p.name.split(".")[0].isdigit() and not p.name.startswith(".")),
                     key=lambda p: int(p.name.split(".")[0])) if log.is_dir() else []
    for entry in entries:
        for line in entry.read_text().splitlines()[1:]:
            if not line.strip():
                continue
            record = json.loads(line)
            name = Path(record["path"].removeprefix("file:")).name
            if record.get("action", "add") == "add":
                committed.add(name)
            else:
                committed.discard(name)
    rows, orphans = [], []
    for part in sorted(output.glob("part-*")):
        if part.name.endswith(".crc"):
            continue
        if part.name not in committed:
            orphans.append(part.name)
            continue
        rows += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return rows, orphans


def _as_row(row, columns) -> tuple:
    return tuple(row[c] for c in columns) if isinstance(row, dict) else tuple(row)


def check_output(sink: str, columns: tuple[str, ...], model: PipelineModel, last_batch: int, observed_rows: list,
                 applied: dict[int, int] | None = None, seq: int | None = None,
                 per_batch: dict[int, list] | None = None) -> tuple[list[Violation], Counter]:
    """``exactly_once_output``: the committed output equals the model's for batches 0..last_batch,
    every row once (a duplicate, a loss or an extra row is a violation, with the row as its key).

    Returns the violations and how many rows were ``duplicate``, ``lost`` or ``extra`` and how many
    batches were ``reapplied`` (applied more than once by a ``foreachBatch`` sink)."""
    violations = []
    tally: Counter = Counter()
    expected = Counter(tuple(r) for r in model.all_output(last_batch))
    observed = Counter(_as_row(r, columns) for r in observed_rows)
    for row in sorted(set(expected) | set(observed), key=str):
        if expected[row] != observed[row]:
            what = "duplicate" if observed[row] > expected[row] > 0 else ("lost" if observed[row] < expected[row] else "extra")
            tally[what] += 1
            violations.append(Violation("exactly_once_output", json.dumps(list(row)),
                                        f"{expected[row]}×", f"{observed[row]}× ({what})", seq))
    if applied is not None:
        for batch in range(last_batch + 1):
            if applied.get(batch, 0) != 1:
                tally["reapplied"] += applied.get(batch, 0) > 1
                violations.append(Violation("exactly_once_output", f"batch {batch}", "applied once",
                                            f"applied {applied.get(batch, 0)}×", seq))
    if per_batch is not None:
        for batch in range(last_batch + 1):
            exp = sorted(model.output(batch))
            obs = sorted(_as_row(r, columns) for r in per_batch.get(batch, []))
            if exp != obs:
                violations.append(Violation("exactly_once_output", f"batch {batch} rows", exp, obs, seq))
    return violations, tally


def check_restarts(runs: list[dict], bound_s: float) -> list[Violation]:
    """``restart_liveness``: every run after a kill starts and commits a new batch within ``bound_s``
    (or finds nothing left to do and exits 0); Spark's error is the observed value otherwise. A run
    the schedule killed again before its first commit is not judged (the run after it is)."""
    violations = []
    if runs and runs[0].get("error"):  # the query could not even start: Spark's error is the finding
        violations.append(Violation("restart_liveness", "run 0", "starts and completes its batches",
                                    runs[0]["error"], runs[0].get("seq")))
    for run in runs[1:]:
        first = run.get("first_commit_s")
        if run.get("killed") and first is None and run.get("seconds", 0) < bound_s:
            continue  # the harness killed it again before it could commit: the next run is judged
        if run.get("error"):
            violations.append(Violation("restart_liveness", f"run {run['run']}", "restarts and completes a batch",
                                        run["error"], run.get("seq")))
        elif first is None and run.get("exit") != 0:
            violations.append(Violation("restart_liveness", f"run {run['run']}", f"a committed batch within {bound_s} s",
                                        f"exit {run.get('exit')}: {run.get('log_tail', '')[-1500:]}", run.get("seq")))
        elif first is not None and first > bound_s:
            violations.append(Violation("restart_liveness", f"run {run['run']}", f"a committed batch within {bound_s} s",
                                        f"first batch after {first:.1f} s", run.get("seq")))
    return violations


def check_at_least_once(columns: tuple[str, ...], model: PipelineModel, last_batch: int, observed_rows: list,
                        crash_windows: list[dict], seq: int | None = None) -> tuple[list[Violation], dict]:
    """The Kafka sink (at least once): ``no_loss`` (every row the model expects from batches
    ``0..last_batch`` is in the topic; a row the model never outputs is reported too), and the
    duplicates counted, each attributed to the crash whose batch (on disk at the kill) outputs that
    row: that crash's window and file caused it. Rows of batch ``last_batch + 1`` (written, never
    committed, by a run that did not come back) are allowed. A duplicate a crash explains is an
    ``exactly_once_output`` violation marked ``strict_only`` (it fails the verdict only under
    ``--strict``); a duplicate no crash explains is always a violation.

    Returns the violations and ``{"count", "windows", "by_crash": [...], "unexplained"}``."""
    violations: list[Violation] = []
    expected = Counter(tuple(r) for r in model.all_output(last_batch))
    allowed_extra = Counter(tuple(r) for r in model.output(last_batch + 1))
    observed = Counter(_as_row(r, columns) for r in observed_rows)
    batches_of: dict[tuple, set[int]] = {}
    for b in range(last_batch + 2):
        for row in model.output(b):
            batches_of.setdefault(tuple(row), set()).add(b)
    by_crash = [{"run": c["run"], "target": c["target"], "after": c.get("after"), "window": c["window"],
                 "batch": c["batch"], "count": 0, "rows": []} for c in crash_windows]
    unexplained: list[list] = []
    total = 0
    for row in sorted(set(expected) | set(observed), key=str):
        exp, obs = expected[row], observed[row]
        if obs < exp:
            violations.append(Violation("no_loss", json.dumps(list(row)), f"{exp}×", f"{obs}× (lost)", seq))
            continue
        extra = obs - exp
        if exp == 0:
            extra = max(0, obs - allowed_extra[row])
            if extra and not batches_of.get(row):
                violations.append(Violation("no_loss", json.dumps(list(row)), "0× (no batch outputs this row)",
                                            f"{obs}× (extra)", seq))
                continue
            if obs and not extra:
                continue  # the uncommitted batch's own output
        if not extra:
            continue
        total += extra
        causes = [c for c in by_crash if c["batch"] in batches_of.get(row, set())]
        for cause in causes:
            cause["count"] += extra
            if len(cause["rows"]) < 20:
                cause["rows"].append(list(row))
        if not causes:
            unexplained.append(list(row))
            violations.append(Violation("exactly_once_output", json.dumps(list(row)), f"{exp}×",
                                        f"{obs}× (duplicate that no crash explains)", seq))
        else:
            violations.append(Violation("exactly_once_output", json.dumps(list(row)), f"{exp}×",
                                        f"{obs}× (duplicate, at-least-once sink; after "
                                        f"{', '.join(c['window'] for c in causes)})", seq, strict_only=True))
    caused = [c for c in by_crash if c["count"]]
    duplicates = {"count": total, "windows": sorted({c["window"] for c in caused}), "by_crash": caused,
                  "unexplained": unexplained[:20]}
    return violations, duplicates


def recorded_watermarks(checkpoint: Path) -> dict[int, int]:
    """``batchWatermarkMs`` of every ``offsets/N`` in the checkpoint: the watermark Spark ran batch N with."""
    found: dict[int, int] = {}
    folder = checkpoint / "offsets"
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        if not path.name.isdigit():
            continue
        for line in path.read_text(errors="replace").splitlines()[1:2]:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                found[int(path.name)] = int(json.loads(line)["batchWatermarkMs"])
    return dict(sorted(found.items()))


def check_watermarks(pipeline: str, batches: list, recorded: dict[int, int]) -> tuple[dict, list[Violation], PipelineModel | None]:
    """Compare the watermarks Spark recorded with an uninterrupted run's.

    After a restart Spark's watermark can lag: a batch the restart re-plans but does not compute
    (the file sink skips a batch its metadata log already has) does not advance it. Records behind
    the uninterrupted watermark may then still be counted, which Spark documents ("data later than
    the threshold may or may not be aggregated"), so a lag is reported, not a violation, and the
    output and state are checked against the model run with the recorded watermarks. A watermark
    ahead of the uninterrupted one could drop records within the threshold, which Spark promises
    never to do: that is a violation. Returns (report, violations, the model to check with or None
    when the watermarks agree)."""
    plain = model_for(pipeline, batches)
    if not recorded:
        return {}, [], None
    plain.run_to(max(recorded))
    if plain.watermarks[0] is None:  # no watermark in this pipeline
        return {}, [], None
    expected = {n: plain.watermarks[n] for n in recorded}
    lagging = [n for n in recorded if recorded[n] < expected[n]]
    ahead = [n for n in recorded if recorded[n] > expected[n]]
    report = {"recorded": recorded, "uninterrupted": expected, "lagging_batches": lagging, "ahead_batches": ahead}
    violations = [Violation("watermark_not_ahead", f"batch {n}", f"<= {expected[n]} ms (uninterrupted run)",
                            f"{recorded[n]} ms recorded in offsets/{n}", None) for n in ahead]
    if not lagging and not ahead:
        return report, violations, None
    return report, violations, model_for(pipeline, batches, recorded)
