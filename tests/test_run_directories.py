"""A run directory owned by one command, campaigns resumed only as they started, default run
directories that never collide, and outputs that replace only what the user asked to replace: the
CLI as a user runs it (a subprocess), each probe of issue 22 a test.

- two commands on one run directory: the second is refused (exit 2) naming the holder (pid, command
  line, start time); the lock goes with the process, however it ends (SIGKILL);
- ``--resume`` of an edited ``campaign.json`` (another seed, a key missing or mistyped, no digest):
  exit 2 naming the key; a cut last line of ``results.jsonl`` is cut away, and said, before the
  resumed campaign appends;
- ``run`` twice with the same seed and no ``--out``: two run directories, ``runs/latest`` the newest;
- ``--json``/``--junit``/``--log``/the report's ``--out`` at a device, a directory, a symbolic link,
  one path for two outputs, a 300-byte name: exit 2 naming the option, before anything runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import test_reliability_io
from tests.test_reliability_io import Command, _entries

command = test_reliability_io.command  # the fixture: a command's own temp, working directory and process mark

ROOT = Path(__file__).resolve().parents[1]
SPARK_RUN = ROOT / "tests" / "fixtures" / "spark-run"
MUTANT = "mutant-recover-keeps-uncommitted"  # fails in its first scenario


def _wait_for_a_result(results: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if results.exists() and results.read_text().count("\n") >= 1:
            return
        time.sleep(0.2)
    raise AssertionError(f"the campaign finished no scenario in {timeout} s")


# -- one command owns a run directory ---------------------------------------------------------------


def test_a_second_command_on_a_running_campaigns_directory_is_refused_naming_the_holder(command):
    proc = command.start("chaos", "--stores", "memory", "--minutes", "1", "--workers", "1", "--seed", "5",
                         "--out", "c", "--no-report")
    run_dir = command.cwd / "c"
    try:
        _wait_for_a_result(run_dir / "results.jsonl", proc)
        holder = f"pid {proc.pid}, started "
        for second in (["chaos", "--resume", "c"],  # a second --resume
                       ["chaos", "--stores", "memory", "--scenarios", "2", "--out", "c", "--overwrite"],
                       ["report", "c"]):  # the report's page would be written into the running campaign's directory
            done = command.run(*second)
            output = done.stdout + done.stderr
            assert done.returncode == 2, output
            assert "in use by another eos-harness command" in output and holder in output, output
            assert "eos-harness chaos --stores memory --minutes 1" in output, output  # its command line
            assert "Traceback" not in output
        assert (run_dir / "results.jsonl").read_text().strip(), "--overwrite removed the running campaign's results"
        assert not (run_dir / "report.html").exists()
        elsewhere = command.run("report", "c", "--out", "r.html")  # what finished so far, written outside
        assert elsewhere.returncode in (0, 3), elsewhere.stdout + elsewhere.stderr
        assert (command.cwd / "r.html").is_file()
    finally:
        proc.send_signal(signal.SIGKILL)  # the lock goes with the process, however it ends
        proc.communicate(timeout=30)
    command.kill_leftovers()
    done = command.run("report", "c")
    assert done.returncode in (0, 3), done.stdout + done.stderr
    assert (run_dir / "report.html").is_file()


# -- a resumed campaign is the campaign that started ------------------------------------------------


@pytest.fixture(scope="module")
def stopped_template(cli, tmp_path_factory) -> Path:
    """A campaign stopped at its first failure (``--until-failure``): resumable, its plan not finished."""
    cmd = Command(cli, tmp_path_factory.mktemp("stopped"))
    try:
        # Seed 1: the mutant passes its first five scenarios (its own crash points come first), then is caught.
        done = cmd.run("chaos", "--stores", MUTANT, "--workloads", "counter,tombstones", "--scenarios", "8",
                       "--seed", "1", "--until-failure", "--out", "stopped", "--no-report")
    finally:
        cmd.kill_leftovers()
        shutil.rmtree(cmd.tmp, ignore_errors=True)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    state = json.loads((cmd.cwd / "stopped" / "campaign.json").read_text())
    assert state["finished"] is False and state["digest"]["sha256"]
    return cmd.cwd / "stopped"


@pytest.fixture
def stopped_campaign(command, stopped_template) -> Path:
    shutil.copytree(stopped_template, command.cwd / "stopped", symlinks=True)
    return command.cwd / "stopped"


@pytest.mark.parametrize(("edit", "named"), [
    (lambda state: state.update(seed=4), "'seed' changed"),  # another plan: refused, not joined
    (lambda state: state.update(seed="3"), "'seed' is a string (\"3\"), not an integer"),
    (lambda state: state.pop("stores"), "'stores' is missing"),
    (lambda state: state.update(scenarios=[4]), "'scenarios' is a list, not a positive integer or null"),
    (lambda state: state.pop("digest"), "carries no digest of its plan"),
])
def test_resume_refuses_an_edited_campaign_naming_what_changed(command, stopped_campaign, edit, named):
    path = stopped_campaign / "campaign.json"
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    results = (stopped_campaign / "results.jsonl").read_bytes()
    done = command.run("chaos", "--resume", "stopped")
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr and str(Path("stopped") / "campaign.json") in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert (stopped_campaign / "results.jsonl").read_bytes() == results  # nothing ran


def test_a_cut_last_line_of_the_results_is_cut_away_and_said_before_the_resume_appends(command, stopped_campaign):
    results = stopped_campaign / "results.jsonl"
    whole = results.read_text().splitlines()
    with results.open("a") as out:
        out.write('{"index": 3, "store": "memory", "verd')  # a kill while writing a line
    done = command.run("chaos", "--resume", "stopped", "--no-report")
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1), output
    assert f"{Path('stopped') / 'results.jsonl'}: its last line was cut short (37 bytes" in output.replace("\n", " ")
    lines = results.read_text().splitlines()
    assert lines[: len(whole)] == whole
    indices = [json.loads(line)["index"] for line in lines]  # every line whole JSON, none lost on the join
    assert sorted(indices) == sorted(set(indices))
    campaign = json.loads((stopped_campaign / "chaos.json").read_text())
    assert {r["index"] for r in campaign["scenarios"]} == set(indices)


# -- default run directories never collide -----------------------------------------------------------


def test_runs_without_out_get_a_new_directory_each_and_latest_points_to_the_newest(command):
    made = []
    for _ in range(2):  # the same run twice in one second or not: never "exists already"
        done = command.run("run", "--store", "memory", "--seed", "1", "--no-report")
        assert done.returncode == 0, done.stdout + done.stderr
        made.append(next(line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith("history: ")))
    runs = command.cwd / "runs"
    first, second = (Path(path).parent.name for path in made)
    assert first != second and first.endswith("-run-seed1") and second.startswith(first[:8])
    assert os.readlink(runs / "latest") == second
    assert json.loads((runs / "latest" / "verdict.json").read_text())["verdict"] == "pass"

    (runs / "latest").unlink()
    (runs / "latest").symlink_to(command.cwd)  # a link the user made: left alone
    done = command.run("run", "--store", "memory", "--seed", "2", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.readlink(runs / "latest") == str(command.cwd)
    assert len([p for p in runs.iterdir() if p.name != "latest"]) == 3


# -- outputs replace only what the user asked to replace --------------------------------------------


def _spark_run(cwd: Path) -> str:
    shutil.copytree(SPARK_RUN, cwd / "spark-run")
    return "spark-run"


OUTPUT_PROBES = {
    # probe: (the command line, given the working directory; what the refusal says)
    "a device": (lambda cwd: ["chaos", "--stores", "memory", "--scenarios", "1", "--json", "/dev/null"],
                 "--json /dev/null: is a character device"),
    "a directory": (lambda cwd: ["run", "--store", "memory", "--seed", "1", "--junit", "."],
                    "--junit .: is a directory"),
    "a symbolic link": (lambda cwd: ["verify", "memory", "--seed", "1", "--json", "link.json"],
                        "--json link.json: is a symbolic link (to target.json)"),
    "two outputs at one path": (lambda cwd: ["chaos", "--stores", "memory", "--json", "a.xml", "--junit", "./a.xml"],
                                "--junit ./a.xml: --json a.xml is the same file"),
    "a name too long": (lambda cwd: ["report", _spark_run(cwd), "--out", "r" * 300 + ".html"],
                        "its file name is 305 bytes long, more than the file system allows"),
    "the report's page a directory": (lambda cwd: ["report", _spark_run(cwd)], "report.html: is a directory"),
    "a file the harness writes in the run directory": (
        lambda cwd: ["run", "--store", "memory", "--out", "o", "--json", "o/history.jsonl"],
        "--json o/history.jsonl: the harness writes its own history.jsonl in the run directory"),
}


@pytest.mark.parametrize("probe", list(OUTPUT_PROBES))
def test_an_output_that_is_not_a_new_or_regular_file_is_a_usage_error_before_anything_runs(command, probe):
    argv, says = OUTPUT_PROBES[probe]
    (command.cwd / "target.json").write_text("the user's")
    (command.cwd / "link.json").symlink_to("target.json")
    args = argv(command.cwd)
    if probe == "the report's page a directory":
        (command.cwd / "spark-run" / "report.html").mkdir()
    before = _entries(command.cwd)
    done = command.run(*args)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert says in " ".join(output.split()), output
    assert "Traceback" not in output
    assert _entries(command.cwd) == before  # nothing ran: no run directory, no file written or replaced
    assert (command.cwd / "target.json").read_text() == "the user's"
