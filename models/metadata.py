"""Reference model of KIP-868 metadata transactions, pure and deterministic.

A metadata log is a list of :class:`Entry`: metadata records and the markers ``Begin``, ``End``
and ``Abort``. What a reader may see of it is the **visible image**: every record outside a
transaction, applied in log order, and every transaction that ended with ``End``, applied whole
at its ``End``. A transaction still open at the end of the log is invisible; an ``Abort``
discards it. Visibility here is decided per transaction (each transactional entry names its
transaction), so the model gives one answer even for a log that breaks the KIP's invariants;
:func:`log_problems` says which invariant a log breaks:

- at most one transaction is open at a time (a ``Begin`` only when none is open, and a controller
  of a newer epoch closes its predecessor's open transaction with ``Abort`` before it writes
  anything else);
- no interleaving: while a transaction is open, every entry belongs to it;
- a fenced controller never writes again: epochs never go down along the log.

Commands (create a topic with N partitions, change a config, delete a topic) become records by
:func:`records_of`, checked against the image they apply to; :func:`snapshot_batches` writes an
image as record batches of any size, :func:`image_from_snapshot` reads them back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = [
    "ABORT",
    "BEGIN",
    "END",
    "RECORD",
    "Command",
    "Entry",
    "Image",
    "LogProblem",
    "Replay",
    "apply_commands",
    "image_from_snapshot",
    "image_at",
    "log_problems",
    "open_transaction",
    "records_of",
    "snapshot_batches",
    "visible_image",
]

RECORD, BEGIN, END, ABORT = "record", "begin", "end", "abort"

# A metadata record, as a JSON-able list: ["topic", name] | ["partition", topic, index] |
# ["config", resource, key, value-or-None] | ["remove_topic", name].
Record = tuple


@dataclass(frozen=True)
class Entry:
    """One entry of the metadata log.

    ``kind``: RECORD or a marker; ``record``: the metadata record (RECORD only); ``txn``: the
    transaction it belongs to (None outside any); ``command``: the command it was written for;
    ``epoch``: the controller epoch that wrote it; ``batch``: the batch it was written in (a batch
    is appended atomically); ``offset``: its offset in the log (None before it is appended)."""

    kind: str
    record: Record | None = None
    txn: str | None = None
    command: int | None = None
    epoch: int = 0
    batch: str | None = None
    offset: int | None = None

    def to_json(self) -> dict:
        data = {"k": self.kind, "x": self.txn, "c": self.command, "e": self.epoch, "b": self.batch}
        if self.record is not None:
            data["r"] = list(self.record)
        return data

    @classmethod
    def from_json(cls, data: dict, offset: int | None = None) -> Entry:
        record = data.get("r")
        return cls(data["k"], tuple(record) if record is not None else None, data.get("x"), data.get("c"),
                   data.get("e", 0), data.get("b"), offset)

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes, offset: int | None = None) -> Entry:
        return cls.from_json(json.loads(value), offset)


@dataclass
class Image:
    """A metadata image: topics with their partitions, and configs per resource."""

    topics: dict[str, set[int]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def apply(self, record: Record) -> None:
        kind = record[0]
        if kind == "topic":
            self.topics[record[1]] = set()
        elif kind == "partition":
            self.topics.setdefault(record[1], set()).add(record[2])
        elif kind == "config":
            resource, key, value = record[1], record[2], record[3]
            if value is None:
                self.configs.get(resource, {}).pop(key, None)
                if resource in self.configs and not self.configs[resource]:
                    del self.configs[resource]
            else:
                self.configs.setdefault(resource, {})[key] = value
        elif kind == "remove_topic":
            self.topics.pop(record[1], None)
            self.configs.pop(f"topic:{record[1]}", None)
        else:
            raise ValueError(f"unknown metadata record {record!r}")

    def copy(self) -> Image:
        return Image({t: set(p) for t, p in self.topics.items()}, {r: dict(c) for r, c in self.configs.items()})

    def to_json(self) -> dict:
        """A compact, comparable form: partitions per topic (a count when they are 0..n-1, else the
        list), the configs, and a digest of the whole."""
        topics = {t: len(p) if p == set(range(len(p))) else sorted(p) for t, p in sorted(self.topics.items())}
        configs = {r: dict(sorted(c.items())) for r, c in sorted(self.configs.items())}
        digest = hashlib.sha1(json.dumps([topics, configs]).encode()).hexdigest()[:12]
        return {"topics": topics, "configs": configs, "digest": digest}

    def records(self) -> Iterator[Record]:
        """The records that rebuild this image from empty (the content of a snapshot)."""
        for topic, parts in sorted(self.topics.items()):
            yield ("topic", topic)
            for index in sorted(parts):
                yield ("partition", topic, index)
        for resource, configs in sorted(self.configs.items()):
            for key, value in sorted(configs.items()):
                yield ("config", resource, key, value)


class Replay:
    """The visible image of a log fed entry by entry (the model's reader)."""

    def __init__(self, image: Image | None = None) -> None:
        self.image = image.copy() if image is not None else Image()
        self.pending: dict[str, list[Record]] = {}

    def feed(self, entry: Entry) -> None:
        if entry.kind == RECORD:
            if entry.txn is None:
                self.image.apply(entry.record)
            else:
                self.pending.setdefault(entry.txn, []).append(entry.record)
        elif entry.kind == BEGIN:
            self.pending[entry.txn] = []
        elif entry.kind == END:
            for record in self.pending.pop(entry.txn, []):
                self.image.apply(record)
        elif entry.kind == ABORT:
            self.pending.pop(entry.txn, None)
        else:
            raise ValueError(f"unknown entry kind {entry.kind!r}")


def visible_image(entries: Iterable[Entry], start: Image | None = None) -> Image:
    """The visible image of the log (from ``start``, a snapshot's image, if given)."""
    replay = Replay(start)
    for entry in entries:
        replay.feed(entry)
    return replay.image


def image_at(entries: list[Entry], position: int) -> Image:
    """The visible image of the entries whose offset is below ``position`` (a reader's position:
    the offset of the next entry it would read)."""
    return visible_image(e for e in entries if e.offset < position)


def open_transaction(entries: list[Entry]) -> tuple[str, int] | None:
    """The transaction open at the end of the log, and the index of its Begin; None if none is."""
    open_txn: tuple[str, int] | None = None
    for index, entry in enumerate(entries):
        if entry.kind == BEGIN:
            open_txn = (entry.txn, index)
        elif entry.kind in (END, ABORT) and open_txn is not None and entry.txn == open_txn[0]:
            open_txn = None
    return open_txn


@dataclass(frozen=True)
class LogProblem:
    """An invariant the log breaks. ``invariant``: ``one_open_transaction``, ``no_interleaving``
    or ``fenced_never_writes``; ``offset``: the entry where it shows."""

    invariant: str
    offset: int | None
    detail: str


def log_problems(entries: Iterable[Entry]) -> list[LogProblem]:
    """Every place the log breaks one of the KIP's invariants (see the module doc)."""
    problems: list[LogProblem] = []
    open_txn: Entry | None = None  # the Begin of the open transaction
    top_epoch: int | None = None
    for entry in entries:
        if top_epoch is not None and entry.epoch < top_epoch:
            problems.append(LogProblem("fenced_never_writes", entry.offset,
                                       f"{entry.kind} of epoch {entry.epoch} after epoch {top_epoch} wrote"))
        top_epoch = entry.epoch if top_epoch is None else max(top_epoch, entry.epoch)
        if open_txn is None:
            if entry.kind == BEGIN:
                open_txn = entry
            elif entry.kind in (END, ABORT) or entry.txn is not None:
                problems.append(LogProblem("no_interleaving", entry.offset,
                                           f"{entry.kind} of transaction {entry.txn} while none is open"))
            continue
        if entry.txn == open_txn.txn:
            if entry.kind == BEGIN:
                problems.append(LogProblem("one_open_transaction", entry.offset,
                                           f"transaction {entry.txn} begun twice"))
            elif entry.kind in (END, ABORT):
                open_txn = None
            continue
        if entry.epoch > open_txn.epoch and entry.kind != ABORT:
            problems.append(LogProblem(
                "one_open_transaction", entry.offset,
                f"controller epoch {entry.epoch} wrote a {entry.kind} (command {entry.command}) while transaction "
                f"{open_txn.txn} of epoch {open_txn.epoch} (Begin at offset {open_txn.offset}) was open: a new "
                "controller must abort it first"))
            open_txn = entry if entry.kind == BEGIN else None
        elif entry.kind == BEGIN:
            problems.append(LogProblem("one_open_transaction", entry.offset,
                                       f"Begin of {entry.txn} while {open_txn.txn} (offset {open_txn.offset}) is open"))
            problems.append(LogProblem("no_interleaving", entry.offset,
                                       f"transaction {entry.txn} begins inside {open_txn.txn}"))
        elif entry.kind == ABORT and entry.txn is None:
            open_txn = None
        else:
            problems.append(LogProblem(
                "no_interleaving", entry.offset,
                f"{entry.kind} of {entry.txn or 'no transaction'} (command {entry.command}) inside transaction "
                f"{open_txn.txn} (Begin at offset {open_txn.offset})"))
    return problems


# -- commands -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A controller command: ``create_topic`` (``topic``, ``partitions``), ``set_config``
    (``resource``, ``key``, ``value``; None deletes the key) or ``delete_topic`` (``topic``)."""

    kind: str
    topic: str | None = None
    partitions: int = 0
    resource: str | None = None
    key: str | None = None
    value: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, 0) or k == "kind"}

    @classmethod
    def from_json(cls, data: dict) -> Command:
        return cls(**data)

    def __str__(self) -> str:
        if self.kind == "create_topic":
            return f"create {self.topic} ({self.partitions} partitions)"
        if self.kind == "delete_topic":
            return f"delete {self.topic}"
        return f"set {self.resource} {self.key}={self.value}"


def records_of(command: Command, image: Image) -> list[Record]:
    """The records a command becomes, checked against ``image``: creating a topic that exists or
    deleting one that does not is refused (no records), as Kafka's controller refuses it."""
    if command.kind == "create_topic":
        if command.topic in image.topics:
            return []
        return [("topic", command.topic)] + [("partition", command.topic, i) for i in range(command.partitions)]
    if command.kind == "delete_topic":
        return [("remove_topic", command.topic)] if command.topic in image.topics else []
    if command.kind == "set_config":
        return [("config", command.resource, command.key, command.value)]
    raise ValueError(f"unknown command {command.kind!r}")


def apply_commands(commands: Iterable[Command], image: Image | None = None) -> Image:
    """The image after every command ran once, in order."""
    image = image.copy() if image is not None else Image()
    for command in commands:
        for record in records_of(command, image):
            image.apply(record)
    return image


# -- snapshots --------------------------------------------------------------------------------------


def snapshot_batches(image: Image, batch_records: int) -> list[list[Record]]:
    """The image as a snapshot: its records in batches of ``batch_records`` (any size >= 1)."""
    if batch_records < 1:
        raise ValueError(f"batch_records must be >= 1, got {batch_records}")
    records = list(image.records())
    return [records[i:i + batch_records] for i in range(0, len(records), batch_records)]


def image_from_snapshot(batches: Iterable[Iterable[Record]]) -> Image:
    image = Image()
    for batch in batches:
        for record in batch:
            image.apply(tuple(record))
    return image
