"""The promises of the conformance suite, written once: pure functions that compare what a store
answered with what the key-value model (:mod:`eos_harness.models.kv`) says it must answer.

Each returns the broken promise as a :class:`~eos_harness.verdict.Violation` (None when it held),
whose ``detail`` says in a store implementer's words what was asked and what came back
("commit #1 had no writes; committed_offset returned None, expected 1"). The driver
(:mod:`.driver`) adds what happened just before; the machine and the matrix (:mod:`.plan`) decide
when each promise is asked. Nothing here talks to a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eos_harness.suites.offsets.checks import PROMISES
from eos_harness.verdict import Violation

__all__ = [
    "CHECKS",
    "CONDITIONS",
    "GUARD_CHECKS",
    "WAIVABLE",
    "clean_close_durable",
    "clean_close_refused",
    "commit_offset",
    "delete_returns",
    "explaining",
    "first_diff",
    "judge_recovery",
    "range_matches",
    "read_committed_matches",
    "reads_match",
    "reopened_offset",
    "recover_refused",
    "recover_trust",
    "recovered_partition",
    "recovered_state",
    "restore_offset",
    "show",
]

# Every check the suite reports, with the promise it stands for.
CHECKS = {
    "read_your_own_writes": "the writer reads its own writes, committed or not (get, delete, range, all)",
    "read_committed_isolation": "read_committed() shows only committed data (transactional stores)",
    "no_uncommitted_survives": "after a crash, no uncommitted write is left",
    "atomic_commit": "a commit interrupted by a crash is seen whole or not at all, data and offsets together",
    "committed_durable": "committed data survives a crash",
    "committed_offset_durable": "committed_offset returns the offset the last commit received, also after a crash",
    "clean_close_durable": "after a clean close and reopen, all committed data is there",
    "recover_trust": "recover() returns True for a transactional store, False for a persistent non-transactional one",
    "offset_convention": "restore(records, end_offset) records end_offset, the next changelog offset to read",
    "store_raised": "the store raises no exception the protocol does not allow",
    "store_return_type": "the store returns the types the protocol requires",
    "store_hang": "every call returns within --store-timeout",
    "store_error": "the store answers a call as the protocol says",
}
# The condition under which each check can fire: a case that met it exercised the check (the verdict's
# ``coverage`` counts the cases; a check no case met is "not exercised", never passed).
CONDITIONS = {
    "read_your_own_writes": "a read (get, delete, range, all) after a write",
    "read_committed_isolation": "a read_committed() read while the store holds data (uncommitted writes, for a "
                                "transactional store)",
    "no_uncommitted_survives": "a crash with uncommitted writes",
    "atomic_commit": "a crash inside a commit",
    "committed_durable": "a crash after a commit of at least one write",
    "committed_offset_durable": "committed_offset asked after a commit",
    "clean_close_durable": "a clean close and reopen after a commit of at least one write",
    "recover_trust": "a recover() after a crash",
    "offset_convention": "a restore of changelog records",
    "store_raised": "any call into the store",
    "store_return_type": "any call into the store",
    "store_hang": "any call into the store",
    "store_error": "any call into the store",
}
# The checks about the calls themselves: after one, the store cannot be driven on (never waivable).
GUARD_CHECKS = frozenset({"store_raised", "store_return_type", "store_hang", "store_error"})
WAIVABLE = tuple(sorted(set(CHECKS) - GUARD_CHECKS))
# The checks ``--allow`` may waive: the conformance suite's, and the offsets suite's promises.
ALLOWABLE = (*WAIVABLE, *PROMISES)


def show(data) -> object:
    """Bytes as text (latin-1, reversible), recursively, for verdicts a person reads."""
    if isinstance(data, bytes):
        return data.decode("latin-1")
    if isinstance(data, list | tuple):
        return [show(x) for x in data]
    if isinstance(data, dict):
        return {show(k): show(v) for k, v in sorted(data.items())}
    return data


def first_diff(expected: Mapping, observed: Mapping):
    """The smallest key whose value differs (None when the maps are equal)."""
    for key in sorted(set(expected) | set(observed)):
        if expected.get(key) != observed.get(key):
            return key
    return None


def _violation(check: str, key, expected, observed, detail: str) -> Violation:
    return Violation(check, show(key), show(expected), show(observed), detail=detail)


def _value(value) -> str:
    return "nothing (absent)" if value is None else repr(show(value))


# -- reads by the writer -------------------------------------------------------------------------------

def reads_match(expected: Mapping[bytes, bytes], gets: Mapping[bytes, bytes | None],
                listing: Mapping[bytes, bytes] | None) -> Violation | None:
    """read_your_own_writes: ``get`` of each key (``gets``) and ``all()`` (``listing``, None when the
    store declares no range scans) show the model's merged view ``expected``."""
    for key, got in gets.items():
        if got != expected.get(key):
            return _violation("read_your_own_writes", key, expected.get(key), got,
                              f"get({show(key)!r}) returned {_value(got)}, expected {_value(expected.get(key))} "
                              "(the newest write, committed or not)")
    if listing is not None and dict(listing) != dict(expected):
        key = first_diff(expected, listing)
        return _violation("read_your_own_writes", key, expected.get(key), listing.get(key),
                          f"all() listed {_value(listing.get(key))} for {show(key)!r}, expected "
                          f"{_value(expected.get(key))} (get agrees with the model; all() does not)")
    return None


def delete_returns(key: bytes, expected: bytes | None, observed: bytes | None) -> Violation | None:
    """read_your_own_writes: ``delete`` returns the value the key had, as ``get`` would have."""
    if observed == expected:
        return None
    return _violation("read_your_own_writes", key, f"delete returns {show(expected)}", f"{show(observed)}",
                      f"delete({show(key)!r}) returned {_value(observed)}, expected {_value(expected)} "
                      "(the value the key had, uncommitted writes included)")


def range_matches(lo: bytes, hi: bytes, expected: list, observed: list) -> Violation | None:
    """read_your_own_writes: ``range(lo, hi)`` is every live entry in [lo, hi], sorted."""
    if observed == expected:
        return None
    missing = [k for k, _ in expected if k not in dict(observed)]
    extra = [k for k, _ in observed if k not in dict(expected)]
    why = (f"it lists {show(extra)} that are deleted or absent" if extra else
           f"it misses {show(missing)}" if missing else "the values or the order differ")
    return _violation("read_your_own_writes", f"range {lo!r}..{hi!r}", expected, observed,
                      f"range({show(lo)!r}, {show(hi)!r}): {why}")


# -- read committed ------------------------------------------------------------------------------------

def read_committed_matches(expected: Mapping[bytes, bytes], gets: Mapping[bytes, bytes | None],
                           listing: Mapping[bytes, bytes] | None, ranged: tuple[bytes, bytes, list] | None,
                           uncommitted: Mapping[bytes, bytes | None]) -> Violation | None:
    """read_committed_isolation: ``read_committed()`` (its ``all``, ``get`` of each key, a ``range``)
    shows exactly the committed data ``expected``; ``uncommitted`` (the open transaction) says why not."""

    def why(key, got) -> str:
        if key in uncommitted and got == uncommitted[key]:
            return f"it shows the uncommitted write {show(key)!r} = {_value(got)}"
        return f"committed is {_value(expected.get(key))}"

    if listing is not None and dict(listing) != dict(expected):
        key = first_diff(expected, listing)
        return _violation("read_committed_isolation", key, expected.get(key), listing.get(key),
                          f"read_committed().all() listed {_value(listing.get(key))} for {show(key)!r}; "
                          f"{why(key, listing.get(key))}")
    for key, got in gets.items():
        if got != expected.get(key):
            return _violation("read_committed_isolation", key, expected.get(key), got,
                              f"read_committed().get({show(key)!r}) returned {_value(got)}; {why(key, got)}")
    if ranged is not None:
        lo, hi, got = ranged
        want = [(k, v) for k, v in sorted(expected.items()) if lo <= k <= hi]
        if got != want:
            return _violation("read_committed_isolation", f"range {show(lo)}..{show(hi)}", want, got,
                              f"read_committed().range({show(lo)!r}, {show(hi)!r}) is not the committed data")
    return None


# -- offsets -------------------------------------------------------------------------------------------

def commit_offset(tp: str, number: int, writes: int, expected: int | None, observed: int | None,
                  previous: int | None, empty_may_keep: bool) -> Violation | None:
    """committed_offset_durable: right after commit #``number`` (``writes`` writes since the one
    before), ``committed_offset`` returns the offset that commit received. A store that declares its
    empty commits record no offset (``empty_may_keep``) may still return the ``previous`` one."""
    if observed == expected or (empty_may_keep and writes == 0 and observed == previous):
        return None
    had = "had no writes" if writes == 0 else f"had {writes} write{'s' if writes > 1 else ''}"
    detail = f"commit #{number} {had}; committed_offset returned {observed}, expected {expected}"
    if writes == 0 and observed == previous:
        detail += (" (the store's empty commit recorded no offset; if that is by design, declare "
                   "Capabilities(empty_commit_records_offset=False))")
    elif expected is not None and observed == expected - 1:
        detail += " (the offset of the last record, not the next one to read: see the offset convention)"
    return _violation("committed_offset_durable", tp, expected, observed, detail)


def restore_offset(tp: str, start: int, count: int, end_offset: int, observed: int | None,
                   previous: int | None, empty_may_keep: bool) -> Violation | None:
    """offset_convention: after ``restore`` of ``count`` records from offset ``start`` with
    ``end_offset``, ``committed_offset`` returns ``end_offset`` (the next changelog offset to read)."""
    if observed == end_offset or (empty_may_keep and count == 0 and observed == previous):
        return None
    records = f"{count} records at offsets {start}..{start + count - 1}" if count else "no records"
    detail = (f"restore of {records} with end_offset {end_offset}: committed_offset returned {observed}, "
              f"expected {end_offset} (the next changelog offset to read, one past the last record restored)")
    if count and observed == end_offset - 1:
        detail += "; the store kept the offset of the last record"
    return _violation("offset_convention", tp, end_offset, observed, detail)


# -- after a crash, a close, a recovery ----------------------------------------------------------------

def recover_trust(persistent: bool, transactional: bool, offset: int | None, trusted: bool) -> Violation | None:
    """recover_trust: a transactional persistent store trusts its contents after ``recover``; a
    persistent non-transactional one must not (the runtime then wipes and restores it)."""
    if persistent and not transactional and trusted:
        return _violation("recover_trust", None, "recover() returns False (contents not trusted)", "True",
                          f"recover({offset}) returned True after a crash, but a non-transactional store may "
                          "hold uncommitted writes: it must return False so that the runtime wipes it")
    if persistent and transactional and not trusted:
        return _violation("recover_trust", None, "recover() returns True for a transactional store", "False",
                          f"recover({offset}) returned False: a transactional store discards its uncommitted "
                          "writes itself and must say its contents can be trusted")
    return None


def recover_refused(refusal: str) -> Violation:
    """recover_trust: a transactional persistent store that refuses its own directory after a crash
    (``init`` raised ``IncompatibleStoreDirectory``; Kafka's RocksDB store: ``TaskCorruptedException``)."""
    return _violation("recover_trust", None, "the store reopens its directory and trusts it (transactional)",
                      "init refused the directory", f"after a crash, init raised {refusal}: the runtime wipes the "
                      "store and restores it from the changelog, but a transactional store keeps only committed "
                      "writes and must reopen what it kept (KIP-892; Kafka Streams 4.4.0, "
                      "enable.transactional.statestores: \"Under EOS, state stores will no longer be wiped on-error "
                      "and rebuilt from scratch\")")


def explaining(outcomes: Sequence[tuple[Mapping, Mapping]], data: Mapping, offsets: Mapping) -> list[int]:
    """The recorded ``outcomes`` (each: its data, and its offset by partition) that explain ALL that a
    recovered store shows: its ``data`` and every partition's offset in ``offsets`` (a partition an
    outcome does not name: None), by index. Several fit when two consecutive states are alike in
    what one read shows (a commit with no writes that gave the first partition the offset it
    already had): the store is right when any of them explains all of it, and wrong only when none
    does (then :func:`recovered_state` and :func:`recovered_partition` name what broke)."""
    return [number for number, (want, given) in enumerate(outcomes)
            if dict(want) == dict(data) and all(given.get(tp) == got for tp, got in offsets.items())]


def recovered_state(tp: str, outcomes: list[tuple[dict, int | None]], data: dict, offset: int | None,
                    uncommitted: Mapping[bytes, bytes | None], in_flight: int | None,
                    recovered_with: int | None) -> Violation | None:
    """What a restarted store holds after ``recover``: one of ``outcomes`` (the last committed state
    and offset; after a crash inside a commit, also that commit's state and offset), exactly.

    atomic_commit (a half-applied commit, or data of one side with the offset of the other),
    no_uncommitted_survives (a write of the open transaction left), committed_durable (committed data
    lost or changed), committed_offset_durable (the data is right, the offset is not)."""
    if (data, offset) in outcomes:
        return None
    where = (f"after a crash inside the commit with offset {in_flight}" if in_flight is not None
             else "after a crash outside a commit")
    asked = f"recover({recovered_with})"
    datas = [o[0] for o in outcomes]
    if data in datas:
        if len(outcomes) == 1:
            return _violation("committed_offset_durable", tp, [outcomes[0][1]], offset,
                              f"{where} and {asked}: the data is the committed data, but committed_offset "
                              f"returned {offset}, expected {outcomes[0][1]}")
        sides = [number for number, want in enumerate(datas) if want == data]
        side = ("the commit before it" if sides == [0] else "that commit" if len(sides) == 1 else
                "that commit, which is also the data before it (the commit changed no data)")
        offsets = " or ".join(dict.fromkeys(str(outcomes[number][1]) for number in sides))
        return _violation("atomic_commit", tp, [o[1] for o in outcomes], offset,
                          f"{where} and {asked}: the store holds the data of {side} but committed_offset "
                          f"returned {offset}, expected {offsets}: data and offset were not committed together")
    if len(outcomes) > 1:
        key = first_diff(outcomes[1][0], data)
        return _violation("atomic_commit", key, "all of the commit or none of it", f"partial: {show(data)}",
                          f"{where} and {asked}: the store holds part of that commit: {show(key)!r} is "
                          f"{_value(data.get(key))}, which is neither the state before it nor after it")
    pre = outcomes[0][0]
    key = first_diff(pre, data)
    if key in uncommitted and data.get(key) == uncommitted[key]:
        return _violation("no_uncommitted_survives", key, pre.get(key), data.get(key),
                          f"{where} and {asked}: {show(key)!r} is {_value(data.get(key))}, an uncommitted write "
                          f"that should have been discarded; committed is {_value(pre.get(key))}")
    return _violation("committed_durable", key, pre.get(key), data.get(key),
                      f"{where} and {asked}: {show(key)!r} is {_value(data.get(key))}, expected the committed "
                      f"{_value(pre.get(key))}")


def recovered_partition(tp: str, where: str, expected: int | None, observed: int | None,
                        others: list[int | None]) -> Violation | None:
    """After ``recover``, a further changelog partition of the store (a global store's) holds the
    offset of the same commit as the data and the first partition: atomic_commit when it holds the
    other commit's (the partitions were not committed together), committed_offset_durable otherwise
    (lost, or an offset no commit gave it; None expected for a partition never committed)."""
    if observed == expected:
        return None
    if observed in others:
        return _violation("atomic_commit", tp, expected, observed,
                          f"{where}: the data and the first partition are those of one commit, but "
                          f"committed_offset({tp}) returned {observed}, the other commit's (expected {expected}): "
                          "the partitions' offsets were not committed together")
    never = " (a partition never committed)" if expected is None else ""
    return _violation("committed_offset_durable", tp, expected, observed,
                      f"{where}: committed_offset({tp}) returned {observed}, expected {expected}{never}")


def judge_recovery(outcomes: Sequence[tuple[Mapping, Mapping]], data: Mapping, offsets: Mapping,
                   uncommitted: Mapping[bytes, bytes | None], in_flight: int | None,
                   recovered_with: int | None) -> tuple[int | None, list[Violation]]:
    """What a restarted store shows after ``recover`` (its ``data``, and ``offsets``: each partition's
    ``committed_offset``, the store's own changelog partition first), judged against the recorded
    ``outcomes`` (data, offsets by partition): the last committed state, and after a crash inside a
    commit also that commit's. Returns the index of an outcome that explains all of it and no
    violation; or None and the broken promises (:func:`recovered_state` for the data and the first
    partition, else :func:`recovered_partition` for each further partition, judged against the
    outcome that fits the data, the first partition and the most further partitions)."""
    fits = explaining(outcomes, data, offsets)
    if fits:
        return fits[0], []
    first, *further = offsets
    pairs = [(want, given.get(first)) for want, given in outcomes]
    verdict = recovered_state(str(first), pairs, dict(data), offsets[first], uncommitted, in_flight, recovered_with)
    if verdict is not None:
        return None, [verdict]
    fitting = [number for number, pair in enumerate(pairs) if pair == (dict(data), offsets[first])]
    index = max(fitting, key=lambda number: sum(outcomes[number][1].get(tp) == offsets[tp] for tp in further))
    where = (f"after a crash inside the commit with offset {in_flight} and recover({recovered_with})"
             if in_flight is not None else f"after a crash outside a commit and recover({recovered_with})")
    found = [recovered_partition(str(tp), where, outcomes[index][1].get(tp), offsets[tp],
                                 [given.get(tp) for number, (_, given) in enumerate(outcomes) if number != index])
             for tp in further]
    return None, [v for v in found if v is not None]


def reopened_offset(tp: str, expected: int | None, observed: int | None) -> Violation | None:
    """committed_offset_durable: after a clean ``close`` and reopen, ``committed_offset`` still returns
    the offset of the last commit."""
    if observed == expected:
        return None
    return _violation("committed_offset_durable", tp, expected, observed,
                      f"after close() and a reopen, committed_offset returned {observed}, expected {expected} "
                      "(the offset of the last commit)")


def clean_close_durable(expected: Mapping[bytes, bytes], data: Mapping[bytes, bytes],
                        uncommitted: Mapping[bytes, bytes | None] | None = None) -> Violation | None:
    """clean_close_durable: after a clean ``close`` and reopen, a persistent store holds all committed data
    and nothing else; ``uncommitted`` (the transaction open at the close, which close() discards) says why not."""
    if dict(data) == dict(expected):
        return None
    key = first_diff(expected, data)
    detail = (f"after close() and a reopen, {show(key)!r} is {_value(data.get(key))}, expected the "
              f"committed {_value(expected.get(key))}")
    if uncommitted and key in uncommitted and data.get(key) == uncommitted[key]:
        detail += ": an uncommitted write of the transaction open at the close, which close() must discard"
    return _violation("clean_close_durable", key, expected.get(key), data.get(key), detail)


def clean_close_refused(expected: Mapping[bytes, bytes], refusal: str) -> Violation:
    """clean_close_durable: after a clean ``close``, the store's ``init`` refused the directory it closed
    (``IncompatibleStoreDirectory``; Kafka's RocksDB store: ``TaskCorruptedException``, its status marker not
    CLOSED): the runtime wipes it, and every committed write is gone from the store."""
    key = min(expected)
    return _violation("clean_close_durable", key, expected[key], None,
                      f"after close() and a reopen, init raised {refusal}: the store refused the directory it had "
                      f"closed cleanly, so the runtime wipes it and its {len(expected)} committed keys are gone "
                      "(restored from the changelog, not kept)")
