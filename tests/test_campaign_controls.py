"""Campaign controls and JUnit, through the CLI as a user runs it: Ctrl-C keeps and writes what
finished and says how to resume; ``--resume`` completes the same plan; ``--until-failure`` stops at
the failure it looks for; ``--junit`` is read back by a JUnit parser (``junitparser``) as CI reads it.

A "real" store with a bug is a mutant given by its factory (``eos_harness.stores.mutants:…``): the
harness judges a ``module:function`` store as a user's store, expected to pass.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from pathlib import Path

import psutil
from junitparser import Failure, JUnitXml, Skipped

from tests.conftest import interrupt

BUGGY_REAL_STORE = "eos_harness.stores.mutants:RecoverKeepsUncommitted"  # fails within its first scenarios


def wait_for_results(run_dir: Path, count: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    results = run_dir / "results.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and len(results.read_text().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} results after {timeout} s (exit {proc.poll()})")


# How long a campaign may take to stop once told (Ctrl-C, SIGINT, its first failure): its running
# scenarios are killed, not waited for. Generous for a loaded 2-core machine running three test
# workers (11.5 s was seen), far below what a campaign that went on would take (the rest of its
# one or five minutes).
STOP_BOUND_S = 25

def scenario_keys(campaign: dict) -> list[tuple]:
    return [(r["index"], r["store"], r["workload"], tuple(r["schedule"]), r["seed"], r["verdict"])
            for r in campaign["scenarios"]]


def junit_cases(path: Path) -> dict[tuple[str, str], object]:
    """(testsuite, testcase) → the testcase, as a JUnit parser reads the file."""
    return {(suite.name, case.name): case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def results_of(case) -> list:
    return list(case.result)


def test_ctrl_c_keeps_what_finished_writes_junit_kills_everything_and_resume_continues_the_plan(cli, tmp_path):
    from eos_harness.models.workloads import CAMPAIGN_WORKLOADS
    from eos_harness.suites.lifecycle.plan import campaign_plan, default_stores

    out, junit = tmp_path / "chaos", tmp_path / "chaos.xml"
    proc = cli.start("chaos", "--minutes", "1", "--seed", "7", "--workers", "2", "--out", str(out), "--junit", str(junit))
    time.sleep(10)  # Ctrl-C 10 s into a one-minute campaign
    wait_for_results(out, 1, proc)  # on a loaded machine the first scenario may take longer
    output, took, children = interrupt(proc)
    assert proc.returncode == 130, output
    assert took < STOP_BOUND_S, f"Ctrl-C took {took:.1f} s to stop the campaign"
    assert children, "the campaign had started no process: nothing was tested"
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE], "left running"
    assert f"to resume: eos-harness chaos --suite lifecycle --resume {out}" in output
    campaign = json.loads((out / "chaos.json").read_text())
    assert campaign["stopped"]["why"] == "SIGINT"
    finished = scenario_keys(campaign)
    assert finished
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["index"] for line in lines) == [k[0] for k in finished]
    cases = junit_cases(junit)  # the JUnit file of the stopped campaign: its stores that ran
    ran = {r["store"] for r in campaign["scenarios"]}
    assert {suite for suite, _ in cases if (suite, "completed") in cases} == ran
    report = (out / "report.html").read_text()  # the report of what finished, written on the stop
    assert f'<dd data-field="total">{len(finished)}</dd>' in report, "the report does not count what was kept"

    # Resumed, then stopped again (SIGTERM) a few seconds in: the scenarios are the plan's, by index,
    # those finished before are kept as they were, none ran twice.
    proc = cli.start("chaos", "--resume", str(out))
    wait_for_results(out, len(lines) + 1, proc)
    output, _, _ = interrupt(proc, signal.SIGTERM)
    assert proc.returncode == 143, output
    assert "resuming the campaign" in output and f"--resume {out}" in output
    resumed = json.loads((out / "chaos.json").read_text())
    keys = scenario_keys(resumed)
    assert len(keys) > len(finished) and set(finished) <= set(keys)
    assert len({k[0] for k in keys}) == len(keys)
    expected_plan = campaign_plan(7, default_stores(), list(CAMPAIGN_WORKLOADS))
    by_index = {}
    for index, scenario in enumerate(expected_plan):
        if index > max(k[0] for k in keys):
            break
        by_index[index] = (scenario.store, scenario.workload, tuple(map(str, scenario.schedule)), scenario.seed)
    assert [k[1:5] for k in keys] == [by_index[k[0]] for k in keys]
    assert json.loads((out / "campaign.json").read_text())["spent_seconds"] > 8


def test_resume_completes_an_interrupted_campaign_as_an_uninterrupted_run_would(cli, tmp_path):
    args = ["--stores", "mutant-split-offsets-write,memory", "--scenarios", "12", "--seed", "7", "--workers", "2"]
    out, junit = tmp_path / "stopped", tmp_path / "stopped.xml"
    proc = cli.start("chaos", *args, "--out", str(out), "--junit", str(junit))
    wait_for_results(out, 3, proc)
    output, _, _ = interrupt(proc)
    assert proc.returncode == 130, output
    stopped = scenario_keys(json.loads((out / "chaos.json").read_text()))
    assert 3 <= len(stopped) < 12

    refused = cli("chaos", "--resume", str(out), "--seed", "8")
    assert refused.returncode == 2 and "--seed" in refused.stderr and "keeps the options" in refused.stderr
    resumed = cli("chaos", "--resume", str(out))  # the JUnit path too is the campaign's own
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    whole = cli("chaos", *args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stdout + whole.stderr

    union = json.loads((out / "chaos.json").read_text())
    uninterrupted = json.loads((tmp_path / "whole" / "chaos.json").read_text())
    assert scenario_keys(union) == scenario_keys(uninterrupted)
    assert [k[0] for k in scenario_keys(union)] == list(range(12))
    assert set(stopped) <= set(scenario_keys(union))
    assert union["summary"] == uninterrupted["summary"]
    assert "stopped" not in union
    again = cli("chaos", "--resume", str(out))
    assert again.returncode == 2 and "ran to its end" in again.stderr

    # The JUnit file rewritten by the resume: the mutant's broken check is an expected failure with
    # its evidence, it is caught; every testcase of the real store passes, but a check no scenario exercised
    # or does not apply to the store, which is skipped saying so: never passed.
    cases = junit_cases(junit)
    atomic = results_of(cases[("mutant-split-offsets-write", "atomic_commit")])
    assert len(atomic) == 1 and isinstance(atomic[0], Skipped) and atomic[0].type == "expected-failure"
    assert "eos-harness run --store mutant-split-offsets-write" in atomic[0].message
    assert "observed=" in atomic[0].message
    assert cases[("mutant-split-offsets-write", "caught")].is_passed
    memory = [case for (suite, _), case in cases.items() if suite == "memory"]
    skipped = [case for case in memory if not case.is_passed]
    assert memory and len(skipped) < len(memory)
    assert all(isinstance(r, Skipped) and r.message.startswith(("not exercised", "not applicable")) for c in skipped for r in results_of(c))


def test_until_failure_stops_a_mutant_campaign_at_its_first_failure(cli, tmp_path):
    out, junit = tmp_path / "chaos", tmp_path / "chaos.xml"
    proc = cli.start("chaos", "--until-failure", "--stores", "mutant-split-offsets-write", "--seed", "7",
                 "--minutes", "5", "--out", str(out), "--junit", str(junit))
    first_failure = None
    while proc.poll() is None:  # when the failure is recorded, as results.jsonl shows it
        results = out / "results.jsonl"
        if first_failure is None and results.exists() and '"verdict": "fail"' in results.read_text():
            first_failure = time.monotonic()
        time.sleep(0.1)
    stopped_after = time.monotonic() - (first_failure or time.monotonic())
    output = proc.stdout.read()
    assert proc.returncode == 0, output  # the mutant was caught: what was expected
    campaign = json.loads((out / "chaos.json").read_text())
    failing = [r for r in campaign["scenarios"] if r["verdict"] == "fail"]
    assert len(failing) == 1, "it must stop at the first failure"
    assert campaign["stopped"]["why"] == "until-failure"
    assert failing[0]["repro"] in campaign["stopped"]["message"] and failing[0]["repro"] in output
    assert stopped_after < STOP_BOUND_S, f"it went on for {stopped_after:.1f} s after the failure"
    assert f"--resume {out}" in output
    case = junit_cases(junit)[("mutant-split-offsets-write", "atomic_commit")]
    assert isinstance(results_of(case)[0], Skipped)


def test_until_failure_goes_past_caught_mutants_and_stops_at_a_real_store_failing(cli, tmp_path):
    out, junit = tmp_path / "chaos", tmp_path / "chaos.xml"
    # One worker: the stores take turns from the first scenario on, the mutant's first runs (and fails: it fails
    # in every scenario) before the real store's first.
    result = cli("chaos", "--until-failure", "--stores", f"mutant-read-committed-sees-overlay,{BUGGY_REAL_STORE}",
                 "--seed", "7", "--minutes", "5", "--workers", "1", "--out", str(out), "--junit", str(junit))
    assert result.returncode == 1, result.stdout + result.stderr  # a store expected to pass failed
    campaign = json.loads((out / "chaos.json").read_text())
    caught = [r for r in campaign["scenarios"] if r["store"] == "mutant-read-committed-sees-overlay"]
    real = [r for r in campaign["scenarios"] if r["store"] == BUGGY_REAL_STORE]
    assert any(r["verdict"] == "fail" for r in caught), "the mutant's failures did not stop the campaign"
    assert [r["verdict"] for r in real][-1:] == ["fail"] and "fail" not in [r["verdict"] for r in real][:-1]
    real = real[-1:]  # the failure it stopped at
    assert real[0]["repro"] in campaign["stopped"]["message"]

    # JUnit: one failure per check the real store broke, each with its violation and replay command.
    cases = junit_cases(junit)
    broken = sorted({v["check"] for v in real[0]["violations"]})
    failures = {name: results_of(case) for (suite, name), case in cases.items()
                if suite == BUGGY_REAL_STORE and any(isinstance(r, Failure) for r in results_of(case))}
    assert sorted(failures) == broken
    for name in broken:
        (failure,) = failures[name]
        assert isinstance(failure, Failure)
        assert real[0]["repro"] in failure.message and "expected=" in failure.message
        assert real[0]["repro"] in failure.text
    assert all(not isinstance(r, Failure) for (suite, _), case in cases.items()
               if suite == "mutant-read-committed-sees-overlay" for r in results_of(case))


def test_a_lifecycle_campaign_that_allows_a_known_difference_stays_green_and_its_replays_waive_the_same(cli, tmp_path):
    """``chaos --allow CHECK`` on the lifecycle suite (a mutant there is caught by any check; without --allow this
    one is, in every scenario: the test above): the mutant whose mistake shows only in that check is not exercised (not a hole in the
    harness, not caught; JUnit ``caught`` skipped with why), the campaign passes, the summary and the terminal say
    how often the check fired, and a scenario's replay (``run … --allow``) waives the same. ``run --allow`` of a
    check the suite cannot waive is a usage error."""
    mutant = "mutant-read-committed-sees-overlay"
    args = ("chaos", "--stores", f"memory,{mutant}", "--scenarios", "4", "--seed", "1", "--no-report")
    out, junit = tmp_path / "chaos", tmp_path / "chaos.xml"
    done = cli(*args, "--out", out, "--junit", junit, "--allow", "read_committed_isolation")
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    summary, scenarios = campaign["summary"], campaign["scenarios"]
    tally = summary["stores"][mutant]
    assert (tally["status"], tally["failed"], summary["unexpected"]) == ("not exercised", 0, [])
    fired = sum(r["waived"].get("read_committed_isolation", 0) for r in scenarios)
    assert fired > 0 and summary["waived"] == {"read_committed_isolation": fired}
    assert f"waived: read_committed_isolation (--allow; fired {fired} times in " in done.stdout
    assert f"not exercised: {mutant}: its mistake showed only in read_committed_isolation" in done.stdout
    assert "--allow read_committed_isolation" in campaign["repro"]
    assert all("--allow read_committed_isolation" in r["repro"] for r in scenarios)
    cases = junit_cases(junit)
    (skipped,) = results_of(cases[(mutant, "caught")])
    assert isinstance(skipped, Skipped) and "not exercised" in skipped.message
    (waived,) = results_of(cases[("memory", "read_committed_isolation")])
    assert isinstance(waived, Skipped) and waived.message.startswith("waived: --allow read_committed_isolation")
    first = next(r for r in scenarios if r["store"] == mutant and r["waived"])
    replay = cli(*shlex.split(first["repro"])[1:], "--out", tmp_path / "replay", "--no-report")
    assert replay.returncode == 0, replay.stdout + replay.stderr  # passes as its scenario did, the same fired
    assert f"waived: read_committed_isolation (--allow; fired {first['waived']['read_committed_isolation']} " \
           "time" in replay.stdout
    wrong = cli.invoke("run", "--store", "memory", "--allow", "task_finishes", "--out", tmp_path / "no")
    assert wrong.returncode == 2 and "seed:" not in wrong.stdout and "read_committed_isolation" in wrong.stderr


def test_junit_path_is_checked_before_anything_runs(cli, tmp_path):
    result = cli("chaos", "--scenarios", "1", "--out", str(tmp_path / "out"), "--junit",
                 str(tmp_path / "missing" / "x.xml"))
    assert result.returncode == 2 and "--junit" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "out").exists()


def test_run_junit_has_a_failure_per_broken_check(cli, tmp_path):
    command = ["run", "--store", BUGGY_REAL_STORE, "--crash-at", "task.process.mid_batch@11", "--seed", "1"]
    junit = tmp_path / "run.xml"
    result = cli(*command, "--out", str(tmp_path / "run"), "--junit", str(junit))
    assert result.returncode == 1, result.stdout + result.stderr
    cases = junit_cases(junit)
    failed = [name for (_, name), case in cases.items() if not case.is_passed]
    assert failed and all(f"--store {BUGGY_REAL_STORE}" in results_of(cases[(BUGGY_REAL_STORE, name)])[0].message
                          for name in failed)
    assert cases[(BUGGY_REAL_STORE, "completed")].is_passed


def test_verify_junit_has_a_passing_testcase_per_conformance_check(cli, tmp_path):
    from eos_harness.suites.conformance.runner import CHECKS

    junit = tmp_path / "verify.xml"
    result = cli("verify", "memory", "--seed", "1", "--examples", "1", "--steps", "5", "--junit", str(junit))
    assert result.returncode == 0, result.stdout + result.stderr
    cases = junit_cases(junit)
    conformance = {name: case for (suite, name), case in cases.items() if suite == "memory"}
    assert sorted(conformance) == sorted(CHECKS)
    # Memory is not persistent and has no restore of its own: the checks that cannot fire on it are
    # skipped with why; every other one was exercised and passed.
    not_applicable = {"atomic_commit", "committed_durable", "clean_close_durable", "recover_trust", "offset_convention"}
    assert all(case.is_passed for name, case in conformance.items() if name not in not_applicable)
    for name in not_applicable:
        (skipped,) = results_of(conformance[name])
        assert isinstance(skipped, Skipped) and skipped.message.startswith("not applicable: the store ")
    # The offsets suite has its own testsuite: a testcase per promise, passed where it applies to the
    # store, skipped with the reason where it does not (memory is neither persistent nor managing offsets).
    from eos_harness.suites.offsets.checks import PROMISES

    offsets = {name: case for (suite, name), case in cases.items() if suite == "memory (offsets)"}
    assert sorted(offsets) == sorted(PROMISES)
    assert all(case.is_passed or case.is_skipped for case in offsets.values())
    assert offsets["never_committed_is_none"].is_passed and offsets["store_directory"].is_passed
    assert "not persistent" in results_of(offsets["migration_keeps_offsets"])[0].message
    assert set(cases) == {("memory", n) for n in conformance} | {("memory (offsets)", n) for n in offsets}


def test_spark_results_in_junit_count_as_the_verdict_counts(tmp_path):
    """The Spark mapping over results shaped as the runner writes them: a broken check of a real sink
    is a failure with its repro; an at-least-once duplicate fails only under --strict; the mutant
    sink caught is an expected failure; a refused configuration is skipped; an error is an error."""
    from eos_harness.junit import write_junit
    from eos_harness.suites.spark.junit import spark_suites
    from eos_harness.verdict import Violation

    def result(sink: str, violations: list[Violation], **fields) -> dict:
        return {"pipeline": "count", "sink": sink, "seed": 5, "schedule": ["sink@2"], "strict": False,
                "configuration": {"state_provider": "rocksdb", "changelog_checkpointing": False,
                                  "checkpoint_format": 1, "source": "file"},
                "repro": f"eos-harness run --suite spark --pipeline count --sink {sink} --seed 5",
                "verdict": "fail" if any(not v.strict_only for v in violations) else "pass",
                "violations": [v.to_json() for v in violations], "expected": "pass", **fields}

    lost = Violation("no_loss", '["a", 1]', "1×", "0× (lost)", 12)
    duplicate = Violation("exactly_once_output", '["b", 2]', "1×", "2×", 14, strict_only=True)
    results = [result("file", [lost]), result("kafka", [duplicate]),
               result("foreach-nocheck", [lost], expected="caught"),
               result("foreach", [], verdict="not_applicable", reason="Spark refuses it"),
               {**result("foreach", []), "pipeline": "dedup", "verdict": "error", "error": "RuntimeError: no Java"}]
    for strict in (False, True):
        path = tmp_path / f"spark-{strict}.xml"
        assert write_junit(path, spark_suites(results, strict), "spark") is None
        cases = junit_cases(path)
        (failure,) = results_of(cases[("count/file/rocksdb/fmt1", "no_loss")])
        assert isinstance(failure, Failure) and "--sink file" in failure.message and "0× (lost)" in failure.message
        kafka = results_of(cases[("count/kafka/rocksdb/fmt1", "exactly_once_output")])
        assert bool(kafka) == strict and all(isinstance(r, Failure) for r in kafka)
        (caught,) = results_of(cases[("count/foreach-nocheck/rocksdb/fmt1", "no_loss")])
        assert isinstance(caught, Skipped) and caught.type == "expected-failure"
        assert cases[("count/foreach-nocheck/rocksdb/fmt1", "caught")].is_passed
        assert cases[("count/foreach/rocksdb/fmt1", "not_applicable")].is_skipped
        assert cases[("dedup/foreach/rocksdb/fmt1", "completed")].is_error


def test_a_mutant_whose_mistake_sits_at_one_crash_point_is_caught_in_its_first_scenario(cli, tmp_path):
    # Its mistake lies at store.commit.between_data_and_offsets, which no other store of the campaign
    # reaches: the campaign draws it first for that store, at a commit with data in flight, and the
    # JSON says how many of the mutant's scenarios ran up to its first failure.
    out = tmp_path / "chaos"
    result = cli("chaos", "--stores", "rocksdb-indexed,mutant-split-offsets-write", "--scenarios", "2",
                 "--seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    stores = json.loads((out / "chaos.json").read_text())["summary"]["stores"]
    assert stores["mutant-split-offsets-write"]["status"] == "caught"
    assert stores["mutant-split-offsets-write"]["scenarios_to_first_catch"] == 1
    assert "scenarios_to_first_catch" not in stores["rocksdb-indexed"]  # a store expected to pass: no catch to count
    # Per store, the scenarios whose history met each check's condition: the real store's one scenario
    # restarted after crashes (atomic_commit met); nothing froze an instance, so zombie_fenced was not
    # exercised, and the campaign says so rather than count it passed.
    indexed = stores["rocksdb-indexed"]
    assert indexed["exercised"]["atomic_commit"] == indexed["exercised"]["exactly_once_output"] == 1
    assert "zombie_fenced" in indexed["not_exercised"] and "atomic_commit" not in indexed["not_exercised"]
    assert "not exercised (no scenario met the check's condition: not passed): " in result.stdout
    assert "no scenario ran a global store's workload" in result.stdout  # partitions_one_commit: 2 scenarios reach none


def test_a_short_campaign_exercises_every_check_that_applies_to_each_correct_store(cli, tmp_path):
    # Five scenarios per store: each one's early scenarios meet every lifecycle check's condition (a
    # frozen zombie, a crash on the global store's workload among them). A check that cannot fire on a
    # store is not applicable, with why (a store that is not transactional or not persistent; a window
    # store, which no global workload feeds), never counted not exercised nor passed.
    out = tmp_path / "chaos"
    result = cli("chaos", "--stores", "memory,rocksdb-indexed,memory-window", "--workloads",
                 "counter,global,tumbling-count", "--scenarios", "15", "--seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    stores = json.loads((out / "chaos.json").read_text())["summary"]["stores"]
    assert {s: t["not_exercised"] for s, t in stores.items()} == {s: [] for s in stores}
    assert "not exercised" not in result.stdout
    assert stores["rocksdb-indexed"]["not_applicable"] == {}
    assert stores["rocksdb-indexed"]["exercised"]["zombie_fenced"] >= 1
    assert stores["rocksdb-indexed"]["exercised"]["partitions_one_commit"] >= 1
    assert set(stores["memory"]["not_applicable"]) == {"atomic_commit", "no_wipe"}
    assert "neither transactional nor persistent" in stores["memory"]["not_applicable"]["atomic_commit"]
    assert set(stores["memory-window"]["not_applicable"]) == {"atomic_commit", "no_wipe", "partitions_one_commit"}
    assert "window store" in stores["memory-window"]["not_applicable"]["partitions_one_commit"]
    assert "atomic_commit" not in stores["memory"]["exercised"]  # neither exercised nor passed: not applicable


def test_a_campaign_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    """A shell starts a background job with SIGINT ignored (and a CI runner may start its tests so): a
    ``kill -INT`` still stops the campaign as Ctrl-C does (exit 130, what finished kept)."""
    from tests.conftest import EOS_BIN

    out = tmp_path / "chaos"
    proc = subprocess.Popen([EOS_BIN, "chaos", "--minutes", "1", "--seed", "3", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_for_results(out, 1, proc)
        output, took, _ = interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, output
    assert took < STOP_BOUND_S, f"SIGINT took {took:.1f} s to stop the campaign"
    assert json.loads((out / "chaos.json").read_text())["stopped"]["why"] == "SIGINT"
