"""``eos-harness``: the command line. Each command lives with the code it drives; this file wires them."""

from __future__ import annotations

import json

import click
from eos_harness.faces.check import check_command
from eos_harness.faces.kafka_log import kafka_log_command
from eos_harness.faces.kafka_metadata import kafka_metadata_command
from eos_harness.faces.lifecycle import demo_command, run_command
from eos_harness.faces.params import AT_LEAST_ONE
from eos_harness.faces.report import report_command
from eos_harness.faces.toolkit import console, seed_or_drawn, starts_store_processes, suite_option
from eos_harness.process.guard import STORE_TIMEOUT_S


def _suite_of(args: list[str]) -> str | None:
    """The value of ``--suite`` among a command's arguments, if any."""
    for i, arg in enumerate(args):
        if arg == "--suite" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--suite="):
            return arg.split("=", 1)[1]
    return None


def _without_suite(args: list[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--suite":
            skip = True
        elif not arg.startswith("--suite="):
            out.append(arg)
    return out


DEFAULT_SUITE = "lifecycle"  # the suite of ``run`` and ``chaos`` without ``--suite``


class HarnessGroup(click.Group):
    """``run`` and ``chaos`` come from the suite registry (:data:`eos_harness.suite.SUITES`): with
    ``--suite NAME`` they are that suite's commands (the lifecycle suite's without it; a name no suite
    has is left to the registered command's ``--suite``, which lists the suites).

    Every command runs in a :func:`eos_harness.session.session` (one temp root, removed at the end;
    SIGTERM unwinds like Ctrl-C); an interrupted command exits 130 (SIGINT) or 143 (SIGTERM)."""

    def resolve_command(self, ctx, args):
        from eos_harness.suite import SUITES

        name, command, rest = super().resolve_command(ctx, args)
        entry = SUITES.get(_suite_of(rest) or DEFAULT_SUITE) if name in ("run", "chaos") else None
        if entry is not None:
            found = entry.command(name)
            if found is None:
                raise click.UsageError(f"the {entry.name} suite has no campaign; run it with: eos-harness run "
                                       f"--suite {entry.name} (see `eos-harness run --suite {entry.name} --help`)")
            if not any(p.name == "suite" or "--suite" in getattr(p, "opts", ()) for p in found.params):
                rest = _without_suite(rest)  # the suite's one command (verify, kafka-log, …) has no --suite
            command = found
        return name, command, rest

    def invoke(self, ctx: click.Context):
        from eos_harness.kafka_versions import unknown_version
        from eos_harness.session import TempDirTooLong, exit_code_of, session, signal_name

        problem = unknown_version()  # $EOS_KAFKA_VERSION names a Kafka the harness has jars for, before anything runs
        if problem is not None:
            raise click.UsageError(problem)
        try:
            with session():
                return super().invoke(ctx)
        except TempDirTooLong as exc:  # a store process started where no command said it would
            raise click.UsageError(str(exc)) from None
        except KeyboardInterrupt as exc:
            click.echo(f"interrupted ({signal_name(exc)}): stopped; whatever the command started was stopped",
                       err=True)
            ctx.exit(exit_code_of(exc))


@click.group(cls=HarnessGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Fault-injection harness and verifier for exactly-once (EOS) state semantics."""


@main.command("suites")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def suites_command(as_json: bool) -> None:
    """List every suite: what it runs on, its commands and its checks with their meanings."""
    from eos_harness.suite import SUITES

    rows = [s.to_json() for s in SUITES.values()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        commands = ", ".join(f"{c} --suite {row['name']}" for c, has in row["commands"].items() if has)
        click.echo(f"{row['name']}: {row['title']}\n  runs on: {row['runs_on']}\n  commands: {commands}"
                   + ("; pytest --pyargs " + row["package"] if row["pytest_entry"] else ""))
        if row["commands"]["chaos"]:
            click.echo("  engines: " + "; ".join(f"{name} ({what})" for name, what in row["engines"].items()))
        if row["allowable"]:
            click.echo("  chaos --allow (and verify --allow) can waive: " + ", ".join(row["allowable"]))
        for check, meaning in row["checks"].items():
            click.echo(f"    {check:<34} {meaning}")


@main.command("stores")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stores_command(as_json: bool) -> None:
    """List the built-in stores, mutants and unsafe runtime variants."""
    from eos_harness.kafka_streams.catalogue import KAFKA_STORES
    from eos_harness.stores.registry import builtin_specs, opt_in_specs
    from rich.table import Table

    rows = []
    for spec in [*builtin_specs(), *opt_in_specs()]:
        store = spec.factory()
        kafka = KAFKA_STORES.get(spec.name)
        rows.append({"name": spec.name, "kind": spec.kind, "transactional": store.transactional(),
                     "manages_offsets": store.manages_offsets(), "description": spec.description,
                     "system": kafka.system if kafka else "eos-harness", "version": kafka.version if kafka else None})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="stores")
    for col in ("name", "kind", "transactional", "manages_offsets", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["kind"], str(r["transactional"]), str(r["manages_offsets"]), r["description"])
    console.print(table)


@main.command("points")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--store", "store", default=None, metavar="MODULE:FUNCTION",
              help="List only the crash points of this store of yours: those its module declares, and those it "
                   "reaches (run once, in a child) without declaring them; for one of Kafka Streams' stores "
                   "(kafka-streams-…), the points inside its JVM, each with the Java method it sits in.")
def points_command(as_json: bool, store: str | None) -> None:
    """List every crash point and every fault kind a schedule can name, with its meaning."""
    from eos_harness.faults.kinds import kinds
    from eos_harness.faults.points import load_declarations

    if store is not None:
        starts_store_processes(_store_points)(store, as_json)  # the store is run once, in a child
        return
    rows = [{"name": p.name, "description": p.description, "type": "crash point"} for p in load_declarations()]
    faults = [{"name": k.spelling, "description": k.meaning, "type": "fault kind", "suite": k.suite,
               "armed": k.armed, "needs": [n.what for n in k.needs], "stops_broker": k.stops_broker}
              for k in kinds()]
    if as_json:
        click.echo(json.dumps(rows + faults, indent=2))
        return
    click.echo("crash points (a schedule arms POINT[@n] or freeze:POINT[@n]):")
    for r in rows:
        click.echo(f"  {r['name']:<43} {r['description']}")
    click.echo("\nfault kinds (how a schedule spells them):")
    for r in faults:
        needs = f"; needs {r['needs'][-1]}" if r["needs"] else ""
        click.echo(f"  {r['name']:<43} {r['description']}\n  {'':<43} ({r['suite']} suite; armed {r['armed']}{needs})")


def _store_points(store: str, as_json: bool) -> None:
    """``points --store``: the crash points a user's store declares, and those it reaches undeclared."""
    import os

    from eos_harness.faults.points import load_declarations
    from eos_harness.process.server import children_output
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.child_probe import store_ref
    from eos_harness.stores.probe import probe_store

    ours = {p.name for p in load_declarations()}
    try:
        with children_output(os.devnull):  # the module's own noise on import (in a child), the probe's
            probe = probe_store(store_ref(store))
    except StoreFactoryError as exc:
        raise click.UsageError(str(exc)) from None
    own = _jvm_store_points(store)  # Kafka Streams' stores: the harness declares their points (Byteman rules)
    rows = [{"name": p.name, "description": p.description, "declared": True, "reached": p.name in probe.points}
            for p in load_declarations() if p.name not in ours or p.name in own]
    rows += [{"name": name, "description": "reached, never declared (verify declares it for its run)",
              "declared": False, "reached": True} for name in probe.undeclared]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"crash points of {store}:" if rows else f"store {store} declares and reaches no crash point of its own")
    for r in rows:
        click.echo(f"  {r['name']:<43} {r['description']}{'' if r['reached'] else ' (not reached by one probe run)'}")
    if probe.undeclared:
        click.echo(f"warning: {probe.undeclared_warning(store)}")
    if probe.error or probe.finding:
        click.echo(f"note: the probe run did not finish: {probe.error or probe.finding['observed']}")


def _jvm_store_points(store: str) -> set[str]:
    """The crash points inside the JVM of one of Kafka Streams' stores (none for any other store)."""
    from eos_harness.kafka_streams.catalogue import KAFKA_STORES
    from eos_harness.kafka_streams.points import points_for

    info = KAFKA_STORES.get(store)
    return set() if info is None else {p.name for p in points_for(info.store_kind, info.transactional)}


class _GivesWayToHelp(click.Option):
    """An eager flag that exits (``--list-checks``) but lets ``--help`` on the same line win."""

    def handle_parse_result(self, ctx: click.Context, opts, args):
        if opts.get("help"):
            opts = {name: value for name, value in opts.items() if name != self.name}
        return super().handle_parse_result(ctx, opts, args)


def _list_checks(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``verify --list-checks``: every check ``verify`` may report, by suite, with its one-line meaning."""
    if not value or ctx.resilient_parsing:
        return
    from eos_harness.suites.verify import listed_checks

    suites, offsets_scenarios = listed_checks()
    for name, about, checks in suites:
        click.echo(f"{name} suite, {about}:")
        for check, meaning, mutants, kafka in checks:
            click.echo(f"  {check:<34} {meaning}")
            alone = (f"alone catches the built-in {', '.join(mutants)}" if mutants
                     else "no built-in mutant that it alone catches yet")
            click.echo(f"  {'':<34} {alone}")
            if kafka:  # mutants of Kafka Streams' own code (Byteman rules), run only when named
                click.echo(f"  {'':<34} catches Kafka Streams' {', '.join(kafka)}")
    click.echo("offsets scenarios (verify STORE --offsets-scenario NAME runs one alone):")
    for scenario, checks in offsets_scenarios:
        click.echo(f"  {scenario:<34} {', '.join(checks)}")
    ctx.exit(0)


@main.command("verify")
@click.argument("store")
@click.option("--list-checks", cls=_GivesWayToHelp, is_flag=True, is_eager=True, expose_value=False,
              callback=_list_checks,
              help="List every check verify reports (conformance, offsets and window suites), each with its "
                   "one-line meaning and the built-in mutant it alone catches, and exit.")
@click.option("--seed", type=int, default=None, help="Seed of the state machine (printed when not given).")
@click.option("--examples", type=AT_LEAST_ONE, default=40, show_default=True, help="Hypothesis examples.")
@click.option("--steps", type=AT_LEAST_ONE, default=25, show_default=True, help="Steps per example.")
@click.option("--shrink/--no-shrink", default=True, show_default=True,
              help="Shrink a failing sequence to a minimal one (slower on a failure).")
@click.option("--json", "json_path", default=None, help="Write the verdict JSON here.")
@click.option("--store-timeout", type=click.FloatRange(min=0, min_open=True), default=STORE_TIMEOUT_S, show_default=True,
              metavar="SECONDS", help="Bound on each call into the store; a call that takes longer is a store_hang finding.")
@click.option("--log", "log_path", default=None, metavar="FILE",
              help="Write the store's own output (its processes' stdout and stderr) here [default: beside --json "
                   "as NAME.log; without --json, not kept].")
@click.option("--junit", "junit_path", default=None,
              help="Write JUnit XML here (for CI): a testcase per conformance check, a failure per broken check.")
@click.option("--allow", "allow", multiple=True, metavar="CHECK",
              help="Waive CHECK, a difference you know about (repeatable); the verdict names what was waived. "
                   "Checks: read_your_own_writes, read_committed_isolation, no_uncommitted_survives, atomic_commit, "
                   "committed_durable, committed_offset_durable, clean_close_durable, recover_trust, offset_convention, "
                   "and the offsets suite's (--list-checks); for a window store: fetch_order, read_committed_isolation, "
                   "expired_never_fetched, stream_time_rebuilt (what a read shows: the case goes on).")
@click.option("--max-findings", type=AT_LEAST_ONE, default=5, show_default=True,
              help="Distinct checks the state machine looks for (each found one is waived and it runs again).")
@click.option("--offsets-scenario", "offsets_scenarios", multiple=True, metavar="NAME",
              help="Run only the offsets suite's scenario NAME (repeatable), no conformance case: the replay of "
                   "an offsets finding (--list-checks lists the scenarios).")
@starts_store_processes
def verify_command(store: str, seed: int | None, examples: int, steps: int, shrink: bool, json_path: str | None,
                   store_timeout: float, log_path: str | None, junit_path: str | None, allow: tuple[str, ...],
                   max_findings: int, offsets_scenarios: tuple[str, ...]) -> None:
    """Run the conformance suite and the offsets suite against STORE (a built-in name or module:function);
    a window store (its kind, or a store with ``window_config``) gets the window store suite."""
    import os
    import sys
    import tempfile
    from pathlib import Path

    from eos_harness.outputs import check_outputs
    from eos_harness.rundir import RunDirError, write_text
    from eos_harness.stores import StoreFactoryError
    from eos_harness.suites.conformance.checks import GUARD_CHECKS
    from eos_harness.suites.verify import VerifyOptionError, check_options, junit_suites, verify_store
    from eos_harness.verdict import exit_code
    from rich.table import Table

    try:
        check_options(allow, offsets_scenarios)
    except VerifyOptionError as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    if log_path is None and json_path:
        log_path = str(Path(json_path).with_suffix(".log"))
    try:
        check_outputs({"--json": json_path, "--junit": junit_path, "--log": log_path})
        if log_path:
            Path(log_path).write_text("")  # this run's output only
    except (RunDirError, OSError) as exc:
        raise click.UsageError(str(exc)) from None
    seed = seed_or_drawn(seed)
    kept_log = log_path is not None
    if log_path is None:  # in the command's temp root, removed at its end
        fd, log_path = tempfile.mkstemp(prefix="eos-verify-", suffix=".log")
        os.close(fd)
    try:
        from eos_harness.process.server import children_output
        from eos_harness.stores.child_probe import store_ref

        with children_output(log_path):  # its module's output on import (in a child) goes to the log
            ref = store_ref(store, store_timeout)  # the store resolved once, here: a usage error for a bad one
        try:
            check_options(allow, window=ref.window)  # now that its kind is known
        except VerifyOptionError as exc:
            raise click.BadParameter(str(exc), param_hint=exc.option) from None
        console.print(f"seed: {seed}")  # once the input is known good: a usage error prints nothing else
        result = verify_store(ref, seed, examples=examples, steps=steps, shrink=shrink, store_timeout=store_timeout,
                              log=log_path, allow=allow, max_findings=max_findings, offsets_scenarios=offsets_scenarios)
    except StoreFactoryError as exc:
        raise click.UsageError(str(exc)) from None
    json_error = None
    if json_path:
        try:
            write_text(Path(json_path), json.dumps(result, indent=2))
        except OSError as exc:
            json_error = f"could not write {json_path}: {exc.strerror or exc}"
    if junit_path:
        from eos_harness.junit import write_junit

        json_error = json_error or write_junit(junit_path, junit_suites(result), f"eos-harness verify {store}")
    table = Table(title=f"conformance of {store}: {len(result['cases'])} cases")
    table.add_column("#", no_wrap=True)
    table.add_column("check", no_wrap=True)
    for col in ("key", "expected", "observed"):
        table.add_column(col, overflow="fold")
    for number, v in enumerate(result["violations"], 1):
        table.add_row(str(number), v["check"], str(v["key"]), str(v["expected"]), str(v["observed"]))
    if result["violations"]:
        console.print(table)
        for number, v in enumerate(result["violations"], 1):
            plain = {"markup": False, "highlight": False, "soft_wrap": True}
            if v["check"] in GUARD_CHECKS:  # about the store's own call: the operation, its traceback or stack
                console.print(f"#{number} {v['check']} in the store's {v['key']}: {v['observed']}", **plain)
                if v.get("detail"):
                    what = "stack when it was killed" if v["check"] == "store_hang" else "own traceback"
                    console.print(f"#{number} the store's {what}:\n{v['detail']}", **plain)
            elif v.get("detail"):
                console.print(f"#{number} {v['check']}: {v['detail']}", **plain)
            console.print(f"#{number} case: {v['case']}", **plain)
            if v.get("fired"):
                console.print(f"#{number} fired in {v['fired']['cases']} of {v['fired']['of']} cases", **plain)
            console.print(f"#{number} replay: {v['replay']}", **plain)
    for line in result.get("not_checked", []):
        console.print(f"not checked: {line}", markup=False, highlight=False, soft_wrap=True)
    coverage = result.get("coverage") or {}
    for check, why in coverage.get("not_applicable", {}).items():
        console.print(f"not applicable: {check}: {why}", markup=False, highlight=False, soft_wrap=True)
    for check, condition in coverage.get("not_exercised", {}).items():
        console.print(f"not exercised: {check} (not passed: no case met its condition: {condition})",
                      markup=False, highlight=False, soft_wrap=True)
    if coverage.get("exercised"):
        console.print("checks exercised (cases that met each one's condition): " + ", ".join(
            f"{check} {n}" for check, n in coverage["exercised"].items() if n), markup=False, highlight=False,
            soft_wrap=True)
    for skipped in result.get("offsets", {}).get("not_applicable", []):
        console.print(f"not applicable: offsets {skipped['scenario']} ({', '.join(skipped['checks'])}): "
                      f"{skipped['reason']}", markup=False, highlight=False, soft_wrap=True)
    for note in result.get("offsets", {}).get("notes", []):
        console.print(f"note: offsets {note}", markup=False, highlight=False, soft_wrap=True)
    for check in result.get("allowed", []):
        times = result.get("waived", {}).get(check, 0)
        console.print(f"waived: {check} (--allow; fired {times} time{'s' if times != 1 else ''})",
                      markup=False, highlight=False)
    if result.get("stopped"):
        console.print(result["stopped"], markup=False, highlight=False, soft_wrap=True)
    if result.get("error"):
        console.print(f"error: {result['error']}", markup=False, highlight=False, soft_wrap=True)
    for warning in result.get("warnings", []):
        console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if result.get("points"):
        console.print("crash points reached: " + ", ".join(
            f"{p['name']} (crashed {p['crashes']}×{'' if p['declared'] else ', declared for this run'})"
            for p in result["points"]), markup=False, highlight=False, soft_wrap=True)
    if Path(log_path).stat().st_size:
        where = log_path if kept_log else "not kept (keep it with --log FILE, or --json)"
        console.print(f"the store's output: {where}", markup=False, highlight=False, soft_wrap=True)
    colour = {"pass": "green", "fail": "red"}.get(result["verdict"], "yellow")
    offsets = result.get("offsets") or {}
    if offsets.get("checks"):  # what the offsets suite ran, so a pass says it was run at all
        by = {word: [c for c, v in offsets["checks"].items() if v == word] for word in ("pass", "fail", "error")}
        console.print(f"offsets suite: {offsets.get('verdict')} ({len(offsets.get('cases', []))} scenarios; checks "
                      f"{len(by['pass'])} passed, {len(by['fail'])} failed, {len(by['error'])} error, "
                      f"{len(offsets.get('not_applicable', []))} scenario(s) not applicable)",
                      markup=False, highlight=False, soft_wrap=True)
    if result["verdict"] == "pass":
        unexercised = len(coverage.get("not_exercised", {}))
        console.print(f"[green]verdict: pass[/] ({len(result['cases'])} cases"
                      + (f"; {unexercised} check(s) not exercised, not passed" if unexercised else "") + ")")
    else:
        console.print(f"[{colour}]verdict: {result['verdict']}[/]  replay: {result['repro']}", soft_wrap=True)
    if json_error:
        console.print(f"[red]{json_error}[/] (the verdict is above)")
    sys.exit(exit_code([result["verdict"]], incomplete=bool(json_error)))


@main.command("new-store")
@click.argument("name")
@click.option("--dir", "directory", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Where to write NAME.py and test_NAME.py (an existing directory).")
def new_store_command(name: str, directory: str) -> None:
    """Write NAME.py, a ready-to-fill adapter of your store to the store protocol (every method with its
    contract), and test_NAME.py, a pytest file running the conformance suite on it. Never overwrites a file;
    refuses a NAME that would shadow an importable module (eos_harness, the standard library, a package)."""
    from pathlib import Path

    from eos_harness.scaffold import ScaffoldError, write_scaffold

    target = Path(directory)
    if not target.is_dir():
        raise click.UsageError(f"--dir {directory}: no such directory; create it first")
    try:
        written = write_scaffold(name, target)
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"wrote {written[0]} (fill in each method) and {written[1]}; then:\n"
               f"  eos-harness verify {name}:make_store --json {name}.json\n  pytest {written[1].name}")


@click.command("chaos", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@suite_option(DEFAULT_SUITE)
def chaos_command() -> None:
    """Run a chaos campaign of a suite: random scenarios, seeds drawn from the campaign seed (`eos-harness chaos
    --suite NAME --help` shows that suite's options)."""
    # Never run: the group sends ``chaos`` to its suite's command (a --suite no suite has is refused above).


main.add_command(run_command)
main.add_command(chaos_command)
main.add_command(demo_command)
main.add_command(kafka_log_command)
main.add_command(kafka_metadata_command)
main.add_command(report_command)
main.add_command(check_command)

if __name__ == "__main__":
    main()
