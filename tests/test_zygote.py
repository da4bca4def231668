"""The zygote that forks store and task children: exit codes, pipes, signals, nothing left behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
from eos_harness.process.server import forkserver_context
from eos_harness.session import _stop_forkserver


def _reply_then_exit(conn, code: int) -> None:
    conn.send(("pid", os.getpid()))
    conn.close()
    os._exit(code)


def _raise(conn) -> None:
    conn.send("about to raise")
    raise RuntimeError("boom")


def _wait_forever(conn) -> None:
    conn.send("ready")
    while True:
        time.sleep(1)


def test_a_child_gets_its_pipe_and_its_exit_code_is_reported():
    ctx = forkserver_context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_reply_then_exit, args=(child, 3), daemon=True)
    proc.start()
    child.close()
    assert parent.recv() == ("pid", proc.pid)
    proc.join(10)
    assert not proc.is_alive() and proc.exitcode == 3


def test_an_exception_in_the_child_exits_1_and_a_kill_exits_minus_9():
    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    raiser = ctx.Process(target=_raise, args=(child,))
    raiser.start()
    assert parent.recv() == "about to raise"
    raiser.join(10)
    assert raiser.exitcode == 1

    parent, child = ctx.Pipe()
    sleeper = ctx.Process(target=_wait_forever, args=(child,))
    sleeper.start()
    assert parent.recv() == "ready" and sleeper.is_alive() and sleeper.exitcode is None
    os.kill(sleeper.pid, signal.SIGSTOP)  # a frozen child is still alive
    assert sleeper.is_alive()
    sleeper.kill()
    sleeper.join(10)
    assert not sleeper.is_alive() and sleeper.exitcode == -signal.SIGKILL


def test_children_die_with_the_driver_even_when_it_is_killed(tmp_path):
    # A driver that starts a child and is then SIGKILLed (no atexit): the child must not survive.
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from eos_harness.process.server import forkserver_context
        from tests.test_zygote import _wait_forever
        if __name__ == "__main__":
            ctx = forkserver_context()
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_wait_forever, args=(child,))
            proc.start()
            parent.recv()
            print(proc.pid, flush=True)
            time.sleep(60)
    """)
    path = tmp_path / "driver.py"
    path.write_text(script)
    # The killed driver runs no exit handler: its multiprocessing directory (pymp-*) would stay in the
    # temp directory, so it gets a temp directory of its own (short: the forkserver's AF_UNIX path).
    own_tmp = tempfile.mkdtemp(prefix="eosz-")
    driver = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True, start_new_session=True,
                              env={**os.environ, "TMPDIR": own_tmp})
    try:
        child_pid = int(driver.stdout.readline())
        assert psutil.pid_exists(child_pid)
        driver.kill()
        driver.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _session(driver.pid):
            time.sleep(0.1)
        assert _session(driver.pid) == [], "processes of the killed driver survived"
    finally:
        for p in _session(driver.pid):
            p.kill()
        shutil.rmtree(own_tmp, ignore_errors=True)


def _session(sid: int) -> list[psutil.Process]:
    left = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            pass
    return left


def test_a_server_started_after_the_forkserver_stopped_gets_a_new_zygote():
    """A long-lived process (a pytest session) outlives the zygote when a command run in it stops
    multiprocessing's forkserver (as every eos-harness command does at its end): the next store
    server starts a new zygote instead of failing every start with 'the zygote is gone'."""
    from multiprocessing import forkserver

    from eos_harness.process.server import StoreServer

    ctx = forkserver_context()
    first = ctx.Process(target=_reply_then_exit, args=(ctx.Pipe()[1], 0))
    first.start()
    first.join()
    _stop_forkserver(forkserver._forkserver)  # as a command's end does; the zygote goes with it
    with StoreServer():
        parent, child = ctx.Pipe()
        again = ctx.Process(target=_reply_then_exit, args=(child, 7))
        again.start()
        assert parent.recv() == ("pid", again.pid)
        again.join()
        assert again.exitcode == 7


def test_a_spare_child_killed_before_its_turn_is_replaced_and_its_end_is_never_reported():
    """The zygote forks each child ahead of its request (a spare): one that dies before it is handed a
    target is replaced, the next start gets a child that runs its target, and the driver never hears
    of the dead spare's exit as a child's."""
    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    first = ctx.Process(target=_reply_then_exit, args=(child, 0))
    first.start()
    assert parent.recv() == ("pid", first.pid)
    first.join()
    zygote = psutil.Process(ctx._get()._process.pid)
    deadline = time.monotonic() + 10
    while not (spares := [p for p in zygote.children() if p.pid != first.pid]) and time.monotonic() < deadline:
        time.sleep(0.05)
    [spare] = spares  # forked while the driver waited for the first child
    spare.kill()
    spare.wait(10)
    for code in (5, 6):  # the start that finds its spare dead, and the one after
        parent, child = ctx.Pipe()
        again = ctx.Process(target=_reply_then_exit, args=(child, code))
        again.start()
        assert parent.recv() == ("pid", again.pid) and again.pid != spare.pid
        again.join(10)
        assert again.exitcode == code
    assert spare.pid not in ctx._get()._exits  # a spare is no child of the driver's
