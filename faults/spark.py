"""Spark driver kills between micro-batch commit steps, placed by watching files appear.

A micro-batch commits in steps, each a file renamed into place in the checkpoint or output
directory: ``offsets/N``, the state version ``N+1`` of each partition (or of each store of a partition: a
stream-stream join keeps four) (``N+1.delta``,
``N+1.changelog``, ``N+1.zip``; ``N+1_<uuid>.…`` with checkpoint format v2), the sink's commit
(the file sink's ``_spark_metadata/N``, a marker ``_batches/N`` written after a ``foreachBatch``
sink committed), then ``commits/N``. :class:`FileWatcher` (inotify) SIGKILLs a process group
right after the first final file matching a :class:`CrashTarget` appears (names with a leading
dot, ``.tmp`` and ``.crc`` are never final), or at a random time. The kill lands a little after
the file, so :func:`classify` decides the crash window from what is really on disk afterwards.

On a loaded machine the watcher may see the file late, and the driver may be past the next step by then
(``commit@3`` landing after ``offsets/4``): so once the step just before the target appears (the sink of
batch N for ``commit@N``, ``offsets/N`` for ``state@N``, ``commits/N-1`` for ``offsets@N``), the watcher lowers
the driver's process group to the lowest priority (nice 19): the step to the target and the kill come at once,
and the driver, which dies at the target, is not slowed before it (a ``sink@N`` kill of a ``foreachBatch`` sink
needs none: the sink holds after its marker for the kill, :func:`eos_harness.spark.pipelines.mark_sink_step`).
And the watcher's own thread runs at nice -15 where the harness may raise a priority (root, or CAP_SYS_NICE; else
at its process's): it sleeps until a file appears, and then it must run before the driver writes the next one
(a file sink's ``sink@N``: Spark writes ``commits/N`` a few milliseconds after ``_spark_metadata/N``).

Nothing here knows what a pipeline or a store is: only directories, file names and a process group.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.faults import kinds

__all__ = ["WATCHER_NICE", "CrashTarget", "FileWatcher", "classify", "final_files", "parse_target", "step_of"]

WATCHER_NICE = -15  # the watcher thread's priority where it may be raised (see the module)
_STATE_FILE = re.compile(r"^(\d+)(?:_[0-9a-fA-F-]+)?\.(delta|snapshot|changelog|zip)$")


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class CrashTarget:
    """``offsets@N``, ``state@N``, ``sink@N``, ``commit@N`` (kill right after that step of batch N),
    or ``random@MS`` (kill MS milliseconds after the first ``offsets/`` file this run writes)."""

    kind: str
    number: int

    def __str__(self) -> str:
        return f"{self.kind}@{self.number}"


def parse_target(text: str) -> CrashTarget:
    """``commit@2`` → the target, for a kind the registry holds for the Spark suite."""
    kind, _, number = text.strip().partition("@")
    if kinds.named(kind, kinds.SPARK) is None or not number.isdigit():
        spellings = ", ".join(k.spelling for k in kinds.kinds(kinds.SPARK))
        raise TargetError(f"bad crash point {text!r}: use one of {spellings} "
                          "(N: the batch id; MS: milliseconds after the run's first offsets file)")
    return CrashTarget(kind, int(number))


def is_final(name: str) -> bool:
    return not (name.startswith(".") or name.endswith(".tmp") or name.endswith(".crc"))


def step_of(root: str, relative: str) -> tuple[str, int] | None:
    """The commit step a final file stands for, as (kind, batch id), or None.

    ``root`` is ``checkpoint`` or ``output``; ``relative`` the path below it."""
    parts = relative.split("/")
    name = parts[-1]
    if not is_final(name):
        return None
    if root == "checkpoint":
        if len(parts) == 2 and parts[0] == "offsets" and name.isdigit():
            return "offsets", int(name)
        if len(parts) == 2 and parts[0] == "commits" and name.isdigit():
            return "commit", int(name)
        # state/OP/PARTITION/N.delta, or below a store of the partition: a stream-stream join keeps four
        # (state/OP/PARTITION/left-keyToNumValues/N.delta, …), each its own version files
        if parts[0] == "state" and (len(parts) == 4 or len(parts) == 5 and not parts[3].startswith("_")):
            m = _STATE_FILE.match(name)
            if m:
                return "state", int(m.group(1)) - 1
        return None
    if len(parts) == 2 and parts[0] in ("_spark_metadata", "_batches"):
        number = name.split(".")[0]
        if number.isdigit():
            return "sink", int(number)
    return None


def _approach(target: CrashTarget) -> tuple[str, int] | None:
    """The step just before ``target`` (kind, batch), after which its driver is slowed; None: none is."""
    if target.kind == "commit":
        return "sink", target.number
    if target.kind == "state":
        return "offsets", target.number
    if target.kind == "offsets" and target.number > 0:
        return "commit", target.number - 1
    return None


def final_files(roots: dict[str, Path]) -> dict[str, list[str]]:
    """Every final file under each root, relative, sorted (what a restart will find)."""
    out: dict[str, list[str]] = {}
    for label, root in roots.items():
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if is_final(name):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
        out[label] = sorted(files)
    return out


def classify(files: dict[str, list[str]], partitions: int) -> dict:
    """The crash window the files on disk show: the last batch N with ``offsets/N`` and how far its
    commit got (``after_offsets``, ``after_state`` (k of ``partitions`` state files), ``after_sink``,
    ``after_commit``), or ``before_first_batch``."""
    steps: dict[str, set[int]] = {k: set() for k in ("offsets", "state", "sink", "commit")}
    state_count: dict[int, int] = {}
    for label, names in files.items():
        for rel in names:
            step = step_of(label, rel)
            if step:
                steps[step[0]].add(step[1])
                if step[0] == "state":
                    state_count[step[1]] = state_count.get(step[1], 0) + 1
    if not steps["offsets"]:
        return {"window": "before_first_batch", "batch": None}
    n = max(steps["offsets"])
    if n in steps["commit"]:
        window = "after_commit"
    elif n in steps["sink"]:
        window = "after_sink"
    elif n in steps["state"]:
        window = "after_state"
    else:
        window = "after_offsets"
    result = {"window": window, "batch": n, "state_files": state_count.get(n, 0), "partitions": partitions,
              "sink_written": n in steps["sink"], "committed": sorted(steps["commit"])[-1:] or None}
    return result


@dataclass
class FileWatcher:
    """Watch ``roots`` (label → directory, created if missing) recursively with inotify; record every
    final file as (seconds since start, label, relative path); SIGKILL process group ``pgid`` when
    ``target`` is reached. Use as a context manager; ``attach(pgid)`` once the process exists."""

    roots: dict[str, Path]
    target: CrashTarget | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)
    killed: dict | None = None
    pgid: int | None = None
    slowed: str | None = None  # the file after which the driver was lowered to nice 19 (see the module)
    clock_zero: float = 0.0  # event times are time.monotonic() - clock_zero

    def __post_init__(self) -> None:
        from inotify_simple import INotify, flags

        self._flags = flags
        self._inotify = INotify()
        self._watches: dict[int, tuple[str, Path]] = {}
        self._seen: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._first_offsets: float | None = None
        self._lock = threading.Lock()
        self._scanning = True  # files already on disk (a restart's) are recorded, never a random kill's start
        for label, root in self.roots.items():
            root.mkdir(parents=True, exist_ok=True)
            self._add_tree(label, root)
        self._scanning = False
        self._thread = threading.Thread(target=self._loop, name="spark-file-watcher", daemon=True)

    def __enter__(self) -> FileWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._inotify.close()

    def attach(self, pgid: int) -> None:
        with self._lock:
            self.pgid = pgid

    def _add_tree(self, label: str, directory: Path) -> None:
        f = self._flags
        try:
            wd = self._inotify.add_watch(str(directory), f.CREATE | f.MOVED_TO | f.CLOSE_WRITE)
        except OSError:
            return
        self._watches[wd] = (label, directory)
        # Files or directories made before the watch existed.
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith("."):
                    self._add_tree(label, Path(entry.path))
            else:
                self._file(label, Path(entry.path))

    def _file(self, label: str, path: Path) -> None:
        if not is_final(path.name):
            return
        rel = os.path.relpath(path, self.roots[label])
        if (label, rel) in self._seen:
            return
        self._seen.add((label, rel))
        now = time.monotonic() - self.clock_zero
        self.events.append((round(now, 4), label, rel))
        step = step_of(label, rel)
        if step and step[0] == "offsets" and self._first_offsets is None and not self._scanning:
            self._first_offsets = time.monotonic()
        if self.target and self.killed is None and step == (self.target.kind, self.target.number):
            self._kill(f"{label}/{rel}")
        elif self.target and self.killed is None and step is not None and step == _approach(self.target):
            self._slow(f"{label}/{rel}")

    def _slow(self, reason: str) -> None:
        """The driver's group at the lowest priority, from the step before the target on (see the module)."""
        with self._lock:
            if self.pgid is None or self.slowed is not None:
                return
            try:
                os.setpriority(os.PRIO_PGRP, self.pgid, 19)
            except OSError:
                return
            self.slowed = reason

    def _kill(self, reason: str) -> None:
        with self._lock:
            if self.pgid is None or self.killed is not None:
                return
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                return
            self.killed = {"after": reason, "at": round(time.monotonic() - self.clock_zero, 4)}

    def _loop(self) -> None:
        f = self._flags
        with contextlib.suppress(OSError):  # a higher priority for this thread alone, where permitted (see the module)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WATCHER_NICE)
        while not self._stop.is_set():
            for event in self._inotify.read(timeout=20):
                if event.wd not in self._watches:
                    continue
                label, directory = self._watches[event.wd]
                path = directory / event.name
                if event.mask & f.ISDIR:
                    if event.mask & (f.CREATE | f.MOVED_TO) and not event.name.startswith("."):
                        self._add_tree(label, path)
                elif event.mask & (f.MOVED_TO | f.CLOSE_WRITE):
                    self._file(label, path)
            if (self.target and self.target.kind == "random" and self.killed is None and self._first_offsets
                    and time.monotonic() - self._first_offsets >= self.target.number / 1000):
                self._kill(f"random {self.target.number} ms after the run's first offsets file")
