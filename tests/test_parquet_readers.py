"""The readers of a campaign's results when its JSON is gone and only the Parquet results are left (a campaign
on ``--engine spark`` writes them at its end, ``RUN_DIR/parquet/results``; e.g. only ``parquet/`` was copied back
from a cluster): ``--resume`` takes the finished scenarios from them (not run again) and its ``--junit`` counts
them, and ``report`` reads them. ``results.jsonl``, written as each scenario ends, stays the source of truth when
it is there. The Parquet is written by the campaign's own writer (no Spark here: pyarrow only)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ElementTree

import pytest

CAMPAIGN = ("chaos", "--until-failure", "--stores", "mutant-read-committed-sees-overlay", "--scenarios", "4",
            "--workers", "1", "--seed", "7", "--no-report")


def _only_parquet(out) -> list[dict]:
    """Leave ``out`` with its results as Parquet only (written as a campaign on Spark writes them)."""
    from eos_harness.results_parquet import write_histories, write_results

    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    write_results(out, results, "store")
    write_histories(out, results, "store")
    (out / "results.jsonl").unlink()
    (out / "chaos.json").unlink(missing_ok=True)
    return results


@pytest.fixture(scope="module")
def stopped(cli, tmp_path_factory):
    """A campaign stopped at its first failure (--until-failure), its results as Parquet only."""
    out = tmp_path_factory.mktemp("parquet-readers") / "run"
    done = cli(*CAMPAIGN, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"--resume {out}" in done.stdout
    return out, _only_parquet(out)


def test_resume_takes_the_finished_scenarios_from_the_parquet_results_and_junit_counts_them(cli, stopped, tmp_path):
    out, before = stopped
    run = tmp_path / "run"
    shutil.copytree(out, run)
    junit = tmp_path / "resumed.xml"
    done = cli("chaos", "--resume", run, "--no-report", "--junit", junit)
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((run / "chaos.json").read_text())
    indices = [r["index"] for r in campaign["scenarios"]]
    assert indices == sorted(set(indices)) and len(indices) > len(before)
    for earlier in before:  # not run again: its result as it finished the first time
        (again,) = [r for r in campaign["scenarios"] if r["index"] == earlier["index"]]
        assert (again["started_at"], again["seconds"], again["verdict"]) == \
            (earlier["started_at"], earlier["seconds"], earlier["verdict"])
    new = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {r["index"] for r in new}.isdisjoint(r["index"] for r in before)  # only what ran now
    from eos_harness.results_parquet import read_results

    assert [r["index"] for r in read_results(run)] == indices  # the Parquet holds every scenario again
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["scenarios"] == str(len(indices)) and properties["failed"] == str(len(indices))


def test_report_reads_the_parquet_results_when_the_json_is_gone(cli, stopped, tmp_path):
    from eos_harness.report.load import load_run
    from eos_harness.report.render import headline

    out, before = stopped
    view = load_run(out)
    assert [(s.index, s.subject, s.verdict) for s in view.scenarios] == \
        [(r["index"], r["store"], r["verdict"]) for r in before]
    assert not view.problems
    assert headline(view)[1].startswith(("No failures", "Nothing")) is False
    report = tmp_path / "report.html"
    done = cli("report", out, "--out", report)
    assert done.returncode == 0, done.stdout + done.stderr
    page = report.read_text()
    assert "mutant-read-committed-sees-overlay" in page and before[0]["repro"] in page
