"""Scenarios of several changelog partitions (issue 15 item 1): a global store fed by three changelog
partitions, plus a source partition's position, committed together with the data.

- ``partitions_reopen``: commits naming every partition, then only some; ``committed_offset`` for each
  right after, and after a clean close and reopen; a partition never committed is None.
- ``offsets_none_unmanaged``: a store that does not manage offsets (or is not persistent) answers None.
"""

from __future__ import annotations

from pathlib import Path

from eos_harness.store import TopicPartition
from eos_harness.verdict import Violation

from .scenario import CHANGELOGS, NEVER_COMMITTED, SOURCE, Features, LiveStore, Scenario, show_offsets

__all__ = ["SCENARIOS"]

ALL = (*CHANGELOGS, SOURCE)


def _manages_persistently(features: Features) -> str | None:
    if not features.manages_offsets:
        return "the store does not manage offsets (the runtime keeps them in the task's .checkpoint)"
    if not features.persistent:
        return "the store is not persistent: nothing survives a reopen"
    return None


def _offset_violation(check: str, live: LiveStore, tp: TopicPartition, expected, observed, what: str) -> Violation:
    return Violation(check, str(tp), expected, observed,
                     detail=f"{what}: committed_offset({tp}) returned {observed}, expected {expected}\n"
                            f"just before (oldest first):\n{live.recent()}")


def _check_offsets(live: LiveStore, expected: dict[TopicPartition, int | None], check: str, what: str,
                   none_check: str = "never_committed_is_none") -> list[Violation]:
    """The first partition whose offset differs (a None expected is ``none_check``'s business)."""
    got = live.offsets(expected)
    for tp, want in expected.items():
        if got[tp] != want:
            return [_offset_violation(none_check if want is None else check, live, tp, want, got[tp], what)]
    return []


def run_reopen(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    first = {CHANGELOGS[0]: 5 + seed % 7, CHANGELOGS[1]: 40, CHANGELOGS[2]: 3, SOURCE: 17}
    second = {CHANGELOGS[1]: 44, SOURCE: 21}  # only some partitions: the others keep the first commit's
    expected: dict[TopicPartition, int | None] = {**first, **second, NEVER_COMMITTED: None}
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        live.call("recover", None)
        fresh = _check_offsets(live, dict.fromkeys((*ALL, NEVER_COMMITTED)), "never_committed_is_none",
                               "a new store, before any commit")
        if fresh:
            return fresh
        live.call("put", b"a", b"v1")
        live.call("commit", first)
        live.told(f"put a=v1, commit {show_offsets(first)}")
        found = _check_offsets(live, {**first, NEVER_COMMITTED: None}, "partition_offset_exact",
                               "right after a commit naming every partition")
        if found:
            return found
        live.call("put", b"b", b"v1")
        live.call("commit", second)
        live.told(f"put b=v1, commit {show_offsets(second)} (only some partitions)")
        found = _check_offsets(live, expected, "partition_offset_exact",
                               "right after a commit naming only some partitions (the others keep theirs)")
        if found:
            return found
        live.close()
        live.start()
        live.told("reopen")
        found = _check_offsets(live, expected, "partition_offset_survives_reopen", "after close() and a reopen")
        if found:
            return found
        live.call("recover", expected[CHANGELOGS[0]])
        live.told(f"recover({expected[CHANGELOGS[0]]})")
        found = _check_offsets(live, expected, "partition_offset_survives_reopen", "after close(), a reopen and recover")
        live.call("close")
        return found


def run_unmanaged(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    offsets = {CHANGELOGS[0]: 9, CHANGELOGS[1]: 12, CHANGELOGS[2]: 4, SOURCE: 30}
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        manages, persistent = live.call("manages_offsets"), live.call("persistent")
        live.call("recover", None)
        live.call("put", b"a", b"v1")
        live.call("commit", offsets)
        live.told(f"put a=v1, commit {show_offsets(offsets)}")
        want = dict.fromkeys((*ALL, NEVER_COMMITTED)) if not manages else {**offsets, NEVER_COMMITTED: None}
        why = ("right after a commit, for a store whose manages_offsets() is False" if not manages
               else "right after a commit: a partition never committed")
        found = _check_offsets(live, want, "partition_offset_exact", why)
        if found:
            return found
        live.kill()
        live.start()
        live.told("restart after the SIGKILL")
        if not persistent:
            want = dict.fromkeys((*ALL, NEVER_COMMITTED))
            why = "after a restart of a store that is not persistent"
        else:
            why = "after a commit, a SIGKILL and a restart"
        found = _check_offsets(live, want, "partition_offset_exact", why)
        live.call("close")
        return found


SCENARIOS = [
    Scenario("partitions_reopen", ("partition_offset_exact", "partition_offset_survives_reopen",
                                   "never_committed_is_none"), _manages_persistently, run_reopen),
    Scenario("offsets_none", ("never_committed_is_none",), lambda features: None, run_unmanaged),
]
