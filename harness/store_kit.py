"""Helpers for writing a store adapter (``eos-harness new-store`` generates a module that uses them).

- :func:`merged_range`: the entries of a range scan with an open transaction's writes merged over
  the committed data (tombstones hide keys), sorted: what ``range`` and ``all`` return;
- :class:`LatestView`: the read-only view of a store's latest writes (its own ``get``, ``range``,
  ``all``), the ``read_committed()`` of a store that is not transactional;
- :class:`PutAllAndDeleteByPut`: ``put_all`` and ``delete`` from the store's own ``put`` and ``get``;
- :func:`with_crash_points`: put crash points before and after an existing method of a wrapped
  object (the library's own ``commit``, ``write_batch``…), so that the harness can crash the store
  at those steps without changing the library.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping

from eos_harness.faults.points import crash_point

__all__ = ["LatestView", "PutAllAndDeleteByPut", "merged_range", "with_crash_points"]


class PutAllAndDeleteByPut:
    """A store's ``put_all`` and ``delete`` written with its own ``put`` and ``get``: ``put_all`` puts
    each entry in turn, ``delete`` puts a tombstone (None) and returns the value it replaced."""

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self.put(key, None)
        return old


class LatestView:
    """A read-only view (``get``, ``range``, ``all``) of a store's own reads: its latest writes,
    committed or not. The ``read_committed()`` of a store that is not transactional (what it holds
    is all there is, as KIP-844 says for interactive queries); a base for a wrapper that reads
    through to the store it wraps."""

    def __init__(self, store) -> None:
        self._store = store

    def get(self, key: bytes) -> bytes | None:
        return self._store.get(key)

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._store.range(lo, hi)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._store.all()


def merged_range(committed: Iterable[tuple[bytes, bytes]] | Mapping[bytes, bytes],
                 pending: Mapping[bytes, bytes | None], lo: bytes | None = None,
                 hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
    """Live entries with ``lo <= key <= hi`` (None: unbounded), sorted by key: ``pending`` (the open
    transaction's writes, ``None`` a tombstone) over ``committed`` (pairs, or a mapping)."""
    items = committed.items() if isinstance(committed, Mapping) else committed
    merged = {k: v for k, v in items if (lo is None or k >= lo) and (hi is None or k <= hi)}
    for key, value in pending.items():
        if (lo is not None and key < lo) or (hi is not None and key > hi):
            continue
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return iter(sorted(merged.items()))


def with_crash_points(obj: object, method: str, before: str | None = None, after: str | None = None) -> object:
    """Wrap ``obj.method`` (on this object only) so that crash point ``before`` is reached just before
    it runs and ``after`` just after it returns. Declare the points, with their meanings, at import
    time of your module (``declare(name, meaning)``), so that ``eos-harness points --store`` lists
    them. Returns ``obj``."""
    original = getattr(obj, method)

    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        if before is not None:
            crash_point(before)
        result = original(*args, **kwargs)
        if after is not None:
            crash_point(after)
        return result

    setattr(obj, method, wrapped)
    return obj
