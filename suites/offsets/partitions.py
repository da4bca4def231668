"""Scenarios of several changelog partitions (issue 15 item 1): a global store fed by three changelog
partitions, plus a source partition's position, committed together with the data.

- ``partitions_reopen``: commits naming every partition, then only some; ``committed_offset`` for each
  right after, and after a clean close and reopen; a partition never committed is None.
- ``offsets_none``: a store that does not manage offsets (or is not persistent) answers None for every
  partition; one that does, None for a partition never committed (also after a SIGKILL).
- ``partitions_crash``: a SIGKILL before and after a commit of every partition, and a crash at each
  crash point the store reaches inside that commit (its first hit): after recovery the data and
  every partition's offset are those of one commit.
- ``flush_noop``: ``flush()`` makes no write visible to ``read_committed()`` or durable, and records
  no offset.
"""

from __future__ import annotations

from dataclasses import replace
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
    got = live.offsets(expected)  # a task's store is asked for its own partition alone
    for tp, offset in got.items():
        if offset != expected[tp]:
            want = expected[tp]
            return [_offset_violation(none_check if want is None else check, live, tp, want, offset, what)]
    return []


def _put_commit_check(live: LiveStore, key: bytes, offsets: dict[TopicPartition, int],
                      expected: dict[TopicPartition, int | None], every_partition: bool) -> list[Violation]:
    """Put ``key``=v1 and commit ``offsets`` (naming every partition, or only some); then each
    partition's committed offset must be ``expected``'s."""
    live.call("put", key, b"v1")
    live.call("commit", offsets)
    live.told(f"put {key.decode()}=v1, commit {show_offsets(offsets)}" + ("" if every_partition else " (only some partitions)"))
    naming = "every partition" if every_partition else "only some partitions (the others keep theirs)"
    return _check_offsets(live, expected, "partition_offset_exact", f"right after a commit naming {naming}")


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
        found = (_put_commit_check(live, b"a", first, {**first, NEVER_COMMITTED: None}, every_partition=True)
                 or _put_commit_check(live, b"b", second, expected, every_partition=False))
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
        if not live.several:  # a task's store (partitions_reopen, which asks this first, is not run for it)
            fresh = _check_offsets(live, dict.fromkeys(CHANGELOGS[:1]), "never_committed_is_none",
                                   "a new store, before any commit")
            if fresh:
                return fresh
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
        found = _check_offsets(live, want, "partition_offset_survives_reopen" if persistent else "partition_offset_exact",
                               why)
        live.call("close")
        return found


# -- a crash inside (or around) a commit of several partitions ----------------------------------------

BASE = [(b"a", b"v1"), (b"b", b"v1"), (b"c", b"v1")]
WRITES = [(b"a", b"v2"), (b"d", b"v1"), (b"b", None)]


def _commit_offsets(seed: int) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The offsets of the base commit and of the commit that crashes: every partition moves."""
    shift = seed % 5
    first = {CHANGELOGS[0]: 10 + shift, CHANGELOGS[1]: 20, CHANGELOGS[2]: 30 + shift, SOURCE: 100}
    return first, {CHANGELOGS[0]: 13 + shift, CHANGELOGS[1]: 26, CHANGELOGS[2]: 31 + shift, SOURCE: 107}


def _reached_in_commit(spec: str, workdir: Path, store_timeout: float) -> list[str]:
    """The crash points the store reaches in a commit of several partitions (traced in a child)."""
    first, _ = _commit_offsets(0)
    with LiveStore(spec, workdir / "trace", store_timeout) as live:
        live.start(trace=True)
        offers = live.call("capabilities")
        live.call("recover", None)
        live.put_all(BASE, offers)
        live.call("commit", first)
        return [name for name, _ in dict.fromkeys(live.close()) if not name.startswith("task.")]


def _judge_recovery(live: LiveStore, outcomes: list[tuple[str, dict, dict]], data: dict,
                    offsets: dict[TopicPartition, int | None],
                    uncommitted: dict[bytes, bytes | None] | None = None) -> Violation | None:
    """What a restarted store holds must be one of ``outcomes`` (label, data, offsets), whole (the
    offsets of the partitions the store was asked for: a task's store, its own partition alone).
    ``uncommitted``: the writes made after the last commit and given to none (the store was killed
    with them open): when the offsets are the last commit's and one of them is in the data, the
    promise broken is the conformance suite's no_uncommitted_survives, not that data and offsets go
    together."""
    outcomes = [(label, want, {tp: offs.get(tp) for tp in offsets}) for label, want, offs in outcomes]
    if any(data == want and offsets == offs for _, want, offs in outcomes):
        return None
    shown = show_offsets(offsets)
    story = f"\njust before (oldest first):\n{live.recent()}"
    lost = [tp for tp, got in offsets.items() if got is None and any(o[tp] is not None for _, _, o in outcomes)]
    if lost:
        tp = lost[0]
        return Violation("partition_offset_survives_reopen", str(tp), [o[tp] for _, _, o in outcomes], None,
                         detail=f"after the crash and a restart, committed_offset({tp}) returned None: the store "
                                f"forgot a committed partition (offsets {shown}){story}")
    by_partition = {tp: {label for label, _, o in outcomes if o[tp] == got} for tp, got in offsets.items()}
    labels = [label for label, _, _ in outcomes]
    if all(by_partition.values()) and not set.intersection(*by_partition.values()):
        ahead = [str(tp) for tp, ls in by_partition.items() if labels[-1] in ls and labels[0] not in ls]
        behind = [str(tp) for tp, ls in by_partition.items() if labels[0] in ls and labels[-1] not in ls]
        return Violation("partitions_committed_together", ", ".join(behind), show_offsets(outcomes[-1][2]), shown,
                         detail=f"after a crash inside the commit and a restart, {', '.join(ahead)} hold the "
                                f"offsets of {labels[-1]} but {', '.join(behind)} those of {labels[0]}: the "
                                f"partitions of one commit were not committed together{story}")
    matching = [label for label, _, o in outcomes if o == offsets]
    holding = [label for label, want, _ in outcomes if want == data]
    if matching and holding:
        return Violation("offsets_match_data", None, f"data and offsets of {matching[0]}",
                         f"data of {holding[0]}, offsets of {matching[0]}",
                         detail=f"after the crash and a restart, the store holds the data of {holding[0]} but the "
                                f"offsets of {matching[0]} ({shown}): data and offsets were not written "
                                f"together{story}")
    survived = _survived(uncommitted or {}, outcomes[0][1], data) if matching and len(outcomes) == 1 else []
    if survived:
        told = ", ".join(f"{k.decode('latin-1')}={v.decode('latin-1')}" if v is not None
                         else f"the delete of {k.decode('latin-1')}" for k, v in survived)
        return Violation("no_uncommitted_survives", survived[0][0].decode("latin-1"), show_data(outcomes[0][1]),
                         show_data(data),
                         detail=f"after a SIGKILL with writes never committed and a restart, the store holds the "
                                f"uncommitted {told} (the offsets are those of {matching[0]}, {shown}): an "
                                f"uncommitted write survived the crash{story}")
    if matching:
        return Violation("offsets_match_data", None, [show_data(w) for _, w, _ in outcomes], show_data(data),
                         detail=f"after the crash and a restart, the offsets are those of {matching[0]} ({shown}) "
                                f"but the data is that of no commit: {show_data(data)}{story}")
    tp = next(tp for tp, ls in by_partition.items() if not ls)
    return Violation("partition_offset_exact", str(tp), [o[tp] for _, _, o in outcomes], offsets[tp],
                     detail=f"after the crash and a restart, committed_offset({tp}) returned {offsets[tp]}, which "
                            f"no commit gave it (offsets {shown}){story}")


def _survived(uncommitted: dict[bytes, bytes | None], committed: dict[bytes, bytes],
              data: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The writes of ``uncommitted`` (None: a delete) that the recovered ``data`` shows, where the
    ``committed`` data differs from them."""
    return [(k, v) for k, v in uncommitted.items()
            if committed.get(k) != v and (data.get(k) == v if v is not None else k not in data)]


def show_data(data: dict[bytes, bytes]) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in sorted(data.items())}


def _reads_written(live: LiveStore, offers, expected: dict[bytes, bytes], what: str) -> Violation | None:
    """read_your_own_writes (the conformance suite's promise): right after ``what``, the store's
    contents are exactly the writes made (``expected``): never a row no write made (offsets or
    positions kept among the data), nor one lost."""
    data = live.contents(offers)
    if data == expected:
        return None
    extra = {k: v for k, v in data.items() if expected.get(k) != v}
    missing = [k for k in expected if k not in data]
    told = (f"lists {show_data(extra)}, which no write made" if extra
            else f"misses {[k.decode('latin-1') for k in missing]}")
    return Violation("read_your_own_writes", next(iter(show_data(extra) or {k.decode("latin-1"): 0 for k in missing})),
                     show_data(expected), show_data(data),
                     detail=f"right after {what}, the store {told} (its contents: {show_data(data)})"
                            f"\njust before (oldest first):\n{live.recent()}")


def run_crash(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    first, second = _commit_offsets(seed)
    points = _reached_in_commit(spec, workdir, store_timeout)
    cases: list[tuple[str, str | None, int]] = [("kill before commit", None, 0), ("kill after commit", None, 1)]
    cases += [(f"crash at {point}", point, 1) for point in points]
    found: dict[str, Violation] = {}
    for number, (label, point, hit) in enumerate(cases):
        with LiveStore(spec, workdir / f"case-{number}", store_timeout) as live:
            live.start()
            offers = live.call("capabilities")
            live.call("recover", None)
            live.put_all(BASE, offers)
            live.call("commit", first)
            live.told(f"put_all {show_data(dict(BASE))}, commit #1 {show_offsets(first)}")
            violation = _reads_written(live, offers, dict(BASE), "commit #1")
            if violation is not None:
                found.setdefault(violation.check, replace(violation, case=f"offsets: partitions_crash: {label}"))
                continue
            live.put_all(WRITES, offers)
            live.told("put a=v2, d=v1, b=None (a tombstone)")
            data_first = dict(BASE)
            data_second = {k: v for k, v in {**data_first, **dict(WRITES)}.items() if v is not None}
            outcomes = [("commit #1", data_first, {**first, NEVER_COMMITTED: None})]
            after = ("commit #2", data_second, {**second, NEVER_COMMITTED: None})
            if point is None:
                if hit:
                    live.call("commit", second)
                    live.told(f"commit #2 {show_offsets(second)}")
                    outcomes = [after]
                live.kill()
            elif live.commit_crashing(second, point, hit):
                outcomes.append(after)
            else:
                live.call("close")
                continue
            if not offers.commit_durable:  # durable once flushed: any commit since it was opened, or none
                earlier = [("no commit", {}, {}), ("commit #1", data_first, {**first, NEVER_COMMITTED: None})]
                outcomes = [*(o for o in earlier if o[0] not in {label for label, _, _ in outcomes}), *outcomes]
            live.start()
            offset = live.call("committed_offset", CHANGELOGS[0])
            live.call("recover", offset)
            live.told(f"restarted; recover({offset})")
            violation = _judge_recovery(live, outcomes, live.contents(offers), live.offsets([*ALL, NEVER_COMMITTED]),
                                        uncommitted=dict(WRITES) if point is None and not hit else None)
            live.call("close")
        if violation is not None and violation.check not in found:
            found[violation.check] = replace(violation, case=f"offsets: partitions_crash: {label}")
    return list(found.values())


def _transactional_managing(features: Features) -> str | None:
    if not features.transactional:
        return ("the store is not transactional: after a crash the runtime wipes it and restores it from the "
                "changelog, so what a crash leaves is never read")
    return _manages_persistently(features)


# -- flush() is a no-op (KIP-892) ------------------------------------------------------------------------

def run_flush(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    first = {CHANGELOGS[0]: 7, CHANGELOGS[1]: 8, CHANGELOGS[2]: 9, SOURCE: 40 + seed % 3}
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        offers = live.call("capabilities")
        live.call("recover", None)
        live.call("put", b"a", b"v1")
        live.call("commit", first)
        live.told(f"put a=v1, commit {show_offsets(first)}")
        wrong = _reads_written(live, offers, {b"a": b"v1"}, "the commit")
        if wrong is not None:
            return [wrong]
        live.call("put", b"b", b"v2")
        live.call("flush")
        live.told("put b=v2, flush()")

        def broke(key, expected, observed, what: str) -> list[Violation]:
            return [Violation("flush_is_noop", key, expected, observed,
                              detail=f"{what}: flush() must commit nothing (KIP-892 made it a no-op; a processor "
                                     f"asks for a commit through its context)\njust before (oldest first):\n"
                                     f"{live.recent()}")]

        seen = live.call("rc_get", b"b")
        if seen is not None:
            return broke("b", None, seen.decode("latin-1"), "after flush(), read_committed().get('b') shows the "
                         "uncommitted write b=v2")
        offsets = live.offsets([*ALL, NEVER_COMMITTED])
        if offsets != live.own({**first, NEVER_COMMITTED: None}):
            return broke(None, show_offsets(live.own({**first, NEVER_COMMITTED: None})), show_offsets(offsets),
                         "after flush(), the committed offsets changed")
        live.kill()
        live.start()
        live.call("recover", live.call("committed_offset", CHANGELOGS[0]))
        live.told("restarted after a SIGKILL; recover")
        data = live.contents(offers)
        if data.get(b"b") == b"v2":
            return broke("b", {"a": "v1"}, show_data(data), "after flush(), a SIGKILL and a restart, the write "
                         "b=v2 that was never committed survived: flush() made it durable")
        if data != {b"a": b"v1"}:
            return [Violation("committed_durable", None, {"a": "v1"}, show_data(data),
                              detail=f"after flush(), a SIGKILL and a restart, the store holds {show_data(data)}, "
                                     f"expected the committed {{'a': 'v1'}}\njust before (oldest first):\n"
                                     f"{live.recent()}")]
        live.call("close")
    return []


def _transactional(features: Features) -> str | None:
    if not features.transactional:
        return ("the store is not transactional: its writes are visible (and kept) at once, so a flush that "
                "commits cannot be told from one that does not")
    return _manages_persistently(features)  # run_flush reads the offsets, and the data after a SIGKILL


SCENARIOS = [
    Scenario("partitions_reopen", ("partition_offset_exact", "partition_offset_survives_reopen",
                                   "never_committed_is_none"), _manages_persistently, run_reopen,
             needs=("several_changelog_partitions",)),
    Scenario("offsets_none", ("never_committed_is_none",), lambda features: None, run_unmanaged,
             needs=("commit_durable",)),
    Scenario("partitions_crash", ("offsets_match_data", "partitions_committed_together",
                                  "partition_offset_survives_reopen", "partition_offset_exact"),
             _transactional_managing, run_crash, several_only=("partitions_committed_together",)),
    Scenario("flush_noop", ("flush_is_noop",), _transactional, run_flush, needs=("commit_durable",)),
]
