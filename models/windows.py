"""The window store of KIP-428 (In-memory window store) as a pure model: the store model the window
stores are checked against (:class:`WindowStoreModel`), and Spark's watermark mapped onto the same rules.

One set of rules serves both: a window whose start is at or before ``stream_time - retention`` is
expired (never fetched, never written: :func:`is_expired`), and, under the semantics of KIP-428 as
first proposed, a write whose window start is at or before ``stream_time - grace`` is late and
dropped (:func:`is_late`).
Argument validation is KIP-428's, with its messages (:func:`validate_window_store`).

**The store model.** Two semantics are in the wild, and a store declares which one it has:

* ``kip428-proposal`` (KIP-428 as first proposed, its wiki page's version 2): a put is dropped when
  its window start is at or before observed stream time minus grace, or at or before stream time
  minus retention;
* ``retention-only`` (Kafka's shipped ``InMemoryWindowStore``: grace moved to the processor): a
  put is dropped only when its window start is at or before stream time minus retention.

Under both, observed stream time is the largest window start any put observed (a dropped put
observes its timestamp too, before the drop rule is applied, as Kafka's store does), and a fetch
never returns a window at or before ``stream_time - retention`` (its lower bound is
``stream_time - retention + 1``). Stream time never decreases, so filtering by the bound is the
same as deleting the expired windows before each put and fetch. The transactional view keeps
staged writes and a staged stream time apart from the committed ones.

**Spark's pipelines.** ``WindowSpec``/``WindowStore``/``SparkWatermarkedCounts`` below.

A window store keeps, per window start, the aggregate of each key. Three durations govern it:
``window_size``, ``grace_period`` (how late a record may arrive and still update its window) and
``retention_period`` (how long a window is kept). Validation follows the KIP's supplier: no
negative duration, the retention no smaller than the window size nor than the grace period.

The KIP's text (in the version that reads cleanly) says a record updates the store only while its
window is still open for late records; as Kafka Streams implements it, a window is open while
``window_end + grace > stream_time``. Spark Structured Streaming closes windows the same way,
with ``grace = watermark delay`` and ``stream_time`` = the largest event time seen in earlier
micro-batches: in append mode a window is emitted and evicted once ``end <= watermark`` where
``watermark = max_event_time - delay``, and a record whose window has ``end <= watermark`` is
dropped as late. :class:`SparkWatermarkedCounts` replays that batch by batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "KIP428_PROPOSAL",
    "NO_TIMESTAMP",
    "RETENTION_ONLY",
    "SEMANTICS",
    "SparkWatermarkedCounts",
    "WindowConfig",
    "WindowSpec",
    "WindowStore",
    "WindowStoreModel",
    "is_expired",
    "is_late",
    "validate_window_store",
    "windows_of",
]

KIP428_PROPOSAL = "kip428-proposal"  # KIP-428 as first proposed: the store drops late (grace) and expired writes
RETENTION_ONLY = "retention-only"  # Kafka's shipped InMemoryWindowStore: the store enforces retention only
SEMANTICS = (KIP428_PROPOSAL, RETENTION_ONLY)
NO_TIMESTAMP = -1  # observed stream time before any put (Kafka's ConsumerRecord.NO_TIMESTAMP)


def is_expired(window_start: int, stream_time: int, retention: int) -> bool:
    """A window at or before ``stream_time - retention`` is expired: never fetched, never written."""
    return window_start <= stream_time - retention


def is_late(window_start: int, stream_time: int, grace: int) -> bool:
    """The grace rule of KIP-428 as first proposed: a write at or before ``stream_time - grace`` is late and dropped."""
    return window_start <= stream_time - grace


def validate_window_store(name: str | None, retention_period: int, window_size: int, grace_period: int) -> None:
    """KIP-428's ``Stores.inMemoryWindowStore`` argument checks, in its order, with its messages.

    Raises TypeError (Java's NullPointerException) for a None name and ValueError (Java's
    IllegalArgumentException) for the rest."""
    if name is None:
        raise TypeError("name cannot be null")
    if retention_period < 0:
        raise ValueError("retentionPeriod cannot be negative")
    if window_size < 0:
        raise ValueError("windowSize cannot be negative")
    if grace_period < 0:
        raise ValueError("gracePeriod cannot be negative")
    if window_size > retention_period:
        raise ValueError(f"The retention period of the window store {name} must be no smaller than its window size. "
                         f"Got size=[{window_size}], retention=[{retention_period}]")
    if grace_period > retention_period:
        raise ValueError(f"The grace period of the window store {name} must not exceed its retention period. "
                         f"Got grace period=[{grace_period}], retention=[{retention_period}]")


@dataclass(frozen=True)
class WindowConfig:
    """What a window store was created with (durations in milliseconds) and the semantics it declares.

    ``WindowConfig.of(...)`` validates as KIP-428 does; the constructor does not (a store that
    validates wrongly can still describe itself)."""

    name: str
    retention_period: int
    window_size: int
    grace_period: int
    semantics: str = KIP428_PROPOSAL

    @classmethod
    def of(cls, name: str | None, retention_period: int, window_size: int, grace_period: int,
           semantics: str = KIP428_PROPOSAL) -> WindowConfig:
        validate_window_store(name, retention_period, window_size, grace_period)
        if semantics not in SEMANTICS:
            raise ValueError(f"unknown window store semantics {semantics!r}: use one of {', '.join(SEMANTICS)}")
        return cls(name, retention_period, window_size, grace_period, semantics)  # type: ignore[arg-type]

    def drop_reason(self, window_start: int, stream_time: int) -> str | None:
        """Why a put at ``window_start`` is dropped once ``stream_time`` (already including it) is
        observed: ``"expired"``, ``"late"``, or None when it is written."""
        if is_expired(window_start, stream_time, self.retention_period):
            return "expired"
        if self.semantics == KIP428_PROPOSAL and is_late(window_start, stream_time, self.grace_period):
            return "late"
        return None

    def lower_bound(self, stream_time: int) -> int:
        """The earliest window start a fetch may return at ``stream_time``."""
        return stream_time - self.retention_period + 1


@dataclass(frozen=True)
class WindowSpec:
    """Durations in milliseconds; ``advance == size`` is a tumbling window, smaller is sliding (hopping)."""

    size: int
    advance: int
    grace: int
    retention: int | None = None  # default: size + grace, the least that keeps every open window

    def __post_init__(self) -> None:
        retention = self.retention_ms
        for name, value in (("retentionPeriod", retention), ("windowSize", self.size), ("gracePeriod", self.grace)):
            if value < 0:
                raise ValueError(f"{name} cannot be negative")
        if self.advance <= 0 or self.advance > self.size:
            raise ValueError(f"the advance must be in (0, windowSize]; got advance={self.advance}, size={self.size}")
        if self.size > retention:
            raise ValueError("The retention period of the window store must be no smaller than its window size. "
                             f"Got size=[{self.size}], retention=[{retention}]")
        if self.grace > retention:
            raise ValueError("The grace period of the window store must not exceed its retention period. "
                             f"Got grace period=[{self.grace}], retention=[{retention}]")

    @property
    def retention_ms(self) -> int:
        return self.size + self.grace if self.retention is None else self.retention


def windows_of(timestamp: int, spec: WindowSpec) -> list[tuple[int, int]]:
    """Every ``(start, end)`` window (epoch-aligned, end exclusive) that contains ``timestamp``."""
    last_start = timestamp - timestamp % spec.advance
    starts = range(last_start, timestamp - spec.size, -spec.advance)
    return sorted((s, s + spec.size) for s in starts if s <= timestamp < s + spec.size)


@dataclass
class WindowStore:
    """KIP-428's in-memory window store: segments per window start, each a key -> count map."""

    spec: WindowSpec
    segments: dict[int, dict[str, int]] = field(default_factory=dict)
    stream_time: int = -(2**62)  # the largest timestamp observed

    def is_open(self, window: tuple[int, int], now: int | None = None) -> bool:
        now = self.stream_time if now is None else now
        return window[1] + self.spec.grace > now

    def add(self, key: str, timestamp: int, now: int | None = None) -> list[tuple[int, int]]:
        """Count ``key`` in every window of ``timestamp`` still open at ``now``; returns the windows updated
        (none at all means the record was dropped as late)."""
        updated = [w for w in windows_of(timestamp, self.spec) if self.is_open(w, now)]
        for start, _ in updated:
            segment = self.segments.setdefault(start, {})
            segment[key] = segment.get(key, 0) + 1
        return updated

    def observe(self, timestamp: int) -> None:
        self.stream_time = max(self.stream_time, timestamp)

    def expire(self, now: int | None = None) -> list[tuple[str, tuple[int, int], int]]:
        """Remove every window past its retention at ``now``; returns them as (key, window, count)."""
        now = self.stream_time if now is None else now
        gone = []
        for start in sorted(self.segments):
            if is_expired(start, now, self.spec.retention_ms):
                for key, count in sorted(self.segments.pop(start).items()):
                    gone.append((key, (start, start + self.spec.size), count))
        return gone

    def contents(self) -> dict[tuple[str, int, int], int]:
        return {(k, s, s + self.spec.size): c for s, seg in self.segments.items() for k, c in seg.items()}


@dataclass
class SparkWatermarkedCounts:
    """Spark's ``groupBy(window(ts, size, slide), key).count()`` with ``withWatermark(ts, delay)`` in
    append mode, batch by batch, on a :class:`WindowStore` with ``grace = delay``.

    Batch ``n`` runs with two watermarks (Spark >= 3.5, SPARK-40925): the one for eviction, computed
    after batch ``n-1`` (``max event time - delay``, never decreasing, starting at 0), and the one
    for late events, which is the eviction watermark of batch ``n-1``. It drops the record-windows
    with ``end <= late watermark``, counts the rest, then emits and evicts every window with
    ``end <= eviction watermark`` (so a record late by less than one batch still counts, in a window
    emitted at once).
    """

    spec: WindowSpec
    store: WindowStore = field(init=False)
    watermark: int = 0
    late_watermark: int = 0
    max_event_time: int | None = None
    dropped: list[tuple[str, int, tuple[int, int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.spec.retention_ms != self.spec.size + self.spec.grace:
            raise ValueError("Spark keeps a window exactly until the watermark passes its end: "
                             "use retention = size + grace (the default)")
        self.store = WindowStore(self.spec)

    def batch(self, records: Iterable[tuple[str, int]]) -> list[tuple[str, int, int, int]]:
        """Run one micro-batch of ``(key, event_time_ms)``; returns its output rows (key, start, end, count)."""
        records = list(records)
        late = self.late_watermark + self.spec.grace  # open for a record iff end + grace > late, i.e. end > late wm
        now = self.watermark + self.spec.grace
        for key, ts in records:
            updated = self.store.add(key, ts, now=late)
            self.dropped.extend((key, ts, w) for w in windows_of(ts, self.spec) if w not in updated)
        # retention = size + grace: a window expires once start + size + grace <= now, i.e. end <= watermark
        out = [(k, s, e, c) for k, (s, e), c in self.store.expire(now=now)]
        for _, ts in records:
            self.max_event_time = ts if self.max_event_time is None else max(self.max_event_time, ts)
        self.late_watermark = self.watermark
        if self.max_event_time is not None:
            self.watermark = max(self.watermark, self.max_event_time - self.spec.grace)
        return sorted(out)

    def state(self) -> dict[tuple[str, int, int], int]:
        return self.store.contents()



Record = tuple[bytes, int, bytes]  # (key, window_start, value)


def _in_keys(key: bytes, key_from: bytes | None, key_to: bytes | None) -> bool:
    return (key_from is None or key >= key_from) and (key_to is None or key <= key_to)


@dataclass
class WindowStoreModel:
    """A window store as KIP-428 promises it, under the semantics its config declares (pure, no I/O).

    Writes go to ``overlay`` (staged) for a transactional store and straight to ``committed``
    otherwise; each store has a writer's stream time (``stream_time``, including staged puts) and a
    committed one. ``changelog`` is every put of the committed EOS transactions, in order (what a
    restore replays); ``pending`` the puts logged since the last commit. ``dropped`` remembers, per
    ``(key, window_start)``, why the last put there was dropped and its value (for naming a violation).
    """

    config: WindowConfig
    transactional: bool = False
    persistent: bool = False
    manages_offsets: bool = False
    committed: dict[tuple[int, bytes], bytes] = field(default_factory=dict)
    committed_stream_time: int = NO_TIMESTAMP
    overlay: dict[tuple[int, bytes], bytes | None] = field(default_factory=dict)
    stream_time: int = NO_TIMESTAMP
    offsets: dict = field(default_factory=dict)
    changelog: list[tuple[bytes, int, bytes | None]] = field(default_factory=list)
    pending: list[tuple[bytes, int, bytes | None]] = field(default_factory=list)
    dropped: dict[tuple[bytes, int], tuple[str, bytes | None]] = field(default_factory=dict)

    # -- writes --------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes | None, window_start: int) -> str | None:
        """Apply a put; returns why it was dropped (``"expired"``/``"late"``) or None if written."""
        self.stream_time = max(self.stream_time, window_start)
        if not self.transactional:
            self.committed_stream_time = self.stream_time
        self.pending.append((key, window_start, value))
        reason = self.config.drop_reason(window_start, self.stream_time)
        if reason is not None:
            self.dropped[(key, window_start)] = (reason, value)
            return reason
        self.dropped.pop((key, window_start), None)
        slot = (window_start, key)
        if self.transactional:
            self.overlay[slot] = value
        elif value is None:
            self.committed.pop(slot, None)
        else:
            self.committed[slot] = value
        return None

    # -- reads -----------------------------------------------------------------------------------
    def _live(self, committed_only: bool = False) -> dict[tuple[int, bytes], bytes]:
        if committed_only or not self.transactional:
            data, now = dict(self.committed), self.committed_stream_time
        else:
            data, now = dict(self.committed), self.stream_time
            for slot, value in self.overlay.items():
                if value is None:
                    data.pop(slot, None)
                else:
                    data[slot] = value
        bound = self.config.lower_bound(now)
        return {slot: v for slot, v in data.items() if slot[0] >= bound}

    def records(self, committed_only: bool = False) -> list[Record]:
        """Every live record as (key, window_start, value), ordered by window start, then key."""
        return [(k, s, v) for (s, k), v in sorted(self._live(committed_only).items())]

    def fetch_window(self, key: bytes, window_start: int, committed_only: bool = False) -> bytes | None:
        return self._live(committed_only).get((window_start, key))

    def fetch(self, key: bytes, time_from: int, time_to: int, committed_only: bool = False) -> list[tuple[int, bytes]]:
        """``key``'s windows with ``time_from <= start <= time_to``, by window start."""
        return [(s, v) for k, s, v in self.records(committed_only) if k == key and time_from <= s <= time_to]

    def fetch_range(self, key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int,
                    committed_only: bool = False) -> list[Record]:
        """Windows of keys in ``[key_from, key_to]`` (None: unbounded) with start in the time range,
        by window start then key; empty when ``key_from > key_to``."""
        if key_from is not None and key_to is not None and key_from > key_to:
            return []
        return [(k, s, v) for k, s, v in self.records(committed_only)
                if _in_keys(k, key_from, key_to) and time_from <= s <= time_to]

    def fetch_all(self, time_from: int, time_to: int, committed_only: bool = False) -> list[Record]:
        return self.fetch_range(None, None, time_from, time_to, committed_only)

    def all(self, committed_only: bool = False) -> list[Record]:
        return self.records(committed_only)

    # -- lifecycle -------------------------------------------------------------------------------
    def committed_after(self, changelog_offsets) -> tuple[list[Record], int, dict]:
        """(live records, stream time, offsets) a commit with these offsets would leave."""
        probe = WindowStoreModel(self.config, False, self.persistent, self.manages_offsets,
                                 committed=self._merged(), committed_stream_time=self.stream_time)
        offsets = dict(self.offsets)
        if self.manages_offsets:
            offsets.update(changelog_offsets)
        return probe.records(), self.stream_time, offsets

    def _merged(self) -> dict[tuple[int, bytes], bytes]:
        data = dict(self.committed)
        for slot, value in self.overlay.items():
            if value is None:
                data.pop(slot, None)
            else:
                data[slot] = value
        bound = self.config.lower_bound(self.stream_time)
        return {slot: v for slot, v in data.items() if slot[0] >= bound}

    def commit(self, changelog_offsets) -> None:
        """The EOS transaction and the store commit: staged writes, stream time and offsets together."""
        self.committed = self._merged()
        self.committed_stream_time = self.stream_time
        self.overlay = {}
        if self.manages_offsets:
            self.offsets.update(changelog_offsets)
        self.changelog.extend(self.pending)
        self.pending = []

    def committed_offset(self, tp) -> int | None:
        return self.offsets.get(tp) if self.manages_offsets else None

    def crash(self) -> None:
        """The process died: staged writes and their stream time are gone, and so is what the open
        EOS transaction logged; a store that is not persistent is empty until restored."""
        self.overlay = {}
        self.pending = []
        self.stream_time = self.committed_stream_time
        if not self.persistent:
            self.committed, self.offsets = {}, {}
            self.stream_time = self.committed_stream_time = NO_TIMESTAMP

    def wipe(self) -> None:
        """An untrusted store deleted by the runtime under EOS: empty, stream time unknown."""
        self.committed, self.overlay, self.offsets, self.pending = {}, {}, {}, []
        self.stream_time = self.committed_stream_time = NO_TIMESTAMP

    def restore(self) -> None:
        """Replay the committed changelog into the (empty) store, as the runtime's restore does:
        each record is a put, so stream time is rebuilt and expired windows are dropped again."""
        changelog = list(self.changelog)
        transactional = self.transactional
        self.transactional = False
        try:
            for key, window_start, value in changelog:
                self.put(key, value, window_start)
        finally:
            self.transactional = transactional
            self.pending = []

    def adopt(self, records: list[Record], stream_time: int, offsets) -> None:
        """Take one allowed outcome of an interrupted commit as the committed state."""
        self.committed = {(s, k): v for k, s, v in records}
        self.committed_stream_time = self.stream_time = stream_time
        self.offsets = dict(offsets)
        self.overlay = {}
