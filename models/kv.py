"""Reference model of a key-value state store as KIP-844/892 promise it (pure, no I/O).

The model keeps the committed map, the open transaction (an overlay of writes, ``None`` for a
tombstone) and the committed changelog offsets. Reads by the writer merge the overlay
(read-your-own-writes); ``read_committed_*`` ignore it. ``crash`` drops the open transaction.

Non-transactional kinds are modelled with the same class: their writes go straight to the
committed map (every reader sees them at once) and ``crash`` makes the contents untrusted
(:attr:`trusted` False) until the harness wipes them (:meth:`wipe`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

Key = bytes
Value = bytes


@dataclass
class KVModel:
    transactional: bool = True
    persistent: bool = True
    manages_offsets: bool = True
    committed: dict[Key, Value] = field(default_factory=dict)
    overlay: dict[Key, Value | None] = field(default_factory=dict)
    offsets: dict[Hashable, int] = field(default_factory=dict)
    trusted: bool = True

    # -- writes -----------------------------------------------------------------
    def put(self, key: Key, value: Value | None) -> None:
        if self.transactional:
            self.overlay[key] = value
        elif value is None:
            self.committed.pop(key, None)
        else:
            self.committed[key] = value

    def put_all(self, entries: Iterable[tuple[Key, Value | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: Key) -> Value | None:
        old = self.get(key)
        self.put(key, None)
        return old

    # -- reads by the writer ----------------------------------------------------
    def get(self, key: Key) -> Value | None:
        if key in self.overlay:
            return self.overlay[key]
        return self.committed.get(key)

    def all(self) -> list[tuple[Key, Value]]:
        merged = dict(self.committed)
        for key, value in self.overlay.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return sorted(merged.items())

    def range(self, lo: Key, hi: Key) -> list[tuple[Key, Value]]:
        return [(k, v) for k, v in self.all() if lo <= k <= hi]

    # -- read-committed view ------------------------------------------------------
    def read_committed_all(self) -> list[tuple[Key, Value]]:
        return sorted(self.committed.items())

    # -- lifecycle ------------------------------------------------------------------
    def committed_after(self, changelog_offsets: Mapping[Hashable, int]) -> tuple[dict, dict]:
        """The (data, offsets) a commit with these offsets would leave, without changing the model."""
        data = dict(self.committed)
        for key, value in self.overlay.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        offsets = dict(self.offsets)
        if self.manages_offsets:
            offsets.update(changelog_offsets)
        return data, offsets

    def commit(self, changelog_offsets: Mapping[Hashable, int]) -> None:
        self.committed, self.offsets = self.committed_after(changelog_offsets)
        self.overlay = {}

    def committed_offset(self, tp: Hashable) -> int | None:
        return self.offsets.get(tp) if self.manages_offsets else None

    def crash(self) -> None:
        """The process died: the open transaction is gone; untransactional contents are untrusted."""
        self.overlay = {}
        if not self.persistent:
            self.committed = {}
            self.offsets = {}
        elif not self.transactional:
            self.trusted = False

    def close_and_reopen(self) -> None:
        """A clean close discards the open transaction; persistent data survives."""
        self.overlay = {}
        if not self.persistent:
            self.committed = {}
            self.offsets = {}

    def wipe(self) -> None:
        """What the runtime does to an untrusted store under EOS: delete it and start empty."""
        self.committed = {}
        self.overlay = {}
        self.offsets = {}
        self.trusted = True

    def adopt(self, data: Mapping[Key, Value], offsets: Mapping[Hashable, int]) -> None:
        """Take one of the allowed outcomes of an interrupted commit as the committed state."""
        self.committed = dict(data)
        self.offsets = dict(offsets)
        self.overlay = {}
