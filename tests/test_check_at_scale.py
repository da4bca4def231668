"""``eos-harness check RUN_DIR [--engine local|spark]``: the lifecycle suite's per-key checks over a campaign's
Parquet histories, in this process or as Spark DataFrame jobs, with one answer. The histories are a real
campaign's (every store and built-in mutant of the lifecycle suite, one scenario each, written as Parquet by the
campaign's own writer) and copies of its passing histories with one broken promise injected each. One Spark run
(``check --engine spark --master local[2]``) in the file."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

CAMPAIGN = ("--suite", "lifecycle", "--scenarios", "23", "--seed", "5", "--no-report", "--workers", "2")
IN_SCOPE = ("no_uncommitted_survives", "committed_rolls_forward", "recovery_idempotent", "state_matches_model",
            "read_your_own_writes", "read_committed_isolation", "exactly_once_output")


def _events(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _model(events: list[dict]):
    from eos_harness.suites.lifecycle.at_scale import model_of

    return model_of(events[0], None)


def _recovery_and_key(events: list[dict], wanted) -> tuple[dict, bytes, bytes | None] | None:
    """A recovery (with contents, before the input's end) and a key of the model for which ``wanted(model, p, key)``
    gives a value to put in its place (None: remove the key)."""
    model = _model(events)
    for event in events:
        if event["type"] == "recover" and event.get("contents") is not None \
                and event["input_position"] < len(model.records):
            for key in sorted(set(model.state_at(len(model.records))) | set(model.state_at(event["input_position"]))):
                found = wanted(model, event["input_position"], key)
                if found is not False:
                    return event, key, found
    return None


def _survivor(model, position: int, key: bytes):
    """A value ``key`` holds only after ``position``: an uncommitted write, if a recovery at ``position`` kept it."""
    value = model.state_at(len(model.records)).get(key)
    held = model.positions_with(key, value)
    return value if value is not None and held and min(held) > position else False


def _forgotten(model, position: int, key: bytes):
    """None when ``key`` held a value at ``position`` and was absent only before it: a committed write lost."""
    held = model.positions_with(key, None)
    return None if model.state_at(position).get(key) is not None and held and max(held) < position else False


def _set_contents(event: dict, key: bytes, value: bytes | None) -> None:
    contents = {k: v for k, v in event["contents"]}
    if value is None:
        contents.pop(key.decode("latin-1"), None)
    else:
        contents[key.decode("latin-1")] = value.decode("latin-1")
    event["contents"] = sorted(contents.items())


def _inject(name: str, events: list[dict]) -> tuple[str, int] | None:
    """Break one promise in ``events`` (a passing history, changed in place): the check that must catch it and
    the event where it shows, or None when this history has nothing to break that way."""
    output = next(e for e in events if e["type"] == "output")
    records = output["records"]
    if name == "duplicate-output" and records:
        records.append(records[0])
        return "exactly_once_output", output["seq"]
    if name == "lost-output" and records:
        records.pop()
        return "exactly_once_output", output["seq"]
    if name == "reordered-output":
        i = next((i for i in range(len(records) - 1) if records[i] != records[i + 1]), None)
        if i is not None:
            records[i], records[i + 1] = records[i + 1], records[i]
            return "exactly_once_output", output["seq"]
    transactional = next(e["transactional"] for e in events if e["type"] == "recover")
    if name == "dirty-read" and transactional:
        read = next((e for e in events if e["type"] == "read"), None)
        if read is not None:
            read["committed"] = "dirty"
            return "read_committed_isolation", read["seq"]
    if name in ("uncommitted-survives", "committed-forgotten"):
        found = _recovery_and_key(events, _survivor if name == "uncommitted-survives" else _forgotten)
        if found is not None:
            event, key, value = found
            _set_contents(event, key, value)
            return ("no_uncommitted_survives" if name == "uncommitted-survives" else "committed_rolls_forward"), event["seq"]
    return None


INJECTIONS = ("dirty-read", "duplicate-output", "lost-output", "reordered-output", "uncommitted-survives",
              "committed-forgotten")


@pytest.fixture(scope="module")
def runs(cli, tmp_path_factory):
    """A lifecycle campaign (its histories as Parquet) and a copy of it with the injected histories beside."""
    from eos_harness.results_parquet import write_histories

    base = tmp_path_factory.mktemp("check")
    campaign = base / "campaign"
    done = cli.start("chaos", *CAMPAIGN, "--out", campaign)
    try:
        output, _ = done.communicate(timeout=600)
    finally:
        if done.poll() is None:
            os.killpg(done.pid, signal.SIGKILL)
            done.wait()
    assert done.returncode in (0, 1), output
    results = [json.loads(line) for line in (campaign / "results.jsonl").read_text().splitlines()]
    assert write_histories(campaign, results, "store") is not None
    injected_dir = base / "injected"
    shutil.copytree(campaign, injected_dir)
    injected, caught = [], {}
    for name in INJECTIONS:
        for result in (r for r in results if r["verdict"] == "pass"):
            events = _events(result["history"])
            said = _inject(name, events)
            if said is None:
                continue
            index = 1000 + len(injected)
            path = base / f"injected-{index}.jsonl"
            path.write_text("".join(json.dumps(e) + "\n" for e in events))
            injected.append({**result, "index": index, "store": f"{result['store']}+{name}", "history": str(path),
                             "verdict": "fail"})
            caught[index] = said
            break
        else:
            raise AssertionError(f"no passing history of the campaign to inject {name} into")
    write_histories(injected_dir, results + injected, "store")
    return campaign, injected_dir, results, caught


def _recorded(result: dict) -> list[tuple]:
    """The campaign's own violations of the per-key checks (without ``atomic_commit``'s, which read the store
    before its replay: said in their observed value)."""
    return sorted(((v["check"], v["key"], v["expected"], v["observed"], v["event"]) for v in result["violations"]
                   if v["check"] in IN_SCOPE and not str(v["observed"]).endswith("(data and offset disagree)")), key=str)


def test_check_gives_the_campaigns_own_per_key_verdicts_and_catches_each_injected_broken_promise(cli, runs, tmp_path):
    campaign, injected_dir, results, caught = runs
    code, output, answer = cli.check(campaign, tmp_path / "campaign.json")
    assert code == 0, output  # the campaign's failures are mutants', expected
    by_index = {s["index"]: s for s in answer["scenarios"]}
    assert sorted(by_index) == sorted(r["index"] for r in results)
    for result in results:
        mine = by_index[result["index"]]
        assert sorted(((v["check"], v["key"], v["expected"], v["observed"], v["event"])
                       for v in mine["violations"]), key=str) == _recorded(result), result["store"]
    mutants = [r for r in results if r["store"].startswith("mutant-") and _recorded(r)]
    assert len(mutants) >= 8, [r["store"] for r in mutants]  # each caught by the same checks as the campaign's
    assert "not exercised (no history held what it judges: not passed): recovery_idempotent" in output
    code, output, answer = cli.check(injected_dir, tmp_path / "injected.json")
    assert code == 1, output
    by_index = {s["index"]: s for s in answer["scenarios"]}
    for index, (check, event) in caught.items():
        scenario = by_index[index]
        assert scenario["verdict"] == "fail" and scenario["checks"][check] == "fail", scenario
        assert {(v["check"], v["event"]) for v in scenario["violations"]} == {(check, event)}, scenario
        assert f"scenario {index} ({scenario['store']}): {check}" in output


@pytest.mark.spark
def test_the_dataframe_checker_gives_the_answer_of_the_in_process_checkers(cli, runs, tmp_path):
    _, injected_dir, results, caught = runs
    local = cli.check(injected_dir, tmp_path / "local.json")
    spark = cli.check(injected_dir, tmp_path / "spark.json", "--engine", "spark", "--master", "local[2]",
                    "--driver-memory", "1g")
    assert spark[0] == local[0] == 1, spark[1]
    assert "engine: spark on local[2]" in spark[1]
    assert (spark[2]["engine"], spark[2]["master"]) == ("spark", "local[2]")
    assert spark[2]["scenarios"] == local[2]["scenarios"]
    fired = {v["check"] for s in spark[2]["scenarios"] for v in s["violations"]}
    assert fired == set(IN_SCOPE) - {"recovery_idempotent"}, fired


@pytest.mark.spark
@pytest.mark.spark_cluster
def test_the_dataframe_checker_on_a_standalone_cluster_gives_the_answer_of_the_in_process_checkers(cli, runs, tmp_path,
                                                                                                   standalone):
    """``check --engine spark --master spark://…`` on a real standalone cluster (a master and two workers here): its
    jobs run on the workers' executors, and its answer (table, JSON, exit code) is the in-process checkers'."""
    _, injected_dir, _, caught = runs
    local = cli.check(injected_dir, tmp_path / "local.json")
    spark = cli.check(injected_dir, tmp_path / "spark.json", "--engine", "spark", "--master", standalone.url,
                    "--driver-memory", "1g")
    assert spark[0] == local[0] == 1, spark[1]
    assert f"engine: spark on {standalone.url}" in spark[1]
    assert (spark[2]["engine"], spark[2]["master"]) == ("spark", standalone.url)
    assert spark[2]["scenarios"] == local[2]["scenarios"]
    assert [line.replace(" (spark): ", " (local): ") for line in spark[1].splitlines()  # the table's title names it
            if not line.startswith("engine:")] == local[1].splitlines()
    assert all(f"scenario {index} (" in spark[1] for index in caught)
    executors = re.findall(r"Launching executor \S+ on worker (\S+)", standalone.log("master"))
    assert len(set(executors)) == 2  # an executor on each worker ran the jobs


def test_check_refuses_what_it_cannot_judge_before_anything_runs(cli, runs, tmp_path):
    campaign, _, _, _ = runs
    (tmp_path / "empty").mkdir()
    cases = [
        ((tmp_path / "nowhere",), "no such directory"),
        ((tmp_path / "empty",), "holds no Parquet histories of the lifecycle suite"),
        ((campaign, "--master", "local[2]"), "add --engine spark"),
        ((campaign, "--engine", "spark", "--master", "yarn"), "--master yarn"),
        ((campaign, "--engine", "spark", "--driver-memory", "lots"), "--driver-memory"),
        ((campaign, "--engine", "dask"), "dask"),
    ]
    for args, said in cases:
        done = cli.invoke("check", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
