"""The registry of suites: ``eos-harness suites`` lists every suite from it, each with what it runs on
and its checks with their meanings, and ``run``/``chaos --suite NAME`` are that suite's commands."""

from __future__ import annotations

import json

from eos_harness.suite import SUITES


def test_suites_lists_every_suite_of_the_registry_with_its_checks_and_its_commands_answer(cli):
    listed = json.loads(cli.invoke("suites", "--json").stdout)
    assert [row["name"] for row in listed] == list(SUITES)
    for row in listed:
        assert row["runs_on"] and row["checks"] and all(row["checks"].values()), row["name"]
        run = cli.invoke("run", "--suite", row["name"], "--help")
        assert run.returncode == 0 and "Usage:" in run.stdout, (row["name"], run.stdout)
        chaos = cli.invoke("chaos", "--suite", row["name"], "--help")  # every suite has a campaign
        assert row["commands"]["chaos"] and chaos.returncode == 0, (row["name"], chaos.stdout)
        assert "--resume" in chaos.stdout and "--until-failure" in chaos.stdout and "--junit" in chaos.stdout
        # chaos --allow on the store suites, whose replays (verify) waive what it waived; never a guard check
        assert ("--allow CHECK" in chaos.stdout) == bool(row["allowable"]), row["name"]
        assert not {"store_hang", "store_raised", "store_return_type", "store_error"} & set(row["allowable"])
    allowing = {row["name"]: row["allowable"] for row in listed if row["allowable"]}
    assert sorted(allowing) == ["conformance", "lifecycle", "offsets", "windows"]
    assert "task_finishes" not in allowing["lifecycle"]  # past it nothing is judged
    assert "read_committed_isolation" in allowing["conformance"] and "read_committed_isolation" in allowing["windows"]
    text = cli.invoke("suites").stdout
    assert all(f"{name}:" in text for name in SUITES) and "no_partial_publish" in text
    assert "engines: local (" in text
    wrong = cli.invoke("run", "--suite", "nope", "--store", "memory")
    assert wrong.returncode == 2 and "'lifecycle'" in wrong.stderr  # the choices come from the registry


def test_suites_says_which_engines_run_each_suite_and_chaos_keeps_to_it(cli, tmp_path):
    """``suites --json``'s ``engines`` (from the registry): every suite with a campaign runs on the local pool; the
    suites whose scenarios run on any machine on Spark too, saying what of them; ``chaos --engine spark`` of any
    other suite is a usage error naming those that Spark runs."""
    listed = {row["name"]: row["engines"] for row in json.loads(cli.invoke("suites", "--json").stdout)}
    on_spark = sorted(name for name, engines in listed.items() if "spark" in engines)
    assert on_spark == sorted(["conformance", "offsets", "windows", "lifecycle", "metadata", "kafka-log"])
    assert all(set(engines) <= {"local", "spark"} and "local" in engines and all(engines.values())
               for engines in listed.values())
    for name in sorted(set(listed) - set(on_spark)):
        done = cli.invoke("chaos", "--suite", name, "--engine", "spark", "--scenarios", "1", "--out", tmp_path / name)
        assert done.returncode == 2 and "run only on this machine" in done.stderr, (name, done.stderr)
        assert ", ".join(s for s in listed if s in on_spark) in done.stderr  # the suites Spark runs, named
        assert not (tmp_path / name).exists()


def test_every_suite_keeps_the_contract_its_campaign_is_planned_from_the_seed_alone():
    """``Suite.plan(seed, options)`` of every suite: the same seed gives the same scenarios, another seed
    others; each names a subject the suite tallies, and the runner has ``run_one`` and ``error_result``."""
    import itertools

    from eos_harness.suite_campaign import subjects_judged

    for entry in SUITES.values():
        plan, runner = entry.part("plan"), entry.part("runner")
        subjects = plan.subjects(None)
        options = {entry.tallies: subjects, **{option.name: option.default for option in entry.options}}
        if entry.name == "lifecycle":  # its stores' crash points, as their probes would give them
            options.update(reached={store: [] for store in subjects}, workloads=["counter"])
        if entry.name == "spark":
            options.update(source="file", strict=False, scenarios=None)

        def first(seed: int, options: dict = options, entry=entry) -> list:
            return list(itertools.islice(entry.plan(seed, options), 4))

        assert first(3) == first(3) and first(3) != first(4), entry.name
        field = {"store": "store", "system": "system", "sink": "sink"}[entry.subject]
        named = {getattr(s, field, None) for s in first(3)} - {None}
        assert named <= set(subjects_judged(entry, subjects)), (entry.name, named)  # its controls included
        assert callable(runner.run_one) and callable(runner.error_result), entry.name
        assert all(isinstance(plan.expected(s)[0], bool) for s in subjects), entry.name
