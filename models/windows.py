"""The in-memory window store of KIP-428 (seed 001) as a pure model, and Spark's watermark mapped onto it.

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

__all__ = ["SparkWatermarkedCounts", "WindowSpec", "WindowStore", "windows_of"]


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
            if start + self.spec.retention_ms <= now:
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

