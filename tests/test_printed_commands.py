"""Every command the harness prints for a user to paste (a scenario's replay, the JSON's ``repro``, a
campaign's ``to resume`` line) is shell-quoted (``eos_harness.commands.command_line``): pasted into a
shell from a directory whose path holds a space and a non-ASCII letter, it runs and gives the same
verdict."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import EOS_BIN

MUTANT = "mutant-recover-keeps-uncommitted"  # caught within a few scenarios


def shell(line: str, cwd: Path) -> subprocess.CompletedProcess:
    """``line`` as a user pastes it into bash (``eos-harness`` on the PATH), in ``cwd``."""
    env = {**os.environ, "PATH": f"{Path(EOS_BIN).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "400"}
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def printed(prefix: str, output: str) -> str:
    [line] = [line for line in output.splitlines() if line.startswith(prefix)]
    return line[len(prefix):]


def test_printed_commands_paste_into_a_shell_from_paths_with_spaces_and_accents(tmp_path):
    here = tmp_path / "dir with space" / "é"
    here.mkdir(parents=True)
    out = here / "campaign ü"
    stopped = shell(f"eos-harness chaos --stores {MUTANT} --scenarios 20 --seed 1 --until-failure --no-report "
                    f"--out '{out}'", here)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr  # a mutant caught: what the campaign expects
    resume = printed("to resume: ", stopped.stdout)
    assert f"'{out}'" in resume, resume  # the directory's path, quoted
    first = json.loads((out / "chaos.json").read_text())
    [caught] = [r for r in first["scenarios"] if r["verdict"] == "fail"]

    # The failing scenario's replay, pasted: the same verdict (a promise broken, exit 1).
    replayed = shell(caught["repro"], here)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "verdict: fail" in replayed.stdout

    # The resume line, pasted: the campaign goes on in the same directory.
    resumed = shell(resume, here)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(json.loads((out / "chaos.json").read_text())["scenarios"]) > len(first["scenarios"])
