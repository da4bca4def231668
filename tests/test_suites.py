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
    text = cli.invoke("suites").stdout
    assert all(f"{name}:" in text for name in SUITES) and "no_partial_publish" in text
    wrong = cli.invoke("run", "--suite", "nope", "--store", "memory")
    assert wrong.returncode == 2 and "'lifecycle'" in wrong.stderr  # the choices come from the registry
