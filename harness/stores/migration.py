"""Upgrade and downgrade of a store's offsets between the legacy files and the store (KIP-1035).

Before Kafka Streams 4.3 the runtime kept a task's changelog offsets in the task's ``.checkpoint``
file (shared by the task's stores) and each store its KIP-796 positions (source-topic offsets) in
its own ``.position`` file, both in Kafka's ``OffsetCheckpoint`` format: a version line (``0``), a
count line, then ``topic partition offset`` lines. A store that manages its offsets keeps them in
itself instead. This module is the shared part of the built-in stores' two directions:

* **upgrade** (:func:`read_legacy` in ``init`` before the store opens anything, then
  :func:`import_legacy` once it is open): the store's own partitions of the ``.checkpoint`` and the
  whole ``.position`` are written into the store durably, THEN the ``.checkpoint`` is rewritten
  without them (deleted when nothing is left) and the ``.position`` deleted. A crash at any step
  leaves the files, or the imported offsets, or both; never neither, never a lower offset.
* **downgrade** (:func:`export_offsets` in ``close`` when ``StoreContext.upgrade_from`` names a version
  before offset management): the changelog offsets are merged into the ``.checkpoint``, the
  positions written to ``.position`` (both durably), THEN the store drops its own copy.

A legacy database with NO offsets to import (no ``.checkpoint`` entry for one of the store's
changelog partitions) is not trusted (:func:`refuse_untrusted`): under exactly-once Kafka Streams
removes a task's ``.checkpoint`` while it runs, so a task that crashed has none, and its database may
hold writes of a transaction that never committed. Kafka wipes such a task's state; here ``init``
raises :class:`~eos_harness.store.IncompatibleStoreDirectory` before it changed anything, and the
runtime wipes the directory and restores the store from the changelog (a ``wipe`` event).

A malformed file is an :class:`OffsetsFileError` naming the file and the line, raised before the
store changed anything. Each step has a crash point before and after it (``store.migrate.*``,
``store.downgrade.*``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from eos_harness.faults.points import crash_point, declare
from eos_harness.store import IncompatibleStoreDirectory, StoreContext, StoreError, TopicPartition
from rocksdict import AccessType, Options, Rdict

__all__ = [
    "OFFSETS_MANAGED_SINCE",
    "DOWNGRADE_POINTS",
    "LegacyOffsets",
    "MIGRATION_POINTS",
    "OffsetsFileError",
    "downgrading",
    "export_offsets",
    "fsync_dir",
    "import_legacy",
    "is_changelog",
    "read_legacy",
    "read_offsets_file",
    "refuse_untrusted",
    "write_offsets",
    "write_offsets_file",
]

VERSION = 0  # Kafka's OffsetCheckpoint format version
OFFSETS_MANAGED_SINCE = (4, 3)  # KIP-1035 shipped in Kafka Streams 4.3

P_MIGRATE_BEFORE_IMPORT = declare("store.migrate.before_import",
                                  "upgrade: legacy .checkpoint/.position read, offsets not yet imported")
P_MIGRATE_AFTER_IMPORT = declare("store.migrate.after_import",
                                 "upgrade: offsets imported into the store durably, legacy files untouched")
P_MIGRATE_AFTER_CHECKPOINT = declare("store.migrate.after_checkpoint",
                                     "upgrade: the store's partitions removed from the task .checkpoint")
P_MIGRATE_AFTER_POSITION = declare("store.migrate.after_position", "upgrade: .position deleted, migration done")
MIGRATION_POINTS = (P_MIGRATE_BEFORE_IMPORT, P_MIGRATE_AFTER_IMPORT, P_MIGRATE_AFTER_CHECKPOINT,
                    P_MIGRATE_AFTER_POSITION)

P_DOWNGRADE_BEFORE_CHECKPOINT = declare("store.downgrade.before_checkpoint",
                                        "downgrade on close: offsets read from the store, no file written yet")
P_DOWNGRADE_AFTER_CHECKPOINT = declare("store.downgrade.after_checkpoint",
                                       "downgrade on close: changelog offsets written to the task .checkpoint")
P_DOWNGRADE_AFTER_POSITION = declare("store.downgrade.after_position",
                                     "downgrade on close: positions written to .position, store offsets not dropped")
P_DOWNGRADE_AFTER_DROP = declare("store.downgrade.after_drop",
                                 "downgrade on close: the store's offsets dropped, store not yet closed")
DOWNGRADE_POINTS = (P_DOWNGRADE_BEFORE_CHECKPOINT, P_DOWNGRADE_AFTER_CHECKPOINT, P_DOWNGRADE_AFTER_POSITION,
                    P_DOWNGRADE_AFTER_DROP)


class OffsetsFileError(StoreError):
    """A legacy offsets file that cannot be read; the message names the file and the line."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}: line {line}: {problem}; the store was not opened and the file was left as it "
                         "is: fix the line, or delete the file to restore the store from the changelog")
        self.path, self.line = path, line


def is_changelog(tp: TopicPartition) -> bool:
    """A changelog partition (its offset goes to the ``.checkpoint``), else a source partition (a KIP-796
    position, ``.position``)."""
    return tp.topic.endswith("-changelog")


def _version(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+){0,2}", text.strip()):
        raise ValueError(f"upgrade_from {text!r} is not a Kafka version; give one like '3.9' or '4.2'")
    return tuple(int(part) for part in text.strip().split("."))


def downgrading(upgrade_from: str | None) -> bool:
    """Whether ``upgrade.from`` names a version before offset management (its close must downgrade)."""
    return upgrade_from is not None and _version(upgrade_from)[:2] < OFFSETS_MANAGED_SINCE


# -- the file format --------------------------------------------------------------------------------

def read_offsets_file(path: Path) -> dict[TopicPartition, int] | None:
    """The offsets in ``path`` (Kafka's OffsetCheckpoint format), None when it does not exist; an empty
    file holds none. Negative offsets are Kafka's sentinels and are skipped, as Kafka does."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise OffsetsFileError(path, text_line(exc), "not text") from None
    if not text:
        return {}
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if lines[0].strip() != str(VERSION):
        raise OffsetsFileError(path, 1, f"unknown version {lines[0]!r} (expected {VERSION})")
    if len(lines) < 2 or not lines[1].strip().isdigit():
        raise OffsetsFileError(path, 2, f"expected the number of entries, found {lines[1] if len(lines) > 1 else 'nothing'!r}")
    count = int(lines[1])
    entries = lines[2:]
    if len(entries) != count:
        line = 3 + min(len(entries), count)  # the first missing line, or the first extra one
        raise OffsetsFileError(path, line, f"expected {count} entries, found {len(entries)}")
    offsets: dict[TopicPartition, int] = {}
    for number, line in enumerate(entries, start=3):
        fields = line.split(" ")
        if len(fields) != 3 or not fields[0] or not fields[1].isdigit() or not fields[2].lstrip("-").isdigit():
            raise OffsetsFileError(path, number, f"expected 'topic partition offset', found {line!r}")
        tp = TopicPartition(fields[0], int(fields[1]))
        if tp in offsets:
            raise OffsetsFileError(path, number, f"partition {tp} listed twice")
        if int(fields[2]) >= 0:
            offsets[tp] = int(fields[2])
    return offsets


def text_line(exc: UnicodeDecodeError) -> int:
    return exc.object[: exc.start].count(b"\n") + 1


def fsync_dir(path: Path) -> None:
    """Make a rename or a removal in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offsets_file(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write ``offsets`` to ``path`` durably (temp file, fsync, rename, fsync of the directory); with no
    offsets the file is deleted instead (durably)."""
    if not offsets:
        remove_file(path)
        return
    write_offsets(path, offsets)


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write ``offsets`` to ``path`` in Kafka's format, durably (also when there are none: a version
    line and a zero count), so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [str(VERSION), str(len(offsets))] + [f"{tp.topic} {tp.partition} {o}" for tp, o in sorted(offsets.items())]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def remove_file(path: Path) -> None:
    """Delete ``path`` durably (nothing to do when it does not exist)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


# -- upgrade --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LegacyOffsets:
    """What the legacy files hold for one store, read before the store opened anything."""

    checkpoint_path: Path
    position_path: Path
    checkpoint: dict[TopicPartition, int] | None  # the whole task .checkpoint (None: no file)
    position: dict[TopicPartition, int] | None  # the store's .position (None: no file)
    own: frozenset[TopicPartition]  # the store's changelog partitions

    @property
    def pending(self) -> bool:
        """Whether there is anything to migrate (a file with the store's offsets, or a .position)."""
        return self.position is not None or bool(self.own & set(self.checkpoint or {}))

    def offsets(self) -> dict[TopicPartition, int]:
        """The offsets to import: the store's own partitions of the .checkpoint, and every position."""
        mine = {tp: o for tp, o in (self.checkpoint or {}).items() if tp in self.own}
        return {**mine, **(self.position or {})}


def read_legacy(context: StoreContext) -> LegacyOffsets:
    """Read (and validate) the legacy files of the store in ``context``, then its ``upgrade_from``; a
    malformed file raises :class:`OffsetsFileError`, an ``upgrade_from`` that is not a Kafka version
    ``ValueError``, both before anything changed. Call it in ``init`` BEFORE the store opens its own
    files."""
    own = frozenset(getattr(context, "changelogs", None) or (context.changelog,))
    checkpoint_path = context.directory.parent.parent / ".checkpoint"
    position_path = context.directory / ".position"
    legacy = LegacyOffsets(checkpoint_path, position_path, read_offsets_file(checkpoint_path),
                           read_offsets_file(position_path), own)
    downgrading(context.upgrade_from)
    return legacy


def _holds_data(database: Path) -> bool:
    """Whether the RocksDB at ``database`` holds any key (opened read-only: its write-ahead log is
    replayed in memory, nothing on disk changes)."""
    db = Rdict(str(database), options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        it = db.iter()
        it.seek_to_first()
        return it.valid()
    finally:
        db.close()


def refuse_untrusted(legacy: LegacyOffsets, database: Path, offsets_cf: str) -> None:
    """Raise :class:`~eos_harness.store.IncompatibleStoreDirectory` when ``database`` is a RocksDB written
    before offset management (no ``offsets_cf`` column family) that holds data, and the legacy
    ``.checkpoint`` has no offset for one of the store's changelog partitions: its data may hold
    uncommitted writes (see the module docstring). Nothing is changed; call it before opening."""
    if not (database / "CURRENT").exists() or offsets_cf in Rdict.list_cf(str(database)):
        return  # no database yet, or one that already manages its offsets
    missing = sorted(tp for tp in legacy.own if tp not in (legacy.checkpoint or {}))
    if not missing or not _holds_data(database):
        return
    where = "does not exist" if legacy.checkpoint is None else f"has no offset for {', '.join(map(str, missing))}"
    raise IncompatibleStoreDirectory(
        f"{database}: a database written before offset management (KIP-1035) whose task .checkpoint "
        f"{legacy.checkpoint_path} {where}: under exactly-once the task crashed and its data may hold uncommitted "
        "writes, so it is not imported; wipe the directory and restore the store from the changelog")


def import_legacy(legacy: LegacyOffsets, stored: Callable[[TopicPartition], int | None],
                  write: Callable[[dict[TopicPartition, int]], None]) -> dict[TopicPartition, int]:
    """The upgrade's steps: ``write`` (which must be durable when it returns) the offsets the store
    does not hold yet, then rewrite the ``.checkpoint`` without the store's partitions, then delete the
    ``.position``. An offset the store already holds wins (it was committed with the data; the file's
    is the same or older). Returns what was written."""
    if not legacy.pending:
        return {}
    crash_point(P_MIGRATE_BEFORE_IMPORT)
    wanted = {tp: offset for tp, offset in legacy.offsets().items() if stored(tp) is None}
    if wanted:
        write(wanted)
    crash_point(P_MIGRATE_AFTER_IMPORT)
    if legacy.checkpoint is not None and legacy.own & set(legacy.checkpoint):
        others = {tp: o for tp, o in legacy.checkpoint.items() if tp not in legacy.own}
        write_offsets_file(legacy.checkpoint_path, others)
    crash_point(P_MIGRATE_AFTER_CHECKPOINT)
    if legacy.position is not None:
        remove_file(legacy.position_path)
    crash_point(P_MIGRATE_AFTER_POSITION)
    return wanted


# -- downgrade ------------------------------------------------------------------------------------

def export_offsets(context: StoreContext, offsets: Mapping[TopicPartition, int], drop: Callable[[], None]) -> None:
    """The downgrade's steps on close: merge the changelog offsets into the task's ``.checkpoint``
    (other stores' entries kept), write the positions to ``.position``, then ``drop`` the store's own
    offsets. Every file is written durably before the store forgets anything."""
    checkpoint_path = context.directory.parent.parent / ".checkpoint"
    position_path = context.directory / ".position"
    crash_point(P_DOWNGRADE_BEFORE_CHECKPOINT)
    changelogs = {tp: o for tp, o in offsets.items() if is_changelog(tp)}
    if changelogs:
        try:
            existing = read_offsets_file(checkpoint_path) or {}
        except OffsetsFileError:
            existing = {}  # a broken .checkpoint of the task is replaced: its own stores restore anyway
        write_offsets_file(checkpoint_path, {**existing, **changelogs})
    crash_point(P_DOWNGRADE_AFTER_CHECKPOINT)
    positions = {tp: o for tp, o in offsets.items() if not is_changelog(tp)}
    if positions:
        write_offsets_file(position_path, positions)
    crash_point(P_DOWNGRADE_AFTER_POSITION)
    drop()
    crash_point(P_DOWNGRADE_AFTER_DROP)
