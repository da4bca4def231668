"""Damaged runs are read, not crashed on: ``eos-harness report`` (and ``chaos --resume``) name each
damaged file and what is wrong, and go on with what they can read; never a traceback.

The run directories are made once, by real small runs: a chaos campaign (a mutant caught, a store of
the user's that fails its probe), a campaign SIGKILLed in its middle, a failing ``run``, and the
recorded Spark run and campaign of ``tests/fixtures``. Each probe of issue 22 is a subprocess test;
the fuzz (``tests/run_dir_fuzz.py``) cuts, flips, retypes and unpermits every file of them: a seeded
sample in the default tier, every variant (over 1,000) in ``-m slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import EOS_BIN
from tests.test_report import Page

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MUTANT = "mutant-recover-keeps-uncommitted"
PROBE_FAILS = "bad_stores:put_raises"  # a user's store that raises in its probe: a result of its own


@pytest.fixture(scope="module")
def short_tmp():
    """The commands' temp directory: short, for multiprocessing's forkserver binds a Unix socket in it."""
    path = tempfile.mkdtemp(prefix="eos-dmg-", dir="/tmp")
    yield {"TMPDIR": path, "COLUMNS": "300"}
    shutil.rmtree(path, ignore_errors=True)


def _without_dac_override() -> list[str]:
    """The prefix that runs a command without the capabilities that let root read a mode-000 file (so
    that "unreadable" means unreadable); nothing when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "running as root, the unreadable-file probes need setpriv (util-linux) to drop CAP_DAC_OVERRIDE"
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.fixture(scope="module")
def runs(cli, short_tmp, tmp_path_factory) -> dict[str, Path]:
    """Real run directories, made once: name -> directory (never changed by a test: copy it first)."""
    base = tmp_path_factory.mktemp("runs")
    made = {}
    # Seed 1: the mutant passes its first five scenarios (its store's own crash points come first), then is caught.
    done = cli("chaos", "--stores", f"{MUTANT},{PROBE_FAILS}", "--workloads", "counter,tombstones",
               "--scenarios", "7", "--seed", "1", "--out", "campaign", "--no-report", cwd=base, env=short_tmp)
    assert done.returncode == 1, done.stdout + done.stderr  # the user's store failed its probe: unexpected
    made["campaign"] = base / "campaign"

    proc = cli.start("chaos", "--stores", MUTANT, "--workloads", "counter,tombstones", "--scenarios", "12",
                     "--seed", "1", "--workers", "1", "--out", "killed", "--no-report", cwd=base, env=short_tmp)
    results = base / "killed" / "results.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count("\n") >= 7):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the campaign and everything it started, mid-scenario
    proc.communicate(timeout=30)
    assert not (base / "killed" / "chaos.json").exists() and results.read_text().count("\n") >= 7
    made["killed"] = base / "killed"

    done = cli("run", "--store", MUTANT, "--crash-at", "task.process.mid_batch@8", "--seed", "1", "--out", "run",
               "--no-report", cwd=base, env=short_tmp)
    assert done.returncode == 1, done.stdout + done.stderr
    made["run"] = base / "run"
    for name in ("spark-run", "spark-campaign"):
        shutil.copytree(FIXTURES / name, base / name)
        made[name] = base / name
    return made


def _copy(runs: dict[str, Path], name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(runs[name], tmp_path / name, symlinks=True))


@pytest.fixture
def report(cli, short_tmp):
    """``eos-harness report RUN_DIR …``; ``unprivileged``: without the capabilities that let root read
    what its mode forbids."""

    def run(run_dir: Path, *args: str, unprivileged: bool = False) -> subprocess.CompletedProcess:
        if unprivileged and _without_dac_override():
            done = subprocess.run([*_without_dac_override(), EOS_BIN, "report", str(run_dir), *args],
                                  capture_output=True, text=True, timeout=300, cwd=run_dir.parent,
                                  env={**os.environ, **short_tmp})
        else:
            done = cli("report", run_dir, *args, cwd=run_dir.parent, env=short_tmp)
        assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
        return done

    return run


def _failing_history(run_dir: Path) -> Path:
    campaign = json.loads((run_dir / "chaos.json").read_text())
    first = next(r for r in campaign["scenarios"] if r["verdict"] == "fail" and isinstance(r["index"], int))
    return run_dir / f"scenario-{first['index']:05d}" / "history.jsonl"


# -- the report's probes of issue 22 ----------------------------------------------------------------


def test_binary_bytes_in_a_history_are_named_and_the_rest_is_reported(report, runs, tmp_path):
    run_dir = _copy(runs, "campaign", tmp_path)
    history = _failing_history(run_dir)
    data = bytearray(history.read_bytes())
    data[len(data) // 2] = 0xFF
    history.write_bytes(bytes(data))
    done = report(run_dir)
    assert done.returncode == 3, done.stdout
    assert f"{history}: line" in done.stdout and "bytes that are not text (UTF-8)" in done.stdout
    assert "the events of its other" in done.stdout  # what could be read is drawn
    assert (run_dir / "report.html").is_file()


def test_an_unreadable_scenario_folder_is_named(report, runs, tmp_path):
    run_dir = _copy(runs, "campaign", tmp_path)
    folder = _failing_history(run_dir).parent
    folder.chmod(0)
    try:
        done = report(run_dir, "--out", str(tmp_path / "r.html"), unprivileged=True)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"{folder}" in done.stdout and "cannot be read (permission denied)" in done.stdout


def test_a_campaign_whose_store_failed_its_probe_is_reported_with_the_probe(report, runs, tmp_path):
    run_dir = _copy(runs, "campaign", tmp_path)
    done = report(run_dir)
    assert done.returncode == 0, done.stdout  # nothing is damaged: a probe has no history to draw
    html = (run_dir / "report.html").read_text()
    assert f"Unexpected results: {PROBE_FAILS}" in done.stdout
    assert f"the probe of {PROBE_FAILS}" in html and "eos-harness verify bad_stores:put_raises" in html


def test_a_sigkilled_campaign_is_reported_from_its_results_with_its_seed_and_a_caught_mutant_as_caught(report, runs, tmp_path):
    run_dir = _copy(runs, "killed", tmp_path)
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    mutant = [r for r in results if r["store"] == MUTANT]
    # Caught before the kill, and some of its scenarios passed (each one judged alone, it was "unexpected").
    assert {r["verdict"] for r in mutant} == {"pass", "fail"}, [r["verdict"] for r in mutant]
    done = report(run_dir)
    assert done.returncode == 3, done.stdout  # chaos.json is missing (named), the rest is read
    assert f"{run_dir / 'chaos.json'}: is missing" in done.stdout
    html = (run_dir / "report.html").read_text()
    assert "Unexpected results" not in done.stdout and "Unexpected results" not in html
    page = Page(html)
    assert page.rows[MUTANT]["status"] == "caught"
    command = page.text_of["campaign-command"]
    assert "--seed 1" in command and f"--scenarios {len(results)}" in command, command


def test_a_0_byte_history_is_listed_among_the_problems_the_page_points_to(report, runs, tmp_path):
    run_dir = _copy(runs, "campaign", tmp_path)
    history = _failing_history(run_dir)
    history.write_bytes(b"")
    done = report(run_dir)
    assert done.returncode == 3, done.stdout
    html = (run_dir / "report.html").read_text()
    problems = html[html.index('id="problems"'):]
    problems = problems[: problems.index("</div>")]
    assert str(history) in problems and "is empty" in problems
    assert "see the problems at the top" in html  # and now the problems are there


def test_a_damaged_run_is_resumed_with_each_damage_named(cli, short_tmp, runs, tmp_path):
    run_dir = _copy(runs, "killed", tmp_path)
    lines = (run_dir / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = b'{"index": 1, "store": "%s", "verdict": 7, "violations": []}\n' % MUTANT.encode()  # a mistyped verdict
    lines[2] = lines[2][:10] + b"\xff\xfe" + lines[2][12:]  # bytes that are not text
    (run_dir / "results.jsonl").write_bytes(b"".join(lines) + b'{"index": 40, "sto')  # and a cut last line
    done = cli("chaos", "--resume", run_dir, "--no-report", cwd=tmp_path, env=short_tmp)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode in (0, 1), output
    assert "Traceback" not in output
    results = run_dir / "results.jsonl"
    assert f"{results}: line 2 'verdict' is an integer (7), not one of" in output
    assert f"{results}: line 3 holds bytes that are not text (UTF-8)" in output
    assert f"{results}: its last line was cut short" in output
    campaign = json.loads((run_dir / "chaos.json").read_text())
    assert sorted(r["index"] for r in campaign["scenarios"]) == list(range(12))  # the damaged ones ran again


# -- the fuzz ---------------------------------------------------------------------------------------


def _fuzz(runs: dict[str, Path], tmp_path: Path, env: dict, **spec) -> dict:
    work = tmp_path / "fuzz"
    copies = {name: Path(shutil.copytree(path, work / name, symlinks=True)) for name, path in runs.items()}
    spec = {"runs": [str(p) for p in copies.values()],
            "resumable": {str(copies["campaign"]): "lifecycle", str(copies["killed"]): "lifecycle"}, **spec}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([*_without_dac_override(), sys.executable, str(ROOT / "tests" / "run_dir_fuzz.py"),
                           str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=3600,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(FIXTURES), **env})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    print(f"\nrun-directory fuzz: {summary['variants']} variants of {summary['of']} ({summary['kinds']}), "
          f"{summary['cli_runs']} through the CLI, {summary['tracebacks']} tracebacks, {len(summary['failures'])} "
          f"failures, {summary['seconds']} s")
    shown = "\n\n".join(f"{f['file']} ({f['kind']}: {f['detail']}): {f['problem']}" for f in summary["failures"][:8])
    assert summary["tracebacks"] == 0 and not summary["failures"], shown
    return summary


def test_a_seeded_sample_of_damaged_run_directories_is_read_never_crashed_on(runs, short_tmp, tmp_path):
    summary = _fuzz(runs, tmp_path, short_tmp, seed=22, limit=150, cli=3, resume_cli=1)
    assert summary["variants"] == 150 and set(summary["kinds"]) == {"cut", "flip", "retype", "unpermit"}


@pytest.mark.slow
def test_every_damage_of_every_file_of_real_run_directories_is_read_never_crashed_on(runs, short_tmp, tmp_path):
    summary = _fuzz(runs, tmp_path, short_tmp, seed=7, limit=None, cli=40, resume_cli=6)
    assert summary["variants"] >= 1000
