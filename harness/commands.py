"""Commands the harness prints for a user to paste (a scenario's replay, the JSON's ``repro``, a
campaign's ``to resume`` line): every word shell-quoted, here and nowhere else, so that a path with a
space or a quote in it pastes as it was."""

from __future__ import annotations

import os
import shlex

__all__ = ["PROGRAM", "command_line"]

PROGRAM = "eos-harness"
# Settings read from the environment that decide what a command runs: a printed command carries each one
# set, so that it replays the same thing in another shell (EOS_KAFKA_VERSION: the Kafka the harness starts).
DECIDING_ENV = ("EOS_KAFKA_VERSION",)


def command_line(*words: object) -> str:
    """``eos-harness WORD…`` as one shell line, each word quoted when it needs to be:
    ``command_line("chaos", "--resume", Path("runs/my run"))`` → ``eos-harness chaos --resume 'runs/my run'``.
    Preceded by ``NAME=value`` for each setting of :data:`DECIDING_ENV` this process has."""
    settings = [f"{name}={shlex.quote(os.environ[name])}" for name in DECIDING_ENV if os.environ.get(name)]
    return " ".join([*settings, shlex.join([PROGRAM, *(str(word) for word in words)])])
