"""The window suite's plan: timestamps near the retention and grace edges, and the fixed matrix of
crash points × workloads (pure functions of the store's config)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from eos_harness.models.windows import WindowConfig

from ..store_subjects import StoreRun, StoreSubjects, store_runs

__all__ = ["KEYS", "VALUES", "WORKLOADS", "edge_deltas", "expected", "known_subjects", "matrix_cases", "campaign",
           "subjects", "workload_puts"]

KEYS = [b"a", b"b", b"c"]
VALUES = [b"v1", b"v2", b"v3"]


def edge_deltas(config: WindowConfig) -> list[int]:
    """Offsets from the current stream time: exactly at, one before and one after the retention and
    grace edges and the window size; a little out of order; a little and a lot ahead."""
    deltas = {0, -1, 1, 3, config.window_size, config.retention_period + 1}
    for edge in (config.retention_period, config.grace_period, config.window_size):
        deltas.update({-edge - 1, -edge, -edge + 1})
    return sorted(deltas)


WORKLOADS = {
    # (key, window start relative to the base stream time, value): the base commit leaves stream time at 100.
    # in order, after a tombstone of a committed base window (b@100)
    "in-order": [(b"b", 0, None), (b"a", 10, b"v2"), (b"b", 20, b"v1"), (b"c", 30, b"v3")],
    "out-of-order": [(b"c", 40, b"v1"), (b"a", 5, b"v2"), (b"b", 25, b"v3"), (b"a", 39, b"v1")],
    "edges": [(b"a", 60, b"v3"), (b"a", 60 - 1, b"v1"), (b"c", 0, b"v2"), (b"b", -1, None)],
}
BASE_TIME = 100


def workload_puts(name: str, config: WindowConfig) -> list[tuple[bytes, int, bytes | None]]:
    """The workload's puts as absolute window starts; "edges" moves stream time so that the
    retention edge lands exactly on the base windows, then writes at the grace edge."""
    if name == "edges":
        rt, gr = config.retention_period, config.grace_period
        ahead = BASE_TIME + rt  # stream time moves so that the base windows sit exactly at the edge
        return [(b"c", ahead, b"v1"), (b"a", ahead - gr, b"v2"), (b"b", ahead - gr + 1, b"v3"),
                (b"a", BASE_TIME, b"v3"), (b"b", BASE_TIME + 1, b"v1")]
    return [(k, BASE_TIME + d, v) for k, d, v in WORKLOADS[name]]


def matrix_cases(crash_points: list[str]) -> list[tuple[str, str | None]]:
    """(workload, crash point or None for a SIGKILL before commit), every point × every workload."""
    return [(w, p) for w in WORKLOADS for p in [None, *crash_points]]


# -- a campaign (``eos-harness chaos --suite windows``) -------------------------------------------------

STORES = StoreSubjects(("window-store", "window-mutant"), lambda spec: True,
                       "check a key-value store with --suite conformance")
known_subjects, subjects, expected = STORES.known, STORES.subjects, STORES.expected


def campaign(seed: int, options: Mapping) -> Iterator[StoreRun]:
    """The window stores in turn, each with a seed drawn from ``seed``."""
    return store_runs(seed, options)
