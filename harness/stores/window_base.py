"""What the built-in window stores (:mod:`.window_memory`, :mod:`.window_rocksdb`) share: the factory
arguments and their defaults, the declared rules (drop a put, the fetch lower bound), observed stream
time with the transactional overlay of staged writes, and the read side (every fetch method, the
writer's merged view, the read-committed view). Each store keeps its own storage: how windows are
written, scanned and expired, and how it commits.
"""

from __future__ import annotations

from collections.abc import Iterator

from eos_harness.models.windows import NO_TIMESTAMP, WindowConfig
from eos_harness.store import CommitFromProcessorError

__all__ = ["DEFAULTS", "TOP", "WindowStoreBase", "in_key_range", "window_config_of", "window_rows"]

DEFAULTS = {"name": "store", "retention_period": 60, "window_size": 10, "grace_period": 20}
TOP = 2**62  # the upper time bound of all() and backward_all()


def window_config_of(semantics: str, kwargs: dict, defaults: dict = DEFAULTS) -> WindowConfig:
    """A factory's keyword arguments (``name``, ``retention_period``, ``window_size``,
    ``grace_period``, each defaulted) validated into a :class:`WindowConfig` of ``semantics``."""
    args = {**defaults, **kwargs}
    return WindowConfig.of(args["name"], args["retention_period"], args["window_size"], args["grace_period"], semantics)


def in_key_range(key: bytes, key_from: bytes | None, key_to: bytes | None) -> bool:
    """``key_from <= key <= key_to``, a None bound being unbounded."""
    return (key_from is None or key >= key_from) and (key_to is None or key <= key_to)


def window_rows(data: dict[tuple[int, bytes], bytes | None], reverse: bool, single_key: bool) -> Iterator:
    """``(window_start, key) -> value`` (None: deleted) as a fetch returns it: live windows ordered by
    window start, then key (reversed if asked); ``(window_start, value)`` for a single key."""
    rows = [(k, s, v) for (s, k), v in sorted(data.items(), reverse=reverse) if v is not None]
    if single_key:
        return iter([(s, v) for _, s, v in rows])
    return iter(rows)


class _CommittedView:
    """The committed windows under the committed stream time (a transactional store's
    read-committed view; a store that is not transactional is its own view)."""

    def __init__(self, store: WindowStoreBase) -> None:
        self._store = store

    def __getattr__(self, method: str):
        reader = getattr(type(self._store), method)

        def read(*args):
            return reader(self._store, *args, committed=True)
        return read


class WindowStoreBase:
    """A window store's shared half. A subclass provides ``_stored_windows`` (the committed windows
    of a range, as a dict), ``_iterate_stored`` (the committed windows of a range as the store's
    iterator), ``_fetch_stored`` (one committed window) and ``_expire_before_read``; the staged
    writes live in ``_staged`` and ``_staged_stream_time`` until the subclass's commit applies them.
    """

    # What a processor that commits a store is told (after "processors must not commit stores").
    _commit_from_processor_hint = "; call context.commit() to request a task commit"

    def __init__(self, config: WindowConfig, transactional: bool = False) -> None:
        self.name = config.name
        self._config = config
        self._transactional = transactional
        self._stream_time = NO_TIMESTAMP  # committed (the only one when not transactional)
        self._staged: dict[tuple[int, bytes], bytes | None] = {}
        self._staged_stream_time = NO_TIMESTAMP
        self._via_processor = False

    # -- the declared rules (a mutant overrides one) ------------------------------------------------
    def window_config(self) -> WindowConfig:
        return self._config

    def _drop_reason(self, window_start: int, stream_time: int) -> str | None:
        """Why a put is dropped (the declared semantics' rule); a mutant overrides it."""
        return self._config.drop_reason(window_start, stream_time)

    def _lower_bound(self, stream_time: int) -> int:
        return self._config.lower_bound(stream_time)

    def _lower(self, time_from: int, committed: bool) -> int:
        """The first window start a read of ``time_from`` onwards may return."""
        return max(time_from, self._lower_bound(self._observed(committed)))

    # -- lifecycle ------------------------------------------------------------------------------------
    def transactional(self) -> bool:
        return self._transactional

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op."""

    # -- stream time and staged writes ----------------------------------------------------------------
    def _observed(self, committed: bool = False) -> int:
        if self._transactional and not committed:
            return max(self._stream_time, self._staged_stream_time)
        return self._stream_time

    def _stage(self, key: bytes, value: bytes | None, window_start: int) -> None:
        """A transactional put: observe ``window_start``, stage the write unless it is dropped."""
        self._staged_stream_time = max(self._observed(), window_start)
        if self._drop_reason(window_start, self._staged_stream_time) is None:
            self._staged[(window_start, key)] = value

    def _discard_staged(self) -> None:
        self._staged, self._staged_stream_time = {}, NO_TIMESTAMP

    def _refuse_commit_from_processor(self) -> None:
        if self._via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores{self._commit_from_processor_hint}")

    # -- reads ----------------------------------------------------------------------------------------
    def _expire_before_read(self) -> None:
        """Drop what expired before a read (a store that expires only on commit does nothing)."""

    def _read(self, key_from, key_to, time_from, time_to, reverse, single_key, committed):
        self._expire_before_read()
        lo = self._lower(time_from, committed)
        empty = time_to < lo or (not single_key and key_from is not None and key_to is not None and key_from > key_to)
        if not self._transactional or committed:
            return self._iterate_stored(key_from, key_to, lo, time_to, reverse, single_key, empty)
        if empty:
            return iter([])
        data = self._stored_windows(key_from, key_to, lo, time_to, single_key)
        for (start, key), value in self._staged.items():
            if lo <= start <= time_to and in_key_range(key, key_from, key_to):
                data[(start, key)] = value
        return window_rows(data, reverse, single_key)

    def _stored_windows(self, key_from, key_to, lo: int, hi: int, single_key: bool) -> dict:
        """The committed windows with a key in range and a start in ``[lo, hi]``: ``(start, key) -> value``."""
        raise NotImplementedError

    def _iterate_stored(self, key_from, key_to, lo: int, hi: int, reverse: bool, single_key: bool, empty: bool):
        """The committed windows of a read as the store returns them (``empty``: the range holds none)."""
        raise NotImplementedError

    def _fetch_stored(self, key: bytes, window_start: int) -> bytes | None:
        raise NotImplementedError

    def fetch_window(self, key: bytes, window_start: int, committed: bool = False) -> bytes | None:
        self._expire_before_read()
        if window_start < self._lower(window_start, committed):
            return None
        if self._transactional and not committed and (window_start, key) in self._staged:
            return self._staged[(window_start, key)]
        return self._fetch_stored(key, window_start)

    def fetch(self, key: bytes, time_from: int, time_to: int, committed: bool = False):
        return self._read(key, key, time_from, time_to, False, True, committed)

    def backward_fetch(self, key: bytes, time_from: int, time_to: int, committed: bool = False):
        return self._read(key, key, time_from, time_to, True, True, committed)

    def fetch_range(self, key_from, key_to, time_from: int, time_to: int, committed: bool = False):
        return self._read(key_from, key_to, time_from, time_to, False, False, committed)

    def backward_fetch_range(self, key_from, key_to, time_from: int, time_to: int, committed: bool = False):
        return self._read(key_from, key_to, time_from, time_to, True, False, committed)

    def fetch_all(self, time_from: int, time_to: int, committed: bool = False):
        return self._read(None, None, time_from, time_to, False, False, committed)

    def backward_fetch_all(self, time_from: int, time_to: int, committed: bool = False):
        return self._read(None, None, time_from, time_to, True, False, committed)

    def all(self, committed: bool = False):
        return self._read(None, None, 0, TOP, False, False, committed)

    def backward_all(self, committed: bool = False):
        return self._read(None, None, 0, TOP, True, False, committed)

    def read_committed(self):
        return _CommittedView(self) if self._transactional else self
