"""The user's code never runs in the harness's own process: a store module is imported, and its factory
called, in a child under ``--store-timeout``. Whatever the store's code does there (exit, raise
``SystemExit`` or ``KeyboardInterrupt``, ``os._exit``, signal itself, sleep, leave a thread running,
start processes) is a ``store_*`` finding (exit 1) or, for a module that cannot be imported, a usage
error naming the module, its file and line (exit 2); never a verdict of the harness's own process
ending early, a hang, a traceback, a temp root or a process left behind. A TMPDIR too long for the
Unix sockets the harness makes under it is a usage error naming TMPDIR (exit 2).

Each store here is written by the test into its own temp module, as a user would write one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

TIMEOUT = 2  # --store-timeout of these tests

STORE_HEAD = """
import os, signal, subprocess, sys, threading, time
from eos_harness.stores.memory import MemoryStore
"""

# factory body (the constructor of a MemoryStore subclass) -> the finding verify reports
CONSTRUCTORS = {
    "system_exit": ("raise SystemExit(0)", "store_raised", "factory raised SystemExit"),
    "keyboard_interrupt": ("raise KeyboardInterrupt", "store_raised", "factory raised KeyboardInterrupt"),
    "os_exit": ("os._exit(0)", "store_error", "the store's process exited with code 0 during factory"),
    "signal": ("os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)", "store_error",
               "the store's process was killed by SIGTERM during factory"),
    "sleep": ("time.sleep(10**6)", "store_hang", "factory had not returned after 2 s"),
    "thread": ("super(type(self), self).__init__(); threading.Thread(target=time.sleep, args=(10**6,)).start()",
               "store_error", "still ran: an application's process with such a thread never exits"),
}


def verify(cli, tmp_path: Path, spec: str, *extra: str):
    """``verify SPEC`` with ``tmp_path/mods`` on PYTHONPATH and a short fresh TMPDIR; returns the result
    and the verdict JSON (None when none was written), after checking no temp root is left."""
    temp = Path(tempfile.mkdtemp(prefix="eos-iso-", dir="/tmp"))  # short: the Unix sockets live under it
    out = tmp_path / "verdict.json"
    try:
        proc = cli("verify", spec, "--seed", "1", "--examples", "1", "--no-shrink", "--store-timeout", str(TIMEOUT),
                   "--json", out, *extra, timeout=120, env={"PYTHONPATH": str(tmp_path / "mods"), "TMPDIR": str(temp)})
        assert list(temp.iterdir()) == [], "the command left its temp root"
    finally:
        shutil.rmtree(temp)
    assert "Traceback (most recent call last)" not in proc.stderr, proc.stderr
    return proc, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.parametrize("case", sorted(CONSTRUCTORS))
def test_what_a_stores_constructor_does_is_a_finding_of_verify(cli, tmp_path, monkeypatch, case):
    """verify called in this process (the CLI for one case: exit 1, the verdict printed): the finding, and
    the module never imported here."""
    import sys

    from eos_harness.suites.verify import verify_store

    body, check, observed = CONSTRUCTORS[case]
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"ctor_{case}.py").write_text(STORE_HEAD + f"""
class Store(MemoryStore):
    def __init__(self):
        {body}

def make_store():
    return Store()
""")
    if case == "system_exit":
        proc, result = verify(cli, tmp_path, f"ctor_{case}:make_store")
        assert proc.returncode == 1 and "verdict: fail" in proc.stdout, proc.stdout + proc.stderr
    else:
        monkeypatch.syspath_prepend(str(tmp_path / "mods"))
        result = verify_store(f"ctor_{case}:make_store", 1, examples=1, steps=5, shrink=False, store_timeout=TIMEOUT,
                              log=tmp_path / "verify.log")
        assert f"ctor_{case}" not in sys.modules
    assert result["verdict"] == "fail"
    [violation] = result["violations"]
    assert violation["check"] == check and observed in violation["observed"], violation


def test_a_thread_left_after_close_is_a_store_error_whatever_the_store_timeout(tmp_path, monkeypatch):
    """The store timeout bounds close alone, never the grace its threads get after it: with a timeout
    shorter than that grace (as a loaded machine makes the two race) the thread is still the finding,
    never a hang of close."""
    from eos_harness.process.server import CLOSE_THREADS_GRACE_S
    from eos_harness.suites.verify import verify_store

    body, check, observed = CONSTRUCTORS["thread"]
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "ctor_short.py").write_text(STORE_HEAD + f"""
class Store(MemoryStore):
    def __init__(self):
        {body}

def make_store():
    return Store()
""")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    timeout = CLOSE_THREADS_GRACE_S / 2
    result = verify_store("ctor_short:make_store", 1, examples=1, steps=5, shrink=False, store_timeout=timeout,
                          log=tmp_path / "verify.log")
    assert result["verdict"] == "fail"
    [violation] = result["violations"]
    assert violation["check"] == check and observed in violation["observed"], violation


IMPORTS = {
    "syntax_error": ("def make_store(:\n    pass\n", "has a syntax error: {file}, line 1: invalid syntax"),
    "system_exit": ("import sys\nsys.exit(0)\n", "raised SystemExit: 0 at {file}, line 2"),
    "os_exit": ("import os\nos._exit(0)\n", "ended the process (exited with code 0)"),
    "sleep": ("import time\ntime.sleep(10**6)\n", "did not finish within 2 s (--store-timeout)"),
}


@pytest.mark.parametrize("case", sorted(IMPORTS))
def test_a_store_module_that_cannot_be_imported_is_a_usage_error_naming_it(cli, tmp_path, monkeypatch, case):
    """Through the CLI for one case (exit 2, the message on stderr, no verdict), the others in this process."""
    import sys

    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.child_probe import store_ref

    source, message = IMPORTS[case]
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"imp_{case}.py").write_text(source)
    if case == "syntax_error":
        proc, result = verify(cli, tmp_path, f"imp_{case}:make_store")
        assert proc.returncode == 2 and result is None, proc.stdout + proc.stderr
        error = proc.stderr
    else:
        monkeypatch.syspath_prepend(str(tmp_path / "mods"))
        with pytest.raises(StoreFactoryError) as raised:
            store_ref(f"imp_{case}:make_store", TIMEOUT)
        error = str(raised.value)
        assert f"imp_{case}" not in sys.modules
    flat = " ".join(error.split())
    assert f"module 'imp_{case}'" in flat and message.format(file=tmp_path / "mods" / f"imp_{case}.py") in flat, flat
    if case == "sleep":  # where the import was, in the module's own code
        assert f"imp_{case}.py\", line 2 in <module>" in error


def test_processes_a_store_starts_die_with_it(cli, tmp_path):
    """Each store process starts a process, every other one in a session of its own (``setsid``, out of
    the store's process group). Each is gone before the next store process opens (the store checks the
    processes of every store process that has ended), and none outlives the command."""
    (tmp_path / "mods").mkdir()
    pids, leaks = tmp_path / "pids", tmp_path / "leaks"
    (tmp_path / "mods" / "starts_processes.py").write_text(textwrap.dedent(f"""
        import os, subprocess, sys
        import psutil
        from eos_harness.stores.memory import MemoryStore

        def alive(pid):
            return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE

        class Store(MemoryStore):
            def init(self, context):
                super().init(context)
                lines = open({str(pids)!r}).read().split("\\n") if os.path.exists({str(pids)!r}) else []
                pairs = [tuple(map(int, line.split())) for line in lines if line]
                left = [started for store, started in pairs if not alive(store) and alive(started)]
                if left:
                    with open({str(leaks)!r}, "a") as out:
                        out.write(f"{{left}}\\n")
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                         start_new_session=len(pairs) % 2 == 1)
                with open({str(pids)!r}, "a") as out:
                    out.write(f"{{os.getpid()}} {{child.pid}}\\n")

        def make_store():
            return Store()
        """))
    proc = cli("verify", "starts_processes:make_store", "--seed", "1", "--examples", "1", "--no-shrink",
               env={"PYTHONPATH": str(tmp_path / "mods")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = [int(line.split()[1]) for line in pids.read_text().splitlines()]
    assert len(started) > 3, started  # a child per store process
    assert not leaks.exists(), f"processes of ended store processes still ran when the next one opened: {leaks.read_text()}"
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


def test_a_window_store_runs_in_children_only(cli, tmp_path):
    """A user's window store is probed, validated and traced in children: its ``put`` ending its process
    (os._exit) is a store_error finding of verify (exit 1), not the end of the harness's own process."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "window_exits.py").write_text(textwrap.dedent("""
        import os
        from eos_harness.stores.window_memory import memory_window

        def make_store(**kwargs):
            store = memory_window(**kwargs)
            store.put = lambda *args: os._exit(3)
            return store
        """))
    proc, result = verify(cli, tmp_path, "window_exits:make_store")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert result["suite"] == "windows" and result["verdict"] == "fail", result
    [violation] = result["violations"]
    assert violation["check"] == "store_error" and "exited with code 3" in violation["observed"], violation


def test_a_process_a_store_forks_into_its_own_session_does_not_stall_the_scenario(cli, tmp_path):
    """The store forks a process that leaves for a session of its own still holding the task's pipe to the
    harness: when the task dies at its crash point, that process dies with it (swept), so the harness
    sees the end at once and the scenario passes, not a false task_finishes after the event timeout."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "forks_daemon.py").write_text(textwrap.dedent("""
        import os, time
        from eos_harness.stores.memory import MemoryStore

        class Store(MemoryStore):
            def init(self, context):
                super().init(context)
                if os.fork() == 0:  # holds every fd the task's process has, the harness's pipe too
                    os.setsid()
                    time.sleep(300)
                    os._exit(0)

        def make_store():
            return Store()
        """))
    out = tmp_path / "run"
    proc = cli("run", "--store", "forks_daemon:make_store", "--seed", "1", "--crash-at", "task.commit.after_eos",
               "--out", str(out), "--json", str(tmp_path / "run.json"), "--no-report", timeout=120,
               env={"PYTHONPATH": str(tmp_path / "mods")})
    result = json.loads((tmp_path / "run.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", (proc.stdout, result.get("violations"))
    assert result["crash_points"] == ["task.commit.after_eos"], result


def test_verify_never_imports_the_users_module_into_the_harnesss_process(tmp_path, monkeypatch):
    """verify of a user's key-value store and of a user's window store, called in this process: both are
    checked (their verdicts name their suites), and neither module was ever imported here."""
    from eos_harness.suites.verify import verify_store

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "iso_kv_store.py").write_text(
        "from eos_harness.stores.memory import MemoryStore\n\ndef make_store():\n    return MemoryStore()\n")
    (tmp_path / "iso_window_store.py").write_text(
        "from eos_harness.stores.window_memory import memory_window\n\ndef make(**kwargs):\n"
        "    return memory_window(**kwargs)\n")
    kv = verify_store("iso_kv_store:make_store", 1, examples=1, steps=5, shrink=False, log=tmp_path / "kv.log")
    window = verify_store("iso_window_store:make", 1, examples=1, steps=5, shrink=False, log=tmp_path / "w.log")
    assert (kv["suite"], kv["verdict"]) == ("conformance", "pass"), kv["violations"]
    assert (window["suite"], window["verdict"]) == ("windows", "pass"), window["violations"]
    import sys

    assert "iso_kv_store" not in sys.modules and "iso_window_store" not in sys.modules


def test_the_pytest_plugin_names_a_store_modules_syntax_error_before_collecting(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "plugin_syntax.py").write_text("def make_store(:\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "eos_harness.suites.conformance", "-q",
                           "--eos-store=plugin_syntax:make_store", "-p", "no:cacheprovider"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error: nothing was collected
    assert (f"module 'plugin_syntax' has a syntax error: {tmp_path / 'plugin_syntax.py'}, line 1" in proc.stderr
            and "Traceback" not in proc.stderr), proc.stderr


def test_a_campaign_whose_scheduled_fault_never_fires_is_an_error_naming_it(cli, tmp_path):
    # A store whose own point is reached only in the first commit of each process (the restore's): the
    # probe sees it, so the campaign plans it at a commit with data in flight, where it is never reached.
    # What the campaign planned was not run: an error (exit 3) naming the fault, never a pass.
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "first_commit_store.py").write_text(textwrap.dedent("""
        from eos_harness.faults.points import crash_point, declare
        from eos_harness.stores.memory import MemoryStore

        FIRST = declare("user.commit.first_in_process", "the first commit a process makes, before it writes")

        class Store(MemoryStore):
            committed = False

            def commit(self, offsets):
                if not Store.committed:
                    Store.committed = True
                    crash_point(FIRST)
                super().commit(offsets)

        def make_store():
            return Store()
        """))
    out = tmp_path / "chaos"
    proc = cli("chaos", "--stores", "first_commit_store:make_store", "--scenarios", "1", "--seed", "1",
               "--out", out, "--no-report", env={"PYTHONPATH": str(tmp_path / "mods")})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    [result] = json.loads((out / "chaos.json").read_text())["scenarios"]
    [unfired] = result["not_fired"]
    assert unfired.startswith("user.commit.first_in_process@") and result["verdict"] == "error", result
    assert f"scheduled fault {unfired} never fired" in " ".join(proc.stdout.split())
