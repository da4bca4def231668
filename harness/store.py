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
* not persistent: writes are visible at once; a restart starts empty (a store may also be
  transactional and not persistent: writes are held until ``commit`` and invisible to
  ``read_committed()`` until then, and a restart starts empty all the same).

**The offset convention.** A changelog offset given to ``commit`` (and to ``restore`` as
``end_offset``) is the offset of the NEXT changelog record to read: one past the last record whose
write the store's contents include (Kafka's "position", the end offset of the changelog at that
commit). ``committed_offset`` returns exactly that number, and after a restart the runtime hands it
to ``recover`` and replays the changelog from it, that offset included. A store that keeps the
offset of the last record written instead (one less) would have that record replayed twice, and a
store that adds one would skip a record: the suite's ``offset_convention`` check catches both.

**Several changelog partitions (KIP-1035).** A store may be fed by several changelog partitions
(a global store): ``StoreContext.changelogs`` names them, ``commit`` receives an offset for each (and
for the source partitions whose KIP-796 positions it keeps; a partition is a changelog partition iff
its topic ends with ``-changelog``), all committed atomically with the data, and
``committed_offset(tp)`` answers for each, None for a partition never committed. Checked by the
offsets suite (``suites/offsets``, run by ``eos-harness verify``).

**Upgrade and downgrade (KIP-1035).** A persistent store that manages offsets, opened on a directory
that still holds the legacy files (the task's ``.checkpoint``, ``StoreContext.checkpoint_path``, and
its own KIP-796 ``.position``, ``StoreContext.position_path``), imports those offsets (its own
partitions of the ``.checkpoint``, which the task's stores share) durably, then removes them from the
files; a malformed file is a :class:`StoreError` naming the file and the line, raised by ``init``
before anything changed. With ``StoreContext.upgrade_from`` set to a version before offset management
(before ``4.3``), ``close()`` writes the changelog offsets back to the ``.checkpoint`` and the
positions to ``.position`` and drops its own copy, so that an older store opens the directory.
A store that cannot open a directory written by a newer format raises
:class:`IncompatibleStoreDirectory` from ``init``: the runtime then wipes the store and restores it
from the changelog. Checked by the offsets suite (``migration_*``, ``downgrade_*``). Both are what
Kafka's own RocksDB store does (it kept those files before 4.3); a store written from scratch, with
no legacy files to import and no older format to go back to, declares it lacks them
(``Capabilities(legacy_offsets_import=False, legacy_downgrade=False)``) and is not checked for them.

**Optional methods.** ``capabilities()`` (see :class:`Capabilities`) and ``restore(records,
end_offset)`` (see :meth:`StateStore.restore`): a store without them offers every capability, and
is restored by the runtime through ``put`` and ``commit``. A store fed by several changelog
partitions (the lifecycle's ``global`` workload) is always restored through ``put`` and ``commit``
(``restore`` takes one partition's records), each partition replayed from its own committed offset.

**Optional attribute.** ``metrics_scope`` (a ``str``, Kafka's ``StoreSupplier#metricsScope``): the
``[store type]`` of the ``[store type]-state-id`` tag of the store's commit metrics
(``eos_harness.runtime.metrics``); without it, ``rocksdb`` for the built-in RocksDB stores,
``in-memory`` for a store that is not persistent, else the store's class name.

**Through a processor.** A processor reaches the store through the runtime's decorator
(``eos_harness.runtime.processor.ProcessorStore``), whose ``commit`` raises
:class:`CommitFromProcessorError` and whose ``flush`` does nothing; it requests a task commit with
``context.commit()`` instead (KIP-892). A store initialised with ``context.via_processor`` refuses
``commit`` itself as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "Capabilities",
    "ChangelogRecord",
    "CommitFromProcessorError",
    "KeyValueView",
    "StateStore",
    "StoreContext",
    "IncompatibleStoreDirectory",
    "StoreError",
    "TopicPartition",
    "capabilities_of",
    "offers_restore",
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
    range scans)``, and the JSON field ``not_checked``); everything it does not declare is checked
    in full.

    * ``range_scans``: ``range`` and ``all`` (and the read-committed view's) are offered, sorted,
      inclusive. Declared False: the suite never calls them: it draws no range-scan steps and reads
      a store's contents key by key with ``get`` (the suite's keys are a small fixed set, so
      nothing is missed); ``range``/``all`` may be absent or raise.
    * ``put_all``: ``put_all`` is offered. Declared False: the suite, the probe and the runtime
      write entry by entry with ``put`` (the same writes, in the same order); ``put_all`` may be
      absent.
    * ``empty_commit_records_offset``: a ``commit`` with no writes since the last one (or since the
      store was opened) still records its offsets (KIP-892). Declared False (a store whose empty
      commit writes nothing, not even the offset): after such a commit ``committed_offset`` may
      still return the offset of the commit before; it may not return anything else. Every commit
      that had writes is checked as usual.
    * ``legacy_offsets_import``: opened on a directory that still holds the legacy offsets files
      (the task's ``.checkpoint``, the store's ``.position``), the store imports its offsets from them
      and removes them (KIP-1035's upgrade, what Kafka Streams does for its RocksDB store, which
      kept those files before 4.3). Declared False (a store written with offset management from
      the start, which never had those files): the offsets suite's scenarios
      ``upgrade_from_legacy_files``, ``upgrade_without_checkpoint`` and ``malformed_offsets_files``
      are not run, and the checks ``migration_*`` and ``malformed_offsets_file`` are not checked.
    * ``legacy_downgrade``: with ``StoreContext.upgrade_from`` set to a version before offset
      management, ``close()`` hands the offsets back to ``.checkpoint``/``.position`` and keeps none
      (KIP-1035's downgrade, Kafka's RocksDB store going back to its pre-4.3 format). Declared False
      (a store with no older format to go back to): the scenario ``downgrade_with_upgrade_from`` is
      not run, and the checks ``downgrade_*`` are not checked.
    * ``several_changelog_partitions``: the store may be fed by several changelog partitions (a
      global store, KIP-1035): ``commit`` takes an offset for each partition of
      ``StoreContext.changelogs`` (and for source partitions whose positions it keeps) and
      ``committed_offset`` answers for each. Declared False (a task's store, fed by its own
      changelog partition only and never a global store, as most stream libraries build their
      stores: quixstreams' ``RocksDBStore`` keeps one changelog offset per store partition): the
      store's context names ``context.changelog`` alone, every commit names that one partition and
      no other, ``committed_offset`` is asked of it alone; the promises about several partitions
      (``partitions_committed_together``, ``partitions_one_commit``, a commit naming only some
      partitions, a partition never committed beside committed ones) are not checked, the lifecycle's
      global workload is not run, and everything else is checked as for any store.
    * ``commit_durable``: a commit that returned survives a crash of the store's process: after it the
      store holds the last committed state. Declared False (a store that keeps its commits in memory
      until it flushes, as Kafka Streams' RocksDB store does: it writes with RocksDB's write-ahead log
      disabled and counts on the changelog, which "Kafka Streams guarantees to restore ... by replaying
      the corresponding changelog topics", Kafka Streams' architecture documentation, Fault Tolerance):
      after a crash the store may hold the state of any commit since it was last closed cleanly (or
      since the recovery before), its data and its offsets together, never a mix of two commits and
      never an uncommitted write; the runtime restores the rest from the changelog from the store's
      committed offset. ``committed_durable`` is then not checked; a clean close is still durable
      (``clean_close_durable``), and everything else is checked in full.
    """

    range_scans: bool = True
    put_all: bool = True
    empty_commit_records_offset: bool = True
    legacy_offsets_import: bool = True
    legacy_downgrade: bool = True
    several_changelog_partitions: bool = True
    commit_durable: bool = True

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


def offers_restore(store: object) -> bool:
    """Whether ``store`` has its own ``restore(records, end_offset)`` (else the runtime replays
    through ``put`` and ``commit``)."""
    return callable(getattr(store, "restore", None))


class ChangelogRecord(NamedTuple):
    """One changelog record handed to :meth:`StateStore.restore`: its ``offset`` in the changelog
    partition, and the write it records (``value`` None: a tombstone)."""

    offset: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class StoreContext:
    """Where and for whom a store lives (Kafka Streams' state directory layout).

    ``directory`` is ``[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]``: the store
    owns it and nothing outside it. ``changelog`` is the store's changelog partition
    ``[application.id]-[store.name]-changelog``/``partition``. ``changelogs`` (optional, KIP-1035):
    every changelog partition feeding the store, ``(changelog,)`` unless given; a global store has
    several, and ``commit`` then names each of them (``committed_offset`` answers for each).
    """

    directory: Path
    application_id: str = "app"
    task_id: str = "0_0"
    store_name: str = "store"
    changelog: TopicPartition = field(default_factory=lambda: TopicPartition("app-store-changelog", 0))
    via_processor: bool = False
    changelogs: tuple[TopicPartition, ...] = ()
    # Kafka's ``upgrade.from``: set to a version before offset management (e.g. "3.9"), close()
    # hands the offsets back to the legacy files so that version can open the store (KIP-1035).
    upgrade_from: str | None = None

    def __post_init__(self) -> None:
        if not self.changelogs:
            object.__setattr__(self, "changelogs", (self.changelog,))

    @property
    def task_dir(self) -> Path:
        """``[state.dir]/[application.id]/[task.id]``: where the task's ``.checkpoint`` lives."""
        return self.directory.parent.parent

    @property
    def checkpoint_path(self) -> Path:
        """The task's legacy ``.checkpoint`` file (changelog offsets of stores that do not manage them)."""
        return self.task_dir / ".checkpoint"

    @property
    def position_path(self) -> Path:
        """The store's legacy KIP-796 ``.position`` file (source-topic offsets)."""
        return self.directory / ".position"


class StoreError(Exception):
    """A store refused an operation; the message says why."""


class IncompatibleStoreDirectory(StoreError):
    """``init`` found a directory written by a store format it cannot open (KIP-1035: a store from
    before offset management meeting the offsets column family of an upgraded one, without
    ``upgrade.from``; or an upgraded store meeting a legacy database with no ``.checkpoint`` offset to
    import, which under exactly-once may hold uncommitted writes). The one exception ``init`` may
    raise: the runtime wipes the store's directory and restores it from the changelog."""


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
        """The offset for ``tp`` given to the last successful ``commit`` (or ``restore``), exactly:
        the next changelog offset to read (see the offset convention above); None when never
        committed, or when the store does not manage offsets. Survives close and reopen for
        persistent stores."""

    def recover(self, changelog_offset: int | None) -> bool:
        """Bring the store to a consistent state after a crash (KIP-844).

        Discards uncommitted writes (or completes an interrupted commit) so that the contents
        correspond to ``changelog_offset`` or a later committed offset. Returns True if the
        contents can be trusted; a non-transactional store returns False and is then wiped and
        restored from the changelog by the runtime under EOS.
        """

    # Optional (not part of the runtime-checkable shape): a store's own restore path.
    #
    # def restore(self, records: Sequence[ChangelogRecord], end_offset: int) -> None:
    #     """Apply the changelog ``records`` (in offset order; ``value`` None deletes) and commit them
    #     together with ``end_offset`` as this store's changelog offset (the next offset to read,
    #     one past the last record; also given when ``records`` is empty), as ``put`` of each record
    #     followed by ``commit({context.changelog: end_offset})`` would: afterwards
    #     ``committed_offset(context.changelog) == end_offset`` (a store that manages offsets) and
    #     the records are committed. Called by the runtime after ``recover``, with the committed
    #     changelog tail from the store's committed offset, possibly in several batches (as Kafka's
    #     ``restoreBatch``); never while the store has uncommitted writes. Checked by the suite
    #     (``offset_convention``, and every read after it); when absent, the runtime replays
    #     through ``put`` and ``commit``."""

    def read_committed(self) -> KeyValueView:
        """A read-only view that shows only committed data (KIP-844 read-committed queries).

        For a non-transactional store it shows the latest writes, as Kafka does.
        """

    def flush(self) -> None:
        """Deprecated by KIP-892: a no-op. Use :meth:`commit`."""

    def close(self) -> None:
        """Release resources. Uncommitted writes of a transactional store are discarded."""
