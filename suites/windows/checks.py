"""The window store suite's promises (KIP-428), as pure functions of what a store returned
and the model (:class:`eos_harness.models.windows.WindowStoreModel`).

A difference between a store's read and the model is named by the rule it breaks: a window that the
model dropped as late is ``late_write_dropped``, one it dropped as expired ``expired_write_dropped``,
one at or before ``stream_time - retention`` ``expired_never_fetched``, one a tombstone deleted
``tombstone_deletes_window``; right after a restore the same differences are ``stream_time_rebuilt``,
and after any restart so is a window that only a stream time not brought back would show.
"""

from __future__ import annotations

from collections.abc import Callable

from eos_harness.models.windows import WindowStoreModel, is_expired, validate_window_store
from eos_harness.verdict import Violation

__all__ = ["CHECKS", "CONDITIONS", "VALIDATION_CASES", "WAIVABLE", "check_validation", "compare_records", "explain",
           "recovered_windows", "show", "stream_time_behind"]

CHECKS = {
    "argument_validation": "invalid (name, retention, window size, grace) raises with KIP-428's message",
    "late_write_dropped": "kip428-proposal semantics: a put at or before stream time - grace is dropped",
    "expired_write_dropped": "a put at or before stream time - retention is dropped",
    "expired_never_fetched": "no fetch returns a window at or before stream time - retention",
    "stream_time_rebuilt": "after a restart (a restore, a reopen, a crash and recover), stream time is what the "
                           "declared design says (expired windows stay gone, late writes are still dropped)",
    "tombstone_deletes_window": "a put of None (a tombstone) deletes exactly its window (key and window start), "
                                "in the writer's view and, once committed, in every view",
    "read_your_own_writes": "fetches return the live windows, the writer's staged writes included",
    "fetch_order": "fetches are ordered by window start then key; backward fetches in the reverse order",
    "held_iterator": "an iterator open across expiry still yields the windows live when it was opened",
    "read_committed_isolation": "read_committed() shows only committed windows, under the committed stream time",
    "no_uncommitted_survives": "after a crash, no staged write survives",
    "atomic_commit": "a commit interrupted by a crash is all there (data, stream time, offsets) or not at all",
    "committed_durable": "after a crash, every committed window is there",
    "committed_offset_durable": "committed_offset returns the offset of the last commit, across restarts",
    "clean_close_durable": "after a clean close and reopen, a persistent store holds every committed window",
    "recover_trust": "recover() is True for a transactional store, False for a persistent non-transactional one",
    "store_error": "the store raised where the protocol says it must not",
}

# The checks ``verify --allow`` can waive for a window store: what a read of the live store shows (a waived
# difference is counted and the case goes on; the model is not changed by a read). A store whose reads differ
# from the model (Kafka's persistent window store lists all() by key within a segment) still has its
# commits crashed and judged.
WAIVABLE = ("fetch_order", "read_committed_isolation", "expired_never_fetched", "stream_time_rebuilt")

# The condition under which each check can fire (a case that met it exercised the check; the verdict's
# ``coverage`` counts them, and names a check no case met "not exercised", never passed).
CONDITIONS = {
    "argument_validation": "the store's factory is called with the invalid argument combinations",
    "late_write_dropped": "a put at or before stream time - grace, then a read (the proposal's semantics)",
    "expired_write_dropped": "a put at or before stream time - retention, then a read",
    "expired_never_fetched": "a read while a window once written lies at or before stream time - retention",
    "stream_time_rebuilt": "a read after a restart (a restore from the changelog, a reopen, a crash and recover), "
                           "before a put reaches the stream time before it, with a window expired under that "
                           "stream time",
    "tombstone_deletes_window": "a put of None on a live window, then a read",
    "read_your_own_writes": "a read after a put",
    "fetch_order": "a read that returns two windows or more",
    "held_iterator": "an iterator held open while stream time moves past a window it is still to yield",
    "read_committed_isolation": "a read_committed() read while windows are stored (staged ones, for a "
                                "transactional store)",
    "no_uncommitted_survives": "a crash with writes since the last commit",
    "atomic_commit": "a crash inside a commit with writes in it",
    "committed_durable": "a crash after a commit of at least one window",
    "committed_offset_durable": "committed_offset asked after a commit (a store that manages its offsets)",
    "clean_close_durable": "a clean close and reopen of a persistent store holding committed windows",
    "recover_trust": "a recover() after a crash of a persistent store",
    "store_error": "any call into the store",
}

# Invalid argument combinations (and two valid edges), in the order KIP-428 checks them.
VALIDATION_CASES: list[dict] = [
    {"name": None, "retention_period": 10, "window_size": 5, "grace_period": 1},
    {"name": "w", "retention_period": -1, "window_size": 5, "grace_period": 1},
    {"name": "w", "retention_period": -1, "window_size": -1, "grace_period": -1},
    {"name": "w", "retention_period": 10, "window_size": -1, "grace_period": 1},
    {"name": "w", "retention_period": 10, "window_size": -1, "grace_period": -1},
    {"name": "w", "retention_period": 10, "window_size": 5, "grace_period": -1},
    {"name": "w", "retention_period": 10, "window_size": 11, "grace_period": 1},
    {"name": "w", "retention_period": 10, "window_size": 11, "grace_period": 11},
    {"name": "w", "retention_period": 10, "window_size": 5, "grace_period": 11},
    {"name": "w", "retention_period": 10, "window_size": 10, "grace_period": 10},  # valid: both at the edge
    {"name": "w", "retention_period": 0, "window_size": 0, "grace_period": 0},  # valid
]


def show(data) -> object:
    if isinstance(data, bytes):
        return data.decode("latin-1")
    if isinstance(data, list | tuple):
        return [show(x) for x in data]
    return data


def _outcome(make: Callable[[], object]) -> str:
    try:
        make()
    except (TypeError, ValueError) as exc:
        return f"{'ValueError' if isinstance(exc, ValueError) else 'TypeError'}: {exc}"
    return "accepted"


def check_validation(factory: Callable[..., object]) -> list[Violation]:
    """Call the store factory with every case of :data:`VALIDATION_CASES`; each must raise as
    KIP-428's supplier does (same exception kind and message) or be accepted when valid."""
    found = []
    for case in VALIDATION_CASES:
        expected = _outcome(lambda c=case: validate_window_store(c["name"], c["retention_period"], c["window_size"],
                                                                 c["grace_period"]))
        observed = _outcome(lambda c=case: factory(**c))
        if observed != expected:
            found.append(Violation("argument_validation", str(case), expected, observed))
    return found


def stream_time_behind(model: WindowStoreModel, key: bytes, start: int, stream_time: int,
                       restarted: int | None, beyond_edge: bool = True) -> bool:
    """Whether an extra window is explained by a stream time that a restart did not bring back:
    ``restarted`` is the stream time the store would have had it started from none at its last
    restart (the greatest window start put since; None when a put since reached the stream time of
    the restart, or there was no restart), under which the window is live, while under the model's
    ``stream_time`` it is dropped or expired (``beyond_edge``: by more than the one step at the edge,
    which an off-by-one at the edge explains as well: that is the edge's own check)."""
    if restarted is None:
        return False
    config = model.config
    if config.drop_reason(start, restarted) is not None or start < config.lower_bound(restarted):
        return False
    reason = model.dropped.get((key, start), (None, None))[0]
    edge = stream_time - (config.grace_period if reason == "late" else config.retention_period)
    return start < edge or (not beyond_edge and start == edge)


def _tombstoned(model: WindowStoreModel, key: bytes, start: int, committed: bool) -> bool:
    """Whether the last write of the window ``(key, start)`` the view shows was a tombstone the model
    wrote (not one it dropped); ``committed``: the committed view of a transactional store."""
    writes = model.changelog if committed and model.transactional else [*model.changelog, *model.pending]
    last = [value for k, s, value in writes if (k, s) == (key, start)]
    return bool(last) and last[-1] is None and (key, start) not in model.dropped


def _name_extra(model: WindowStoreModel, key: bytes, start: int, value: bytes, stream_time: int,
                after_restore: bool, default: str) -> str:
    if after_restore:
        return "stream_time_rebuilt"
    reason, dropped_value = model.dropped.get((key, start), (None, None))
    if reason == "late" and dropped_value == value:
        return "late_write_dropped"
    if reason == "expired" and dropped_value == value:
        return "expired_write_dropped"
    if is_expired(start, stream_time, model.config.retention_period):
        return "expired_never_fetched"
    return default


def explain(check: str, model: WindowStoreModel, what: str, record: tuple, stream_time: int,
            restarted: int | None) -> str:
    """What an extra window ``record`` (key, start, value) that ``what`` returned means, in observed
    values: the stream time and the rule that hide it."""
    key, start, value = record
    config = model.config
    shown = f"{what} returned {show(key)}@{start}={show(value)}"
    if check == "stream_time_rebuilt":
        since = "no put since" if restarted is None or restarted < 0 else f"the puts since reach {restarted} only"
        return (f"{shown}, a window at or before stream time {stream_time} - retention {config.retention_period}"
                f" (or dropped at that stream time): after the restart the store's stream time was not "
                f"rebuilt to {stream_time} ({since})")
    if check == "tombstone_deletes_window":
        return (f"{shown}, a window its last write deleted (a put of None at {show(key)}@{start}, "
                "not dropped): the tombstone did not delete it")
    if check in ("late_write_dropped", "expired_write_dropped"):
        return f"{shown}, a put the model dropped at stream time {stream_time} ({check.split('_')[0]})"
    if check == "expired_never_fetched":
        return (f"{shown}, at or before stream time {stream_time} - retention {config.retention_period}: "
                "expired windows are never fetched")
    return shown


def recovered_windows(model: WindowStoreModel, outcomes: list[tuple[list, int, int | None]], data: list,
                      offset: int | None, restarted: int | None, what: str) -> Violation | None:
    """After a crash and ``recover``, a store that holds one recorded outcome (records, stream time,
    offset; the last one that of the commit the crash interrupted) whole, plus windows that only a
    tombstone not applied or a stream time not brought back explain: the finding that names it (None
    when ``data`` is not so explained)."""
    for number, (records, stream_time, given) in enumerate(outcomes):
        extra = [r for r in data if r not in records]
        if given != offset or not extra or [r for r in data if r not in extra] != records:
            continue
        in_flight = number == len(outcomes) - 1 and len(outcomes) > 1  # the interrupted commit's writes count
        deleted = [r for r in extra if _tombstoned(model, r[0], r[1], committed=not in_flight)]
        if deleted:
            return Violation("tombstone_deletes_window", f"{what}: {show(deleted[0][0])}@{deleted[0][1]}", "absent",
                             show(data), detail=explain("tombstone_deletes_window", model, what, deleted[0],
                                                        stream_time, restarted))
        behind = [r for r in extra if stream_time_behind(model, r[0], r[1], stream_time, restarted)]
        if behind and all(stream_time_behind(model, r[0], r[1], stream_time, restarted, beyond_edge=False)
                          for r in extra):
            return Violation("stream_time_rebuilt", f"{what}: {show(behind[0][0])}@{behind[0][1]}", "absent",
                             show(data), detail=explain("stream_time_rebuilt", model, what, behind[0], stream_time,
                                                        restarted))
    return None


def compare_records(model: WindowStoreModel, what: str, expected: list, observed: list, *, committed: bool = False,
                    after_restore: bool = False, default: str = "read_your_own_writes",
                    single_key: bytes | None = None, restarted: int | None = None) -> Violation | None:
    """The first broken promise when a fetch returned ``observed`` where the model says ``expected``
    (both lists of (key, window_start, value), or of (window_start, value) for one ``single_key``).
    ``restarted``: after a restart, the stream time a store that lost its own would have (see
    :func:`stream_time_behind`)."""
    if observed == expected:
        return None
    def full(rows):
        return [tuple(r) if single_key is None else (single_key, *r) for r in rows]
    exp, obs = full(expected), full(observed)
    stream_time = model.committed_stream_time if committed else model.stream_time
    if sorted(exp) == sorted(obs) or set(exp) == set(obs):
        return Violation("fetch_order", what, show(expected), show(observed))
    extra = [r for r in obs if r not in exp]
    new_windows = [r for r in extra if not any(k == r[0] and s == r[1] for k, s, _ in exp)]
    deleted = [r for r in new_windows if _tombstoned(model, r[0], r[1], committed)]
    if deleted:  # a window its last write deleted, whatever the stream time
        return Violation("tombstone_deletes_window", f"{what}: {show(deleted[0][0])}@{deleted[0][1]}", "absent",
                         show(observed), detail=explain("tombstone_deletes_window", model, what, deleted[0],
                                                        stream_time, restarted))
    behind = [r for r in new_windows if stream_time_behind(model, r[0], r[1], stream_time, restarted)]
    if behind:  # only a stream time a restart did not bring back shows this window
        return Violation("stream_time_rebuilt", f"{what}: {show(behind[0][0])}@{behind[0][1]}", "absent",
                         show(observed), detail=explain("stream_time_rebuilt", model, what, behind[0], stream_time,
                                                        restarted))
    for key, start, value in extra:
        if not any(k == key and s == start for k, s, _ in exp):
            check = _name_extra(model, key, start, value, stream_time, after_restore, default)
            return Violation(check, f"{what}: {show(key)}@{start}", "absent", show(observed),
                             detail=explain(check, model, what, (key, start, value), stream_time, restarted))
    return Violation("stream_time_rebuilt" if after_restore and extra else default, what, show(expected), show(observed))
