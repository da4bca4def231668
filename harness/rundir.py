"""Run directories: the one place where the harness creates, reuses or empties a directory of results.

A run directory is created fresh and marked as the harness's own (a ``.eos-harness-run`` file
saying what created it). An existing directory is reused only when it carries the marker and the
user asked for it (``--overwrite``), and even then only what the harness makes there (scenario
folders, histories, verdicts, state and broker files) is removed. A directory holding anything
else is never emptied: the harness refuses, naming it. A user-given directory's parent must
exist (the harness creates no directories outside the one it was given).

One command owns a run directory for its whole life: :func:`hold` takes a lock on a file inside it
(``.eos-harness-lock``, ``flock``: the operating system releases it when the process ends, however it
ends) and writes who holds it (pid, command line, start time). A second command on the directory (a
second ``--resume``, ``--overwrite`` into a running campaign's directory, ``report`` writing its page
there) is refused, naming the holder. A default run directory is new for every run
(``runs/<UTC time>-<command>-seed<N>``, :func:`new_run_dir`), with ``runs/latest`` a symbolic link to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from eos_harness.commands import command_line

__all__ = ["LATEST", "LOCK", "MARKER", "RunDirError", "claim", "hold", "is_marked",
           "new_run_dir", "prepare", "release_all", "run_directory"]

MARKER = ".eos-harness-run"
LOCK = ".eos-harness-lock"  # the lock a command holds on its run directory for its whole life (never removed)
LATEST = "latest"  # runs/latest: a symbolic link to the newest default run directory
# What the harness writes at the top of a run directory (a campaign, a lifecycle or Spark scenario).
HARNESS_MADE = (
    MARKER, "scenario-*", "[0-9][0-9][0-9]-*", "chaos.json", "campaign.json", "results.jsonl", "history.jsonl", "verdict.json",
    "broker.sqlite*", "state", "state-*", "input", "output", "checkpoint", "run-*.config.json", "run-*.log",
    "run-*.report.jsonl", "snapshots", "report.html", "children.log",
)


class RunDirError(ValueError):
    """The run directory cannot be used as asked (a usage error: nothing was run)."""


def is_marked(path: str | Path) -> bool:
    return os.path.isfile(os.path.join(path, MARKER))  # False, never an error, for a directory it cannot read


def _harness_made(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in HARNESS_MADE)


def _mark(path: Path) -> None:
    command = command_line(*sys.argv[1:])  # however it was started (a script path, python -m …)
    (path / MARKER).write_text(f"made by eos-harness (pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')}): "
                               f"{command}\nThe harness may empty this directory of its own results "
                               "(--overwrite); delete this file to keep it from doing so.\n")


def _clear_harness_content(path: Path) -> None:
    for entry in path.iterdir():
        if entry.name in (MARKER, LOCK) or not _harness_made(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def prepare(out: str | Path, *, overwrite: bool = False, given: bool = True) -> Path:
    """Make ``out`` the command's run directory, held by this command (:func:`hold`) for its whole
    life, or raise :class:`RunDirError` before anything runs.

    ``given``: the user named it (``--out``): its parent must exist. Otherwise it is a default,
    created with its parents. An existing directory is used when it is empty; when it is one the
    harness made, only with ``overwrite`` (its results are removed), and never while another command
    holds it.
    """
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"--out {out}: is a file, not a directory; give a directory to write results in")
    if not path.exists():
        parent = path.absolute().parent
        if given and not parent.is_dir():
            raise RunDirError(f"--out {out}: its parent directory {parent} does not exist; create it first "
                              "(the harness creates no directories outside the run directory)")
        try:
            path.mkdir(parents=not given)
        except OSError as exc:
            raise RunDirError(f"--out {out}: cannot create the run directory: {exc.strerror or exc}") from None
        hold(path, "--out")
        _mark_or_refuse(path, out)
        return path
    try:
        entries = [e.name for e in path.iterdir() if e.name != LOCK]
    except OSError as exc:
        raise RunDirError(f"--out {out}: cannot read the directory: {exc.strerror or exc}") from None
    if not entries:
        hold(path, "--out")
        _mark_or_refuse(path, out)
        return path
    if not is_marked(path):
        shown = ", ".join(sorted(entries)[:3]) + (" …" if len(entries) > 3 else "")
        raise RunDirError(f"--out {out}: the directory is not empty and was not made by eos-harness ({shown}); "
                          "the harness never deletes what it did not create: give a new or empty directory")
    hold(path, "--out")  # a command running there is named, whatever else is asked
    if not overwrite:
        raise RunDirError(f"--out {out}: holds the results of an earlier run; pass --overwrite to replace them, "
                          "or give another directory")
    try:
        _clear_harness_content(path)
        _mark(path)
    except OSError as exc:
        raise RunDirError(f"--out {out}: cannot remove the earlier results: {exc}") from None
    return path


def _mark_or_refuse(path: Path, out: str | Path) -> None:
    try:
        _mark(path)
    except OSError as exc:
        raise RunDirError(f"--out {out}: cannot write in this directory: {exc.strerror or exc}") from None


def run_directory(out: str | Path | None, command: str, seed: int | None, *, overwrite: bool = False,
                  root: str | Path = "runs") -> Path:
    """The run directory of ``command`` (``run``, ``chaos``, ``spark-chaos``, …): ``out`` when the user
    gave one (:func:`prepare`), else a new one under ``root`` (:func:`new_run_dir`). Held by this command."""
    if out is not None:
        return prepare(out, overwrite=overwrite, given=True)
    return new_run_dir(command, seed, root)


_DEFAULT_NAME = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9-]+$")


def new_run_dir(command: str, seed: int | None, root: str | Path = "runs") -> Path:
    """A new run directory ``root/<UTC time>-<command>-seed<N>`` (``-2``, ``-3``, … when a run of the
    same second took that name), created (with ``root``), held and marked; ``root/latest`` is made a
    symbolic link to it, unless ``latest`` is something the harness did not make (then it is left alone)."""
    base = Path(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot create {base} for the run directory: {exc.strerror or exc}; "
                          "give one with --out") from None
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{command}" + (f"-seed{seed}" if seed is not None else "")
    for attempt in range(1, 1000):
        path = base / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise RunDirError(f"cannot create the run directory {path}: {exc.strerror or exc}; "
                              "give one with --out") from None
        break
    else:  # pragma: no cover - a thousand runs in one second
        raise RunDirError(f"cannot find a new name for the run directory under {base}; give one with --out")
    hold(path, "the run directory")
    _mark_or_refuse(path, path)
    point_latest(path)
    return path


def point_latest(path: Path) -> bool:
    """Make ``path.parent/latest`` a symbolic link to ``path`` (replaced atomically). Only a ``latest``
    the harness made (a link to a sibling run directory of its own naming) is replaced; anything else
    there is left alone (returns False)."""
    latest = path.parent / LATEST
    if latest.is_symlink():
        target = os.readlink(latest)
        if "/" in target or not _DEFAULT_NAME.match(target):
            return False
    elif os.path.lexists(latest):
        return False
    temporary = path.parent / f".{LATEST}-{os.getpid()}"
    try:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        temporary.symlink_to(path.name)
        os.replace(temporary, latest)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return False
    return True


# ---------------------------------------------------------------------------------------------- the lock

_HELD: dict[tuple[int, int], int] = {}  # (device, inode) of a held run directory -> the lock file's descriptor


def hold(directory: str | Path, option: str = "") -> None:
    """Hold ``directory`` for this command's whole life (released when the process ends, or by
    :func:`release_all`). Raises :class:`RunDirError` naming the holder (pid, command line, start time)
    when another command holds it. Holding a directory this process holds already is a no-op."""
    path = Path(directory)
    label = f"{option} {directory}" if option and option != "the run directory" else str(directory)
    try:
        status = path.stat()
    except OSError as exc:
        raise RunDirError(f"{label}: cannot be used: {exc.strerror or exc}") from None
    key = (status.st_dev, status.st_ino)
    if key in _HELD:
        return
    lock = path / LOCK
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise RunDirError(f"{label}: cannot take the run directory's lock ({lock}): {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        who = _read_holder(fd)
        os.close(fd)
        raise RunDirError(f"{label}: in use by another eos-harness command ({who}); one command at a time "
                          "owns a run directory: wait for it to end (or stop it), or give another directory") from None
    command = command_line(*sys.argv[1:])
    record = {"pid": os.getpid(), "command": command,
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    _HELD[key] = fd


def _read_holder(fd: int) -> str:
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        return f"pid {int(record['pid'])}, started {record['started']}: {record['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid is not recorded yet"


def release_all() -> None:
    """Release every run directory this process holds (the end of a command run in-process)."""
    for fd in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


def claim(path: Path) -> Path:
    """A scenario's own directory, used by the runners: created (with its parents) and marked, or,
    when it exists and is the harness's (or empty), emptied of the harness's earlier results. A
    directory with anything else in it raises :class:`RunDirError`."""
    path = Path(path)
    if path.is_dir() and any(e.name != LOCK for e in path.iterdir()) and not is_marked(path):
        # the lock alone is this command's own (hold): the directory is still empty
        raise RunDirError(f"{path}: the directory is not empty and was not made by eos-harness; "
                          "the harness never deletes what it did not create: give a new or empty directory")
    if path.is_dir():
        _clear_harness_content(path)
    else:
        path.mkdir(parents=True)
    _mark(path)
    return path


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file renamed into place (never a half-written file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
