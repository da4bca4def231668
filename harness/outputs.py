"""The files a command writes where the user said (``--json``, ``--junit``, ``--log``, the report's
``--out``), checked in one place before anything runs.

A command replaces only what the user asked it to replace: a regular file, or a new name in an
existing, writable directory. Everything else is a usage error (exit 2) naming the option and the
path: a directory, a device, a FIFO or a socket; a symbolic link (replacing it would leave its
target with the old content); a name longer than the file system allows; two outputs at one path
(they would overwrite each other); a file the harness itself writes in the run directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from eos_harness.rundir import LOCK, MARKER, RunDirError, _harness_made

__all__ = ["check_outputs"]

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}


def check_outputs(outputs: Mapping[str, str | Path | None], run_dir: str | Path | None = None,
                  run_dir_writes: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Check every output file ``outputs`` names (option → path; None: not asked for) and return them
    as paths. ``run_dir``: the command's run directory, where no output may take the name of a file the
    harness writes there, except ``run_dir_writes`` (option → the name that option writes there by
    default, e.g. ``{"--json": "chaos.json"}``). Raises :class:`~eos_harness.rundir.RunDirError`."""
    checked: dict[str, Path] = {}
    at: dict[tuple, str] = {}
    for option, given in outputs.items():
        if given is None or given == "":
            continue
        path = Path(given)
        label = f"{option} {given}" if option else str(given)
        if run_dir is not None:
            _check_not_the_harness_own(path, label, Path(run_dir), (run_dir_writes or {}).get(option))
        _check_one(path, label)
        key = _identity(path)
        if key in at:
            other = at[key]
            raise RunDirError(f"{label}: {other} {outputs[other]} is the same file; two outputs at one path "
                              "would overwrite each other: give each its own file")
        at[key] = option
        checked[option] = path
    return checked


def _check_one(path: Path, label: str) -> None:
    name = path.name
    if name in ("", ".", ".."):
        raise RunDirError(f"{label}: is a directory; give a file name")
    parent = path.absolute().parent
    try:
        limit = os.pathconf(parent if parent.is_dir() else "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    size = len(os.fsencode(name))
    if size > limit:
        raise RunDirError(f"{label}: its file name is {size} bytes long, more than the file system allows "
                          f"({limit}); give a shorter name")
    if len(os.fsencode(str(path.absolute()))) >= 4096:
        raise RunDirError(f"{label}: the path is longer than the system allows (4096 bytes); give a shorter one")
    try:
        status = path.lstat()
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise RunDirError(f"{label}: cannot be used: {exc.strerror or exc}") from None
    if status is not None and not stat.S_ISREG(status.st_mode):
        kind = _KINDS.get(stat.S_IFMT(status.st_mode), "not a regular file")
        if stat.S_ISLNK(status.st_mode):
            raise RunDirError(f"{label}: is a symbolic link (to {os.readlink(path)}); the harness replaces only "
                              "regular files: give the path of the file itself, or a new name")
        raise RunDirError(f"{label}: is {kind}; the harness writes only regular files: give a file name")
    if not parent.is_dir():
        raise RunDirError(f"{label}: the directory {parent} does not exist; create it first "
                          "(the harness creates no directories outside the run directory)")
    if not os.access(parent, os.W_OK | os.X_OK) or (status is not None and not os.access(path, os.W_OK)):
        raise RunDirError(f"{label}: not writable")


def _identity(path: Path) -> tuple:
    """One key per file: the real directory and the name (two names of one existing file: its inode)."""
    try:
        status = path.stat()
        return ("inode", status.st_dev, status.st_ino)
    except OSError:
        return ("name", os.path.realpath(path.absolute().parent), path.name)


def _check_not_the_harness_own(path: Path, label: str, run_dir: Path, allowed: str | None) -> None:
    if os.path.realpath(path.absolute().parent) != os.path.realpath(run_dir.absolute()):
        return
    name = path.name
    if name == allowed:
        return
    if name in (MARKER, LOCK) or _harness_made(name):
        raise RunDirError(f"{label}: the harness writes its own {name} in the run directory {run_dir}; "
                          "give another name")
