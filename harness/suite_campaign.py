"""A campaign of any suite, written once against the suite contract (:mod:`eos_harness.suite`): the
suite's plan drawn from the campaign seed, its scenarios run N at a time on the campaign engine
(:func:`eos_harness.campaign.run_plan`) each where the engine runs it (:mod:`eos_harness.engine`: this
machine's pool, or a Spark task), kept for ``--resume``, stopped by ``--until-failure``, judged by the shared
tallies (:mod:`eos_harness.campaign_summary`), and, on Spark, written as Parquet too
(:mod:`eos_harness.results_parquet`).

A subject expected to pass must pass every scenario; one expected to fail (a mutant) must be caught,
by one of the checks that name its mistake when the suite names them. The campaign JSON has the same
fields for every suite: ``suite``, ``seed``, ``subject`` (the field of a result naming what it ran), the
suite's options, ``minutes``, ``scenarios``, ``summary`` (with ``errors``: a line each), ``repro``,
``seconds``; and what the suite's session and ``campaign_fields`` add.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from eos_harness import campaign_summary
from eos_harness.campaign import UNTIL_FAILURE, KeptCampaign, budget, run_plan, save_state, until_failure_rule
from eos_harness.engine import LOCAL, EngineUnavailable
from eos_harness.results_parquet import PARQUET_DIR, RESULTS_DATASET, write_histories, write_results
from eos_harness.suite import CampaignSession, Suite

__all__ = ["defaults", "exit_code", "judge_of", "run_suite_campaign", "subjects_judged", "summarize"]


def _recorded(result: dict) -> str:
    return result["verdict"]


def judge_of(entry: Suite) -> Callable[[dict], str]:
    """A result's verdict as the suite judges it (its plan's ``judge``), else the one it recorded."""
    return entry.hook("plan", "judge", _recorded)


def subjects_judged(entry: Suite, subjects: Iterable[str]) -> list[str]:
    """The subjects a campaign of ``subjects`` tallies: the suite's ``CONTROLS`` first, then those."""
    controls = tuple(entry.hook("plan", "CONTROLS", ()))
    return [*controls, *(s for s in subjects if s not in controls)]


def defaults(entry: Suite) -> dict:
    """The options of a campaign of ``entry`` at their defaults (its default subjects included)."""
    return {entry.tallies: entry.part("plan").subjects(None), **{o.name: o.default for o in entry.options}}


def summarize(entry: Suite, results: list[dict], subjects: Iterable[str],
              not_applicable: Mapping[str, Mapping[str, str]] | None = None, allowed: Iterable[str] = ()) -> dict:
    """The campaign's ``summary`` (:func:`eos_harness.campaign_summary.summarize`): a tally per subject, each
    result judged as the suite judges it; a mutant caught only by one of the checks its plan names; with the
    scenarios that met each check's condition when the suite's results say (``coverage``), and per subject
    the checks that cannot fire on it (``not_applicable``); ``allowed``: the checks waived (``--allow``), whose
    totals it names (a mutant caught only by them is not exercised, not judged)."""
    expected = entry.part("plan").expected
    return campaign_summary.summarize(results, subjects, entry.subject, entry.tallies,
                                      lambda subject: expected(subject)[0],
                                      lambda subject: tuple(expected(subject)[1]) or None, judge=judge_of(entry),
                                      checks=entry.checks() if entry.coverage else (), not_applicable=not_applicable,
                                      allowed=allowed)


def exit_code(entry: Suite, campaign: dict) -> int:
    """The campaign's exit code (:func:`eos_harness.campaign_summary.campaign_exit_code`)."""
    return campaign_summary.campaign_exit_code(campaign, entry.tallies, judge_of(entry))


def run_suite_campaign(entry: Suite, seed: int, options: Mapping, out_dir: Path, *, minutes: float | None = None,
                       scenarios: int | None = None, workers: int | None = None,
                       on_result: Callable[[dict], None] = lambda result: None, until_failure: bool = False,
                       resume: bool = False, outputs: Mapping | None = None, running: Mapping | None = None,
                       log: Path | None = None, fatal: tuple[type[BaseException], ...] = (),
                       say: Callable[[str], object] = lambda text: None, engine=None) -> dict:
    """Run a campaign of ``entry`` in the (prepared) run directory ``out_dir``; returns its JSON object.
    ``options``: the suite's own options, its subjects under ``entry.tallies`` (kept in ``out_dir`` with
    ``outputs``, the JSON and JUnit paths); ``resume``: continue the stopped campaign of ``out_dir`` (the same
    plan, the scenarios that finished are not run again, a ``minutes`` campaign gets the time it had left).
    ``minutes`` and ``scenarios`` both None: the suite's ``minutes`` (None: its whole plan).
    ``running``: what the plan runs with besides its options, never kept (a broker opened for this start,
    the stores resolved at the edge: ``refs``); ``log``: where the processes the scenarios start write their
    output (the JSON's ``log``); ``fatal``: exceptions that mean the campaign's own input is wrong (they stop
    it and propagate); ``say``: where the suite's session says what it starts (a Kafka cluster); ``engine``: where
    the scenarios run (:mod:`eos_harness.engine`; default: the local pool); ``workers`` None: as many as the
    engine has cores (the local pool: the suite's ``workers``)."""
    runner, plan = entry.part("runner"), entry.part("plan")
    if log is None and getattr(runner, "CHILDREN_LOG", None):
        log = out_dir / runner.CHILDREN_LOG
    # An engine with nowhere left to run stops the campaign too (its scenarios would all be errors).
    fatal = (*(fatal or tuple(getattr(runner, "FATAL", ()))), EngineUnavailable)
    judge = judge_of(entry)
    engine = engine or LOCAL
    if minutes is None and scenarios is None:
        minutes = entry.minutes
    kept = KeptCampaign.start(out_dir, {"suite": entry.name, "seed": seed, **options, "minutes": minutes,
                                        "scenarios": scenarios, "workers": workers or entry.workers,
                                        "until_failure": until_failure,
                                        **(outputs or {})}, resume)
    deadline = kept.started + minutes * 60 - kept.spent if minutes is not None else None

    def expected_to_fail(subject: str) -> bool:
        return plan.expected(subject)[0]

    def one(index: int, scenario) -> dict:
        # The scenario's own directory, made by its runner when it keeps something there.
        return _complete(entry, runs.run(index, scenario, out_dir / f"scenario-{index:05d}"), expected_to_fail)

    def error_result(scenario, exc: BaseException) -> dict:
        return _complete(entry, runner.error_result(scenario, exc), expected_to_fail)

    session = getattr(runner, "campaign_session", None)
    with contextlib.ExitStack() as stack:
        if log is not None:
            from eos_harness.process.server import children_output

            stack.enter_context(children_output(log))  # resumed: appended to
        runs = stack.enter_context(engine.start(entry, out_dir, log, say))
        if not workers and runs.workers:  # as many as the engine has cores
            kept.state["workers"] = runs.workers
            with contextlib.suppress(OSError):
                save_state(out_dir, kept.state)
        workers = workers or runs.workers or entry.workers
        given = {**options, **(running or {}), "seed": seed, "workers": workers}
        found = stack.enter_context(session(given, say) if session is not None else contextlib.nullcontext(given))
        found = found if isinstance(found, CampaignSession) else CampaignSession(found)
        subjects = [s for s in subjects_judged(entry, options[entry.tallies]) if s not in found.left_out]
        stop_after = until_failure_rule(subjects, expected_to_fail, entry.subject, judge) if until_failure \
            else lambda result: None
        for result in found.results:
            on_result(result)
        # A result found before the plan (a store's probe) that --until-failure stops at: nothing is planned
        # (once: a resumed campaign goes on past it, as past a scenario that failed).
        stopped_before = None if resume else next((r for r in map(stop_after, found.results) if r is not None), None)
        run = run_plan(iter(()) if stopped_before else entry.plan(seed, found.options), one, workers=workers,
                       more=budget(scenarios, deadline), run_alone=getattr(plan, "runs_alone", lambda s: False),
                       error_result=error_result, on_result=kept.recorded(on_result),
                       results_file=out_dir / "results.jsonl", fatal=fatal, skip=kept.skip, stop_after=stop_after,
                       cut_short=runs.cut_short)
    stopped = run.stop_json or ({"why": UNTIL_FAILURE, "message": stopped_before} if stopped_before else None)
    kept.end(stopped=stopped is not None)
    results = found.results + kept.results(run)
    plan_options = ("seed", entry.tallies, *(o.name for o in entry.options if o.replay), "allow", "minutes",
                    "scenarios")
    negatable = [o.name for o in entry.options if o.kind == "switch"]
    campaign = {"suite": entry.name, "seed": seed, "subject": entry.subject, **options,
                "minutes": minutes, "repro": campaign_summary.campaign_repro(kept.state, plan_options, negatable),
                "scenarios": results, "summary": summarize(entry, results, subjects, found.not_applicable,
                                                           options.get("allow") or ()),
                "seconds": round(kept.seconds, 1), **({"log": str(log)} if log is not None else {}), **found.fields}
    if found.left_out:
        campaign["left_out"] = found.left_out
    if until_failure:
        campaign["until_failure"] = True
    if stopped is not None:
        campaign["stopped"] = stopped
    campaign.update(getattr(runner, "campaign_fields", lambda campaign: {})(campaign))
    # On Spark (and on any start of a campaign that has them, so that they hold every result) as Parquet too.
    if engine.parquet or (out_dir / PARQUET_DIR / RESULTS_DATASET).is_dir():
        with contextlib.suppress(OSError):  # a full disk: the JSON and results.jsonl still say everything
            write_results(out_dir, results, entry.subject)
            write_histories(out_dir, results, entry.subject)
    return campaign


def _complete(entry: Suite, result: dict, expected_to_fail: Callable[[str], bool]) -> dict:
    """A result with the fields every suite's result has (``suite``, ``expected``, ``crash_points``,
    ``fault_errors``, ``history``), whatever its runner left out."""
    result.setdefault("suite", entry.name)
    result.setdefault("expected", "fail" if expected_to_fail(result[entry.subject]) else "pass")
    result.setdefault("crash_points", [])
    result.setdefault("fault_errors", [])
    result.setdefault("history", None)  # a suite that records no history says so (the report draws no timeline)
    return result
