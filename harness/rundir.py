"""Run directories: the one place where the harness creates, reuses or empties a directory of results.

A run directory is created fresh and marked as the harness's own (a ``.eos-harness-run`` file
saying what created it). An existing directory is reused only when it carries the marker and the
user asked for it (``--overwrite``), and even then only what the harness makes there (scenario
folders, histories, verdicts, state and broker files) is removed. A directory holding anything
else is never emptied: the harness refuses, naming it. A user-given directory's parent must
exist (the harness creates no directories outside the one it was given).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import sys
import time
from pathlib import Path

__all__ = ["MARKER", "RunDirError", "check_output_file", "claim", "is_marked", "prepare"]

MARKER = ".eos-harness-run"
# What the harness writes at the top of a run directory (a campaign, a lifecycle or Spark scenario).
HARNESS_MADE = (
    MARKER, "scenario-*", "[0-9][0-9][0-9]-*", "chaos.json", "campaign.json", "results.jsonl", "history.jsonl", "verdict.json",
    "broker.sqlite*", "state", "state-*", "input", "output", "checkpoint", "run-*.config.json", "run-*.log",
    "run-*.report.jsonl", "snapshots", "report.html", "children.log",
)


class RunDirError(ValueError):
    """The run directory cannot be used as asked (a usage error: nothing was run)."""


def is_marked(path: Path) -> bool:
    return (path / MARKER).is_file()


def _harness_made(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in HARNESS_MADE)


def _mark(path: Path) -> None:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "eos-harness"
    (path / MARKER).write_text(f"made by eos-harness (pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')}): "
                               f"{command}\nThe harness may empty this directory of its own results "
                               "(--overwrite); delete this file to keep it from doing so.\n")


def _clear_harness_content(path: Path) -> None:
    for entry in path.iterdir():
        if entry.name == MARKER or not _harness_made(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def prepare(out: str | Path, *, overwrite: bool = False, given: bool = True) -> Path:
    """Make ``out`` the command's run directory, or raise :class:`RunDirError` before anything runs.

    ``given``: the user named it (``--out``): its parent must exist. Otherwise it is a default
    (``runs/run-<seed>``), created with its parents. An existing directory is used when it is
    empty; when it is one the harness made, only with ``overwrite`` (its results are removed).
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
            _mark(path)
        except OSError as exc:
            raise RunDirError(f"--out {out}: cannot create the run directory: {exc.strerror or exc}") from None
        return path
    entries = [e.name for e in path.iterdir()]
    if not entries:
        try:
            _mark(path)
        except OSError as exc:
            raise RunDirError(f"--out {out}: cannot write in this directory: {exc.strerror or exc}") from None
        return path
    if not is_marked(path):
        shown = ", ".join(sorted(entries)[:3]) + (" …" if len(entries) > 3 else "")
        raise RunDirError(f"--out {out}: the directory is not empty and was not made by eos-harness ({shown}); "
                          "the harness never deletes what it did not create: give a new or empty directory")
    if not overwrite:
        raise RunDirError(f"--out {out}: holds the results of an earlier run; pass --overwrite to replace them, "
                          "or give another directory")
    try:
        _clear_harness_content(path)
        _mark(path)
    except OSError as exc:
        raise RunDirError(f"--out {out}: cannot remove the earlier results: {exc}") from None
    return path


def claim(path: Path) -> Path:
    """A scenario's own directory, used by the runners: created (with its parents) and marked, or,
    when it exists and is the harness's (or empty), emptied of the harness's earlier results. A
    directory with anything else in it raises :class:`RunDirError`."""
    path = Path(path)
    if path.is_dir() and any(path.iterdir()) and not is_marked(path):
        raise RunDirError(f"{path}: the directory is not empty and was not made by eos-harness; "
                          "the harness never deletes what it did not create: give a new or empty directory")
    if path.is_dir():
        _clear_harness_content(path)
    else:
        path.mkdir(parents=True)
    _mark(path)
    return path


def check_output_file(path: str | Path, option: str = "--json") -> Path:
    """A file the command will write its results to: its directory must exist and be writable, and
    it must not be a directory. Raises :class:`RunDirError` (checked before anything runs)."""
    target = Path(path)
    parent = target.absolute().parent
    if target.is_dir():
        raise RunDirError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise RunDirError(f"{option} {path}: the directory {parent} does not exist; create it first "
                          "(the harness creates no directories outside the run directory)")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise RunDirError(f"{option} {path}: not writable")
    return target


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file renamed into place (never a half-written file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
