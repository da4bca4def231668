"""``chaos --suite spark --state-provider/--checkpoint-format/--changelog`` (spelled as ``run`` spells them): each
narrows the campaign's plan, the built-in matrix and a user's query alike, the mutant sink included, to the state
configurations that match; none given, the plan of a seed is what it always was. A choice that leaves none is a
usage error before anything runs. Pure Python: no Spark is started."""

from __future__ import annotations

import json
import shlex
from collections import Counter

import pytest
from eos_harness.campaign_summary import campaign_repro
from eos_harness.suites.spark.plan import (
    MATRIX_SINKS,
    MUTANT_SINK,
    STATE_CONFIGURATIONS,
    WINDOWS,
    StateChoice,
    campaign,
    control,
    matrix,
)
from eos_harness.suites.spark.runner import campaign_fields
from eos_harness.suites.spark.user import UserScenario, user_plan

NOT_GIVEN = {"state_provider": None, "checkpoint_format": None, "changelog": None}


def configuration(scenario) -> tuple[str, bool, int]:
    return scenario.provider, scenario.changelog, scenario.checkpoint_format


def named_in_replay(scenario) -> bool:
    """The scenario's replay names its configuration as ``run`` takes it."""
    words = shlex.split(scenario.repro())
    at = words.index("--state-provider")
    return (words[at + 1] == scenario.provider and words[words.index("--checkpoint-format") + 1]
            == str(scenario.checkpoint_format) and ("--changelog" in words) == scenario.changelog)


def test_the_built_in_matrix_runs_only_the_configurations_chosen_each_in_every_window():
    everything = campaign(7, {"sinks": list(MATRIX_SINKS), **NOT_GIVEN})
    assert everything == campaign(7, {"sinks": list(MATRIX_SINKS)})  # a campaign kept before the options: the same
    assert {configuration(s) for s in everything} == set(STATE_CONFIGURATIONS)

    options = {"sinks": list(MATRIX_SINKS), **NOT_GIVEN, "state_provider": "rocksdb", "checkpoint_format": "1"}
    planned = campaign(7, options)
    assert planned == campaign(7, options)  # the seed decides it
    assert planned[0].sink == MUTANT_SINK and configuration(planned[0]) == ("rocksdb", False, 1)
    assert {configuration(s) for s in planned} == {("rocksdb", False, 1), ("rocksdb", True, 1)}
    # every (pipeline, sink) of the whole matrix under those two, each in every window, as the whole plan has them
    cells = Counter((s.pipeline, s.sink, *configuration(s), s.schedule[0].split("@")[0]) for s in planned[1:])
    wanted = {(c["pipeline"], c["sink"], c["provider"], c["changelog"], c["checkpoint_format"], c["window"])
              for c in matrix() if c["provider"] == "rocksdb" and c["checkpoint_format"] == 1}
    assert set(cells) == wanted and set(cells.values()) == {1}
    assert len(planned) == len(wanted) + 1 < len(everything)
    assert all(named_in_replay(s) for s in planned)

    # the mutant sink runs in a configuration chosen too: the first of them when they leave out its own
    only_hdfs = campaign(7, {"sinks": ["file"], **NOT_GIVEN, "state_provider": "hdfs"})
    assert {configuration(s) for s in only_hdfs} == {("hdfs", False, 1)} and only_hdfs[0].sink == MUTANT_SINK
    with_changelog = campaign(7, {"sinks": ["foreach"], **NOT_GIVEN, "changelog": True, "checkpoint_format": "2"})
    assert {configuration(s) for s in with_changelog} == {("rocksdb", True, 2)}
    assert control(7, configurations=(("rocksdb", False, 2), ("rocksdb", True, 2))).checkpoint_format == 2
    assert {configuration(s) for s in campaign(7, {"sinks": ["kafka"], **NOT_GIVEN, "changelog": False})} == {
        ("hdfs", False, 1), ("rocksdb", False, 1), ("rocksdb", False, 2)}


def test_a_users_query_runs_every_window_under_each_configuration_chosen(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(5):
        (folder / f"batch-{n}.jsonl").write_text(json.dumps({"id": n}) + "\n")
    template = UserScenario("my_jobs:build", str(folder))
    assert user_plan(7, template, configurations=STATE_CONFIGURATIONS) == user_plan(7, template)  # none given: as always

    chosen = StateChoice("rocksdb", 1, True).configurations()
    assert chosen == (("rocksdb", True, 1),)
    planned = user_plan(7, template, configurations=chosen)
    assert [configuration(s) for s in planned] == [("rocksdb", True, 1)] * len(WINDOWS)
    assert sorted(s.schedule[0].split("@")[0] for s in planned) == sorted(WINDOWS)  # each window once
    assert all(named_in_replay(s) for s in planned)

    planned = user_plan(7, template, configurations=StateChoice(checkpoint_format=1).configurations())
    cells = {(*configuration(s), s.schedule[0].split("@")[0]) for s in planned}
    assert cells == {(*c, w) for c in STATE_CONFIGURATIONS if c[2] == 1 for w in WINDOWS} and len(planned) == 12
    # the campaign's summary counts the plan it ran: 4 windows of the one configuration, and the mutant sink
    fields = campaign_fields({"scenarios": [], "summary": {}, "pipeline": "my_jobs:build", "source": "file",
                              "sinks": ["user"], "state_provider": "rocksdb", "checkpoint_format": "1",
                              "changelog": True})
    assert fields["summary"]["matrix_size"] == len(WINDOWS) + 1


@pytest.mark.parametrize("pipeline", [(), ("--pipeline", "my_jobs:build")], ids=["built-in", "users-query"])
def test_a_choice_that_leaves_no_configuration_is_a_usage_error_before_anything_runs(cli, tmp_path, pipeline):
    inputs = tmp_path / "in"
    inputs.mkdir(exist_ok=True)
    (inputs / "batch-0.jsonl").write_text("{}\n")
    query = (*pipeline, "--input", inputs) if pipeline else ()
    cases = {
        ("--state-provider", "hdfs", "--checkpoint-format", "2"):
            "--state-provider hdfs --checkpoint-format 2: no state configuration to run (Spark refuses it: "
            "[STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED]",
        ("--state-provider", "hdfs", "--changelog"):
            "--state-provider hdfs --changelog: no state configuration to run (changelog checkpointing is a RocksDB",
        ("--checkpoint-format", "3"): "'3' is not one of '1', '2'",
        ("--state-provider", "memory"): "'memory' is not one of 'hdfs', 'rocksdb'",
    }
    for args, message in cases.items():
        out = tmp_path / "campaign"
        done = cli.invoke("chaos", "--suite", "spark", *query, *args, "--seed", "1", "--out", out)
        said = " ".join(done.stderr.split())
        assert done.returncode == 2 and message in said, (args, done.stdout, done.stderr)
        assert "seed:" not in done.stdout and "Traceback" not in done.stdout + done.stderr
        assert not out.exists()  # nothing ran


def test_the_choice_is_kept_by_the_campaign_its_replay_and_resume_give_it_anew_is_refused(cli, tmp_path):
    state = {"suite": "spark", "seed": 3, "sinks": ["file"], "state_provider": "rocksdb", "checkpoint_format": "1",
             "changelog": False, "minutes": None, "scenarios": None}
    replay = campaign_repro(state, ("seed", "sinks", "state_provider", "checkpoint_format", "changelog"),
                            negatable=("changelog",))
    assert replay.endswith("--state-provider rocksdb --checkpoint-format 1 --no-changelog")
    assert cli.invoke(*shlex.split(replay)[1:], "--help").returncode == 0  # options chaos takes
    for given in (("--state-provider", "hdfs"), ("--checkpoint-format", "2"), ("--changelog",), ("--no-changelog",)):
        done = cli.invoke("chaos", "--suite", "spark", "--resume", tmp_path / "stopped", *given)
        assert done.returncode == 2, (given, done.stdout, done.stderr)
        assert f"{given[0]}: a resumed campaign keeps the options it started with" in " ".join(done.stderr.split())


def test_suites_says_what_the_choice_does(cli):
    [spark] = [row for row in json.loads(cli.invoke("suites", "--json").stdout) if row["name"] == "spark"]
    options = spark["chaos_options"]
    assert "as run --state-provider" in options["--state-provider"]
    assert "as run --checkpoint-format" in options["--checkpoint-format"]
    assert "--no-changelog" in options["--changelog/--no-changelog"]


def test_a_subject_none_of_whose_scenarios_applied_is_not_exercised_not_ok():
    # a user's transformWithState query narrowed to --state-provider hdfs: Spark refuses every configuration, each
    # scenario not applicable; the campaign judged nothing of it, so it must not read "ok"
    from eos_harness.campaign_summary import NOT_EXERCISED, Tally

    tally = Tally("user", False)
    for _ in range(4):
        tally.add({"verdict": "not_applicable", "violations": []}, "not_applicable")
    assert tally.status == NOT_EXERCISED and not tally.unexpected
    tally.add({"verdict": "pass", "violations": []}, "pass")
    assert tally.status == "ok"  # one scenario judged: the others' not applying is said per scenario
