"""What a store starts dies with it, and the command's temp directory is checked before anything runs:
processes a store's child starts are in its process group and are killed with it; a TMPDIR too long
for the Unix sockets the harness makes under it is a usage error naming TMPDIR (exit 2).

Each store here is written by the test into its own temp module, as a user would write one.
"""

from __future__ import annotations

import json
import textwrap
import time

import psutil


def test_processes_a_store_starts_die_with_it(cli, tmp_path):
    (tmp_path / "mods").mkdir()
    pids = tmp_path / "pids"
    (tmp_path / "mods" / "starts_processes.py").write_text(textwrap.dedent(f"""
        import subprocess, sys
        from eos_harness.stores.memory import MemoryStore

        class Store(MemoryStore):
            def init(self, context):
                super().init(context)
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
                with open({str(pids)!r}, "a") as out:
                    out.write(f"{{child.pid}}\\n")

        def make_store():
            return Store()
        """))
    proc = cli("verify", "starts_processes:make_store", "--seed", "1", "--examples", "1", "--no-shrink",
               env={"PYTHONPATH": str(tmp_path / "mods")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) > 3, started  # a child per store process
    time.sleep(0.5)
    alive = [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert alive == [], f"processes the store started outlived it: {alive}"


def test_a_tmpdir_too_long_for_a_unix_socket_is_a_usage_error_naming_it(cli, tmp_path):
    long_dir = tmp_path / ("d" * 60)
    long_dir.mkdir()
    # Every command that starts store processes (the forkserver's Unix socket is made under TMPDIR)...
    for command in (["verify", "memory", "--examples", "1"], ["run", "--store", "memory", "--out", str(tmp_path / "r")],
                    ["run", "--suite", "metadata", "--system", "controller", "--out", str(tmp_path / "r")],
                    ["points", "--store", "memory"]):
        proc = cli(*command, env={"TMPDIR": str(long_dir)})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        flat = " ".join(proc.stderr.split())
        assert f"TMPDIR={long_dir} is too long" in flat and "Traceback" not in flat, flat
        assert list(long_dir.iterdir()) == [] and not (tmp_path / "r").exists()  # nothing ran
    # ... and only those: a command that starts none runs under that TMPDIR (a Spark run too: test_spark_tempfiles).
    listed = cli("points", "--json", env={"TMPDIR": str(long_dir)})
    assert listed.returncode == 0 and "TMPDIR" not in listed.stderr, listed.stdout + listed.stderr


def test_run_with_a_scheduled_fault_that_never_fires_is_an_error_naming_it(cli, tmp_path):
    for schedule in ("task.commit.after_eos@100000", "kill@99999"):
        out = tmp_path / schedule.replace("@", "-")
        proc = cli("run", "--store", "memory", "--seed", "1", "--crash-at", schedule, "--out", out,
                   "--json", out.with_suffix(".json"), "--no-report")
        assert proc.returncode == 3, proc.stdout + proc.stderr
        result = json.loads(out.with_suffix(".json").read_text())
        assert result["verdict"] == "error" and result["not_fired"] == [schedule], result
        assert f"scheduled fault {schedule} never fired" in " ".join(proc.stdout.split())
