"""One run of a Spark pipeline's driver under a :class:`~eos_harness.faults.spark.FileWatcher` (which kills
it at its crash target), as the Spark suite's campaign runner (:mod:`.runner`) and the runner of a user's own
pipeline (:mod:`.user`) both run it: started, waited for (killed when it hangs), and what the watcher saw of
the checkpoint and output folders, with the crash window it was killed in."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.faults.spark import CrashTarget, FileWatcher, classify, final_files, step_of
from eos_harness.spark.process import PipelineProcess

__all__ = ["RUN_TIMEOUT_S", "DriverRun", "committed_batches", "run_driver"]

RUN_TIMEOUT_S = 300.0  # a driver still running after this is hung: killed, its run an error


def committed_batches(checkpoint_files) -> set[int]:
    """The batches whose commit file is among ``checkpoint_files`` (paths relative to the checkpoint)."""
    return {s[1] for rel in checkpoint_files if (s := step_of("checkpoint", rel)) and s[0] == "commit"}


class _NoWatcher:
    """Stands in for :class:`FileWatcher` when a run without kills is measured unwatched (benchmark)."""

    events: list = []
    killed = None

    def __enter__(self) -> _NoWatcher:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def attach(self, pgid: int) -> None:
        pass


@dataclass
class DriverRun:
    """What one run of the driver did. ``started``: when its process started (monotonic clock)."""

    process: PipelineProcess  # stopped: its reports, causes and log tail are still read from disk
    target: CrashTarget | None
    code: int | None  # the driver's exit code; None: it hung and was killed
    started: float
    file_events: list[tuple[float, str, str]]  # (seconds since the scenario began, root, path in it) as seen
    first_new_commit: float | None  # when its first commit of a batch not committed before it was seen
    killed: dict | None  # the watcher's kill ("at", "after"), None: not killed
    hung: str | None  # the run's error when the driver did not exit in time (its log's tail), else None
    files: dict = field(default_factory=dict)  # when killed: every file of the roots just after the kill
    window: dict = field(default_factory=dict)  # when killed: the crash window those files say it was in

    def first_commit_s(self, killed_at: float | None, clock_zero: float) -> float | None:
        """Seconds from the previous run's kill (at ``killed_at``; None: from this driver's start) to this run's
        first new commit, None when it committed none."""
        if self.first_new_commit is None:
            return None
        since = killed_at if killed_at is not None else self.started - clock_zero
        return round(self.first_new_commit - since, 3)

    def crash(self, number: int) -> dict:
        """The crash window of a killed run (its ``number`` in the scenario): the target, the step the kill
        came after, and the window the files it left say it was in."""
        assert self.killed is not None
        return {"run": number, "target": str(self.target), "after": self.killed["after"], **self.window}


def run_driver(config: dict, run_dir: Path, name: str, roots: dict[str, Path], target: CrashTarget | None,
               clock_zero: float, watch: bool = True) -> DriverRun:
    """Run the driver of ``config`` once (process ``name`` in ``run_dir``), watching ``roots`` (label: folder)
    with ``target`` to kill it at (None: a run to the end, watched only when ``watch``); times are seconds
    since ``clock_zero`` (monotonic). Killed at ``sink@N``, a ``foreachBatch`` sink (the harness's, or the
    wrapper around a user's) holds after its marker of batch N for the kill (``config["hold_after_sink"]``), so
    that the kill lands after the sink and before ``commits/N`` however loaded the machine is."""
    if target is not None and target.kind == "sink":
        config = {**config, "hold_after_sink": target.number}
    committed_before = committed_batches(final_files(roots)["checkpoint"])
    watcher_cm = FileWatcher(roots, target, clock_zero=clock_zero) if watch or target else _NoWatcher()
    with watcher_cm as watcher, PipelineProcess(config, run_dir, name, to_the_end=target is None) as process:
        watcher.attach(process.pgid)
        code = process.wait(RUN_TIMEOUT_S)
        hung = None
        if code is None:
            process.kill()
            hung = f"no exit within {RUN_TIMEOUT_S:g} s (hung); log: {process.log_tail()}"
        time.sleep(0.05)  # let the watcher drain its last events
    new_commits = [at for at, label, rel in watcher.events
                   if label == "checkpoint" and (s := step_of(label, rel)) and s[0] == "commit"
                   and s[1] not in committed_before]
    run = DriverRun(process, target, code, process.started, list(watcher.events),
                    new_commits[0] if new_commits else None, watcher.killed, hung)
    if watcher.killed:
        run.files = final_files(roots)
        run.window = classify(run.files, partitions=2)
    return run
