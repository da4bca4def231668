"""The CLI's toolkit, shared by every command (:mod:`eos_harness.faces`): the console, the seed, the
output files checked before anything runs and written after, the option texts every command shares,
and a campaign's resume, its stop message and its exit code. A face parses its options, calls its
suite, renders and writes with these; it imports no private name of another face."""

from __future__ import annotations

import contextlib
import functools
import json
import random
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from click.core import ParameterSource
from eos_harness.broker.spec import BrokerSpec
from eos_harness.extras import needs_kafka
from eos_harness.faces.params import require_extra
from eos_harness.verdict import EXIT_INCOMPLETE
from rich.console import Console

__all__ = ["JUNIT_HELP", "OVERWRITE_HELP", "STORE_TIMEOUT_HELP", "allow_option", "campaign_exit", "campaign_options",
           "campaign_progress", "check_output_path", "console", "given_or_kept", "finish_campaign",
           "incomplete", "interrupted_exit_code", "kept_outputs", "print_stopped", "print_violations",
           "refuse_with_resume", "require_kafka_extra", "resumed_state", "run_options", "run_outputs", "campaign_outputs", "seed_or_drawn",
           "store_timeout_option", "suite_option", "tallies_table", "write_json"]

STORE_TIMEOUT_HELP = "Bound on each call into the store; a call that takes longer is a store_hang finding."


def suite_option(default: str):
    """``--suite NAME`` of ``run`` and ``chaos``: the CLI's group has sent the command its suite's
    (:data:`eos_harness.suite.SUITES`), so the value is read there, not here."""
    from eos_harness.suite import SUITES

    return click.option("--suite", type=click.Choice(list(SUITES)), default=default, show_default=True,
                        expose_value=False, help="The suite to run (`eos-harness suites` lists them); "
                        "`eos-harness run --suite NAME --help` shows that suite's options.")


def _options(*options):
    def apply(command):
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def run_options(suite: str, kind: str, seed: str = "Seed of the input (printed when not given)."):
    """The options every ``run`` command has beside its suite's own: ``--suite``, ``--seed``, ``--json``,
    ``--junit``, ``--out`` (default: a new run directory named for ``kind``), ``--overwrite``, ``--no-report``."""
    from eos_harness.faces.report import NO_REPORT_HELP

    return _options(
        suite_option(suite),
        click.option("--seed", type=int, default=None, help=seed),
        click.option("--json", "json_path", default=None, help="Write the verdict JSON here."),
        click.option("--junit", "junit_path", default=None, help=JUNIT_HELP),
        click.option("--out", default=None, help=f"Run directory (default: a new runs/<UTC time>-{kind}-seed<N>; "
                     "runs/latest links to it)."),
        click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP),
        click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP))


def campaign_options(suite: str, kind: str, junit: str, until_failure: str, resume: str,
                     minutes: str = "Run for this long (default 1 unless --scenarios).",
                     scenarios: str = "Run exactly this many scenarios.", workers: int = 2):
    """The options every ``chaos`` command has beside its suite's own (the command takes the click
    context first): ``--suite``, ``--minutes``, ``--scenarios``, ``--seed``, ``--json``, ``--out``
    (default: a new run directory named for ``kind``), ``--workers``, ``--overwrite``, ``--junit`` (``junit``: what a suite's testcase
    means), ``--until-failure``, ``--resume`` and ``--no-report``, with the suite's help texts."""
    from eos_harness.faces.params import AT_LEAST_ONE, POSITIVE_MINUTES
    from eos_harness.faces.report import NO_REPORT_HELP

    return _options(
        suite_option(suite),
        click.option("--minutes", type=POSITIVE_MINUTES, default=None, help=minutes),
        click.option("--scenarios", type=AT_LEAST_ONE, default=None, help=scenarios),
        click.option("--seed", type=int, default=None, help="Campaign seed (printed when not given)."),
        click.option("--json", "json_path", default=None,
                     help="Write the campaign JSON here (default OUT/chaos.json)."),
        click.option("--out", default=None, help=f"Results directory (default: a new runs/<UTC time>-{kind}-seed<N>; "
                     "runs/latest links to it)."),
        click.option("--workers", type=AT_LEAST_ONE, default=None, help=f"Scenarios run at once (default: {workers}; "
                     "with --engine spark, the cores of the Spark application)."),
        click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP),
        click.option("--junit", "junit_path", default=None, help=f"{JUNIT_HELP} {junit}"),
        click.option("--until-failure", is_flag=True, help=until_failure),
        click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR", help=resume),
        click.option("--no-report", "no_report", is_flag=True, help=NO_REPORT_HELP),
        click.pass_context)


def starts_store_processes(command):
    """A command that starts store processes (through the zygote, whose forkserver makes a Unix socket
    under TMPDIR): a TMPDIR too long for that socket is a usage error naming TMPDIR before it runs
    anything. Put it next to ``def`` (under the click decorators)."""

    @functools.wraps(command)
    def checked(*args, **kwargs):
        from eos_harness.session import TempDirTooLong, check_temp_dir

        try:
            check_temp_dir()
        except TempDirTooLong as exc:
            raise click.UsageError(str(exc)) from None
        return command(*args, **kwargs)

    return checked


def store_timeout_option(command):
    """``--store-timeout SECONDS`` (run, chaos)."""
    from eos_harness.process.guard import STORE_TIMEOUT_S

    return click.option("--store-timeout", type=click.FloatRange(min=0, min_open=True), default=STORE_TIMEOUT_S,
                        show_default=True, metavar="SECONDS", help=STORE_TIMEOUT_HELP)(command)


# Logs and CI output are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)


def seed_or_drawn(seed: int | None) -> int:
    """The seed given, or one drawn at random (the command prints it)."""
    return seed if seed is not None else random.SystemRandom().randrange(2**31)


def write_json(path: str | Path | None, obj: dict) -> str | None:
    """Write the results JSON (its directory was checked up front); returns why it could not be written."""
    from eos_harness.rundir import write_text

    if not path:
        return None
    try:
        write_text(Path(path), json.dumps(obj, indent=2))
    except OSError as exc:
        return f"could not write {path}: {exc.strerror or exc}"
    return None


def run_outputs(json_path: str | None, junit_path: str | None, out: str | None, kind: str, seed: int,
                overwrite: bool) -> Path:
    """A ``run``'s outputs checked before anything runs (:func:`eos_harness.outputs.check_outputs`), and
    its run directory: ``--out``, or a new ``runs/<UTC time>-KIND-seed<N>`` (:func:`eos_harness.rundir.run_directory`)."""
    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import run_directory

    check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=out)
    return run_directory(out, kind, seed, overwrite=overwrite)


def campaign_outputs(json_path: str | None, junit_path: str | None, out: str | None, resume_dir: str | None,
                     kind: str, seed: int, overwrite: bool) -> Path:
    """A campaign's outputs checked before anything runs, and its run directory: the stopped campaign's
    (``--resume``), ``--out``, or a new ``runs/<UTC time>-KIND-seed<N>``."""
    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import run_directory

    check_outputs({"--json": json_path, "--junit": junit_path}, run_dir=resume_dir or out,
                  run_dir_writes={"--json": "chaos.json"})
    return Path(resume_dir) if resume_dir is not None else run_directory(out, kind, seed, overwrite=overwrite)


def check_output_path(json_path: str | None, option: str = "--json") -> None:
    """Check, before anything runs, that an output file (``--json``) can be written there."""
    from eos_harness.outputs import check_outputs

    check_outputs({option: json_path})


JUNIT_HELP = ("Write JUnit XML here (for CI): a testsuite per store, a testcase per check, a failure per broken "
              "check with its violations and replay command.")


OVERWRITE_HELP = ("Reuse --out if it holds an earlier run's results (only what the harness wrote there is "
                  "removed; a directory it did not make is never emptied).")


def incomplete(exc: Exception) -> click.ClickException:
    """A click error for a run that could not be completed (no broker to run on): exit code 3."""
    error = click.ClickException(str(exc))
    error.exit_code = EXIT_INCOMPLETE
    return error


def require_kafka_extra(broker: BrokerSpec) -> None:
    """A usage error when ``broker`` is Kafka and the ``kafka`` extra is not installed."""
    if needs_kafka(broker):
        require_extra("kafka", f"--broker {broker.cli_text}")


def campaign_exit(campaign: dict) -> int:
    """The exit code of a campaign of any suite: 130/143 when interrupted (SIGINT/SIGTERM), else
    :func:`eos_harness.suite_campaign.exit_code` from its verdicts, as its suite (``campaign["suite"]``)
    judges them; 3 for a campaign that passed whose JUnit file could not be written."""
    from eos_harness.suite import suite
    from eos_harness.suite_campaign import exit_code

    interrupted = interrupted_exit_code(campaign)
    if interrupted is not None:
        return interrupted
    code = exit_code(suite(campaign["suite"]), campaign)
    return EXIT_INCOMPLETE if code == 0 and campaign.get("junit_error") else code


def print_stopped(campaign: dict, resume_command: str) -> None:
    """For a campaign stopped early (Ctrl-C, SIGTERM, --until-failure, a broken environment): why, and
    the command that resumes it. Printed last, where it is seen."""
    stopped = campaign.get("stopped")
    if stopped:
        console.print(f"[red]{stopped['message']}[/]", soft_wrap=True)
        console.print(f"to resume: {resume_command}", soft_wrap=True, markup=False, highlight=False)


def interrupted_exit_code(campaign: dict) -> int | None:
    """130 (SIGINT) or 143 (SIGTERM) for a campaign a signal stopped; None for any other."""
    why = (campaign.get("stopped") or {}).get("why")
    return 128 + int(getattr(signal, why)) if why in ("SIGINT", "SIGTERM") else None


def resumed_state(ctx: click.Context, resume_dir: str, suite: str, plan_options: tuple[str, ...],
                  finished_hint: str = "") -> dict:
    """The options of the stopped ``suite`` campaign in ``resume_dir``; a usage error when it is not one,
    when one of ``plan_options`` is given anew (:func:`refuse_with_resume`), or when it ran to its end
    (the message ends with ``finished_hint``)."""
    from eos_harness.campaign import ResumeError, open_for_resume
    from eos_harness.records import OPTION_TYPES

    refuse_with_resume(ctx, plan_options)
    try:  # held by this command from here on; a damaged line of its results is named (and run again)
        resumed = open_for_resume(resume_dir, suite, [name for name in plan_options if name in OPTION_TYPES])
    except ResumeError as exc:
        raise click.UsageError(str(exc)) from None
    state = resumed.state
    for note in resumed.notes:
        console.print(f"warning: {note}", soft_wrap=True, highlight=False, markup=False)
    if state.get("finished"):
        raise click.UsageError(f"--resume {resume_dir}: that campaign ran to its end; nothing to resume{finished_hint}")
    return state


def given_or_kept(ctx: click.Context, state: dict, name: str, value):
    """A resumed campaign's option that may be given anew: ``value`` when given on the command line,
    else what the campaign kept (``value`` when it kept none)."""
    if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
        return value
    return state.get(name, value)


def refuse_with_resume(ctx: click.Context, names: tuple[str, ...]) -> None:
    """A usage error when an option that shapes the plan is given with --resume (the campaign keeps its own)."""
    def spelled(name: str) -> str:  # as given: --no-NAME for the off side of a --NAME/--no-NAME switch
        param = next((p for p in ctx.command.params if p.name == name), None)
        if param is not None and getattr(param, "secondary_opts", None) and ctx.params.get(name) is False:
            return param.secondary_opts[0]
        return f"--{name.replace('_', '-')}"

    given = [spelled(name) for name in names if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{', '.join(given)}: a resumed campaign keeps the options it started with "
                               "(the same plan); drop them, or start a new campaign")


def print_violations(result: dict, title: str, last_column: str = "event") -> None:
    """A run's violations (the first 20) in a table titled ``title`` (``last_column``: ``event``, the
    history's sequence number, or ``where``: the violation's detail), then the meaning of each check
    that fired, from the suite's checks (:data:`eos_harness.suite.SUITES`)."""
    from eos_harness.suite import SUITES
    from rich.table import Table

    table = Table(title=title)
    table.add_column("check", no_wrap=True)
    for col in ("key", "expected", "observed", last_column):
        table.add_column(col, overflow="fold")
    for v in result["violations"][:20]:
        last = v["event"] if last_column == "event" else v.get("detail") or ""
        table.add_row(v["check"], str(v["key"]), str(v["expected"]), str(v["observed"]), str(last))
    if len(result["violations"]) > 20:
        table.add_row("…", f"{len(result['violations']) - 20} more", "", "", "")
    console.print(table)
    meanings = SUITES[result["suite"]].checks() if result.get("suite") in SUITES else {}
    for check in sorted({v["check"] for v in result["violations"]}):
        console.print(f"  {check}: {meanings.get(check, '')}", markup=False, highlight=False)


def tallies_table(campaign: dict):
    """A campaign's tally per subject (store, system): its expected result, scenarios, failures, status,
    the check that must catch it and how often it did (when its suite names one), the checks that fired."""
    from eos_harness.suite import suite
    from rich.table import Table

    entry, summary = suite(campaign["suite"]), campaign["summary"]
    tallies = summary[entry.tallies]
    named = any(t.get("caught_by") for t in tallies.values())
    table = Table(title=f"{entry.name} chaos campaign, seed {campaign['seed']}: {summary['total']} scenarios")
    for col in (entry.subject, "expected", "scenarios", "failed", "verdict", *(["caught by"] if named else []),
                "checks that fired"):
        table.add_column(col)
    for subject, t in tallies.items():
        if not t["scenarios"]:
            continue
        colour = "green" if t["status"] in ("ok", "caught") else "yellow" if t["status"] == "not exercised" else "red"
        checks = ", ".join(f"{c}×{n}" for c, n in sorted(t["checks"].items(), key=lambda kv: -kv[1]))
        caught = [f"{t['caught_by']} (allowed)" if t.get("not_exercised_why") else
                  f"{t['caught_by']}×{t['caught_by_its_check']}" if t.get("caught_by") else "-"] if named else []
        table.add_row(subject, t["expected"], str(t["scenarios"]), str(t["failed"]), f"[{colour}]{t['status']}[/]",
                      *caught, checks)
    return table


def finish_run(result: dict, out_dir: Path, json_error: str | None, report: bool,
               outputs: tuple[str, str] | None = None) -> None:
    """The end of every ``run``: its replay (when it did not pass, or a scheduled fault could not be
    injected), its history and its processes' output (``outputs``: the result's field and what it
    holds), a JSON that could not be written, its report; then exit with the run's code."""
    from eos_harness.faces.report import write_run_report
    from eos_harness.verdict import exit_code

    if result["verdict"] != "pass" or result.get("fault_errors"):
        console.print(f"replay: {result['repro']}", soft_wrap=True)
    if "history" in result:
        console.print(f"history: {result['history']}")
    if outputs is not None and outputs[0] in result:
        console.print(f"{outputs[1]}: {result[outputs[0]]}", soft_wrap=True)
    if json_error:
        console.print(f"[red]{json_error}[/] (the verdict is above and in {out_dir / 'verdict.json'})")
    if report:
        write_run_report(out_dir)
    sys.exit(exit_code([result["verdict"]], incomplete=bool(result.get("fault_errors") or json_error)))


def kept_outputs(json_path: str | None, junit_path: str | None) -> dict:
    """The output files a campaign keeps in its run directory's state (a resume writes them again)."""
    return {"json": str(Path(json_path).absolute()) if json_path else None,
            "junit": str(Path(junit_path).absolute()) if junit_path else None}


@contextlib.contextmanager
def campaign_progress(out_dir: Path, total: int | None, resume: bool) -> Iterator[Callable[[dict], None]]:
    """A progress bar of a campaign's scenarios (those a resumed campaign finished before count as
    done), and the ``on_result`` that advances it."""
    from eos_harness.campaign import finished_results
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    finished = len(finished_results(out_dir / "results.jsonl")) if resume else 0
    if resume:
        console.print(f"resuming the campaign of {out_dir}: {finished} scenario(s) finished before are kept")
    with Progress(TextColumn("[bold]chaos"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task("chaos", total=total, completed=finished, status="")
        counts = {"fail": 0, "error": 0}

        def on_result(result: dict) -> None:
            counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
            errors = f", {counts['error']} could not run" if counts["error"] else ""
            # A store's probe (run before its scenarios) is a result, not one of the scenarios asked for.
            progress.update(task, advance=0 if result.get("probe") else 1,
                            status=f"{counts['fail']} failing (mutants included){errors}")

        yield on_result


def finish_campaign(campaign: dict, out_dir: Path, json_path: str | None, junit_path: str | None, report: bool,
                    junit_suites: Callable[[dict], list], show: Callable[[dict], None],
                    judge: Callable[[dict], str] | None = None, outputs: str = "", asked: str | None = None) -> None:
    """The end of every campaign: write its JSON (OUT/chaos.json unless ``--json``), its JUnit file
    (``junit_suites``: the suite's testsuites) and its report, whether it ran to its end or was stopped;
    print its tables (``show``), what was not run, the unexpected results with a replay each, the faults
    that could not be injected and the scenarios that could not be run to their end; last, for a
    campaign stopped early, how to resume it. ``judge``: a result's verdict, as the suite judges it;
    ``outputs``: what the campaign's ``log`` holds; ``asked``: the option that named the subjects, if any."""
    from eos_harness.faces.report import write_run_report
    from eos_harness.junit import write_junit
    from eos_harness.suite import suite

    name, subject = campaign["suite"], suite(campaign["suite"]).subject
    judge = judge or (lambda result: result["verdict"])
    json_file = Path(json_path) if json_path else out_dir / "chaos.json"
    json_error = write_json(json_file, campaign)
    junit_error = write_junit(junit_path, junit_suites(campaign),
                              f"eos-harness chaos --suite {name}, seed {campaign['seed']}") if junit_path else None
    show(campaign)
    summary = campaign["summary"]
    if summary.get("not_run"):  # not judged, so not unexpected: a warning
        console.print(f"[yellow]not run ({f'asked for with {asked}, ' if asked else ''}not reached before the "
                      "campaign ended, so not judged): "
                      f"{', '.join(summary['not_run'])}; give more --scenarios or --minutes to cover them[/]",
                      soft_wrap=True)
    if summary["unexpected"]:
        console.print(f"[red]unexpected results: {', '.join(summary['unexpected'])}[/]")
        for unexpected in summary["unexpected"]:
            expected_fail = summary[suite(name).tallies][unexpected]["expected"] == "fail"
            first = next((r for r in campaign["scenarios"] if r[subject] == unexpected
                          and (expected_fail or judge(r) == "fail")), None)
            if first is None:
                continue
            console.print(f"  replay: {first['repro']}", soft_wrap=True, markup=False, highlight=False)
            for v in first["violations"]:  # what its process wrote before it failed (from the log)
                if v["check"].endswith("_finishes") and v.get("detail"):
                    console.print(f"  {v['check']}: {v['observed']}\n{v['detail']}", markup=False, highlight=False,
                                  soft_wrap=True)
                    break
    if summary.get("fault_errors"):
        console.print(f"[red]{len(summary['fault_errors'])} scheduled fault(s) could not be injected "
                      "(the campaign did not test what it planned):[/]")
        for line in summary["fault_errors"][:5]:
            console.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)
    if summary.get("errors"):
        console.print(f"[red]{len(summary['errors'])} scenario(s) could not be run to their end "
                      "(verdict \"error\" in the JSON, with the reason):[/]")
        for line in summary["errors"][:5]:
            console.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)
    if json_error:
        campaign["json_error"] = json_error
        console.print(f"[red]{json_error}[/]; the scenarios that finished are in {out_dir / 'results.jsonl'} "
                      "as far as it could be written", soft_wrap=True)
    else:
        log = f"; {outputs}: {campaign['log']}" if campaign.get("log") else ""
        console.print(f"results: {json_file} (histories under {out_dir}{log})", soft_wrap=True)
    if junit_error:
        campaign["junit_error"] = junit_error
        console.print(f"[red]{junit_error}[/]", soft_wrap=True)
    elif junit_path:
        console.print(f"JUnit: {junit_path}")
    if report:
        write_run_report(out_dir, None if json_error else json_file)
    from eos_harness.commands import command_line

    print_stopped(campaign, command_line("chaos", "--suite", name, "--resume", out_dir))


def allow_option(entry, help: str):
    """``--allow CHECK`` (repeatable) of a command of ``entry``'s suite (``chaos``, the lifecycle's ``run``), its help
    ``help`` followed by the checks the suite can waive: a check it cannot waive is a usage error, before anything
    runs, listing those it can."""
    allowable = entry.allowable()

    def check(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in allowable:
                raise click.BadParameter(f"{name!r} is not a check the {entry.name} suite can allow"
                                         f"{_why_not(entry, name)}; the checks it can allow: {', '.join(allowable)}",
                                         ctx, param)
        return value

    return click.option("--allow", "allow", multiple=True, metavar="CHECK", callback=check,
                        help=f"{help} The checks the {entry.name} suite can allow: {', '.join(allowable)}.")


def _why_not(entry, name: str) -> str:
    from eos_harness.suites.offsets.checks import GUARD_CHECKS

    if name in GUARD_CHECKS:
        return " (it is about the store's own calls: after one the store cannot be driven on, so it is never waived)"
    if name in entry.checks():
        return " (a finding of it ends what it fires in: nothing past it is judged)"
    return f" (not a check of the {entry.name} suite)"
