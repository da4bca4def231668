"""Commands the harness prints for a user to paste (a scenario's replay, the JSON's ``repro``, a
campaign's ``to resume`` line): every word shell-quoted, here and nowhere else, so that a path with a
space or a quote in it pastes as it was."""

from __future__ import annotations

import shlex

__all__ = ["PROGRAM", "command_line"]

PROGRAM = "eos-harness"


def command_line(*words: object) -> str:
    """``eos-harness WORD…`` as one shell line, each word quoted when it needs to be:
    ``command_line("chaos", "--resume", Path("runs/my run"))`` → ``eos-harness chaos --resume 'runs/my run'``."""
    return shlex.join([PROGRAM, *(str(word) for word in words)])
