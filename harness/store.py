"""The state store protocol: the Python shape of Kafka's ``StateStore`` after KIP-844 and KIP-892.

A store implementer codes against :class:`StateStore` and nothing else. Keys and values are
``bytes``; a value of ``None`` is a tombstone (a delete). The harness creates a store with a
factory (``module:function`` returning an unopened store), calls :meth:`StateStore.init` with a
:class:`StoreContext`, then :meth:`StateStore.recover` after a restart, and drives it.

What the conformance suite checks is chosen by the store's own answers to ``persistent()``,
``transactional()`` and ``manages_offsets()``:

* transactional: writes are visible to the writer (read-your-own-writes) and invisible to
  ``read_committed()`` until ``commit``; ``commit`` applies the data and the offsets atomically;
  after a crash, ``recover`` discards what was not committed (or finishes a commit that was
  interrupted) and the store holds exactly the last committed state and offsets.
* non-transactional and persistent (legacy): writes are visible to every reader at once; after a
  crash the contents are not trusted and ``recover`` returns False; after a clean ``close`` all
  data is there. Offsets are kept for it by the harness in the task's ``.checkpoint`` file.
* not persistent: writes are visible at once; a restart starts empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "Capabilities",
    "CommitFromProcessorError",
    "KeyValueView",
    "StateStore",
    "StoreContext",
    "StoreError",
    "TopicPartition",
    "capabilities_of",
]


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A Kafka topic partition; the key of a changelog offset."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        topic, _, partition = text.rpartition("-")
        if not topic or not partition.isdigit():
            raise ValueError(f"not a topic partition: {text!r} (expected TOPIC-PARTITION, e.g. app-s-changelog-0)")
        return cls(topic, int(partition))


@dataclass(frozen=True)
class Capabilities:
    """What a store offers, declared by the store itself through an optional ``capabilities()``
    method returning one of these (a store without the method offers everything).

    A store declares only what it LACKS: ``Capabilities(range_scans=False)``. What a store declares
    it lacks is not checked, and the verdict says so (``not checked: range (the store declares no
    range scans)``); everything it does not declare is checked in full.

    * ``range_scans``: ``range`` and ``all`` are offered (sorted, inclusive).
    * ``put_all``: ``put_all`` is offered (else the harness writes entry by entry with ``put``).
    * ``empty_commit_records_offset``: a ``commit`` with no writes since the last one still
      records its offsets (KIP-892); a store whose empty commit writes nothing declares False.
    """

    range_scans: bool = True
    put_all: bool = True
    empty_commit_records_offset: bool = True

    def lacking(self) -> list[str]:
        """The names of what the store declares it lacks, in declaration order."""
        return [name for name, offered in vars(self).items() if not offered]


def capabilities_of(store: object) -> Capabilities:
    """The store's declared capabilities (everything, for a store without ``capabilities()``)."""
    declare = getattr(store, "capabilities", None)
    if declare is None:
        return Capabilities()
    declared = declare()
    if not isinstance(declared, Capabilities):
        raise TypeError(f"{type(store).__name__}.capabilities() returned {type(declared).__name__}; "
                        "return eos_harness.store.Capabilities(...)")
    return declared


@dataclass(frozen=True)
class StoreContext:
    """Where and for whom a store lives (Kafka Streams' state store naming rule, seed 004).

    ``directory`` is ``[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]``: the store
    owns it and nothing outside it. ``changelog`` is the store's changelog partition
    ``[application.id]-[store.name]-changelog``/``partition``.
    """

    directory: Path
    application_id: str = "app"
    task_id: str = "0_0"
    store_name: str = "store"
    changelog: TopicPartition = field(default_factory=lambda: TopicPartition("app-store-changelog", 0))
    via_processor: bool = False


class StoreError(Exception):
    """A store refused an operation; the message says why."""


class CommitFromProcessorError(StoreError):
    """KIP-892: a store reached through a processor's context must not be committed by it.

    Processors request a task commit through their context instead.
    """


@runtime_checkable
class KeyValueView(Protocol):
    """A read-only view of a store (``StateStore.read_committed()`` returns one)."""

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None when absent or deleted."""

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every live ``(key, value)`` with ``lo <= key <= hi`` (bytewise), sorted by key."""

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every live ``(key, value)``, sorted by key."""


@runtime_checkable
class StateStore(Protocol):
    """A key-value state store as KIP-844/892 specify it.

    Must never: show an uncommitted write through ``read_committed()`` (transactional stores);
    return a tombstoned key from any read; let a commit be seen half applied after a crash
    (transactional stores: data and offsets together, or neither).
    """

    name: str

    def init(self, context: StoreContext) -> None:
        """Open (creating if needed) the store in ``context.directory``. Opens the first transaction."""

    def persistent(self) -> bool:
        """True if the contents survive a restart of the process."""

    def transactional(self) -> bool:
        """True if writes are held uncommitted until :meth:`commit` (KIP-844)."""

    def manages_offsets(self) -> bool:
        """True if :meth:`commit` stores the changelog offsets atomically with the data (KIP-892).

        If False, offsets given to ``commit`` are ignored and ``committed_offset`` returns None;
        the harness keeps them in the task's ``.checkpoint`` file instead.
        """

    def get(self, key: bytes) -> bytes | None:
        """The newest value of ``key`` including this writer's uncommitted writes, or None."""

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write ``value`` for ``key`` (uncommitted if transactional). ``None`` deletes the key."""

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """``put`` every entry, in order, in the same (open) transaction."""

    def delete(self, key: bytes) -> bytes | None:
        """Delete ``key``; returns the value it had (as ``get`` would have), or None."""

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Live entries with ``lo <= key <= hi``, sorted, uncommitted writes merged in."""

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every live entry, sorted, uncommitted writes merged in."""

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        """Make every write so far durable, together with ``changelog_offsets`` (KIP-892).

        Transactional stores apply data and offsets atomically: after a crash inside ``commit``,
        recovery yields either all of it or none of it. Raises :class:`CommitFromProcessorError`
        when the store was initialised with ``context.via_processor``.
        """

    def committed_offset(self, tp: TopicPartition) -> int | None:
        """The offset for ``tp`` given to the last successful ``commit``, or None (never committed,
        or the store does not manage offsets). Survives close and reopen for persistent stores."""

    def recover(self, changelog_offset: int | None) -> bool:
        """Bring the store to a consistent state after a crash (KIP-844).

        Discards uncommitted writes (or completes an interrupted commit) so that the contents
        correspond to ``changelog_offset`` or a later committed offset. Returns True if the
        contents can be trusted; a non-transactional store returns False and is then wiped and
        restored from the changelog by the runtime under EOS.
        """

    def read_committed(self) -> KeyValueView:
        """A read-only view that shows only committed data (KIP-844 read-committed queries).

        For a non-transactional store it shows the latest writes, as Kafka does.
        """

    def flush(self) -> None:
        """Deprecated by KIP-892: a no-op. Use :meth:`commit`."""

    def close(self) -> None:
        """Release resources. Uncommitted writes of a transactional store are discarded."""
