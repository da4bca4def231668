"""When each check of the lifecycle suite can fire: its condition, a predicate over a scenario's history
(pure, as the checks are). A scenario whose history meets a check's condition exercised it; a campaign
counts them per store (the chaos JSON's ``exercised``) and names each check no scenario of a store met
``not exercised``, never passed; a check that cannot fire on the store (:func:`not_applicable`: what the
store says it is, or declares) is ``not_applicable``, with why, neither passed nor not exercised."""

from __future__ import annotations

from collections.abc import Callable

from eos_harness.models.workloads import WORKLOADS

__all__ = ["CONDITIONS", "TASK_STORE", "declared_not_applicable", "exercised", "not_applicable", "not_exercised_note"]


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


# The checks whose condition needs a transactional persistent store: they cannot fire on another one.
_TRANSACTIONAL_PERSISTENT = ("atomic_commit", "no_wipe")
# Why partitions_one_commit cannot fire on a task's store (a campaign's summary says it of each one).
TASK_STORE = ("it declares it is a task's store, fed by its own changelog partition only "
              "(Capabilities(several_changelog_partitions=False)): no global store's several changelog partitions")


def not_applicable(history: list[dict]) -> dict[str, str]:
    """The checks that cannot fire on the scenario's store, with why, from what the store said it is at its
    first recovery (``transactional()``, ``persistent()``): a store that is not both keeps no commit to
    make atomic nor a wipe to avoid. Empty when no recovery showed it."""
    recover = next((e for e in history if e["type"] == "recover" and "transactional" in e), None)
    if recover is None or (recover["transactional"] and recover.get("persistent")):
        return {}
    lacks = [what for what in ("transactional", "persistent") if not recover.get(what)]
    said = " nor ".join(lacks) if len(lacks) > 1 else lacks[0]
    why = (f"the store says it is {'neither ' if len(lacks) > 1 else 'not '}{said} "
           f"({' and '.join(f'{w}()' for w in lacks)} returned False): it needs a transactional persistent store")
    return dict.fromkeys(_TRANSACTIONAL_PERSISTENT, why)


def declared_not_applicable(window: bool, task_store: bool) -> dict[str, str]:
    """The checks that cannot fire on a store by what it is or declares (its
    :class:`~eos_harness.stores.StoreRef`), with why: partitions_one_commit needs a store fed by several
    changelog partitions, which neither a window store (no windowed workload is a global store) nor a
    task's store is."""
    if window:
        return {"partitions_one_commit": "a window store: no windowed workload feeds it from several changelog "
                                         "partitions (the global workload is a key-value store's)"}
    return {"partitions_one_commit": TASK_STORE} if task_store else {}


def not_exercised_note(campaign: dict) -> str | None:
    """The line a campaign's terminal output ends its tallies with when some check was not exercised on a
    store that ran (not passed): each such check with its condition and the stores, and how to plan a global
    store's crash when no scenario ran its workload; None when every check that applies was exercised."""
    stores = campaign["summary"]["stores"]
    unexercised: dict[str, list[str]] = {}  # check -> the stores none of whose scenarios met its condition
    for store, tally in stores.items():
        for check in tally.get("not_exercised", []):
            unexercised.setdefault(check, []).append(store)
    if not unexercised:
        return None
    ran = [s for s, t in stores.items() if t["scenarios"]]
    # No scenario of the campaign ran a global store's workload (--workloads without global): say how to plan one.
    several = any(WORKLOADS[r["workload"]].changelog_partitions > 1
                  for r in campaign["scenarios"] if r.get("workload") in WORKLOADS)
    hint = {} if several else {"partitions_one_commit": "; no scenario ran a global store's workload: it needs "
                                                        "global in --workloads and a store's third scenario "
                                                        "(its crash during recovery)"}
    return "not exercised (no scenario met the check's condition: not passed): " + "; ".join(
        f"{check} ({CONDITIONS[check][0]}{hint.get(check, '')}) on "
        f"{'every store' if set(on) >= set(ran) else ', '.join(on)}" for check, on in unexercised.items())
