"""The report as a browser shows it (opt-in tier ``browser``: ``make test-browser`` installs Debian's
``chromium`` when it is missing): headless Chromium loads the file with its network switched off,
runs its scripts, and the rendered page has the failure's timeline (plotly drew its SVG), its
violations and its repro command. A screenshot of each report is kept in the test's directory,
and in ``$EOS_REPORT_SHOTS`` when set. Every suite's campaign report is checked: lifecycle, metadata
and Spark.

The Spark report is of a recorded real Spark campaign (``tests/fixtures/spark-campaign``: the
mutant sink, caught, and a real sink that passed): a live Spark campaign takes minutes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
MUTANT = "mutant-recover-keeps-uncommitted"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--virtual-time-budget=10000"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Chromium is not installed: run `make test-browser` (it installs Debian's chromium) or "
                    "`apt-get install -y chromium`")
    return found


def _browse(report: Path, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{mode[0].lstrip('-').split('=')[0]}"
    done = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *mode, report.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _rendered(report: Path, tmp: Path, name: str) -> str:
    """The DOM after the page's scripts ran; and a screenshot of the page."""
    dom = _browse(report, tmp, "--dump-dom").stdout
    shot = tmp / f"{name}.png"
    _browse(report, tmp, f"--screenshot={shot}", "--window-size=1400,3200")
    assert shot.stat().st_size > 20_000, "a blank screenshot"
    if os.environ.get("EOS_REPORT_SHOTS"):
        keep = Path(os.environ["EOS_REPORT_SHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / shot.name)
    return dom


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).replace("&gt;", ">").replace("&amp;", "&").split())


def _assert_failure_rendered(dom: str, result: dict) -> None:
    section = re.search(r'<section class="failure[^"]*" id="failure-0".*?</section>', dom, re.S)
    assert section, "no failure section"
    section_html = section.group(0)
    timeline = re.search(r'<div id="timeline-0" class="[^"]*js-plotly-plot[^"]*"', section_html)
    assert timeline, "plotly did not draw the timeline"
    assert section_html.count('class="main-svg"') >= 1, "the timeline has no SVG"
    assert 'class="scatterlayer' in section_html and "violation" in section_html  # the violations' trace
    text = _text(section_html)
    assert result["repro"] in text
    for violation in result["violations"][:5]:
        assert violation["check"] in text
    assert "copy" in text


def test_a_lifecycle_campaign_report_in_chromium(cli, tmp_path):
    out = tmp_path / "campaign"
    done = cli("chaos", "--stores", f"memory,{MUTANT}", "--scenarios", "12", "--seed", "7", "--out", out, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    failing = sorted((r for r in campaign["scenarios"] if r["verdict"] == "fail"), key=lambda r: r["index"])
    dom = _rendered(out / "report.html", tmp_path, "lifecycle-campaign")
    _assert_failure_rendered(dom, failing[0])
    assert 'id="plot-recovery" class="plotly-graph-div js-plotly-plot"' in dom
    assert 'id="plot-rate" class="plotly-graph-div js-plotly-plot"' in dom
    assert "No unexpected result" in _text(dom.split('id="summary-title"')[0])


def test_a_spark_campaign_report_in_chromium(tmp_path):
    run = tmp_path / "spark-campaign"
    shutil.copytree(ROOT / "tests" / "fixtures" / "spark-campaign", run)
    from eos_harness.report import write_report

    report, _ = write_report(run)
    campaign = json.loads((run / "chaos.json").read_text())
    (failing,) = [r for r in campaign["scenarios"] if r["verdict"] == "fail"]
    dom = _rendered(report, tmp_path, "spark-campaign")
    _assert_failure_rendered(dom, failing)
    assert 'id="plot-restart" class="plotly-graph-div js-plotly-plot"' in dom
    assert 'id="plot-rate" class="plotly-graph-div js-plotly-plot"' in dom
    assert "No unexpected result" in _text(dom.split('id="summary-title"')[0])


def test_a_metadata_campaign_report_in_chromium(cli, tmp_path):
    """The real controller and every mutant: each mutant's failure has its drawn timeline, violations and
    repro command; scenarios per second is drawn; the mutants were caught, so nothing is unexpected."""
    out = tmp_path / "campaign"
    done = cli("chaos", "--suite", "metadata", "--scenarios", "14", "--seed", "7", "--out", out, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((out / "chaos.json").read_text())
    failing = sorted((r for r in campaign["scenarios"] if r["verdict"] == "fail"), key=lambda r: r["index"])
    assert {r["system"] for r in failing} == {s for s, t in campaign["summary"]["systems"].items()
                                              if t["expected"] == "fail"}
    dom = _rendered(out / "report.html", tmp_path, "metadata-campaign")
    _assert_failure_rendered(dom, failing[0])
    for n, result in enumerate(failing):  # every mutant's section, in order, with its own repro
        section = re.search(rf'<section class="failure[^"]*" id="failure-{n}".*?</section>', dom, re.S)
        assert section and result["repro"] in _text(section.group(0)), result["system"]
        assert "mutant caught (expected)" in _text(section.group(0)), result["system"]  # not "unexpected failure"
        assert re.search(rf'<div id="timeline-{n}" class="[^"]*js-plotly-plot', section.group(0)), result["system"]
    assert 'id="plot-rate" class="plotly-graph-div js-plotly-plot"' in dom
    assert "No unexpected result" in _text(dom.split('id="summary-title"')[0])
