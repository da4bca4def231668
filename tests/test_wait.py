"""The one wait-until helper: returns as soon as the predicate holds, names what it awaited when not."""

from __future__ import annotations

import time

import pytest
from eos_harness.process.wait import WaitTimeout, wait_until


def test_returns_the_predicates_value_as_soon_as_it_holds():
    calls = []

    def third_time():
        calls.append(time.monotonic())
        return "ready" if len(calls) == 3 else None

    started = time.monotonic()
    assert wait_until(third_time, timeout=10, interval=0.02, what="the third call") == "ready"
    assert len(calls) == 3
    assert time.monotonic() - started < 1.0  # two short intervals, not the 10 s timeout


def test_a_predicate_that_already_holds_does_not_sleep():
    started = time.monotonic()
    assert wait_until(lambda: 42, timeout=10, interval=5, what="the answer") == 42
    assert time.monotonic() - started < 0.5


def test_the_timeout_names_what_was_awaited_and_how_long():
    calls = []
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"timed out after 0\.3 s waiting for Kafka node 2 to listen") as caught:
        wait_until(lambda: calls.append(1), timeout=0.3, interval=0.05, what="Kafka node 2 to listen")
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 2.0
    assert isinstance(caught.value, WaitTimeout)
    assert (caught.value.what, caught.value.timeout) == ("Kafka node 2 to listen", 0.3)
    assert len(calls) >= 3  # polled, and once more at the deadline


def test_an_exception_from_the_predicate_ends_the_wait_at_once():
    def exited():
        raise RuntimeError("node 1 exited with code 1")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="node 1 exited"):
        wait_until(exited, timeout=10, what="node 1")
    assert time.monotonic() - started < 0.5
