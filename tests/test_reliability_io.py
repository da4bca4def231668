"""Nothing lost, nothing left: the CLI, run as a user runs it (a subprocess), under a user's files,
bad paths, Ctrl-C, SIGTERM, SIGKILL and a full disk.

Each test gives the command its own temp directory (``TMPDIR``) and an environment mark, so that
"nothing left" is checked exactly: the temp directory is empty afterwards, and no process carrying
the mark (children, the zygote, multiprocessing's forkserver, Kafka's JVMs) is still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

MARK = "EOS_HARNESS_TEST_MARK"


class Command:
    """One CLI invocation's environment: its temp dir, its working dir, its process mark; the command
    itself is run by the ``cli`` fixture (tests/conftest.py)."""

    def __init__(self, cli, tmp_path: Path) -> None:
        self.cli = cli
        # Short: multiprocessing's forkserver binds a Unix socket in it (at most 107 bytes of path).
        self.tmp = Path(tempfile.mkdtemp(prefix="eos-test-", dir="/tmp"))
        self.cwd = tmp_path / "cwd"
        self.cwd.mkdir()
        self.mark = uuid.uuid4().hex
        self.env = {"TMPDIR": str(self.tmp), MARK: self.mark, "COLUMNS": "200"}

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.cli(*args, cwd=self.cwd, env=self.env, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen:
        return self.cli.start(*args, cwd=self.cwd, env=self.env)

    def processes(self) -> list[psutil.Process]:
        """Every running process started by this command (they inherit its environment)."""
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(MARK) == self.mark and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        return found

    def kill_leftovers(self) -> None:
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()


@pytest.fixture
def command(cli, tmp_path):
    cmd = Command(cli, tmp_path)
    yield cmd
    cmd.kill_leftovers()
    shutil.rmtree(cmd.tmp, ignore_errors=True)


def _entries(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def _wait_for_results(run_dir: Path, proc: subprocess.Popen, at_least_s: float) -> None:
    """Wait until the campaign has finished a scenario and ran ``at_least_s`` seconds. The bound only
    stops a hung command: a campaign that ends first fails the wait with its output (on a busy
    machine, starting a Kafka broker and running the first scenario took over 60 s)."""
    started = time.monotonic()
    results = run_dir / "results.jsonl"
    while time.monotonic() - started < 300:
        assert proc.poll() is None, proc.stdout.read()
        if time.monotonic() - started >= at_least_s and results.exists() and results.read_text().strip():
            return
        time.sleep(0.2)
    raise AssertionError("the campaign finished no scenario in 300 s")


# -- a user's files are never deleted ---------------------------------------------------------------


def test_run_refuses_an_out_directory_holding_a_users_file(command):
    out = command.cwd / "x"
    (out / "src").mkdir(parents=True)
    (out / "src" / "notes.txt").write_text("hi")
    done = command.run("run", "--store", "memory", "--seed", "1", "--out", "x")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--out x: the directory is not empty and was not made by eos-harness" in done.stderr
    assert (out / "src" / "notes.txt").read_text() == "hi"
    assert _entries(out) == {"src", "src/notes.txt"}  # nothing removed, nothing added


def test_run_refuses_the_working_directory(command):
    (command.cwd / "notes.txt").write_text("hi")
    done = command.run("run", "--store", "memory", "--seed", "1", "--out", ".")
    assert done.returncode == 2
    assert "not made by eos-harness" in done.stderr
    assert _entries(command.cwd) == {"notes.txt"}
    assert (command.cwd / "notes.txt").read_text() == "hi"


def test_spark_run_refuses_a_users_directory_before_anything_starts(command):
    (command.cwd / "notes.txt").write_text("hi")
    done = command.run("run", "--suite", "spark", "--pipeline", "count", "--sink", "file", "--out", ".")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not made by eos-harness" in done.stderr
    assert _entries(command.cwd) == {"notes.txt"}


def test_overwrite_replaces_only_the_harness_results(command):
    first = command.run("run", "--store", "memory", "--seed", "1", "--out", "r")
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = command.cwd / "r"
    assert {".eos-harness-run", "verdict.json", "history.jsonl"} <= _entries(run_dir)

    again = command.run("run", "--store", "memory", "--seed", "1", "--out", "r")
    assert again.returncode == 2
    assert "holds the results of an earlier run; pass --overwrite" in again.stderr

    (run_dir / "notes.txt").write_text("mine")  # a user's file in the harness's directory
    before = (run_dir / "verdict.json").stat().st_mtime_ns
    replaced = command.run("run", "--store", "memory", "--seed", "1", "--out", "r", "--overwrite")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert (run_dir / "verdict.json").stat().st_mtime_ns != before


def test_overwrite_never_empties_a_directory_the_harness_did_not_make(command):
    out = command.cwd / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("hi")
    done = command.run("chaos", "--scenarios", "2", "--seed", "1", "--out", "mine", "--overwrite")
    assert done.returncode == 2
    assert "not made by eos-harness" in done.stderr
    assert _entries(out) == {"notes.txt"}


def test_demo_reuses_its_own_directory(command):
    for _ in range(2):  # `make demo` twice
        done = command.run("demo", "--minutes", "0.05", "--out", "d")
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert "results:" in done.stdout


# -- paths that do not exist: a usage error before anything runs ------------------------------------


def test_json_in_a_missing_directory_is_refused_before_verify_runs(command):
    missing = Path(f"/nonexistent-{uuid.uuid4().hex[:8]}")
    started = time.monotonic()
    done = command.run("verify", "memory", "--seed", "1", "--json", str(missing / "d" / "out.json"))
    assert done.returncode == 2
    assert f"--json {missing}/d/out.json: the directory {missing}/d does not exist" in done.stderr
    assert "verdict" not in done.stdout  # nothing ran
    assert time.monotonic() - started < 15
    assert not missing.exists()


@pytest.mark.parametrize("argv", [["run", "--store", "memory", "--seed", "1"], ["chaos", "--scenarios", "2"]])
def test_out_under_a_missing_directory_is_refused_and_not_created(command, argv):
    missing = Path(f"/nonexistent-{uuid.uuid4().hex[:8]}")
    done = command.run(*argv, "--out", str(missing / "dir"))
    assert done.returncode == 2
    assert f"its parent directory {missing} does not exist" in done.stderr
    assert not missing.exists()
    assert _entries(command.tmp) == set()


def test_verify_writes_nothing_into_the_working_directory(command):
    done = command.run("verify", "memory", "--examples", "3", "--steps", "5", "--seed", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _entries(command.cwd) == set()  # no .hypothesis/
    assert _entries(command.tmp) == set()


# -- Ctrl-C and SIGTERM: the summary, the JSON, nothing left ------------------------------------------


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_campaign_keeps_what_finished_and_leaves_nothing(command, signum, code):
    proc = command.start("chaos", "--minutes", "1", "--seed", "3", "--out", "c")
    run_dir = command.cwd / "c"
    _wait_for_results(run_dir, proc, at_least_s=6)
    proc.send_signal(signum)
    sent = time.monotonic()
    output, _ = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10, output
    assert proc.returncode == code, output
    name = signal.Signals(signum).name
    assert f"interrupted ({name})" in output
    assert "chaos campaign, seed 3" in output  # the summary table of what finished
    campaign = json.loads((run_dir / "chaos.json").read_text())
    finished = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert campaign["stopped"]["why"] == name
    assert len(campaign["scenarios"]) == len(finished) >= 1
    assert campaign["summary"]["total"] == len(finished)
    assert all(r["verdict"] in ("pass", "fail") for r in campaign["scenarios"])  # no cut-short "error"
    time.sleep(0.5)
    assert command.processes() == []
    assert _entries(command.tmp) == set()


def test_a_killed_command_leaves_a_temp_root_the_next_one_removes(command):
    proc = command.start("chaos", "--minutes", "1", "--seed", "3", "--out", "c")
    _wait_for_results(command.cwd / "c", proc, at_least_s=2)
    proc.kill()
    proc.wait(10)
    left = [p for p in command.tmp.iterdir() if p.name.startswith("eos-harness-")]
    assert len(left) == 1 and (left[0] / ".eos-harness-tmp").read_text().startswith(f"{proc.pid} ")
    deadline = time.monotonic() + 10  # the zygote dies with its parent, the forkserver at EOF
    while command.processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    done = command.run("points")
    assert done.returncode == 0
    assert _entries(command.tmp) == set()


# -- a full disk: stop within seconds, one message naming the cause, exit 3 ---------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (needs root to mount)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 2 MB tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_stops_the_campaign_with_one_message(command, small_disk):
    started = time.monotonic()
    done = command.run("chaos", "--minutes", "1", "--seed", "3", "--out", str(small_disk / "c"), timeout=90)
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert elapsed < 30, f"took {elapsed:.0f} s: the campaign did not give up on the full disk"
    stops = [line for line in output.splitlines() if line.startswith("stopped:")]
    assert len(stops) == 1 and "no space left on device (ENOSPC)" in stops[0], output
    assert "Traceback" not in output
    assert _entries(command.cwd) == set()  # nothing written outside the run directory …
    assert _entries(command.tmp) == set()  # … and nothing left in the temp directory
    assert command.processes() == []


# -- Kafka: SIGTERM leaves no broker and no broker data -------------------------------------------------


@pytest.mark.kafka
def test_sigterm_during_a_kafka_campaign_leaves_no_broker(command):
    proc = command.start("chaos", "--broker", "kafka-local", "--minutes", "1", "--seed", "3", "--out", "k")
    _wait_for_results(command.cwd / "k", proc, at_least_s=5)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, output
    assert "interrupted (SIGTERM)" in output
    assert json.loads((command.cwd / "k" / "chaos.json").read_text())["scenarios"]
    time.sleep(1)
    assert [p.name() for p in command.processes()] == []  # no java, no watchdog, no child
    assert _entries(command.tmp) == set()  # no eos-kafka-*, no pymp-*


def test_output_held_before_a_log_opens_leaves_no_file_when_nothing_was_written(tmp_path, monkeypatch):
    # held_output (a store module's import before the run directory exists) keeps the output in a temp file
    # until the run's log opens; a caller whose log never opens (a usage error, a library caller) must not
    # find an empty eos-driver-*.log left in its temp directory.
    from eos_harness.process import server

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with server.held_output():
        pass
    assert list(tmp_path.iterdir()) == [] and server._held == []
    with server.held_output():
        os.write(1, b"said while held\n")  # kept for the log that opens next
    [held] = tmp_path.iterdir()
    assert held.read_text() == "said while held\n" and server._held == [held]
    server._append_held(tmp_path / "run.log")  # what the run's log does when it opens
    assert (tmp_path / "run.log").read_text() == "said while held\n" and not held.exists()
