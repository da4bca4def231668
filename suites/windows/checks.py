"""The window store suite's promises (KIP-428), as pure functions of what a store returned
and the model (:class:`eos_harness.models.windows.WindowStoreModel`).

A difference between a store's read and the model is named by the rule it breaks: a window that the
model dropped as late is ``late_write_dropped``, one it dropped as expired ``expired_write_dropped``,
one at or before ``stream_time - retention`` ``expired_never_fetched``; right after a restore the
same differences are ``stream_time_rebuilt``.
"""

from __future__ import annotations

from collections.abc import Callable

from eos_harness.models.windows import WindowStoreModel, is_expired, validate_window_store
from eos_harness.verdict import Violation

__all__ = ["CHECKS", "VALIDATION_CASES", "check_validation", "compare_records", "show"]

CHECKS = {
    "argument_validation": "invalid (name, retention, window size, grace) raises with KIP-428's message",
    "late_write_dropped": "kip428-proposal semantics: a put at or before stream time - grace is dropped",
    "expired_write_dropped": "a put at or before stream time - retention is dropped",
    "expired_never_fetched": "no fetch returns a window at or before stream time - retention",
    "stream_time_rebuilt": "after a restart, stream time is what the declared design says (expired windows stay gone)",
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


def compare_records(model: WindowStoreModel, what: str, expected: list, observed: list, *, committed: bool = False,
                    after_restore: bool = False, default: str = "read_your_own_writes",
                    single_key: bytes | None = None) -> Violation | None:
    """The first broken promise when a fetch returned ``observed`` where the model says ``expected``
    (both lists of (key, window_start, value), or of (window_start, value) for one ``single_key``)."""
    if observed == expected:
        return None
    def full(rows):
        return [tuple(r) if single_key is None else (single_key, *r) for r in rows]
    exp, obs = full(expected), full(observed)
    stream_time = model.committed_stream_time if committed else model.stream_time
    if sorted(exp) == sorted(obs) or set(exp) == set(obs):
        return Violation("fetch_order", what, show(expected), show(observed))
    extra = [r for r in obs if r not in exp]
    for key, start, value in extra:
        if not any(k == key and s == start for k, s, _ in exp):
            check = _name_extra(model, key, start, value, stream_time, after_restore, default)
            return Violation(check, f"{what}: {show(key)}@{start}", "absent", show(observed))
    return Violation("stream_time_rebuilt" if after_restore and extra else default, what, show(expected), show(observed))
