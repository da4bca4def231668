"""Zombie instances: a process frozen at a fault point while a newer one takes over its work.

A suite's runner collects the zombies of a scenario in :func:`zombies`; when the scenario's
instances have run, each zombie is woken and must find itself fenced. Whatever happens, none is
left running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["zombies"]


@contextlib.contextmanager
def zombies() -> Iterator[list[Any]]:
    """A list for the scenario's frozen instances (each with ``resume()``, ``collect()``, ``proc`` and
    ``reap()``). When the block ends normally each is resumed and collected (its events recorded);
    when it ends in any way, each still alive is killed and reaped."""
    frozen: list[Any] = []
    try:
        yield frozen
        for zombie in frozen:  # wake the zombies: each must find itself fenced
            zombie.resume()
            zombie.collect()
    finally:
        for zombie in frozen:
            if zombie.proc.is_alive():
                zombie.proc.kill()
                zombie.reap()
