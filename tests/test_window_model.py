"""The KIP-428 window store model: KIP-428's validation messages, the drop rules of both semantics at
their edges (exactly at, one before, one after), the fetch lower bound, the transactional view, and
stream time rebuilt by a restore."""

from __future__ import annotations

import pytest
from eos_harness.models.windows import (
    KIP428_PROPOSAL,
    RETENTION_ONLY,
    WindowConfig,
    WindowStoreModel,
    validate_window_store,
)

R, S, G = 60, 10, 20


@pytest.mark.parametrize(("args", "error", "message"), [
    ((None, 10, 5, 1), TypeError, "name cannot be null"),
    (("w", -1, 5, 1), ValueError, "retentionPeriod cannot be negative"),
    (("w", -1, -1, -1), ValueError, "retentionPeriod cannot be negative"),
    (("w", 10, -1, 1), ValueError, "windowSize cannot be negative"),
    (("w", 10, -1, -1), ValueError, "windowSize cannot be negative"),
    (("w", 10, 5, -1), ValueError, "gracePeriod cannot be negative"),
    (("w", 10, 11, 1), ValueError,
     "The retention period of the window store w must be no smaller than its window size. Got size=[11], retention=[10]"),
    (("w", 10, 11, 11), ValueError,
     "The retention period of the window store w must be no smaller than its window size. Got size=[11], retention=[10]"),
    (("w", 10, 5, 11), ValueError,
     "The grace period of the window store w must not exceed its retention period. Got grace period=[11], retention=[10]"),
])
def test_every_invalid_combination_raises_with_the_seeds_message(args, error, message):
    with pytest.raises(error) as raised:
        validate_window_store(*args)
    assert str(raised.value) == message
    with pytest.raises(error):
        WindowConfig.of(*args)


def test_the_edges_of_validation_are_valid():
    validate_window_store("w", 10, 10, 10)
    validate_window_store("w", 0, 0, 0)


def model(semantics: str, transactional: bool = False, persistent: bool = False) -> WindowStoreModel:
    return WindowStoreModel(WindowConfig.of("w", R, S, G, semantics), transactional=transactional, persistent=persistent)


def test_seed_semantics_drops_a_write_exactly_at_stream_time_minus_grace():
    m = model(KIP428_PROPOSAL)
    m.put(b"k", b"now", 100)
    assert m.put(b"a", b"x", 100 - G - 1) == "late"
    assert m.put(b"b", b"x", 100 - G) == "late"
    assert m.put(b"c", b"x", 100 - G + 1) is None
    assert m.fetch_window(b"b", 100 - G) is None
    assert m.fetch_window(b"c", 100 - G + 1) == b"x"


def test_retention_only_keeps_late_writes_and_drops_exactly_at_the_retention_edge():
    m = model(RETENTION_ONLY)
    m.put(b"k", b"now", 100)
    assert m.put(b"a", b"x", 100 - G) is None  # grace is the processor's business
    assert m.put(b"b", b"x", 100 - R) == "expired"
    assert m.put(b"c", b"x", 100 - R + 1) is None
    assert m.fetch(b"c", 0, 1000) == [(100 - R + 1, b"x")]


def test_a_fetch_never_returns_a_window_at_or_before_stream_time_minus_retention():
    m = model(RETENTION_ONLY)
    m.put(b"a", b"1", 40)
    m.put(b"a", b"2", 41)
    m.put(b"z", b"t", 100)  # stream time 100: 40 is exactly at the edge, 41 one after
    assert m.fetch(b"a", 0, 100) == [(41, b"2")]
    assert m.fetch_all(0, 100) == [(b"a", 41, b"2"), (b"z", 100, b"t")]
    assert m.fetch_range(b"b", b"a", 0, 100) == []  # key_from > key_to: nothing
    assert m.fetch_range(None, b"m", 0, 100) == [(b"a", 41, b"2")]


def test_out_of_order_writes_are_ordered_by_window_start_then_key():
    m = model(RETENTION_ONLY)
    for key, start in ((b"b", 50), (b"a", 50), (b"c", 45), (b"a", 47)):
        m.put(key, b"v", start)
    assert [(k, s) for k, s, _ in m.all()] == [(b"c", 45), (b"a", 47), (b"a", 50), (b"b", 50)]


def test_transactional_view_commit_crash_and_recover():
    m = model(KIP428_PROPOSAL, transactional=True, persistent=True)
    m.put(b"a", b"1", 100)
    m.commit({"tp": 1})
    m.put(b"b", b"2", 200)  # staged; its stream time expires a@100 for the writer only
    assert m.all() == [(b"b", 200, b"2")]
    assert m.all(committed_only=True) == [(b"a", 100, b"1")]
    records, stream_time, offsets = m.committed_after({"tp": 2})
    assert (records, stream_time) == ([(b"b", 200, b"2")], 200)
    m.crash()
    assert m.stream_time == 100 and m.all() == [(b"a", 100, b"1")]


def test_restore_rebuilds_stream_time_so_expired_windows_stay_gone():
    m = model(RETENTION_ONLY)
    m.put(b"a", b"1", 10)
    m.put(b"b", b"2", 100)
    m.commit({})
    m.crash()  # not persistent: empty, stream time unknown
    assert m.all() == [] and m.stream_time == -1
    m.restore()
    assert m.stream_time == 100
    assert m.all() == [(b"b", 100, b"2")]
