"""The HTML page of a :class:`~eos_harness.report.load.RunView`: a jinja2 template, the plotly figures
and plotly.js inlined, so the file needs no network and no other file."""

from __future__ import annotations

import time
from pathlib import Path

import jinja2
from eos_harness.report import figures
from eos_harness.report.load import UNKNOWN, RunView, ScenarioView, check_run_directory, load_run
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, PASS

__all__ = ["coverage", "headline", "render_html", "write_report"]

REPORT_NAME = "report.html"

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True)


def headline(view: RunView) -> tuple[str, str]:
    """(``ok`` | ``bad`` | ``warn``, the sentence at the top of the page), from the run's fields."""
    failed, errors = view.count(FAIL), view.count(ERROR)
    stopped = f" The campaign stopped early: {view.stopped.get('message')}." if view.stopped else ""
    stopped += "".join(f" {line[0].upper()}{line[1:]}." for line in view.waived)  # what its --allow waived
    if not view.total:
        return "bad", "Nothing to judge: the run holds no finished scenario." + stopped
    if view.kind == "run":
        only = view.scenarios[0]
        if only.verdict == FAIL:
            checks = ", ".join(sorted({v.get("check", "?") for v in only.violations}))
            mutant = " (a mutant: failing is what it must do)" if only.expected == "fail" else ""
            return "bad", f"The run failed: {checks} broken ({len(only.violations)} violation(s)){mutant}."
        if only.verdict == ERROR:
            return "warn", f"The run could not be completed: {only.error}"
        if only.verdict == NOT_APPLICABLE:
            return "warn", f"Not applicable: {only.error}"
        return "ok", "No failures: the run passed every check."
    if view.unexpected:
        return "bad", (f"Unexpected results: {', '.join(view.unexpected[:5])}"
                       f"{' …' if len(view.unexpected) > 5 else ''} (a real {view.subject_word} that failed, or a "
                       "mutant that was not caught)." + stopped)
    could_not = f" {errors} scenario(s) could not be run to their end (verdict error)." if errors else ""
    unjudged = sorted({s.subject for s in view.failing if s.expected == UNKNOWN})
    if unjudged:
        return "warn", (f"{sum(s.expected == UNKNOWN for s in view.failing)} failing scenario(s) of "
                        f"{', '.join(unjudged[:5])}{' …' if len(unjudged) > 5 else ''}, whose expected result the "
                        "run's files do not say (written by an older eos-harness): not judged." + could_not + stopped)
    if failed:
        return ("warn" if errors or stopped else "ok"), (
            f"No unexpected result: the {failed} failing scenario(s) are all of mutants, caught as they must be; "
            f"every real {view.subject_word} passed." + could_not + stopped)
    if errors:
        return "warn", f"No failures, but{could_not[0].lower()}{could_not[1:]}" + stopped
    return ("warn" if stopped else "ok"), f"No failures: all {view.total} scenarios passed." + stopped


def coverage(view: RunView) -> dict:
    """The coverage matrix: fault kind (rows) × store or configuration (columns), each cell the
    scenarios whose schedule names that kind, how many failed, and its colour class."""
    faults = sorted({f for s in view.scenarios for f in s.faults})
    subjects = [row.name for row in view.subjects if row.scenarios]
    expected = {row.name: row.expected for row in view.subjects}
    cells: dict[tuple[str, str], dict] = {}
    for s in view.scenarios:
        for fault in set(s.faults):
            cell = cells.setdefault((fault, s.subject), {"scenarios": 0, "failed": 0})
            cell["scenarios"] += 1
            cell["failed"] += s.verdict == FAIL
    for (_, subject), cell in cells.items():
        mutant = expected.get(subject) == "fail"
        if cell["failed"]:
            cell["colour"] = "caught" if mutant else "failed"
        else:
            cell["colour"] = "missed" if mutant else "passed"
    return {"faults": faults, "subjects": subjects, "cells": {f"{f}\x00{s}": c for (f, s), c in cells.items()}}


def _minimal(scenario: ScenarioView, suite: str) -> list[tuple[str, str]]:
    """What the failing scenario needs to happen again: system, input, faults, seed."""
    rows = [("system", scenario.subject)]
    if scenario.workload:
        rows.append(("pipeline" if suite == "spark" else "workload", scenario.workload))
    rows.append(("fault schedule", ", ".join(scenario.schedule) or "(none)"))
    rows.append(("seed", str(scenario.seed)))
    return rows


def render_html(view: RunView) -> str:
    """The report page of ``view``."""
    drawn = [s for s in view.failing if s.events is not None]
    drawn.sort(key=lambda s: (not s.unexpected, s.index if s.index is not None else 0))
    failures = [{"s": s, "minimal": _minimal(s, view.suite), "timeline": figures.timeline(s, f"timeline-{n}") if s.events else None}
                for n, s in enumerate(drawn)]
    undrawn = [s for s in view.failing if s.events is None]
    plots = []
    if view.suite == "lifecycle":
        plots.append(("recovery", "Recovery time against state size", figures.recovery_vs_state(view, "plot-recovery"),
                      "no recovery was recorded"))
    if view.kind == "campaign":
        plots.append(("rate", "Scenarios per second", figures.campaign_rate(view, "plot-rate"),
                      "fewer than two scenarios record when they started (started_at; results written before "
                      "it was recorded have none)"))
    if view.suite == "spark":
        plots.append(("kill-to-first-batch", "Kill to first batch", figures.kill_to_first_batch(view, "plot-restart"),
                      "no run was restarted after a kill"))
    level, sentence = headline(view)
    return _env.get_template("report.html.j2").render(
        view=view, level=level, headline=sentence, coverage=coverage(view), failures=failures, undrawn=undrawn,
        plots=plots, plotly_js=figures.plotly_js(), counts={v: view.count(v) for v in (PASS, FAIL, ERROR, NOT_APPLICABLE)},
        categories=figures.CATEGORY_STYLE, generated=time.strftime("%Y-%m-%d %H:%M:%S"))


def write_report(directory: str | Path, out: str | Path | None = None,
                 campaign_json: str | Path | None = None) -> tuple[Path, RunView]:
    """Load the run in ``directory`` and write its report (default ``directory/report.html``).
    Raises :class:`~eos_harness.report.load.NoRun` when there is no run to report, and
    :class:`~eos_harness.rundir.RunDirError` when the report cannot be written there (checked before
    the run is read: ``report.html`` a directory or a link, ``--out`` a device, …)."""
    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import write_text

    check_run_directory(directory)
    target = Path(out) if out else Path(directory) / REPORT_NAME
    check_outputs({"--out" if out else "": target}, run_dir=directory, run_dir_writes={"--out": REPORT_NAME,
                                                                                        "": REPORT_NAME})
    view = load_run(directory, campaign_json)
    write_text(target, render_html(view))
    return target, view
