"""Kafka Streams' own window stores as harness window stores (:mod:`eos_harness.window_store`): each call goes
to the store's JVM, as :class:`~eos_harness.kafka_streams.store.KafkaStreamsStore`'s do.

``Stores.persistentWindowStore`` (RocksDB, one database per segment) and ``Stores.inMemoryWindowStore``, no
duplicates, built with ``Stores.windowStoreBuilder`` (change logging on, caching off). They declare Kafka's
shipped semantics, ``retention-only``: grace is the windowed processor's, not the store's (Kafka's stores take
no grace period). Kafka's window suppliers take no grace period either, and validate their arguments with their
own messages when the JVM opens them: the factory here takes KIP-428's four arguments and does not claim
KIP-428's validation (``WindowCapabilities(argument_validation=False)``).

Reads are Kafka's: a fetch returns an iterator of Kafka's, read from the JVM in batches (an iterator left open
stays open in the JVM, across expiry); the read-committed view is Kafka's ``readOnly(IsolationLevel.READ_COMMITTED)``
(KIP-892, 4.4.0) where the store is transactional, the store itself otherwise. ``restore`` replays the
changelog as puts (Kafka's restore callback drops expired records and rebuilds stream time the same way; the
test utilities' context does not call it) and commits them with the store's own offsets.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator

from eos_harness.kafka_streams.store import KafkaStreamsStore
from eos_harness.models.windows import RETENTION_ONLY, WindowConfig
from eos_harness.store import StoreContext, StoreError
from eos_harness.window_store import WindowCapabilities

__all__ = ["DEFAULTS", "SESSION_DEFAULTS", "KafkaStreamsSessionStore", "KafkaStreamsWindowStore"]

# Long enough that the persistent store's segments (Kafka: max(retention / 2, 60 s)) are several: a commit
# goes through more than one segment's RocksDB.
DEFAULTS = {"name": "store", "retention_period": 240_000, "window_size": 30_000, "grace_period": 60_000}
# A session store is judged through zero-length sessions (KafkaStreamsSessionStore): its "window size" is 0; the
# same retention (Kafka's persistent session store's segments: max(retention / 2, 60 s), as the window store's).
SESSION_DEFAULTS = {**DEFAULTS, "window_size": 0}
_BATCH = 256  # items read from the JVM per round trip of an iterator


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class _JavaIterator:
    """One of Kafka's iterators, open in the JVM until exhausted or closed."""

    def __init__(self, store: KafkaStreamsWindowStore, method: str, args: tuple, committed: bool) -> None:
        self._store = store
        self._single = method in ("fetch", "backward_fetch")
        self._id = store._call("w_iter_open", method=method, args=store._encode_args(args), committed=committed)
        self._buffer: list = []
        self._done = False

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        if not self._buffer and not self._done:
            items = self._store._call("w_iter_next", id=self._id, n=_BATCH)
            self._buffer = [self._store._item(item) for item in items]
            if len(items) < _BATCH:
                self._done = True
                self._store._call("w_iter_close", id=self._id)
        if not self._buffer:
            raise StopIteration
        return self._buffer.pop(0)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._buffer = []
            self._store._call("w_iter_close", id=self._id)


class _View:
    """Kafka's read-committed view of the window store."""

    def __init__(self, store: KafkaStreamsWindowStore) -> None:
        self._store = store

    def __getattr__(self, method: str):
        read = getattr(self._store, "_" + method, None)
        if read is None:
            raise AttributeError(method)
        return lambda *args: read(*args, committed=True)


class KafkaStreamsWindowStore(KafkaStreamsStore):
    """One of Kafka Streams ``version``'s window stores: ``kind`` "rocksdb" or "memory", under
    ``enable.transactional.statestores`` = ``transactional`` (4.4.0)."""

    _SUFFIX = "-window"  # the kind of store the JVM opens: f"{kind}-window"
    _WHAT = "window store"

    def __init__(self, version: str, kind: str, transactional: bool, mutant: str = "", **kwargs) -> None:
        args = {**(SESSION_DEFAULTS if self._SUFFIX == "-session" else DEFAULTS), **kwargs}
        super().__init__(version, kind, transactional, name=args["name"], mutant=mutant)
        self._config = WindowConfig(args["name"], args["retention_period"], args["window_size"],
                                    args["grace_period"], RETENTION_ONLY)

    def window_config(self) -> WindowConfig:
        return self._config

    def capabilities(self) -> WindowCapabilities:  # type: ignore[override]
        return WindowCapabilities(argument_validation=False, commit_durable=self.kind == "memory")

    def manages_offsets(self) -> bool:
        return self.kind == "rocksdb"  # KIP-1035: each segment's RocksDB keeps the offsets (AbstractSegments)

    def init(self, context: StoreContext) -> None:
        self._context = context
        if not self._jvm:
            self._start()
        opened = self._call("open", kind=f"{self.kind}{self._SUFFIX}", transactional=self._transactional,
                            state_dir=str(context.directory), name=self._config.name,
                            retention_period=self._config.retention_period, window_size=self._config.window_size,
                            application_id=context.application_id, task_id=context.task_id,
                            **({"mutant": self.mutant} if self.mutant else {}))
        if opened["persistent"] != self.persistent() or opened["manages_offsets"] != self.manages_offsets():
            raise StoreError(f"Kafka Streams {self.version}'s {self.kind} {self._WHAT} says persistent="
                             f"{opened['persistent']}, managesOffsets={opened['manages_offsets']}; the harness "
                             f"expected {self.persistent()}, {self.manages_offsets()}")

    # -- encoding ---------------------------------------------------------------------------------------
    @staticmethod
    def _encode_args(args: tuple) -> list:
        return [_b64(a) if isinstance(a, bytes) or a is None else a for a in args]

    @staticmethod
    def _item(item: list) -> tuple:
        if len(item) == 2:
            return item[0], base64.b64decode(item[1])
        return base64.b64decode(item[0]), item[1], base64.b64decode(item[2])

    # -- writes -----------------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:  # type: ignore[override]
        self._call("w_put", key=_b64(key), value=_b64(value), start=window_start)

    def restore(self, records: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        self._call("w_restore", records=[[_b64(k), s, _b64(v)] for k, s, v in records])

    # -- reads ------------------------------------------------------------------------------------------
    def _fetch_window(self, key: bytes, window_start: int, committed: bool = False) -> bytes | None:
        found = self._call("w_fetch_window", key=_b64(key), start=window_start, committed=committed)
        return None if found is None else base64.b64decode(found)

    def _read(self, method: str, args: tuple, committed: bool) -> _JavaIterator:
        return _JavaIterator(self, method, args, committed)

    def _fetch(self, key, time_from, time_to, committed=False):
        return self._read("fetch", (key, time_from, time_to), committed)

    def _backward_fetch(self, key, time_from, time_to, committed=False):
        return self._read("backward_fetch", (key, time_from, time_to), committed)

    def _fetch_range(self, key_from, key_to, time_from, time_to, committed=False):
        return self._read("fetch_range", (key_from, key_to, time_from, time_to), committed)

    def _backward_fetch_range(self, key_from, key_to, time_from, time_to, committed=False):
        return self._read("backward_fetch_range", (key_from, key_to, time_from, time_to), committed)

    def _fetch_all(self, time_from, time_to, committed=False):
        return self._read("fetch_all", (time_from, time_to), committed)

    def _backward_fetch_all(self, time_from, time_to, committed=False):
        return self._read("backward_fetch_all", (time_from, time_to), committed)

    def _all(self, committed=False):
        return self._read("all", (), committed)

    def _backward_all(self, committed=False):
        return self._read("backward_all", (), committed)

    def fetch_window(self, key: bytes, window_start: int) -> bytes | None:
        return self._fetch_window(key, window_start)

    def fetch(self, key, time_from, time_to):
        return self._fetch(key, time_from, time_to)

    def backward_fetch(self, key, time_from, time_to):
        return self._backward_fetch(key, time_from, time_to)

    def fetch_range(self, key_from, key_to, time_from, time_to):
        return self._fetch_range(key_from, key_to, time_from, time_to)

    def backward_fetch_range(self, key_from, key_to, time_from, time_to):
        return self._backward_fetch_range(key_from, key_to, time_from, time_to)

    def fetch_all(self, time_from, time_to):
        return self._fetch_all(time_from, time_to)

    def backward_fetch_all(self, time_from, time_to):
        return self._backward_fetch_all(time_from, time_to)

    def all(self):
        return self._all()

    def backward_all(self):
        return self._backward_all()

    def read_committed(self) -> _View:  # type: ignore[override]
        return _View(self)


class KafkaStreamsSessionStore(KafkaStreamsWindowStore):
    """One of Kafka Streams ``version``'s session stores (``Stores.persistentSessionStore``: RocksDB, a database per
    segment, as the window store's; ``Stores.inMemorySessionStore``), built with ``Stores.sessionStoreBuilder``
    (change logging on, caching off), judged by the window suite through zero-length sessions: the window of
    ``key`` starting at ``t`` is the session ``[t, t]`` of ``key`` (``eosharness.SessionStores`` maps each call
    to one of Kafka's session store methods: ``put(Windowed(key, SessionWindow(t, t)))``, ``fetchSession``,
    ``findSessions``/``backwardFindSessions`` with their time bounds, ``fetch(null, null)``).

    Kafka's session stores expire a session by its end as its window stores expire a window by its start (at or
    before stream time minus retention, stream time the greatest end put), and ``findSessions(key, from, to)``
    returns the sessions ending at or after ``from`` and starting at or before ``to``: for zero-length sessions
    both are the window suite's rules under ``retention-only`` semantics. Merging the sessions within an
    inactivity gap is the processor's (``KStreamSessionWindowAggregate``: ``findSessions``, then ``remove`` and
    ``put``), not the store's, and sessions longer than an instant are not exercised."""

    _SUFFIX = "-session"
    _WHAT = "session store"

    def manages_offsets(self) -> bool:
        return self.kind == "rocksdb"  # KIP-1035: each segment's RocksDB keeps the offsets (AbstractSegments)
