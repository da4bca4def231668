"""Read a run directory of any suite into one neutral shape, :class:`RunView`, that the HTML
renderer draws. It reads only files (never a live system) and never raises on a damaged run:
every file it cannot read in full becomes a :class:`Problem` naming the file and what is wrong,
and the view holds what could be read. A directory with no run in it raises :class:`NoRun`.

What it recognises (the files the suites write, see ``suites/*/runner.py`` and :mod:`eos_harness.suite_campaign`):

- a lifecycle campaign: ``chaos.json`` (or, when it is missing or unreadable, ``results.jsonl``)
  with ``scenario-NNNNN/{verdict.json,history.jsonl}``;
- a Spark campaign: the same, with ``"suite": "spark"`` and ``NNN-<pipeline>-<sink>/`` folders;
- a single lifecycle or Spark run: ``verdict.json`` and ``history.jsonl``.

The counts shown (verdict table, totals) are the JSON's own summary fields where the run wrote
them; they are checked against the scenarios list, and a disagreement is a problem, not a silent fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.campaign_summary import waived_lines
from eos_harness.records import (
    CAMPAIGN_TYPES,
    OPTION_TYPES,
    RESULT_TYPES,
    campaign_problems,
    history_problems,
    json_lines,
    option_problems,
    result_problems,
    type_name,
)
from eos_harness.rundir import MARKER
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, Violation, verdict_of

UNKNOWN = "unknown"  # what a subject was expected to do, for a run written before its results said it

__all__ = ["Event", "NoRun", "Problem", "RunView", "ScenarioView", "SubjectRow", "check_run_directory", "load_run"]

MAX_TIMELINES = 40  # failing scenarios drawn with a timeline; the rest are listed with their repro


class NoRun(ValueError):
    """The directory holds no run of the harness (nothing to report)."""


@dataclass
class Problem:
    """A file of the run that could not be read in full."""

    file: str
    what: str


@dataclass
class Event:
    """One history event placed on a timeline."""

    seq: int
    lane: str  # "instance 2", "run 1", "driver"
    category: str  # operation, commit, crash, recovery, fault, lifecycle, output, other
    type: str
    time: float  # seconds since the scenario started, or the seq when the history has no clock
    text: str  # what the event says, for the hover


SHOWN_VIOLATIONS = 50  # rows of a failing scenario's violations table (the rest are in its JSON)


@dataclass
class ScenarioView:
    name: str
    index: int | None
    subject: str  # the store, or the Spark configuration
    verdict: str
    expected: str | None  # "pass", "fail" (a mutant must be caught) or "unknown" (not written); None for a single run
    faults: list[str]  # the fault kinds its schedule names (crash points, kill, sink, …)
    schedule: list[str]
    seed: int | None
    workload: str | None
    violations: list[dict]
    repro: str
    error: str | None = None
    seconds: float | None = None
    started_at: float | None = None
    recovery: list[dict] = field(default_factory=list)
    kill_to_first_batch: list[float] = field(default_factory=list)
    history: str | None = None
    events: list[Event] | None = None  # loaded for failing scenarios only
    timed: bool = False  # the events' time is seconds (else the history's seq)
    keeps_history: bool = True  # False: its result says it records none (``"history": null``)

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    @property
    def shown_violations(self) -> list[dict]:
        """The violations the report's table shows: at most SHOWN_VIOLATIONS, in their order, the first
        of every check among them (a check broken late in a long list is still named)."""
        if len(self.violations) <= SHOWN_VIOLATIONS:
            return self.violations
        first = {}
        for i, v in enumerate(self.violations):
            first.setdefault(v.get("check"), i)
        chosen = sorted(first.values())[:SHOWN_VIOLATIONS]
        taken = set(chosen)
        rest = [i for i in range(len(self.violations)) if i not in taken]
        chosen = sorted(chosen + rest[:SHOWN_VIOLATIONS - len(chosen)])
        return [self.violations[i] for i in chosen]

    @property
    def unexpected(self) -> bool:
        if self.expected == UNKNOWN:
            return False  # not judged: the run's files do not say what its subject was expected to do
        if self.expected is None:
            return self.verdict == FAIL
        return self.verdict != ERROR and (self.verdict == FAIL) != (self.expected == "fail")


@dataclass
class SubjectRow:
    """One row of the verdict table: a store, or a Spark pipeline configuration."""

    name: str
    expected: str | None
    scenarios: int
    failed: int
    errors: int
    not_applicable: int
    status: str
    checks: dict[str, int]

    @property
    def passed(self) -> int:
        return self.scenarios - self.failed - self.errors - self.not_applicable


@dataclass
class RunView:
    suite: str  # "lifecycle" | "spark" | "metadata" (its results have the lifecycle's shape, "system" for "store")
    kind: str  # "campaign" | "run"
    directory: Path
    seed: int | None = None
    seconds: float | None = None
    broker: str | None = None
    command: str | None = None  # the command that reproduces the campaign (or the run)
    subjects: list[SubjectRow] = field(default_factory=list)
    scenarios: list[ScenarioView] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # stores / repro commands whose result was unexpected
    not_run: list[str] = field(default_factory=list)
    waived: list[str] = field(default_factory=list)  # what the campaign's --allow waived, a line each
    stopped: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    timelines_left_out: int = 0
    subject: str | None = None  # what its results ran on, as the campaign JSON names it (``store``, ``system``)
    # kafka-streams: transactional state stores on and off side by side, per configuration (rows of
    # :func:`eos_harness.suites.kafka_streams.compare.transactional_comparison`, each side with its texts)
    transactional_stores: list[dict] = field(default_factory=list)

    @property
    def subject_word(self) -> str:
        return self.subject or {"spark": "configuration", "metadata": "system"}.get(self.suite, "store")

    @property
    def total(self) -> int:
        return len(self.scenarios)

    def count(self, verdict: str) -> int:
        return sum(1 for s in self.scenarios if s.verdict == verdict)

    @property
    def failing(self) -> list[ScenarioView]:
        return [s for s in self.scenarios if s.failed]


# ---------------------------------------------------------------------------------------------- files


def _read_bytes(path: Path, problems: list[Problem]) -> bytes | None:
    try:
        return path.read_bytes()
    except IsADirectoryError:
        problems.append(Problem(str(path), "is a directory, not a file"))
    except OSError as exc:
        problems.append(Problem(str(path), f"cannot be read: {exc.strerror or exc}"))
    return None


def _read_json(path: Path, problems: list[Problem]) -> dict | None:
    data = _read_bytes(path, problems)
    if data is None:
        return None
    if not data.strip():
        problems.append(Problem(str(path), "is empty (the run was cut short before it was written?)"))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(str(path), f"is corrupt: it holds bytes that are not text (UTF-8) at byte {exc.start}"))
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(Problem(str(path), f"is not valid JSON (truncated or corrupt): {exc.msg} at line "
                                           f"{exc.lineno}, column {exc.colno}"))
        return None
    except ValueError as exc:  # a number too long to read, …
        problems.append(Problem(str(path), f"is not valid JSON (corrupt): {exc}"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(str(path), f"holds {type_name(value)}, not a JSON object"))
        return None
    return value


MAX_LINES_NAMED = 5  # bad lines of one file named one by one; the rest are counted


def _read_jsonl(path: Path, problems: list[Problem], what: str,
                check: Callable[[object], list[str]] | None = None, empty_is_damage: bool = False) -> list[dict]:
    """The JSON objects of a JSON-lines file; each line that cannot be read (cut, not text, not JSON,
    not an object, a field of the wrong type per ``check``) is left out and named in one problem."""
    data = _read_bytes(path, problems)
    if data is None:
        return []
    if not data.strip():
        if empty_is_damage:
            problems.append(Problem(str(path), f"is empty: none of its {what} were written (the run was cut short?)"))
        return []
    total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    rows: list[dict] = []
    bad: list[str] = []
    for number, value, problem in json_lines(data):
        if problem is None:
            found = check(value) if check else ([] if isinstance(value, dict) else [f"is {type_name(value)}, "
                                                                                    "not an object"])
            problem = "; ".join(found) or None
        if problem is None:
            rows.append(value)
            continue
        cut = number == total and not data.endswith(b"\n")
        bad.append(f"line {number} of {total} {problem}{' (truncated last line)' if cut else ''}")
    if not data.endswith(b"\n") and not (bad and bad[-1].endswith("(truncated last line)")):
        bad.append(f"line {total} of {total} ends without a newline: the file was cut short after it "
                   "(truncated last line; what followed is lost)")
    if bad:
        named = "; ".join(bad[:MAX_LINES_NAMED]) + (f"; and {len(bad) - MAX_LINES_NAMED} more bad line(s)"
                                                    if len(bad) > MAX_LINES_NAMED else "")
        problems.append(Problem(str(path), f"{named}: left out; the {what} of its other {len(rows)} line(s) are shown"))
    return rows


def _readable_fields(record: dict, types: dict) -> dict:
    """``record`` without the fields of the wrong type (what is shown is only what could be read)."""
    return {name: value for name, value in record.items() if name not in types or types[name][1](value)}


def _marker_command(directory: Path) -> str | None:
    """The command line that made the run directory, from its marker file."""
    try:
        first = (directory / MARKER).read_text().splitlines()[0]
    except (OSError, IndexError, ValueError):  # missing, empty, not text
        return None
    _, sep, command = first.partition("): ")
    return command.strip() if sep and command.strip() else None


_DROPPED = {"--out": 1, "--json": 1, "--junit": 1, "--minutes": 1, "--scenarios": 1, "--seed": 1,
            "--overwrite": 0, "--no-report": 0, "--resume": 1}


def reproduce_command(typed: str | None, seed: int | None, scenarios: int, fallback: list[str]) -> str:
    """The command that runs the same campaign again: the command as typed (or ``fallback``) with
    the seed made explicit and ``--scenarios N`` (the plan is a function of the seed, so the same
    seed's first N scenarios are the same scenarios, however the original was bounded), without
    the options that name output files."""
    try:
        words = shlex.split(typed) if typed else list(fallback)
    except ValueError:
        words = list(fallback)
    kept: list[str] = []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
            continue
        name = word.split("=", 1)[0]
        if name in _DROPPED:
            skip = 0 if "=" in word else _DROPPED[name]
            continue
        kept.append(word)
    if kept and not kept[0].startswith("-"):
        kept[0] = "eos-harness"  # however it was started (a script path, python -m …)
    if seed is not None:
        kept += ["--seed", str(seed)]
    kept += ["--scenarios", str(scenarios)]
    return shlex.join(kept)


# ---------------------------------------------------------------------------------------------- load


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def check_run_directory(directory: str | Path) -> Path:
    """``directory`` if it is a directory the report can read, else :class:`NoRun` saying why."""
    directory = Path(directory)
    if not os.path.isdir(directory):
        raise NoRun(f"{directory}: not a directory; give the run directory a `run` or `chaos` wrote (its --out)")
    if not os.access(directory, os.R_OK | os.X_OK):
        raise NoRun(f"{directory}: cannot be read (permission denied); nothing to report")
    return directory


def load_run(directory: str | Path, campaign_json: str | Path | None = None) -> RunView:
    """The run in ``directory`` as a :class:`RunView`. ``campaign_json``: where the campaign JSON
    was written when not ``directory/chaos.json`` (``chaos --json FILE``). Raises :class:`NoRun`.
    Every file of the run it cannot read in full is a problem of the view, and so is every scenario
    folder whose history or verdict is damaged (read even when not drawn)."""
    directory = check_run_directory(directory)
    problems: list[Problem] = []
    chaos_path = Path(campaign_json) if campaign_json else directory / "chaos.json"
    results_path = directory / "results.jsonl"
    verdict_path = directory / "verdict.json"
    if _exists(chaos_path) or _exists(results_path):
        campaign = _read_campaign(chaos_path, problems) if _exists(chaos_path) else None
        if campaign is None:
            if not _exists(results_path):
                raise NoRun(f"{directory}: {chaos_path} {problems[-1].what}, and there is no results.jsonl "
                            "to report from")
            if not _exists(chaos_path):
                problems.append(Problem(str(chaos_path), "is missing (the campaign was cut short before its "
                                                         "end?); the report is built from results.jsonl"))
            campaign = _campaign_from_results(directory, results_path, problems)
            campaign["read"] = [os.path.realpath(results_path)]
        view = _spark_campaign(campaign, directory, problems) if campaign.get("suite") == "spark" \
            else _lifecycle_campaign(campaign, directory, problems)
    elif (directory / "parquet" / "results").is_dir():  # only the Parquet results (--engine spark) are left
        campaign = _campaign_from_parquet(directory, problems)
        view = _spark_campaign(campaign, directory, problems) if campaign.get("suite") == "spark" \
            else _lifecycle_campaign(campaign, directory, problems)
    elif _exists(verdict_path):
        verdict = _read_json(verdict_path, problems)
        if verdict is not None:
            wrong = result_problems(verdict)
            if wrong:
                problems.append(Problem(str(verdict_path), f"{'; '.join(wrong)}: those fields are not shown"))
                verdict = _readable_fields(verdict, RESULT_TYPES)
        if verdict is None:
            view = RunView("lifecycle", "run", directory)
        elif "pipeline" in verdict:
            view = _spark_run(verdict, directory, problems)
        else:
            view = _lifecycle_run(verdict, directory, problems)
    else:
        try:
            held = sorted(p.name for p in directory.iterdir())[:5]
        except OSError:
            held = []
        raise NoRun(f"{directory}: holds no run of eos-harness (no chaos.json, results.jsonl or verdict.json"
                    f"{'; it holds ' + ', '.join(held) if held else '; it is empty'}); give the directory "
                    "that `eos-harness run` or `chaos` wrote (its --out)")
    view.problems = problems
    read = _load_histories(view, directory)
    if view.kind == "campaign" and _exists(results_path) and not any(p.file == str(results_path) for p in problems):
        read.update(campaign.get("read", []))
        if os.path.realpath(results_path) not in read:  # the scenarios came from chaos.json: what a resume reads
            _read_jsonl(results_path, problems, "scenarios", check=result_problems)
    _check_run_files(view, directory, read)
    return view


def _read_campaign(path: Path, problems: list[Problem]) -> dict | None:
    """The campaign JSON without what is damaged in it (named): None when it has no list of scenarios."""
    campaign = _read_json(path, problems)
    if campaign is None:
        return None
    wrong = campaign_problems(campaign)
    if not isinstance(campaign.get("scenarios"), list):
        problems.append(Problem(str(path), f"has no list of scenarios{': ' + '; '.join(wrong) if wrong else ''}"))
        return None
    if wrong:
        problems.append(Problem(str(path), f"{'; '.join(wrong)}: not shown (the counts are the scenarios' own)"))
        campaign = _readable_fields(campaign, CAMPAIGN_TYPES)
        if any(p.startswith("summary:") for p in wrong):
            campaign.pop("summary", None)
    rows = []
    for number, row in enumerate(campaign["scenarios"]):
        wrong = result_problems(row)
        if wrong:
            problems.append(Problem(str(path), f"scenario entry {number}: {'; '.join(wrong)}: left out"))
        else:
            rows.append(row)
    return {**campaign, "scenarios": rows}


def _campaign_from_parquet(directory: Path, problems: list[Problem]) -> dict:
    """A campaign on Spark whose JSON (chaos.json, results.jsonl) is gone: its results from the Parquet dataset
    it wrote at its end (``parquet/results``), its seed, stores and broker from the options it kept."""
    from eos_harness.results_parquet import read_results

    dataset = directory / "parquet" / "results"
    try:
        results = read_results(directory)
    except ImportError as exc:
        raise NoRun(f"{directory}: holds only Parquet results ({dataset}), and {exc.name} is not installed to "
                    "read them: pip install 'eos-harness[spark]'") from None
    except (OSError, ValueError) as exc:
        raise NoRun(f"{directory}: holds only Parquet results ({dataset}), which cannot be read: {exc}") from None
    rows = []
    for number, row in enumerate(results):
        wrong = result_problems(row)
        if wrong:
            problems.append(Problem(str(dataset), f"row {number}: {'; '.join(wrong)}: left out"))
        else:
            rows.append(row)
    campaign = _campaign_from_rows(directory, rows, problems, what=str(dataset))
    campaign["read"] = [os.path.realpath(dataset)]
    campaign["cut_short"] = "stopped" in campaign  # written at the campaign's end: cut short only if it says so
    return campaign


def _campaign_from_results(directory: Path, results_path: Path, problems: list[Problem]) -> dict:
    """A campaign cut short (no chaos.json): its results from results.jsonl, its seed, stores and broker
    from the options it kept (campaign.json)."""
    rows = _read_jsonl(results_path, problems, "scenarios", check=result_problems)
    return _campaign_from_rows(directory, rows, problems, what="results.jsonl")


def _campaign_from_rows(directory: Path, rows: list[dict], problems: list[Problem], what: str) -> dict:
    campaign: dict = {"scenarios": rows}
    options = _campaign_options(directory, problems)
    if options:
        campaign.update({name: options[name] for name in ("seed", "broker", "source", "sinks") if name in options})
        suite = options.get("suite")
        if suite in ("spark", "metadata"):
            campaign["suite"] = suite
        campaign["asked"] = options.get("stores") or options.get("systems")
        if options.get("finished") is False:
            campaign["stopped"] = {"why": "cut short", "message": "the campaign ended before it wrote chaos.json "
                                   f"(killed, or still running): the report shows the scenarios in {what}"}
    if "suite" not in campaign and rows and "pipeline" in rows[0]:
        campaign["suite"] = "spark"
    campaign["cut_short"] = True
    return campaign


def _campaign_options(directory: Path, problems: list[Problem]) -> dict:
    """The options a campaign kept (campaign.json), without those of the wrong type (named)."""
    from eos_harness.campaign import STATE_FILE

    path = directory / STATE_FILE
    if not _exists(path):
        return {}
    options = _read_json(path, problems)
    if options is None:
        return {}
    wrong = option_problems(options)
    if wrong:
        problems.append(Problem(str(path), f"{'; '.join(wrong)}: not used"))
        options = _readable_fields(options, OPTION_TYPES)
    return options


def _fault_kind(entry: str) -> str:
    """``task.commit.after_eos@3`` → ``task.commit.after_eos``; ``kill@40`` → ``kill``; ``sink@2`` → ``sink``."""
    return re.sub(r"@[^,]*$", "", entry)


def _lifecycle_scenario(r: dict, directory: Path, expected: str | None) -> ScenarioView:
    index = r.get("index") if isinstance(r.get("index"), int) else None
    schedule = [str(f) for f in r.get("schedule", [])]
    subject = str(r.get("store", r.get("system", "?")))
    if index is not None:
        name = f"scenario {index}"
    elif r.get("index") == "probe":
        name = f"the probe of {subject}"
    else:
        name = f"{subject} / {r.get('workload')}"
    return ScenarioView(
        name=name, index=index, subject=subject, verdict=str(r.get("verdict", "?")), expected=expected,
        faults=[_fault_kind(f) for f in schedule] or ["(no fault)"], schedule=schedule, seed=r.get("seed"),
        workload=r.get("workload"), violations=list(r.get("violations", [])), repro=str(r.get("repro", "")),
        error=r.get("error"), seconds=r.get("seconds"), started_at=r.get("started_at"),
        recovery=list(r.get("recovery", [])), history=r.get("history"),
        keeps_history="history" not in r or r["history"] is not None)


def _lifecycle_campaign(campaign: dict, directory: Path, problems: list[Problem]) -> RunView:
    summary = campaign.get("summary")
    rows = [r for r in campaign["scenarios"] if isinstance(r, dict)]
    stores_json = (summary or {}).get("stores") or (summary or {}).get("systems") or {}
    expected = {s: t.get("expected") for s, t in stores_json.items()}
    for r in rows:  # no summary: each result says what its subject was expected to do
        if r.get("expected") in ("pass", "fail"):
            expected.setdefault(r.get("store", r.get("system")), r["expected"])
    suite = str(campaign.get("suite") or (rows[0].get("suite") if rows else None) or "lifecycle")
    # A campaign written before results said what their subject was expected to do, without a summary: "unknown"
    # (the report reads the run's files only; it never asks a suite's code what it would expect today).
    scenarios = [_lifecycle_scenario(r, directory, expected.get(r.get("store", r.get("system"))) or UNKNOWN)
                 for r in rows]
    view = RunView(suite, "campaign", directory, seed=campaign.get("seed"), seconds=campaign.get("seconds"),
                   broker=campaign.get("broker"), scenarios=scenarios, stopped=campaign.get("stopped"),
                   subject=campaign.get("subject") if isinstance(campaign.get("subject"), str) else None)
    if suite == "kafka-streams":
        view.transactional_stores = _transactional_stores(rows)
    computed = _tally(scenarios, lambda s: s.subject)
    if summary:
        for store, t in stores_json.items():
            view.subjects.append(SubjectRow(store, t.get("expected"), int(t.get("scenarios", 0)),
                                            int(t.get("failed", 0)), int(t.get("errors", 0)), 0,
                                            str(t.get("status", "")), dict(t.get("checks", {}))))
        view.unexpected = list(summary.get("unexpected", []))
        view.not_run = list(summary.get("not_run", []))
        with contextlib.suppress(AttributeError, KeyError, TypeError):  # an older or damaged summary: none shown
            view.waived = waived_lines(summary)
        _compare(view, summary, computed, directory / "chaos.json", problems)
    else:
        # As the campaign's own summary judges a store: over all its scenarios (a mutant is caught when one
        # of them failed), and, for a campaign cut short, a mutant not caught yet is not unexpected.
        cut_short = bool(campaign.get("cut_short") or campaign.get("stopped"))
        for store, (n, failed, errors, na, checks) in computed.items():
            exp = expected.get(store) or UNKNOWN
            if exp == UNKNOWN:
                status = "ERROR" if errors == n else "not judged (expected result unknown)"
            elif exp == "fail":
                status = "caught" if failed else "ERROR" if errors == n else \
                    "not caught yet" if cut_short else "NOT CAUGHT"
            else:
                status = "FAILED" if failed else "ERROR" if errors == n else "ok"
            view.subjects.append(SubjectRow(store, exp, n, failed, errors, na, status, checks))
        view.unexpected = sorted(row.name for row in view.subjects if row.status in ("FAILED", "NOT CAUGHT"))
        asked = campaign.get("asked") or []
        view.not_run = sorted(set(asked) - set(computed))
    typed = _marker_command(directory)
    stores = list(stores_json) or list(campaign.get("asked") or []) or sorted({s.subject for s in scenarios})
    listed = "--systems" if "systems" in (summary or {}) or campaign.get("subject") == "system" else "--stores"
    fallback = ["eos-harness", "chaos", *([] if suite == "lifecycle" else ["--suite", suite]), listed, ",".join(stores)]
    if view.broker and view.broker != "embedded":
        fallback += ["--broker", str(view.broker)]
    allowed = campaign.get("allow")
    if isinstance(allowed, list):
        fallback += [word for check in allowed for word in ("--allow", str(check))]
    view.command = reproduce_command(typed if typed and " chaos" in typed else None, view.seed, len(scenarios),
                                     fallback)
    return view


def _transactional_stores(rows: list[dict]) -> list[dict]:
    """The kafka-streams campaign's results, transactional stores on and off side by side, with the texts the
    report shows (computed from the results, so that a campaign rebuilt from results.jsonl has it too)."""
    from eos_harness.suites.kafka_streams.compare import number_text, transactional_comparison, verdicts_text

    table = transactional_comparison(rows)
    for row in table:
        for side in (row["on"], row["off"]):
            side["verdicts_text"] = verdicts_text(side["verdicts"])
            side["restored_text"] = (f"{number_text(side['restored_median'])} / {number_text(side['restored_max'])} "
                                     f"({side['restorations']})")
            side["ms_text"] = f"{number_text(side['restore_ms_median'])} / {number_text(side['restore_ms_max'])}"
    return table


def _tally(scenarios: list[ScenarioView], key) -> dict[str, tuple[int, int, int, int, dict[str, int]]]:
    out: dict[str, list] = {}
    for s in scenarios:
        row = out.setdefault(key(s), [0, 0, 0, 0, Counter()])
        row[0] += 1
        row[1] += s.verdict == FAIL
        row[2] += s.verdict == ERROR
        row[3] += s.verdict == NOT_APPLICABLE
        if s.verdict == FAIL:
            for v in s.violations:
                row[4][v.get("check", "?")] += 1
    return {k: (n, f, e, na, dict(c)) for k, (n, f, e, na, c) in out.items()}


def _compare(view: RunView, summary: dict, computed: dict, path: Path, problems: list[Problem]) -> None:
    """A summary that disagrees with its own scenarios list is reported, not smoothed over."""
    if summary.get("total") is not None and summary["total"] != view.total:
        problems.append(Problem(str(path), f"its summary counts {summary['total']} scenarios but its scenarios list "
                                           f"holds {view.total}"))
    if summary.get("failed") is not None and summary["failed"] != view.count(FAIL):
        problems.append(Problem(str(path), f"its summary counts {summary['failed']} failed scenarios but its scenarios "
                                           f"list holds {view.count(FAIL)}"))
    for row in view.subjects:
        n, failed, *_ = computed.get(row.name, (0, 0, 0, 0, {}))
        if (row.scenarios, row.failed) != (n, failed):
            problems.append(Problem(str(path), f"its summary of {row.name} says {row.scenarios} scenarios, {row.failed} "
                                               f"failed; its scenarios list says {n}, {failed}"))


def _lifecycle_run(verdict: dict, directory: Path, problems: list[Problem]) -> RunView:
    suite = str(verdict.get("suite") or "lifecycle")
    # Written by the run; a run written before results carried it does not say: "unknown".
    expected = verdict.get("expected") if verdict.get("expected") in ("pass", "fail") else UNKNOWN
    scenario = _lifecycle_scenario(verdict, directory, expected)
    scenario.name = "the run"
    view = RunView(suite, "run", directory, seed=verdict.get("seed"), seconds=verdict.get("seconds"),
                   broker=verdict.get("broker"), scenarios=[scenario], command=scenario.repro)
    n, failed, errors, na, checks = _tally([scenario], lambda s: s.subject)[scenario.subject]
    view.subjects = [SubjectRow(scenario.subject, scenario.expected, n, failed, errors, na, scenario.verdict, checks)]
    view.unexpected = [scenario.subject] if scenario.unexpected else []
    return view


# ---------------------------------------------------------------------------------------------- Spark


def spark_configuration(r: dict) -> str:
    """The configuration label of a Spark result, as the terminal's matrix table groups them."""
    conf = r.get("configuration") or {}
    state = str(conf.get("state_provider", "?")) + ("+changelog" if conf.get("changelog_checkpointing") else "")
    source = conf.get("source", "file")
    sink = str(r.get("sink", "?")) + ("" if source == "file" else f" ({source} source)")
    return f"{r.get('pipeline', '?')} → {sink} · {state} · fmt {conf.get('checkpoint_format', '?')}"


def _spark_verdict(r: dict) -> str:
    """As ``suites.spark.plan.judge``: violations marked ``strict_only`` fail only under --strict."""
    verdict = str(r.get("verdict", "?"))
    if verdict in (NOT_APPLICABLE, ERROR) or not isinstance(r.get("violations"), list):
        return verdict
    try:
        return verdict_of([Violation.from_json(v) for v in r["violations"]], bool(r.get("strict")))
    except (TypeError, KeyError, ValueError, AttributeError):
        return verdict


def _kill_to_first_batch(r: dict) -> list[float]:
    """Seconds from each kill to the first batch the restarted run committed (``runs[].first_commit_s``
    of a run that follows a killed one)."""
    runs = r.get("runs") or []
    return [float(run["first_commit_s"]) for before, run in zip(runs, runs[1:], strict=False)
            if before.get("killed") and isinstance(run.get("first_commit_s"), int | float)
            and not isinstance(run.get("first_commit_s"), bool)]


def _spark_scenario(r: dict, name: str, expected: str | None) -> ScenarioView:
    schedule = [str(t) for t in r.get("schedule", [])]
    strict = bool(r.get("strict"))
    violations = [v for v in r.get("violations", []) if strict or not v.get("strict_only")]
    return ScenarioView(
        name=name, index=r.get("index"), subject=spark_configuration(r), verdict=_spark_verdict(r),
        expected=expected, faults=[_fault_kind(t) for t in schedule] or ["(no kill)"], schedule=schedule,
        seed=r.get("seed"), workload=r.get("pipeline"), violations=violations, repro=str(r.get("repro", "")),
        error=r.get("error") or r.get("reason"), seconds=r.get("seconds"), started_at=r.get("started_at"),
        kill_to_first_batch=_kill_to_first_batch(r), history=r.get("history"))


def _spark_campaign(campaign: dict, directory: Path, problems: list[Problem]) -> RunView:
    rows = [r for r in campaign["scenarios"] if isinstance(r, dict)]
    scenarios = []
    for r in rows:
        expected = {"caught": "fail", "pass": "pass"}.get(r.get("expected", "pass"), "pass")
        scenarios.append(_spark_scenario(r, f"scenario {r.get('index')}", expected))
    view = RunView("spark", "campaign", directory, seed=campaign.get("seed"), seconds=campaign.get("seconds"),
                   scenarios=scenarios, stopped=campaign.get("stopped"))
    computed = _tally(scenarios, lambda s: s.subject)
    for subject, (n, failed, errors, na, checks) in sorted(computed.items()):
        members = [s for s in scenarios if s.subject == subject]
        exp = "fail" if any(s.expected == "fail" for s in members) else "pass"
        if exp == "fail":
            status = "caught" if failed else "ERROR" if errors else "NOT CAUGHT"
        else:
            status = "FAILED" if failed else "ERROR" if errors else "n/a" if na == n else "ok"
        view.subjects.append(SubjectRow(subject, exp, n, failed, errors, na, status, checks))
    summary = campaign.get("summary")
    view.unexpected = list((summary or {}).get("unexpected", [s.repro for s in scenarios if s.unexpected]))
    if summary:
        _compare(view, summary, computed, directory / "chaos.json", problems)
    typed = _marker_command(directory)
    fallback = ["eos-harness", "chaos", "--suite", "spark", "--source", str(campaign.get("source", "file")),
                "--sinks", ",".join(campaign.get("sinks") or ["file", "foreach", "kafka"])]
    view.command = reproduce_command(typed if typed and " chaos" in typed else None, view.seed, len(scenarios),
                                     fallback)
    return view


def _spark_run(verdict: dict, directory: Path, problems: list[Problem]) -> RunView:
    written = verdict.get("expected")  # written by the run ("caught" for the mutant sink); older runs: "unknown"
    expected = {"caught": "fail", "pass": "pass"}.get(written, UNKNOWN)
    scenario = _spark_scenario(verdict, "the run", expected)
    view = RunView("spark", "run", directory, seed=verdict.get("seed"), seconds=verdict.get("seconds"),
                   scenarios=[scenario], command=scenario.repro)
    n, failed, errors, na, checks = _tally([scenario], lambda s: s.subject)[scenario.subject]
    view.subjects = [SubjectRow(scenario.subject, scenario.expected, n, failed, errors, na, scenario.verdict, checks)]
    view.unexpected = [scenario.repro] if scenario.unexpected else []
    return view


# ---------------------------------------------------------------------------------------------- histories


def _history_path(scenario: ScenarioView, directory: Path) -> Path | None:
    """The scenario's history: the recorded path, or the same file under ``directory`` (a run
    directory that was moved or copied keeps its layout)."""
    candidates = []
    if not scenario.keeps_history:
        return None
    if scenario.history:
        recorded = Path(scenario.history)
        candidates += [directory / recorded.parent.name / recorded.name, directory / recorded.name, recorded]
    if scenario.index is not None:
        candidates.append(directory / f"scenario-{scenario.index:05d}" / "history.jsonl")
    for path in candidates:
        if os.path.isfile(path):
            return path
    return candidates[0] if candidates else None


def _load_histories(view: RunView, directory: Path) -> set[str]:
    """Read the histories of the failing scenarios drawn (unexpected ones first); returns the files read."""
    failing = sorted(view.failing, key=lambda s: (not s.unexpected, s.index if s.index is not None else -1))
    drawn = failing[:MAX_TIMELINES]
    view.timelines_left_out = len(failing) - len(drawn)
    read: set[str] = set()
    for scenario in drawn:
        path = _history_path(scenario, directory)
        if path is None:  # it records no history (a store's probe): listed with its replay, not drawn
            continue
        if not os.path.isfile(path):
            folder = path.parent
            why = (f"cannot be read: its folder {folder} cannot be read (permission denied)"
                   if os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK) else "is missing")
            view.problems.append(Problem(str(path), f"{why}: the timeline of {scenario.name} cannot be drawn"))
            scenario.events = []
            continue
        read.add(os.path.realpath(path))
        rows = _read_jsonl(path, view.problems, "events", check=history_problems, empty_is_damage=True)
        scenario.events, scenario.timed = timeline_events(rows, view.suite)
    return read


_SCENARIO_FOLDER = re.compile(r"^(scenario-\d+|\d{3}-.+)$")


def _check_run_files(view: RunView, directory: Path, read: set[str]) -> None:
    """Name every damaged file of the run that the view did not read: each scenario folder's history and
    verdict (a folder that cannot be read is named too), a single run's history, the kept options."""
    from eos_harness.campaign import STATE_FILE

    folders: list[Path] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        entries = []
    for entry in entries:
        if _SCENARIO_FOLDER.match(entry.name) and entry.is_dir(follow_symlinks=False):
            folders.append(Path(entry.path))
    if view.kind == "run":
        folders.insert(0, directory)
    elif not any(p.file == str(directory / STATE_FILE) for p in view.problems):
        _campaign_options(directory, view.problems)  # what a --resume would read
    for folder in folders:
        if not os.access(folder, os.R_OK | os.X_OK):
            view.problems.append(Problem(str(folder), "cannot be read (permission denied): its history and verdict "
                                                      "are not checked"))
            continue
        history, verdict = folder / "history.jsonl", folder / "verdict.json"
        if _exists(history) and os.path.realpath(history) not in read:
            _read_jsonl(history, view.problems, "events", check=history_problems, empty_is_damage=True)
        if folder != directory and _exists(verdict):
            found = _read_json(verdict, view.problems)
            wrong = result_problems(found) if found is not None else []
            if wrong:
                view.problems.append(Problem(str(verdict), "; ".join(wrong)))


_CATEGORIES = {
    "read": "operation", "op": "operation", "state": "operation",
    "commit": "commit", "store_commit_begin": "commit", "store_commit": "commit",
    "crash": "crash", "frozen": "crash", "hang": "crash", "aborted": "crash", "exit": "lifecycle",
    "recover": "recovery", "recovery_restart": "recovery", "resumed": "recovery",
    "broker_fault": "fault", "stalled": "fault", "migrated": "fault", "fenced": "fault", "fault_fired": "fault",
    "target_not_reached": "fault",
    "start": "lifecycle", "done": "lifecycle", "verified": "lifecycle", "scenario": "lifecycle", "kafka": "lifecycle",
    "output": "output", "file": "file written",
    "error": "crash", "state_error": "crash", "follower_error": "crash",
    # kafka-streams: an instance's own events and what the harness did to it
    "state_change": "lifecycle", "task_start": "lifecycle", "task_close": "lifecycle", "closed": "lifecycle",
    "stop": "lifecycle", "restore_start": "recovery", "restore_end": "recovery", "point": "fault", "kill": "crash",
    "uncaught": "crash", "query_error": "crash", "query": "operation", "input": "operation", "changelog": "operation",
    "zombie_committed": "commit",
}
_SHOWN = ("point", "fault", "key", "own", "committed", "input_position", "changelog_position", "store_offset",
          "replayed_records", "wiped", "exitcode", "mode", "target", "root", "path", "window", "batch", "phase",
          "code", "seconds", "error", "committed_position", "store", "partition", "batch", "line")


def _describe(event: dict) -> str:
    parts = [f"#{event.get('seq')} {event.get('type')}"]
    for name in _SHOWN:
        if name in event and event[name] is not None:
            value = str(event[name])
            parts.append(f"{name}={value[:120]}{'…' if len(value) > 120 else ''}")
    return " ".join(parts)


def timeline_events(rows: list[dict], suite: str) -> tuple[list[Event], bool]:
    """History rows → timeline events. Spark events carry ``at`` (seconds since the scenario started)
    where the driver measured it; the others take the time of the event before them. Lifecycle
    histories have no clock: their axis is the history's sequence number (the order of events)."""
    timed = any(isinstance(r.get("at"), int | float) for r in rows)
    events: list[Event] = []
    now = 0.0
    starts: dict[object, float] = {}
    for position, row in enumerate(rows):
        seq = row.get("seq", position)
        if isinstance(row.get("lane"), str):  # a history that names its lanes (kafka-streams: instance and thread)
            lane = row["lane"]
        elif suite == "spark":
            lane = f"run {row['run']}" if "run" in row else "driver"
        else:
            instance = row.get("instance", 0)
            lane = f"instance {instance}" if instance else "driver"
        if timed:
            if isinstance(row.get("at"), int | float):
                now = float(row["at"])
                if row.get("type") == "start":
                    starts[row.get("run")] = now
            elif row.get("type") == "exit" and isinstance(row.get("seconds"), int | float) \
                    and row.get("run") in starts:
                now = max(now, starts[row.get("run")] + float(row["seconds"]))
            time = now
        else:
            time = float(seq) if isinstance(seq, int | float) else float(position)
        kind = str(row.get("type", "?"))
        events.append(Event(int(seq) if isinstance(seq, int) else position, lane, _CATEGORIES.get(kind, "other"),
                            kind, time, _describe(row)))
    return events, timed
