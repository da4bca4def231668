"""A KIP-868 metadata log on the broker port: a controller that writes metadata transactions and
readers that build images from them (``eos_harness.metadata.controller``, ``…reader``).

The log is one partition of a topic on any broker of the port (a topic of the embedded SQLite log,
or a Kafka topic). Each batch of entries is appended as ONE broker transaction of the
controller's transactional id, which gives the two things KRaft's Raft layer gives its controller:

- a batch is atomic: it is in the log whole, or (the writer died) not at all;
- leadership by epoch: a new controller's ``init_transactions`` fences every older one, and the
  broker checks the fence inside each append, so a fenced controller cannot write again.

An explicit epoch record checked before each append would race (check, then write); the broker's
transactional append makes the check and the write one step, on both adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eos_harness.broker import Broker, connect
from eos_harness.models.metadata import Entry
from eos_harness.store import TopicPartition

__all__ = ["DEFAULT_MAX_BATCH_BYTES", "LogSpec", "MetadataLog", "pack"]

DEFAULT_MAX_BATCH_BYTES = 8 * 1024  # KRaft's hard-coded maximum batch size (the KIP's motivation)


@dataclass(frozen=True)
class LogSpec:
    """Where a metadata log lives: the broker spec, its topic, the controllers' transactional id."""

    broker: str
    topic: str
    transactional_id: str

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, 0)


def pack(entries: list[Entry], max_batch_bytes: int) -> list[list[Entry]]:
    """Split entries into batches of at most ``max_batch_bytes`` encoded bytes (an entry larger
    than that alone in its batch)."""
    batches: list[list[Entry]] = []
    current: list[Entry] = []
    size = 0
    for entry in entries:
        length = len(entry.encode())
        if current and size + length > max_batch_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(entry)
        size += length
    if current:
        batches.append(current)
    return batches


@dataclass
class MetadataLog:
    """The log, opened on its broker. ``writer()`` makes this the current controller's writer
    (fencing every older one); ``append`` writes one batch atomically; ``read`` returns the
    committed entries from a position, with their offsets."""

    spec: LogSpec
    broker: Broker = field(init=False)

    def __post_init__(self) -> None:
        self.broker = connect(self.spec.broker)
        self._producer = None

    def create(self) -> None:
        self.broker.create_topic(self.spec.topic, 1)

    def become_writer(self) -> None:
        """Fence every older writer (controller) of this log; from now on only this one appends."""
        self._producer = self.broker.producer(self.spec.transactional_id)
        self._producer.init_transactions()

    def append(self, batch: list[Entry]) -> int:
        """Append one batch atomically; returns the position after it. Raises ProducerFenced if a
        newer controller took over."""
        producer = self._producer
        if producer is None:
            raise RuntimeError("call become_writer() before append()")
        producer.begin_transaction()
        for entry in batch:
            producer.send(self.spec.topic, 0, None, entry.encode())
        positions = producer.commit_transaction()
        return positions.get(self.spec.tp, 0)

    def read(self, start: int = 0) -> list[Entry]:
        return [Entry.decode(r.value, r.offset) for r in self.broker.read_committed(self.spec.tp, start)]

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        self.broker.close()

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
