"""The one way the harness's tests call its command line: the ``cli`` fixture.

``cli("run", "--store", "memory", ...)`` runs ``eos-harness`` as a user does: the console script
installed beside this interpreter (the package's real entry, ``eos_harness.faces.cli:main``), in a
session of its own, with ``tests/fixtures`` importable (the test stores, ``module:function``). It
returns the finished process (``.returncode``, ``.stdout``, ``.stderr``) after checking that the
command left no process behind. ``cli.start(...)`` starts it and returns the ``Popen``;
``cli.invoke(...)`` runs a command that starts nothing (``--help``, a usage error, ``report``) in
this process, which saves an interpreter start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
EOS_BIN = str(Path(sys.executable).with_name("eos-harness"))


def every_check_exercised(result: dict, checks) -> dict:
    """A passing verify's ``coverage``, asserted: every check of ``checks`` that applies to the store met
    its condition in some case (none passed unexercised), each one that does not apply says why."""
    assert result["verdict"] == "pass", result["violations"]
    coverage = result["coverage"]
    assert coverage["not_exercised"] == {}, coverage
    assert all(n > 0 for n in coverage["exercised"].values()), coverage
    assert set(coverage["exercised"]) | set(coverage["not_applicable"]) == set(checks)
    assert all(coverage["not_applicable"].values())  # each with why
    return coverage


def session_processes(sid: int, wait: float) -> list[psutil.Process]:
    """Processes still in session ``sid`` after up to ``wait`` seconds (exiting ones get time to go)."""
    deadline = time.monotonic() + wait
    while True:
        left = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getsid(p.pid) == sid:
                    left.append(p)
            except (ProcessLookupError, PermissionError):
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


class Cli:
    """``eos-harness`` for one test: see the module's docstring."""

    def __init__(self) -> None:
        self.seconds = 0.0  # how long the last call took

    def __call__(self, *args: str, timeout: float = 600, cwd: str | Path | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        started = time.monotonic()
        proc = self.start(*args, cwd=cwd, env=env, stderr=subprocess.PIPE)
        out, err = self.finish(proc, timeout)
        self.seconds = time.monotonic() - started
        assert session_processes(proc.pid, wait=10) == [], f"eos-harness {' '.join(args)} left processes behind"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def start(self, *args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None,
              stderr: int = subprocess.STDOUT) -> subprocess.Popen:
        """Started in a session of its own (``proc.pid`` is its session id); stderr joins stdout unless asked."""
        path = os.pathsep.join(p for p in (str(FIXTURES), os.environ.get("PYTHONPATH")) if p)
        return subprocess.Popen([EOS_BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=stderr, text=True,
                                cwd=cwd, env={**os.environ, "PYTHONPATH": path, **(env or {})},
                                start_new_session=True)

    @staticmethod
    def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[str, str | None]:
        """What a started command printed (stdout, stderr) once it ended; its whole session SIGKILLed on the way
        out when it did not end within ``timeout`` (or the test failed while waiting)."""
        try:
            return proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def check(self, run_dir: Path, json_path: Path, *args: str) -> tuple[int, str, dict]:
        """``eos-harness check RUN_DIR --json JSON ARGS`` to its end: its exit code, what it printed, its JSON;
        nothing it started left running."""
        proc = self.start("check", run_dir, "--json", json_path, *args)
        output, _ = self.finish(proc)
        assert session_processes(proc.pid, wait=10) == [], f"eos-harness check {' '.join(args)} left processes behind"
        return proc.returncode, output, json.loads(json_path.read_text())

    def invoke(self, *args: str) -> subprocess.CompletedProcess:
        """In this process, for a command that starts nothing: the exit code and what it printed."""
        from click.testing import CliRunner
        from eos_harness.faces.cli import main

        result = CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)
        return subprocess.CompletedProcess(["eos-harness", *args], result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="session")
def cli() -> Cli:
    return Cli()


# -- a Spark standalone cluster (the spark_cluster tier) ---------------------------------------------------------

@pytest.fixture
def standalone(tmp_path):
    """A Spark standalone cluster on 127.0.0.1 (a master and two one-core workers from the installed PySpark),
    stopped at the end; nothing the campaigns started on it may be left running."""
    from eos_harness.spark.standalone import StandaloneCluster

    base = tmp_path / "cluster"
    with StandaloneCluster(base, workers=2, cores=1) as cluster:
        listening = {c.laddr.ip.removeprefix("::ffff:") for pid in cluster.pids  # IPv4 on an IPv6 socket
                     for c in psutil.Process(pid).net_connections("inet") if c.status == psutil.CONN_LISTEN}
        assert listening == {"127.0.0.1"}, listening
        yield cluster
        left = _left_by(cluster.temp, spare=set(cluster.pids))
        assert left == [], f"processes of the campaign left on the cluster: {left}"


def _left_by(temp: Path, spare: set[int], wait_s: float = 60) -> list[str]:
    """The processes the cluster's JVMs started (their TMPDIR is under ``temp``) still running after
    ``wait_s``, but the cluster's own JVMs (``spare``) and the executors a live worker keeps for the ended
    application a few seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for proc in psutil.process_iter(["pid", "cmdline", "environ"]):
            try:
                if proc.info["pid"] in spare or str(temp) not in (proc.info["environ"] or {}).get("TMPDIR", ""):
                    continue
                left.append(" ".join(proc.info["cmdline"] or [])[:160])
            except (psutil.Error, TypeError):
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


def interrupt(proc: subprocess.Popen, sig: int = signal.SIGINT) -> tuple[str, float, list[psutil.Process]]:
    """Send ``sig``; returns the output, how long the command took to exit, and what it had started."""
    started = psutil.Process(proc.pid).children(recursive=True)
    sent = time.monotonic()
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    return output, time.monotonic() - sent, started


def interrupt_once_kept(proc: subprocess.Popen, run_dir: Path, timeout: float = 120) -> str:
    """A campaign stopped (SIGINT) as soon as it kept its options (``run_dir``/campaign.json), before its first
    scenario could finish; its output."""
    deadline = time.monotonic() + timeout
    while not (run_dir / "campaign.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return interrupt(proc)[0]
