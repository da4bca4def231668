"""Reference models of the Spark pipelines in ``eos_harness.spark.pipelines``: what each micro-batch
outputs and what the state holds after it, computed from the input batches alone (pure, stdlib).

Input is a list of micro-batches, each a list of ``(key, event_time_seconds)``; with the file
source, batch ``n`` is input file ``n`` (one file per trigger). Batch ids past the last input file
are Spark's no-data batches (run when the watermark moved): empty input, same rules.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from eos_harness.models.windows import SparkWatermarkedCounts, WindowSpec

__all__ = ["PIPELINE_MODELS", "PipelineModel", "generate_batches", "model_for"]

Batch = Sequence[tuple[str, int]]

WATERMARK_DELAY_S = 10
TIMEOUT_S = 5  # the processors' event-time timer: last event time of the key + TIMEOUT_S + 0.5 s
KEEP_TIMES = 3  # the processors' list state keeps the last KEEP_TIMES event times of the key


def generate_batches(seed: int, batches: int = 6, per_batch: int = 6, keys: int = 4) -> list[list[tuple[str, int]]]:
    """Seeded input: event time advances about 8 s per batch, with jitter and some records late
    by 20-40 s (behind any watermark of delay 10 s, so the windowed pipelines drop some)."""
    rng = random.Random(seed)
    out = []
    clock = 1_000
    for _ in range(batches):
        clock += rng.randint(5, 11)
        batch = []
        for _ in range(per_batch):
            key = f"k{rng.randrange(keys)}"
            ts = clock - rng.randint(20, 40) if rng.random() < 0.15 else clock + rng.randint(-3, 3)
            batch.append((key, ts))
        out.append(batch)
    return out


@dataclass
class PipelineModel:
    """Outputs and states of a pipeline after each batch id, from ``batches``."""

    batches: list[list[tuple[str, int]]]
    outputs: list[list[tuple]] = field(default_factory=list)
    states: list[dict] = field(default_factory=list)
    # The watermark (ms) Spark recorded for each batch id (``batchWatermarkMs`` of ``offsets/N``):
    # when given, batch N runs with it instead of the one an uninterrupted run computes.
    recorded_watermarks: dict[int, int] | None = None
    # The eviction watermark each batch ran with (None: the pipeline has no watermark).
    watermarks: list[int | None] = field(default_factory=list)

    def step(self, records: Batch) -> tuple[list[tuple], dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _watermark(self) -> int | None:
        return None

    def _use_watermark(self, eviction_ms: int, previous_ms: int) -> None:
        pass

    def run_to(self, batch_id: int) -> None:
        while len(self.outputs) <= batch_id:
            n = len(self.outputs)
            if self.recorded_watermarks and n in self.recorded_watermarks:
                previous = self.recorded_watermarks.get(n - 1, self.watermarks[n - 1] if n else 0) or 0
                self._use_watermark(self.recorded_watermarks[n], previous)
            self.watermarks.append(self._watermark())
            out, state = self.step(self.batches[n] if n < len(self.batches) else [])
            self.outputs.append(sorted(out))
            self.states.append(state)

    def output(self, batch_id: int) -> list[tuple]:
        self.run_to(batch_id)
        return self.outputs[batch_id]

    def state(self, batch_id: int) -> dict:
        """The state after batch ``batch_id`` (``-1``: before any batch, empty)."""
        if batch_id < 0:
            return {}
        self.run_to(batch_id)
        return self.states[batch_id]

    def all_output(self, last_batch: int) -> list[tuple]:
        return sorted(row for b in range(last_batch + 1) for row in self.output(b))


class RunningCount(PipelineModel):
    """``groupBy(key).count()`` in update mode: each batch outputs the new count of every key it saw."""

    def __init__(self, batches: list[list[tuple[str, int]]]) -> None:
        super().__init__(batches)
        self.counts: dict[str, int] = {}

    def step(self, records: Batch) -> tuple[list[tuple], dict]:
        seen = set()
        for key, _ in records:
            self.counts[key] = self.counts.get(key, 0) + 1
            seen.add(key)
        return [(k, self.counts[k]) for k in sorted(seen)], dict(self.counts)


class WindowedCount(PipelineModel):
    """``withWatermark(ts, 10 s).groupBy(window(ts, size, slide), key).count()`` in append mode."""

    def __init__(self, batches: list[list[tuple[str, int]]], size_s: int, slide_s: int) -> None:
        super().__init__(batches)
        self.model = SparkWatermarkedCounts(WindowSpec(size_s * 1000, slide_s * 1000, WATERMARK_DELAY_S * 1000))

    def _watermark(self) -> int | None:
        return self.model.watermark

    def _use_watermark(self, eviction_ms: int, previous_ms: int) -> None:
        # Spark >= 3.5: late events are judged by the previous batch's watermark
        self.model.watermark, self.model.late_watermark = eviction_ms, previous_ms

    def step(self, records: Batch) -> tuple[list[tuple], dict]:
        out = self.model.batch((k, ts * 1000) for k, ts in records)
        rows = [(k, s // 1000, e // 1000, c) for k, s, e, c in out]
        state = {(k, s // 1000, e // 1000): c for (k, s, e), c in self.model.state().items()}
        return rows, state


class KeyedProcessor(PipelineModel):
    """The per-key processor of ``applyInPandasWithState`` / ``transformWithStateInPandas``.

    Per key: a count (value state), the last three event times (list state) and an event-time
    timer at ``(last event time + 5 s) * 1000 + 500`` ms. Records at or behind the watermark are
    dropped as late. A key's input rows emit ``(key, count, "update")``; a timer that the
    watermark passed emits ``(key, count, "expired")`` and clears the key's state, first, if the key
    also has input in that batch.
    """

    def __init__(self, batches: list[list[tuple[str, int]]]) -> None:
        super().__init__(batches)
        self.keys: dict[str, tuple[int, tuple[int, ...], int]] = {}  # key -> (count, times, timer_ms)
        self.watermark_ms = 0
        self.max_event_ms: int | None = None

    def _watermark(self) -> int | None:
        return self.watermark_ms

    def _use_watermark(self, eviction_ms: int, previous_ms: int) -> None:
        self.watermark_ms = eviction_ms

    def step(self, records: Batch) -> tuple[list[tuple], dict]:
        w = self.watermark_ms
        by_key: dict[str, list[int]] = {}
        for key, ts in records:
            if ts * 1000 > w:
                by_key.setdefault(key, []).append(ts)
        out = []
        for key in sorted(self.keys):
            if self.keys[key][2] <= w:
                out.append((key, self.keys.pop(key)[0], "expired"))
        for key, times in sorted(by_key.items()):
            count, kept, _ = self.keys.get(key, (0, (), 0))
            kept = (*kept, *sorted(times))[-KEEP_TIMES:]
            count += len(times)
            timer = (max(kept) + TIMEOUT_S) * 1000 + 500
            self.keys[key] = (count, kept, timer)
            out.append((key, count, "update"))
        for _, ts in records:
            self.max_event_ms = ts * 1000 if self.max_event_ms is None else max(self.max_event_ms, ts * 1000)
        if self.max_event_ms is not None:
            self.watermark_ms = max(self.watermark_ms, self.max_event_ms - WATERMARK_DELAY_S * 1000)
        return out, {k: (c, list(t)) for k, (c, t, _) in self.keys.items()}


PIPELINE_MODELS = {
    "count": lambda b: RunningCount(b),
    "window-tumbling": lambda b: WindowedCount(b, 10, 10),
    "window-sliding": lambda b: WindowedCount(b, 20, 10),
    "pandas-state": lambda b: KeyedProcessor(b),
    "tws": lambda b: KeyedProcessor(b),
}


def model_for(pipeline: str, batches: list[list[tuple[str, int]]],
              recorded_watermarks: dict[int, int] | None = None) -> PipelineModel:
    """The model of ``pipeline`` on ``batches``; ``recorded_watermarks``: run each batch id with the
    watermark Spark recorded for it (after a restart it can lag the uninterrupted one)."""
    try:
        model = PIPELINE_MODELS[pipeline](batches)
    except KeyError:
        raise ValueError(f"unknown pipeline {pipeline!r}; known: {', '.join(PIPELINE_MODELS)}") from None
    model.recorded_watermarks = recorded_watermarks
    return model
