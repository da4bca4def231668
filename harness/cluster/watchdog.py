"""Kills a cluster's processes when the process that started it dies without stopping it.

``python -m harness.cluster.watchdog OWNER_PID MARK`` waits (on a pidfd, no polling) for OWNER_PID
to exit, then SIGKILLs every process whose environment carries ``EOS_HARNESS_KAFKA=MARK`` (the
nodes as they are then, restarted ones included). A clean stop terminates the watchdog first.
An ``atexit`` hook cannot do this when the runner itself is SIGKILLed; this can.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
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


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        print("usage: python -m harness.cluster.watchdog OWNER_PID MARK", file=sys.stderr)
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
