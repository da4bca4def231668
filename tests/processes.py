"""What the tests look for after a run: the processes it left behind."""

from __future__ import annotations

from pathlib import Path

import psutil
from eos_harness.spark.process import RUN_ENV


def processes_of(root: Path) -> list[int]:
    """Live processes started for runs under ``root`` (the driver, its JVM, Python workers)."""
    found = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            run = p.environ().get(RUN_ENV)
        except (psutil.Error, OSError):
            continue
        if run and Path(run).is_relative_to(root):
            found.append(p.pid)
    return found
