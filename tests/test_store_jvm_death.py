"""A store JVM dies with the process that started it (a store's process killed at a crash takes its JVM with
it), whether it was started with ``setpriv --pdeathsig KILL`` or, where that is missing, by setting the
parent-death signal between fork and exec; and one started from a thread that ended lives on (a campaign's
scenario thread starts JVMs that other scenarios borrow). No JVM here: the started program is a sleeping Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

STARTER = """
import sys, threading, time
from eos_harness.kafka_streams import pool
sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
print(bool(pool._with_parent_death()), flush=True)
main = pool.Jvm("4.4.0", sleeper)
threaded = []
thread = threading.Thread(target=lambda: threaded.append(pool.Jvm("4.4.0", sleeper)))
thread.start()
thread.join()
time.sleep(0.5)  # the thread that asked for it has ended
print(main.pid, threaded[0].pid, flush=True)
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "between-fork-and-exec"])
def test_a_store_jvm_dies_with_the_process_that_started_it_not_with_the_thread(setpriv):
    env = dict(os.environ)
    if not setpriv:
        env["PATH"] = os.path.dirname(sys.executable)  # no setpriv there: the fallback
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    children: list[int] = []
    try:
        assert starter.stdout.readline().strip() == str(setpriv)
        children = [int(pid) for pid in starter.stdout.readline().split()]
        assert len(children) == 2 and not any(_gone(pid) for pid in children)  # the threaded one outlived its thread
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 10
        while not all(_gone(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in children)
    finally:
        starter.kill()
        starter.wait()
        for pid in children:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
