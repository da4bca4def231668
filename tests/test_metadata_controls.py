"""The metadata suite's campaign controls and outputs, through the CLI as a user runs it: ``--junit``
read back by a JUnit parser (mutants as expected failures, the real controller's checks passing), the
HTML report in the run directory, Ctrl-C keeping and writing what finished and saying how to resume,
``--resume`` completing the same plan as an uninterrupted run, ``--until-failure`` stopping at the
first failure."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from eos_harness.suites.metadata.plan import MUTANTS
from eos_harness.suites.metadata.runner import REAL
from junitparser import JUnitXml, Skipped


def junit_cases(path: Path) -> dict[tuple[str, str], object]:
    """(testsuite, testcase) → the testcase, as a JUnit parser reads the file."""
    return {(suite.name, case.name): case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def scenario_keys(campaign: dict) -> list[tuple]:
    return [(r["index"], r["system"], r["seed"], tuple(r["schedule"]), r["verdict"]) for r in campaign["scenarios"]]


def test_junit_and_report_of_a_campaign(cli, tmp_path):
    out, junit = tmp_path / "chaos", tmp_path / "chaos.xml"
    done = cli("chaos", "--suite", "metadata", "--scenarios", "14", "--seed", "7", "--out", out, "--junit", junit)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    campaign = json.loads((out / "chaos.json").read_text())
    cases = junit_cases(junit)
    assert {suite for suite, _ in cases} == {REAL, *MUTANTS}
    # The real controller: every check a passing testcase, and every scenario ran to its end.
    real = [case for (suite, _), case in cases.items() if suite == REAL]
    assert len(real) > 2 and all(case.is_passed for case in real)
    # Each mutant: the check that names its mistake an expected failure with its evidence and replay,
    # and the testcase "caught" passing.
    for mutant, (_, check) in MUTANTS.items():
        results = list(cases[(mutant, check)].result)
        assert len(results) == 1 and isinstance(results[0], Skipped), (mutant, check, results)
        assert results[0].type == "expected-failure"
        assert "observed=" in results[0].message
        repro = next(r["repro"] for r in campaign["scenarios"] if r["system"] == mutant)
        assert f"replay: {repro}" in results[0].message
        assert cases[(mutant, "caught")].is_passed
    assert not [case for case in cases.values() if not case.is_passed and not case.is_skipped], "a JUnit failure"
    report = out / "report.html"
    assert f"report: {report}\n" in done.stdout  # with no file named as damaged
    html = report.read_text()
    assert "controller-skips-abort" in html and "no_partial_publish" in html
    # Read again from the run's files: the readers' "published" events (their "at" names where they published)
    # are whole events, so a healthy campaign reports with exit 0 and lists no problem.
    again = cli.invoke("report", out, "--out", tmp_path / "again.html")
    assert again.returncode == 0 and "could not be read" not in again.stdout, again.stdout
    assert "could not be read in full" not in (tmp_path / "again.html").read_text()
    # A published event whose "at" is no place a reader publishes is damage, and is named.
    history = out / "scenario-00000" / "history.jsonl"
    lines = history.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "published")
    lines[number] = json.dumps({**json.loads(lines[number]), "at": "x"})
    history.write_text("\n".join(lines) + "\n")
    damaged = cli.invoke("report", out, "--out", tmp_path / "damaged.html")
    assert damaged.returncode == 3 and f"{history}: line {number + 1} of {len(lines)} 'at' is a string (\"x\")" \
        in damaged.stdout, damaged.stdout


def test_ctrl_c_writes_everything_and_resume_completes_the_uninterrupted_plan(cli, tmp_path):
    args = ["--scenarios", "20", "--seed", "7", "--workers", "2"]
    out, junit = tmp_path / "stopped", tmp_path / "stopped.xml"
    proc = cli.start("chaos", "--suite", "metadata", *args, "--out", out, "--junit", junit)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if results.exists() and results.read_text().splitlines():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert f"to resume: eos-harness chaos --suite metadata --resume {out}" in output
    stopped = json.loads((out / "chaos.json").read_text())
    assert stopped["stopped"]["why"] == "SIGINT"
    kept = scenario_keys(stopped)
    assert 1 <= len(kept) < 20
    assert sorted(json.loads(line)["index"] for line in results.read_text().splitlines()) == [k[0] for k in kept]
    ran = {r["system"] for r in stopped["scenarios"]}
    assert {suite for suite, case in junit_cases(junit) if case == "completed"} == ran
    assert (out / "report.html").exists()

    refused = cli("chaos", "--suite", "metadata", "--resume", str(out), "--scenarios", "5")
    assert refused.returncode == 2 and "keeps the options" in refused.stderr, refused.stderr
    resumed = cli("chaos", "--suite", "metadata", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "resuming the campaign" in resumed.stdout
    whole = cli("chaos", "--suite", "metadata", *args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-2000:]

    union = json.loads((out / "chaos.json").read_text())
    uninterrupted = json.loads((tmp_path / "whole" / "chaos.json").read_text())
    assert scenario_keys(union) == scenario_keys(uninterrupted)
    assert [k[0] for k in scenario_keys(union)] == list(range(20))
    assert set(kept) <= set(scenario_keys(union))
    assert union["summary"] == uninterrupted["summary"] and "stopped" not in union
    cases = junit_cases(junit)  # rewritten by the resume, at the path the campaign kept
    assert all(cases[(mutant, "caught")].is_passed for mutant in MUTANTS)
    again = cli("chaos", "--suite", "metadata", "--resume", str(out))
    assert again.returncode == 2 and "ran to its end" in again.stderr


def test_until_failure_with_only_mutants_stops_at_the_first_failure(cli, tmp_path):
    out = tmp_path / "chaos"
    done = cli("chaos", "--suite", "metadata", "--systems", "reader-publishes-batches,interleaved-transactions",
               "--until-failure", "--scenarios", "10", "--seed", "7", "--workers", "1", "--out", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]  # the mutant was caught, as expected
    campaign = json.loads((out / "chaos.json").read_text())
    assert [r["verdict"] for r in campaign["scenarios"]] == ["fail"], "it must stop at the first failure"
    assert campaign["stopped"]["why"] == "until-failure"
    repro = campaign["scenarios"][0]["repro"]
    assert repro in campaign["stopped"]["message"] and repro in done.stdout
    assert f"--resume {out}" in done.stdout
    assert (out / "report.html").exists()
