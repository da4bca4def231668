"""Reference model of the EOS task lifecycle (KIP-844 steps 1-5), pure and deterministic.

Processing is deterministic, and a task always resumes from its committed input position, so
everything the checkers need follows from the input and the processor: the store contents that
must hold when the committed input position is ``p`` (``state_at(p)``), the writes each record
causes (the changelog), and the outputs that must be read committed, exactly once, in order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from eos_harness.models.windows import KIP428_PROPOSAL, RETENTION_ONLY, WindowConfig, WindowStoreModel
from eos_harness.models.workloads import Effects, Workload

Key = bytes
Value = bytes


class DictView:
    """A read-only sorted view of a dict, for running a processor against the model."""

    def __init__(self, data: dict[Key, Value]) -> None:
        self._data = data

    def get(self, key: Key) -> Value | None:
        return self._data.get(key)

    def range(self, lo: Key, hi: Key) -> Iterator[tuple[Key, Value]]:
        keys = sorted(self._data)
        start, end = bisect.bisect_left(keys, lo), bisect.bisect_right(keys, hi)
        return iter([(k, self._data[k]) for k in keys[start:end]])


class WindowedState:
    """A window store model seen through windowed keys ``key@window_start``: what a windowed workload's
    processor reads and writes, with the drops and expiry of the store's declared semantics."""

    def __init__(self, config: WindowConfig) -> None:
        self.model = WindowStoreModel(config)
        self._dropped: dict[Key, set[Value]] = {}  # the values of the puts dropped as expired, by window

    @staticmethod
    def _join(key: Key, start: int) -> Key:
        return b"%s@%013d" % (key, start)

    @staticmethod
    def _split(windowed: Key) -> tuple[Key, int]:
        key, _, start = windowed.rpartition(b"@")
        return key, int(start)

    def get(self, key: Key) -> Value | None:
        return self.model.fetch_window(*self._split(key))

    def range(self, lo: Key, hi: Key) -> Iterator[tuple[Key, Value]]:
        return iter([(k, v) for k, v in sorted(self.snapshot().items()) if lo <= k <= hi])

    def write(self, key: Key, value: Value | None) -> None:
        plain, start = self._split(key)
        if self.model.put(plain, value, start) == "expired" and value is not None:
            self._dropped.setdefault(key, set()).add(value)

    def snapshot(self) -> dict[Key, Value]:
        return {b"%s@%013d" % (k, s): v for k, s, v in self.model.all()}

    def expired(self) -> dict[Key, frozenset[Value]]:
        """The windows at or before stream time - retention, each with the values a store that keeps
        expired windows may hold there: the one it held when it expired, and those of the puts dropped
        there as expired."""
        bound = self.model.config.lower_bound(self.model.stream_time)
        held: dict[Key, set[Value]] = {}
        for (start, key), value in self.model.committed.items():
            if start < bound:
                held.setdefault(self._join(key, start), set()).add(value)
        for windowed, values in self._dropped.items():
            if self._split(windowed)[1] < bound:
                held.setdefault(windowed, set()).update(values)
        return {k: frozenset(v) for k, v in held.items()}

@dataclass
class LifecycleModel:
    """``window_semantics``: for a windowed workload, the semantics the window store declares
    (``kip428-proposal`` or ``retention-only``): its drops decide what the processor reads."""

    workload: Workload
    records: list[tuple[Key, Value]]
    window_semantics: str | None = None
    window_config: WindowConfig | None = field(init=False, default=None)  # a windowed workload's store
    effects: list[Effects] = field(init=False)
    _states: list[dict[Key, Value]] = field(init=False, repr=False)
    # a retention-only window store's expired windows at each position (what it may still hold)
    _expired: list[dict[Key, frozenset[Value]]] = field(init=False, repr=False, default_factory=list)

    def __post_init__(self) -> None:
        if self.workload.windowed:
            self._run_windowed()
            return
        state: dict[Key, Value] = {}
        self._states = [dict(state)]
        self.effects = []
        for key, value in self.records:
            eff = self.workload.process(key, value, DictView(state))
            for k, v in eff.writes:
                if v is None:
                    state.pop(k, None)
                else:
                    state[k] = v
            self.effects.append(eff)
            self._states.append(dict(state))

    def _run_windowed(self) -> None:
        args = self.workload.window_store
        self.window_config = WindowConfig.of(str(args["name"]), int(args["retention_period"]),
                                             int(args["window_size"]), int(args["grace_period"]),
                                             self.window_semantics or KIP428_PROPOSAL)
        state = WindowedState(self.window_config)
        retained = self.window_config.semantics == RETENTION_ONLY
        self._states = [state.snapshot()]
        self._expired = [state.expired()] if retained else []
        self.effects = []
        for key, value in self.records:
            eff = self.workload.process(key, value, state)
            for k, v in eff.writes:
                state.write(k, v)
            self.effects.append(eff)
            self._states.append(state.snapshot())
            if retained:
                self._expired.append(state.expired())

    def state_at(self, position: int) -> dict[Key, Value]:
        """The store contents once the first ``position`` input records are committed."""
        return self._states[position]

    def within_retention(self, position: int, observed: dict[Key, Value]) -> dict[Key, Value]:
        """``observed`` (a store's contents at committed position ``position``) without the windows a
        retention-only window store (Kafka Streams') may still hold past its retention: a window expired at
        ``position`` with the value it held when it expired or that of a put there the model dropped as
        expired (Kafka's RocksDB store drops a put only when its whole segment has expired). Kafka's retention is a minimum ("The time
        period for which the WindowStore will retain historic data", ``WindowBytesStoreSupplier#retentionPeriod``;
        "This retention time is a guaranteed lower bound for how long a window will be maintained",
        ``Windows#until``), and its stores do not keep stream time across a restart: a reopened store shows
        expired windows until a put brings stream time back (the window suite's ``stream_time_rebuilt``
        names that). The lifecycle's checks are about commits: such a window is not a commit's."""
        if not self._expired:
            return observed
        expired = self.expired_at(position)
        state = self._states[position]
        return {k: v for k, v in observed.items() if k in state or v not in expired.get(k, ())}

    def expired_at(self, position: int) -> dict[Key, frozenset[Value]]:
        """A retention-only window store's expired windows at committed position ``position``, each with the
        values such a store may still hold there (see :meth:`within_retention`); empty for any other store."""
        return self._expired[position] if self._expired else {}

    def expected_output(self, position: int) -> list[tuple[Key, Value]]:
        """Every output record of the first ``position`` input records, in order."""
        return [out for eff in self.effects[:position] for out in eff.outputs]

    def changelog(self, position: int) -> list[tuple[Key, Value | None]]:
        """The changelog a task leaves once ``position`` input records are committed."""
        return [w for eff in self.effects[:position] for w in eff.writes]

    def value_after(self, index: int, key: Key) -> Value | None:
        """What the writer must read for ``key`` right after processing record ``index``."""
        return self._states[index + 1].get(key)

    def positions_with(self, key: Key, value: Value | None) -> list[int]:
        """Committed positions at which ``key`` held ``value`` (used to classify a wrong value)."""
        return [p for p, st in enumerate(self._states) if st.get(key) == value]
