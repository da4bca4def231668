"""The HTML report people can trust: its numbers are the JSON's, a failure shows its violations and
repro command, a run without failures says so at the top, nothing is fetched from a network, and a
damaged run directory is reported file by file (``eos-harness report``'s exit codes 0/2/3).

The page is parsed with ``html.parser``; what a browser renders is checked in ``test_report_browser.py``
(the opt-in ``browser`` tier)."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from eos_harness.report.load import reproduce_command

ROOT = Path(__file__).resolve().parents[1]
MUTANT = "mutant-recover-keeps-uncommitted"
SPARK_RUN = ROOT / "tests" / "fixtures" / "spark-run"
SPARK_CAMPAIGN = ROOT / "tests" / "fixtures" / "spark-campaign"


class Page(HTMLParser):
    """What the tests read from the report: ids in document order, the verdict table, the coverage
    cells, the failure sections, every src/href, every script's src."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.text_of: dict[str, str] = {}
        self.rows: dict[str, dict[str, str]] = {}
        self.cells: list[dict[str, str]] = []
        self.failures: list[dict] = []
        self.links: list[str] = []
        self.script_srcs: list[str] = []
        self.fields: dict[str, str] = {}  # the summary's data-field values
        self._field: str | None = None
        self._open: list[tuple[str, str | None, dict]] = []  # (tag, id, attrs)
        self._row: str | None = None
        self._col: str | None = None
        self._capture: list[list] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("src", "href"):
            if a.get(name):
                self.links.append(a[name])
        if tag == "script":
            self.script_srcs.append(a.get("src") or "")
        if a.get("id"):
            self.ids.append(a["id"])
            self._capture.append([a["id"], tag, 0, []])
        for cap in self._capture:
            if cap[1] == tag:
                cap[2] += 1
        if "data-field" in a:
            self._field = a["data-field"]
        if tag == "tr" and "data-subject" in a:
            self._row = a["data-subject"]
            self.rows[self._row] = {}
        if tag == "td" and self._row is not None and "data-col" in a:
            self._col = a["data-col"]
        if tag == "td" and "data-scenarios" in a:
            self.cells.append(a)
        if tag == "section" and "failure" in (a.get("class") or ""):
            self.failures.append({"index": a.get("data-index"), "subject": a.get("data-subject"), "checks": [],
                                  "repro": None, "timeline": False})
        if self.failures and tag == "tr" and a.get("class") == "violation":
            self.failures[-1]["checks"].append(a["data-check"])
        if self.failures and tag == "code" and "repro" in (a.get("class") or "") and self.failures[-1]["repro"] is None:
            self.failures[-1]["repro"] = ""
            self._col = "repro"
        if self.failures and tag == "div" and a.get("class") == "timeline":
            self.failures[-1]["timeline"] = True

    def handle_endtag(self, tag):
        for cap in list(self._capture):
            if cap[1] == tag:
                cap[2] -= 1
                if cap[2] == 0:
                    self.text_of[cap[0]] = " ".join("".join(cap[3]).split())
                    self._capture.remove(cap)
        if tag == "tr":
            self._row = None
        if tag in ("td", "code"):
            self._col = None

    def handle_data(self, data):
        if self._field is not None:
            self.fields[self._field] = data.strip()
            self._field = None
        for cap in self._capture:
            cap[3].append(data)
        if self._col == "repro" and self.failures:
            self.failures[-1]["repro"] += data
        elif self._row is not None and self._col:
            self.rows[self._row][self._col] = self.rows[self._row].get(self._col, "") + data.strip()


@pytest.fixture(scope="module")
def mutant_campaign(cli, tmp_path_factory) -> Path:
    """A small real campaign in which the mutant is caught: the report is written by `chaos` itself."""
    out = tmp_path_factory.mktemp("campaign") / "run"
    done = cli("chaos", "--stores", f"memory,{MUTANT}", "--scenarios", "12", "--seed", "7", "--out", out, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"report: {out / 'report.html'}" in done.stdout
    return out


def _page(path: Path) -> tuple[str, Page]:
    html = path.read_text()
    return html, Page(html)


def test_the_report_holds_the_numbers_of_the_campaign_json(mutant_campaign):
    campaign = json.loads((mutant_campaign / "chaos.json").read_text())
    summary = campaign["summary"]
    html, page = _page(mutant_campaign / "report.html")

    assert page.fields["seed"] == str(campaign["seed"])
    assert page.fields["seconds"] == f"{campaign['seconds']} s"
    assert int(page.fields["total"]) == summary["total"] == 12
    assert int(page.fields["fail"]) == summary["failed"] > 0
    assert int(page.fields["pass"]) == sum(r["verdict"] == "pass" for r in campaign["scenarios"])
    assert int(page.fields["error"]) == len(summary["errors"])
    for store, tally in summary["stores"].items():
        row = page.rows[store]
        assert int(row["scenarios"]) == tally["scenarios"]
        assert int(row["failed"]) == tally["failed"]
        assert int(row["errors"]) == tally["errors"]
        assert row["status"] == tally["status"]
    # Every failing scenario has its section, with its own repro command and checks, and a timeline.
    failing = {str(r["index"]): r for r in campaign["scenarios"] if r["verdict"] == "fail"}
    assert {f["index"] for f in page.failures} == set(failing)
    for section in page.failures:
        result = failing[section["index"]]
        assert section["repro"] == result["repro"]
        assert section["subject"] == result["store"] == MUTANT
        # Its table: every violation up to 50 rows (the rest in the JSON), every check broken among them.
        assert {*section["checks"]} == {v["check"] for v in result["violations"]}
        assert len(section["checks"]) == min(len(result["violations"]), 50)
        if len(result["violations"]) > 50:
            assert f"{len(result['violations']) - 50} more in the JSON (every check broken has a row above)" in html
        else:
            assert sorted(section["checks"]) == sorted(v["check"] for v in result["violations"])
        assert section["timeline"]
    assert "Plotly.newPlot" in html and 'id="timeline-0"' in html
    # Coverage cells: per (fault kind, store), the scenarios whose schedule names it and their failures.
    expected: dict[tuple[str, str], list[int]] = {}
    for r in campaign["scenarios"]:
        for kind in {re.sub(r"@.*$", "", f) for f in r["schedule"]} or {"(no fault)"}:
            cell = expected.setdefault((kind, r["store"]), [0, 0])
            cell[0] += 1
            cell[1] += r["verdict"] == "fail"
    shown = {}
    fault_of_row = re.findall(r'<tr data-fault="([^"]+)">(.*?)</tr>', html, re.S)
    for fault, row in fault_of_row:
        for subject, n, failed in re.findall(r'data-subject="([^"]+)" data-scenarios="(\d+)" data-failed="(\d+)"', row):
            if int(n):
                shown[(fault, subject)] = [int(n), int(failed)]
    assert shown == expected
    # The headline: the mutant's failures were expected, nothing unexpected.
    assert "No unexpected result" in page.text_of["headline"]
    command = page.text_of["campaign-command"]
    assert "--seed 7" in command and "--scenarios 12" in command and f"memory,{MUTANT}" in command
    assert "--out" not in command


def test_the_report_fetches_nothing_from_a_network(mutant_campaign):
    html, page = _page(mutant_campaign / "report.html")
    assert page.links == [] or not [link for link in page.links if re.match(r"\s*(https?:)?//", link)], page.links
    assert set(page.script_srcs) == {""}, "every script is inline"
    assert "<link" not in html.split("</head>")[0], "no stylesheet or font from elsewhere"
    assert len(html) > 1_000_000  # plotly.js itself is in the file


def test_a_run_without_failures_says_so_at_the_top(cli, tmp_path):
    out = tmp_path / "run"
    done = cli("run", "--store", "memory", "--crash-at", "task.commit.after_eos", "--seed", "3", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    html, page = _page(out / "report.html")
    assert page.ids.index("headline") < page.ids.index("summary")
    assert page.text_of["headline"].startswith("No failures")
    assert page.failures == [] and "no-failures" in page.ids
    campaign = tmp_path / "campaign"
    assert cli("chaos", "--stores", "memory", "--scenarios", "2", "--seed", "2", "--out", str(campaign),
               "--no-report").returncode == 0
    assert not (campaign / "report.html").exists()
    done = cli.invoke("report", str(campaign))
    assert done.returncode == 0, done.stdout + done.stderr
    _, page = _page(campaign / "report.html")
    assert page.text_of["headline"] == "No failures: all 2 scenarios passed."


def test_a_truncated_history_and_a_corrupt_campaign_json_are_named_at_the_top(cli, mutant_campaign, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(mutant_campaign, damaged)
    campaign = json.loads((damaged / "chaos.json").read_text())
    first = next(r for r in campaign["scenarios"] if r["verdict"] == "fail")
    history = damaged / f"scenario-{first['index']:05d}" / "history.jsonl"
    text = history.read_text()
    history.write_text(text[: len(text) // 2])  # cut mid-line, as a full disk or a kill leaves it
    done = cli.invoke("report", str(damaged), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert str(history) in done.stdout + done.stderr
    html, page = _page(tmp_path / "r.html")
    assert page.ids.index("problems") < page.ids.index("summary")
    assert str(history) in page.text_of["problems"] and "truncated last line" in page.text_of["problems"]
    assert {f["index"] for f in page.failures} == {str(r["index"]) for r in campaign["scenarios"]
                                                   if r["verdict"] == "fail"}  # still reported, from the rest

    (damaged / "chaos.json").write_text((damaged / "chaos.json").read_text()[:500])
    done = cli.invoke("report", str(damaged))
    assert done.returncode == 3
    _, page = _page(damaged / "report.html")
    assert f"{damaged / 'chaos.json'}: is not valid JSON" in page.text_of["problems"].replace(" : ", ": ")
    assert int(page.rows["memory"]["scenarios"]) + int(page.rows[MUTANT]["scenarios"]) == 12  # from results.jsonl


def test_a_run_written_before_results_said_what_was_expected_shows_unknown_and_imports_no_suite(
        cli, mutant_campaign, tmp_path):
    """The report reads the run's files only: an older campaign cut short (no chaos.json, results without
    ``expected``) shows "unknown" for each subject and judges none of them, and no suite's code is imported."""
    import subprocess
    import sys

    old = tmp_path / "old"
    shutil.copytree(mutant_campaign, old)
    (old / "chaos.json").unlink()
    rows = [json.loads(line) for line in (old / "results.jsonl").read_text().splitlines()]
    (old / "results.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "expected"}) + "\n"
                                               for r in rows))
    probe = ("import sys; from eos_harness.report import write_report; view = write_report(sys.argv[1])[1]; "
             "print(sorted(m for m in sys.modules if m.startswith('eos_harness.suites'))); "
             "print({row.name: (row.expected, row.status) for row in view.subjects})")
    done = subprocess.run([sys.executable, "-c", probe, str(old)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported, subjects = done.stdout.splitlines()[-2:]
    assert imported == "[]"
    assert eval(subjects) == {"memory": ("unknown", "not judged (expected result unknown)"),  # noqa: S307
                              MUTANT: ("unknown", "not judged (expected result unknown)")}
    _, page = _page(old / "report.html")
    assert page.rows[MUTANT]["expected"] == "unknown"
    assert "not judged" in page.text_of["headline"] and "Unexpected" not in page.text_of["headline"]


def test_a_directory_without_a_run_is_refused_with_exit_2(cli, tmp_path):
    done = cli.invoke("report", str(tmp_path))
    assert done.returncode == 2
    assert "holds no run" in done.stdout + done.stderr and "it is empty" in done.stdout + done.stderr
    assert not (tmp_path / "report.html").exists()
    done = cli.invoke("report", str(tmp_path / "missing"))
    assert done.returncode == 2 and "not a directory" in done.stdout + done.stderr


def test_a_spark_run_report_shows_its_failure_and_kill_to_first_batch(cli, tmp_path):
    """A recorded real Spark run (the mutant sink), read without Spark, moved from where it ran."""
    run = tmp_path / "spark"
    shutil.copytree(SPARK_RUN, run)
    verdict = json.loads((run / "verdict.json").read_text())
    done = cli.invoke("report", str(run))
    assert done.returncode == 0, done.stdout + done.stderr
    html, page = _page(run / "report.html")
    assert page.text_of["headline"].startswith("The run failed: exactly_once_output")
    (section,) = page.failures
    assert section["repro"] == verdict["repro"] and section["checks"] == ["exactly_once_output"]
    assert section["timeline"] and "seconds since the scenario started" in html
    first_batch = [r["first_commit_s"] for r in verdict["runs"][1:]]
    assert "Kill to first committed batch after the restart (1 kills)" in html and first_batch
    assert 'id="plot-restart"' in html


def test_a_spark_campaign_report_holds_the_numbers_of_its_json(cli, tmp_path):
    """A recorded real Spark campaign (two scenarios, the first the mutant sink), read without Spark."""
    run = tmp_path / "spark-campaign"
    shutil.copytree(SPARK_CAMPAIGN, run)
    campaign = json.loads((run / "chaos.json").read_text())
    done = cli.invoke("report", str(run))
    assert done.returncode == 0, done.stdout
    html, page = _page(run / "report.html")
    summary = campaign["summary"]
    assert int(page.fields["total"]) == summary["total"] == len(campaign["scenarios"])
    assert int(page.fields["fail"]) == summary["failed"] == 1
    assert int(page.fields["error"]) == summary["errors"]
    by_configuration: dict[str, list[int]] = {}
    for r in campaign["scenarios"]:
        conf = r["configuration"]
        state = conf["state_provider"] + ("+changelog" if conf["changelog_checkpointing"] else "")
        name = f"{r['pipeline']} → {r['sink']} · {state} · fmt {conf['checkpoint_format']}"
        row = by_configuration.setdefault(name, [0, 0])
        row[0] += 1
        row[1] += r["verdict"] == "fail"
    assert {name: [int(row["scenarios"]), int(row["failed"])] for name, row in page.rows.items()} == by_configuration
    (section,) = page.failures
    (failing,) = [r for r in campaign["scenarios"] if r["verdict"] == "fail"]
    assert section["repro"] == failing["repro"] and section["timeline"]
    assert page.text_of["headline"].startswith("No unexpected result")
    assert page.text_of["campaign-command"] == ("eos-harness chaos --suite spark --source file --sinks file,foreach "
                                                "--seed 3 --scenarios 2")
    assert 'id="plot-restart"' in html
    # Scenarios per second, from each scenario's started_at and seconds, as for the other suites.
    assert all(isinstance(r["started_at"], float) for r in campaign["scenarios"])
    assert 'id="plot-rate"' in html and f"Scenarios per second over the campaign ({summary['total']} scenarios" in html


def test_a_spark_campaign_recorded_before_started_at_says_why_it_has_no_rate_plot(cli, tmp_path):
    """Results written by an older harness (no started_at): the report is written, and says why the plot is not."""
    run = tmp_path / "spark-campaign"
    shutil.copytree(SPARK_CAMPAIGN, run)
    for name in ("chaos.json", "results.jsonl"):
        path = run / name
        path.write_text(re.sub(r'"started_at": [0-9.]+,\s*', "", path.read_text()))
    assert "started_at" not in (run / "chaos.json").read_text() + (run / "results.jsonl").read_text()
    done = cli.invoke("report", str(run))
    assert done.returncode == 0, done.stdout
    html, _ = _page(run / "report.html")
    assert 'id="plot-rate"' not in html and 'id="plot-restart"' in html
    assert "not drawn: fewer than two scenarios record when they started (started_at" in " ".join(html.split())


# A live Spark campaign's report drawing scenarios per second: suites/spark (its CLI campaign's test).


def test_the_reproduce_command_makes_seed_and_count_explicit():
    typed = "eos-harness chaos --minutes 5 --stores memory --out runs/x --overwrite --json=a.json"
    assert reproduce_command(typed, 42, 130, []) == "eos-harness chaos --stores memory --seed 42 --scenarios 130"
    assert reproduce_command(None, 1, 3, ["eos-harness", "chaos", "--suite", "spark"]) == \
        "eos-harness chaos --suite spark --seed 1 --scenarios 3"


def test_a_check_broken_after_fifty_violations_of_another_still_has_its_row():
    from eos_harness.report.load import ScenarioView

    violations = [{"check": "atomic_commit", "key": str(i)} for i in range(70)] + [{"check": "no_wipe", "key": "x"}]
    view = ScenarioView(name="s", index=0, subject="store", verdict="fail", expected="pass", faults=[], schedule=[],
                        seed=1, workload=None, violations=violations, repro="")
    shown = view.shown_violations
    assert len(shown) == 50 and shown[-1] == {"check": "no_wipe", "key": "x"}
    assert shown[:49] == violations[:49]  # in their order
