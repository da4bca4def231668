"""A campaign of any suite, written once against the suite contract (:mod:`eos_harness.suite`): the
suite's plan drawn from the campaign seed, its scenarios run N at a time on the campaign engine
(:func:`eos_harness.campaign.run_plan`), kept for ``--resume``, stopped by ``--until-failure``, and
judged by the shared tallies (:mod:`eos_harness.campaign_summary`).

A subject expected to pass must pass every scenario; one expected to fail (a mutant) must be caught,
by one of the checks that name its mistake when the suite names them. The campaign JSON has the same
fields for every suite: ``suite``, ``seed``, ``subject`` (the field of a result naming what it ran),
``scenarios``, ``summary`` (with ``errors``: a line each), ``repro``, ``seconds``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

from eos_harness import campaign_summary
from eos_harness.campaign import KeptCampaign, budget, run_plan, until_failure_rule
from eos_harness.suite import Suite

__all__ = ["run_suite_campaign"]


def _expected(entry: Suite) -> Callable[[str], tuple[bool, tuple[str, ...]]]:
    plan = entry.part("plan")
    return lambda subject: plan.expected(subject)


def run_suite_campaign(entry: Suite, seed: int, options: Mapping, out_dir: Path, *, minutes: float | None = None,
                       scenarios: int | None = None, workers: int | None = None,
                       on_result: Callable[[dict], None] = lambda result: None, until_failure: bool = False,
                       resume: bool = False, outputs: Mapping | None = None, running: Mapping | None = None,
                       log: Path | None = None, fatal: tuple[type[BaseException], ...] = (),
                       say: Callable[[str], object] = lambda text: None) -> dict:
    """Run a campaign of ``entry`` in the (prepared) run directory ``out_dir``; returns its JSON object.
    ``options``: the suite's own options, its subjects under ``entry.tallies`` (kept in ``out_dir`` with
    ``outputs``, the JSON and JUnit paths); ``resume``: continue the stopped campaign of ``out_dir`` (the same
    plan, the scenarios that finished are not run again, a ``minutes`` campaign gets the time it had left).
    ``running``: what the plan runs with besides its options, never kept (a broker opened for this start);
    ``log``: where the processes the scenarios start write their output (the JSON's ``log``); ``fatal``:
    exceptions that mean the campaign's own input is wrong (they stop it and propagate); ``say``: where the
    suite's session says what it starts (a Kafka cluster)."""
    runner = entry.part("runner")
    if log is None and getattr(runner, "CHILDREN_LOG", None):
        log = out_dir / runner.CHILDREN_LOG
    fatal = fatal or tuple(getattr(runner, "FATAL", ()))
    expected = _expected(entry)
    subjects = list(options[entry.tallies])
    workers = workers or entry.workers
    if minutes is None and scenarios is None:
        minutes = 1.0
    kept = KeptCampaign.start(out_dir, {"suite": entry.name, "seed": seed, **options, "minutes": minutes,
                                        "scenarios": scenarios, "workers": workers, "until_failure": until_failure,
                                        **(outputs or {})}, resume)
    deadline = kept.started + minutes * 60 - kept.spent if minutes is not None else None

    def expected_to_fail(subject: str) -> bool:
        return expected(subject)[0]

    def caught_by(subject: str) -> tuple[str, ...] | None:
        return tuple(expected(subject)[1]) or None

    def one(index: int, scenario) -> dict:
        # The scenario's own directory, made by its runner when it keeps something there.
        return _complete(entry, runner.run_one(scenario, out_dir / f"scenario-{index:05d}"), expected_to_fail)

    def error_result(scenario, exc: BaseException) -> dict:
        return _complete(entry, runner.error_result(scenario, exc), expected_to_fail)

    stop_after = until_failure_rule(subjects, expected_to_fail, entry.subject) if until_failure else lambda r: None
    session = getattr(runner, "campaign_session", None)
    with contextlib.ExitStack() as stack:
        if log is not None:
            from eos_harness.process.server import children_output

            stack.enter_context(children_output(log))  # resumed: appended to
        given = {**options, **(running or {})}
        planned = stack.enter_context(session(given, say) if session is not None else contextlib.nullcontext(given))
        run = run_plan(entry.plan(seed, planned), one, workers=workers, more=budget(scenarios, deadline),
                       error_result=error_result, on_result=kept.recorded(on_result),
                       results_file=out_dir / "results.jsonl", fatal=fatal, skip=kept.skip, stop_after=stop_after)
    kept.end(stopped=run.stopped is not None)
    results = kept.results(run)
    plan_options = ("seed", entry.tallies, *(o.name for o in entry.options if o.plan), "minutes", "scenarios")
    campaign = {"suite": entry.name, "seed": seed, "subject": entry.subject, **options,
                "minutes": minutes, "repro": campaign_summary.campaign_repro(kept.state, plan_options),
                "scenarios": results,
                "summary": campaign_summary.summarize(results, subjects, entry.subject, entry.tallies,
                                                      expected_to_fail, caught_by),
                "seconds": round(kept.seconds, 1), **({"log": str(log)} if log is not None else {})}
    if until_failure:
        campaign["until_failure"] = True
    if run.stopped is not None:
        campaign["stopped"] = run.stop_json
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
