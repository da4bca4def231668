"""When each check of the lifecycle suite can fire: its condition, a predicate over a scenario's history
(pure, as the checks are). A scenario whose history meets a check's condition exercised it; a campaign
counts them per store (the chaos JSON's ``exercised``) and names each check no scenario of a store met
``not exercised``, never passed."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CONDITIONS", "exercised"]


def _restarted_after_crash(history: list[dict], transactional: bool | None = None) -> bool:
    """A recovery (that showed the store) of an instance after one that crashed; ``transactional``: of a
    store of that kind (None: any)."""
    crashed = False
    for event in history:
        crashed = crashed or event["type"] == "crash"
        if event["type"] != "recover" or not crashed or event.get("contents") is None:
            continue
        if transactional is None or (bool(event.get("transactional")) == transactional and event.get("persistent")):
            return True
    return False


def _crashed_in_recovery(history: list[dict]) -> bool:
    recovered = {e["instance"] for e in history if e["type"] == "recover"}
    crashed = {e["instance"] for e in history if e["type"] == "crash" and e["instance"] not in recovered
               and any(s["type"] == "start" and s["instance"] == e["instance"] for s in history)}
    return any(e["type"] == "recover" and e["instance"] - 1 in crashed for e in history)


def _several_partitions(history: list[dict]) -> bool:
    return any(e["type"] == "recover" and len(e.get("recovered_offsets") or {}) > 1 for e in history)


def _any(kind: str) -> Callable[[list[dict]], bool]:
    return lambda history: any(e["type"] == kind for e in history)


# check -> (its condition in words, the predicate over a history)
CONDITIONS: dict[str, tuple[str, Callable[[list[dict]], bool]]] = {
    "atomic_commit": ("a restart after a crash of a transactional persistent store",
                      lambda h: _restarted_after_crash(h, transactional=True)),
    "partitions_one_commit": ("a restart after a crash of a store fed by several changelog partitions (a global "
                              "store)", lambda h: _restarted_after_crash(h) and _several_partitions(h)),
    "no_uncommitted_survives": ("a restart after a crash", _restarted_after_crash),
    "committed_rolls_forward": ("a restart after a crash", _restarted_after_crash),
    "recovery_idempotent": ("a crash during recovery, then a recovery that ends", _crashed_in_recovery),
    "state_matches_model": ("a recovery that shows the store's contents",
                            lambda h: any(e["type"] == "recover" and e.get("contents") is not None for e in h)),
    "exactly_once_output": ("the output read at the end", _any("output")),
    "read_your_own_writes": ("a read by the writer during processing",
                             lambda h: any(e["type"] == "read" and "own" in e for e in h)),
    "read_committed_isolation": ("a read-committed query during processing",
                                 lambda h: any(e["type"] == "read" and "committed" in e for e in h)),
    "no_wipe": ("a restart after a crash of a transactional persistent store",
                lambda h: _restarted_after_crash(h, transactional=True)),
    "task_finishes": ("a task started", _any("start")),
    "store_hang": ("a call into the store", _any("start")),
    "store_raised": ("a call into the store", _any("start")),
    "store_return_type": ("a call into the store", _any("start")),
    "store_directory": ("a store opened", _any("start")),
    "zombie_fenced": ("an instance frozen while a newer one took over (freeze:POINT, txn-timeout)",
                      lambda h: any(e["type"] in ("frozen", "stalled") for e in h)),
}


def exercised(history: list[dict]) -> list[str]:
    """The checks whose condition the scenario's ``history`` met, in :data:`CONDITIONS`' order."""
    return [check for check, (_, met) in CONDITIONS.items() if met(history)]
