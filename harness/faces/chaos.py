"""``eos-harness chaos --suite S``, written once for every suite that keeps the suite contract
(:mod:`eos_harness.suite`): its options are the shared campaign options (:func:`toolkit.campaign_options`),
the list of its subjects (``--stores`` or ``--systems``) and the suite's own (:class:`eos_harness.suite.Option`).
It parses them, resumes a stopped campaign, calls :func:`eos_harness.suite_campaign.run_suite_campaign`,
renders the tallies (and what the suite's ``show`` adds) and writes the JSON, JUnit and report. No suite
logic here."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import click
from eos_harness.broker.spec import parse
from eos_harness.engine import ENGINES
from eos_harness.faces import toolkit
from eos_harness.faces.params import STORE_LIST, BrokerParam, NameList, require_extra
from eos_harness.faces.toolkit import console
from eos_harness.suite import Option, Suite

__all__ = ["chaos_command_for", "prepare", "run_and_show"]

UNTIL_FAILURE_HELP = ("Stop at the first failure of a subject expected to pass (a bug found; a mutant caught is "
                      "expected and does not stop it); when every subject is a mutant, at the first failure. "
                      "Everything that finished is written.")
RESUME_HELP = ("Continue the stopped campaign of RUN_DIR (Ctrl-C, SIGTERM, --until-failure) with its seed and "
               "options, kept there when it started: the same plan, the scenarios that finished are not run again, "
               "a --minutes campaign gets the time it had left; the JSON holds every scenario. --json, --junit, "
               "--workers, --until-failure and the options that do not decide the plan may be given anew.")


def _param_type(option: Option):
    if option.kind == "int":
        return click.IntRange(min=None if option.minimum is None else int(option.minimum))
    if option.kind == "float":
        return click.FloatRange(min=option.minimum, min_open=option.minimum == 0)
    if option.kind == "choice":
        return click.Choice(option.choices)
    if option.kind == "list":
        return NameList(option.name.rstrip("s"), lambda: option.choices)
    if option.kind in ("broker", "kafka-broker"):
        return BrokerParam(needs_kafka="this suite" if option.kind == "kafka-broker" else None)
    return str


def _value(option: Option, value):
    """What the campaign keeps of an option's value (JSON: a broker as it was written)."""
    return value.cli_text if option.kind in ("broker", "kafka-broker") and value is not None else value


def chaos_command_for(entry: Suite) -> click.Command:
    """The ``chaos`` command of ``entry`` (see the module)."""
    plan = entry.part("plan")
    subjects = Option(entry.tallies, "subjects", None,
                      f"Comma-separated {entry.tallies} (default: {', '.join(plan.subjects(None))}).")
    # Any built-in store or factory (a store of a kind the suite does not check is refused by its plan, naming
    # the suite that does); any other subject among the suite's own.
    subject_type = STORE_LIST if entry.subject == "store" else NameList(entry.subject, plan.known_subjects)
    own = (subjects, *entry.options)

    def command(ctx: click.Context, minutes, scenarios, seed, json_path, out, workers, overwrite, junit_path,
                until_failure, resume_dir, no_report, engine_name, master, **given) -> None:
        for extra in entry.extras:
            require_extra(extra, f"--suite {entry.name}")
        allow = tuple(dict.fromkeys(given.pop("allow", ())))
        values = {o.name: _value(o, given[o.name]) for o in own}
        if resume_dir is not None:
            state = toolkit.resumed_state(ctx, resume_dir, entry.name,
                                          ("minutes", "scenarios", "seed", "out", "overwrite",
                                           *(o.name for o in own if o.plan)),
                                          " (start a new one, or give a longer one --minutes/--scenarios)")
            seed, minutes, scenarios = state["seed"], state.get("minutes"), state.get("scenarios")
            for o in own:  # as the campaign kept them, read as if given: a damaged one is a usage error
                kept = state.get(o.name) if o.plan else toolkit.given_or_kept(ctx, state, o.name, values[o.name])
                param = next(p for p in ctx.command.params if p.name == o.name)
                try:
                    shown = ",".join(kept) if isinstance(kept, list) else kept
                    values[o.name] = _value(o, kept if kept is None else param.type_cast_value(ctx, shown))
                except click.BadParameter as exc:
                    raise click.UsageError(f"--resume {resume_dir}: its {o.flag}: {exc.format_message()}") from None
            workers = toolkit.given_or_kept(ctx, state, "workers", workers)
            engine_name = toolkit.given_or_kept(ctx, state, "engine", engine_name)
            master = toolkit.given_or_kept(ctx, state, "master", master) if engine_name == "spark" else master
            until_failure = until_failure or state.get("until_failure", False)
            json_path, junit_path = json_path or state.get("json"), junit_path or state.get("junit")
            allow = _resumed_allow(ctx, entry, resume_dir, state, allow)
        if allow:  # kept only when given: a campaign without --allow keeps (and digests) what it always did
            values["allow"] = list(allow)
        for option in entry.options:
            if option.kind == "broker":  # a broker that must be Kafka is the suite's: its extras say so
                toolkit.require_kafka_extra(parse(values[option.name]))
        try:
            engine = engine_of(entry, engine_name, master, values)
            running = prepare(entry, values, {**state, "out": resume_dir} if resume_dir is not None else None)
            seed = toolkit.seed_or_drawn(seed)
            out_dir = toolkit.campaign_outputs(json_path, junit_path, out, resume_dir, f"{entry.name}-chaos", seed,
                                               overwrite)
        except ValueError as exc:  # StoreFactoryError, RunDirError and a missing extra included: nothing has run
            raise click.UsageError(str(exc)) from None
        campaign = run_and_show(entry, seed, values, out_dir, minutes=minutes, scenarios=scenarios, workers=workers,
                                until_failure=until_failure, resume=resume_dir is not None, json_path=json_path,
                                junit_path=junit_path, report=not no_report, running=running,
                                asked=subjects.flag if given[entry.tallies] else None, engine=engine)
        sys.exit(toolkit.campaign_exit(campaign))

    command.__doc__ = f"Run a chaos campaign of the {entry.title} suite: its scenarios, seeds drawn from the campaign seed."
    whole = entry.minutes is None  # no --minutes nor --scenarios: its whole plan
    if entry.forks_children:  # a TMPDIR too long for the zygote's socket: a usage error before anything runs
        command = toolkit.starts_store_processes(command)
    for option in reversed(own):
        if option.kind == "flag":
            command = click.option(option.flag, option.name, is_flag=True, help=option.help)(command)
            continue
        if option.kind == "switch":  # --NAME/--no-NAME, None when neither is given
            command = click.option(f"{option.flag}/--no-{option.flag[2:]}", option.name, default=None,
                                   help=option.help)(command)
            continue
        command = click.option(option.flag, option.name, type=subject_type if option is subjects else _param_type(option),
                               default=option.default, show_default=option.default is not None,
                               help=option.help)(command)
    command = toolkit.campaign_options(entry.name, f"{entry.name}-chaos",
                                       "A mutant caught is an expected failure (skipped, with its evidence); a mutant "
                                       "not caught is the failure of its testcase 'caught'.",
                                       UNTIL_FAILURE_HELP, RESUME_HELP, workers=entry.workers,
                                       **({"minutes": "Stop starting scenarios after this long (default: none).",
                                           "scenarios": "Run this many scenarios (default: the whole plan)."}
                                          if whole else {}))(command)
    if entry.allowable():
        command = toolkit.allow_option(entry, CHAOS_ALLOW_HELP)(command)
    command = click.option("--master", default=None, metavar="URL", help=MASTER_HELP)(command)
    command = click.option("--engine", "engine_name", type=click.Choice(ENGINES), default="local", show_default=True,
                           help=ENGINE_HELP)(command)
    return click.command("chaos")(command)


def _resumed_allow(ctx: click.Context, entry: Suite, resume_dir: str, state: Mapping,
                   given: tuple[str, ...]) -> tuple[str, ...]:
    """The checks a resumed campaign waives: those it started with (its results were judged with them); a
    usage error when ``--allow`` names others, or when what it kept is not what the suite can allow."""
    from click.core import ParameterSource

    kept = tuple(state.get("allow") or ())
    unknown = [c for c in kept if c not in entry.allowable()]
    if unknown:
        raise click.UsageError(f"--resume {resume_dir}: its --allow {unknown[0]} is not a check the {entry.name} suite "
                               "can allow; the campaign cannot be resumed as it started: start a new one")
    if ctx.get_parameter_source("allow") is ParameterSource.COMMANDLINE and set(given) != set(kept):
        def said(checks):
            return " ".join(f"--allow {c}" for c in checks) if checks else "no --allow"

        raise click.UsageError(f"--resume {resume_dir}: the campaign started with {said(kept)}, this command gives "
                               f"{said(given)}: a resumed campaign waives the checks it started with (its results "
                               "were judged with them); give the same --allow or none, or start a new campaign")
    return kept


def engine_of(entry: Suite, name: str, master: str | None, values: Mapping):
    """The campaign's engine (:mod:`eos_harness.engine`); a ValueError (a usage error, before anything runs)
    for a bad ``--master``, or ``--engine spark`` on a suite (or options) whose scenarios run only here."""
    from eos_harness.engine import DEFAULT_MASTER, LOCAL, check_master
    from eos_harness.suite import SUITES

    if name == "local":
        if master is not None:
            raise ValueError(f"--master {master}: a master is for --engine spark (the local engine runs the "
                             "scenarios on this machine); add --engine spark")
        return LOCAL
    if not entry.anywhere:
        able = ", ".join(s.name for s in SUITES.values() if s.anywhere)
        raise ValueError(f"--engine spark: the scenarios of the {entry.name} suite run only on this machine "
                         f"(they need what this command starts here); the suites Spark runs: {able}")
    master = master or DEFAULT_MASTER
    problem = entry.hook("plan", "engine_problem", lambda options, master: None)(values, master)
    if problem:
        raise ValueError(f"--engine spark: {problem}")
    master = check_master(master)
    require_extra("spark", "--engine spark")
    from eos_harness.spark.engine import SparkEngine

    return SparkEngine(master)


CHAOS_ALLOW_HELP = ("Waive CHECK, a difference you know about (repeatable), as verify --allow does: each scenario's "
                    "result names the checks it waived and how often each fired, the campaign's summary their totals, "
                    "and every replay carries --allow. A mutant whose every check is allowed is not exercised (not "
                    "judged).")
ENGINE_HELP = ("Where the scenarios run: local (a pool of this process, --workers at once) or spark (each scenario "
               "a Spark task on --master; the same plan, verdicts, tables and exit code).")
MASTER_HELP = ("The Spark master of --engine spark: local[*] (every core here, the default), local[N], or "
               "spark://HOST:PORT (a standalone cluster, which must answer).")


def prepare(entry: Suite, values: dict, resumed: Mapping | None = None) -> dict:
    """Before anything runs: the campaign's subjects (those given, else the suite's), each store resolved once,
    here (a bad one is a usage error; returned as ``refs``, what the campaign runs with, never kept), the
    suite's own check of its options, and what it judges besides them (the plan's ``kept_inputs``: a user's query
    and input, kept in ``values["inputs"]``; a ``resumed`` campaign whose inputs changed since it began cannot go
    on). A ValueError (or a missing extra) for a campaign that cannot run."""
    from eos_harness.extras import MissingExtra

    plan = entry.part("plan")
    # a plan whose subjects depend on its other options (Spark: a user's --pipeline is its one subject)
    subjects_of = getattr(plan, "subjects_of", None)
    values[entry.tallies] = subjects_of(values) if subjects_of else plan.subjects(values[entry.tallies])
    running: dict = {}
    if entry.subject == "store":
        from eos_harness.process.server import held_output
        from eos_harness.stores.child_probe import store_ref

        with held_output(children=True):  # its module's output on import: for the run's log, off the terminal
            running["refs"] = {store: store_ref(store, *([values["store_timeout"]] if values.get("store_timeout")
                                                         else [])) for store in values["stores"]}
    try:
        if hasattr(plan, "check_options"):
            plan.check_options({**values, **running})
    except MissingExtra as exc:
        raise ValueError(str(exc)) from None
    inputs = plan.kept_inputs(values) if hasattr(plan, "kept_inputs") else None
    if inputs is not None:
        if resumed is not None and (why := plan.inputs_changed(resumed.get("inputs"), inputs)):
            raise ValueError(f"--resume {resumed['out']}: {why}")
        values["inputs"] = inputs
    return running


def run_and_show(entry: Suite, seed: int, values: Mapping, out_dir: Path, *, minutes: float | None,
                 scenarios: int | None, workers: int, until_failure: bool = False, resume: bool = False,
                 json_path: str | None = None, junit_path: str | None = None, report: bool = True,
                 running: Mapping | None = None, asked: str | None = None, engine=None) -> dict:
    """Run the campaign (:func:`eos_harness.suite_campaign.run_suite_campaign`) with a progress bar, print its
    tables, write its JSON, JUnit and report; returns its JSON object. No broker to run on: exit 3."""
    from eos_harness.cluster import ClusterError
    from eos_harness.engine import EngineUnavailable
    from eos_harness.suite_campaign import judge_of, run_suite_campaign

    console.print(f"seed: {seed}   results: {out_dir}")
    try:
        with toolkit.campaign_progress(out_dir, scenarios, resume) as on_result:
            campaign = run_suite_campaign(entry, seed, values, out_dir, minutes=minutes, scenarios=scenarios,
                                          workers=workers, on_result=on_result, until_failure=until_failure,
                                          resume=resume, outputs={**toolkit.kept_outputs(json_path, junit_path),
                                                                  **_engine_kept(engine)},
                                          running=running, say=console.print, engine=engine)
    except (ClusterError, EngineUnavailable) as exc:
        raise toolkit.incomplete(exc) from None
    toolkit.finish_campaign(campaign, out_dir, json_path, junit_path, report, _junit_suites(entry),
                            lambda campaign: _show(entry, campaign), judge_of(entry),
                            outputs="the output of the processes it started", asked=asked)
    return campaign


def _engine_kept(engine) -> dict:
    """The engine a campaign ran on, kept with its options (not the plan's: a resume may change it)."""
    if engine is None or engine.name == "local":
        return {"engine": "local"}
    return {"engine": engine.name, "master": engine.master}


def _junit_suites(entry: Suite):
    from eos_harness import junit

    def suites(campaign: dict) -> list:
        return junit.tally_suites(campaign, entry.checks(), entry.subject, campaign["summary"][entry.tallies])

    return entry.hook("junit", "campaign_suites", suites)


def _show(entry: Suite, campaign: dict) -> None:
    """The tallies, what the suite shows besides (its ``show``), the warnings, what ``--allow`` waived, the subjects
    left out, the count."""
    from eos_harness import campaign_summary

    console.print(toolkit.tallies_table(campaign))
    show = entry.function(entry.show)
    if show is not None:
        show(campaign)
    for warning in campaign.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
    summary, seconds = campaign["summary"], campaign["seconds"]
    for line in campaign_summary.waived_lines(summary):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    for subject, why in campaign.get("left_out", {}).items():
        console.print(f"left out: {subject}: {why}, so no scenario of this campaign could catch it",
                      soft_wrap=True, highlight=False, markup=False)
    points = f"; crash points hit: {len(summary['points_hit'])}" if summary["points_hit"] else ""
    console.print(f"{summary['total']} scenarios in {seconds} s ({summary['total'] / max(seconds, 1e-9):.1f}/s)"
                  f"{points}", soft_wrap=True, highlight=False)

