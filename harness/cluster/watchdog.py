"""Kills a cluster's processes when the process that started it dies without stopping it.

``start_watchdog(mark)`` runs this module's ``main(OWNER_PID MARK)`` in a new process for this
process (``stop_watchdog`` ends it after a clean stop). The watchdog waits (on a pidfd, no
polling) for OWNER_PID to exit, then SIGKILLs every process whose environment carries
``EOS_HARNESS_KAFKA=MARK`` (the nodes as they are then, restarted ones included). An
``atexit`` hook cannot do this when the runner itself is SIGKILLed; this can.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys

import psutil

ENV_MARK = "EOS_HARNESS_KAFKA"


def marked(mark: str) -> list[psutil.Process]:
    """Processes whose environment has ``EOS_HARNESS_KAFKA=mark``."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get(ENV_MARK) == mark:
                found.append(proc)
    return found


def start_watchdog(mark: str) -> subprocess.Popen:
    """A watchdog that kills the processes marked ``mark`` when this process dies."""
    # -c, not -m: the package imports this module first, and runpy warns when it is run as __main__ too.
    code = "import sys; from eos_harness.cluster.watchdog import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), mark],
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})


def stop_watchdog(watchdog: subprocess.Popen | None) -> None:
    """End a watchdog after its cluster stopped cleanly (None: there is none)."""
    if watchdog is not None:
        watchdog.kill()
        watchdog.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        print("usage: python -m eos_harness.cluster.watchdog OWNER_PID MARK", file=sys.stderr)
        return 2
    owner, mark = int(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner's ^C is for the owner, which cleans up
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        fd = None
    if fd is not None:
        select.select([fd], [], [])
    for proc in marked(mark):
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(signal.SIGCONT)
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
