"""The broker port: what an EOS task needs from Kafka, shaped after Kafka's transactional producer.

Adapters: ``embedded`` (SQLite as the transactional log; needs nothing installed) and ``kafka``
(confluent-kafka against a real broker). ``connect(spec)`` opens one from a spec
(:mod:`.spec`: ``embedded:PATH`` or ``kafka://HOST:PORT``); :func:`.opening.open_broker` opens any
``--broker`` spec for a suite (starting ``kafka-local``); :mod:`.kafka_client` makes every Kafka client.

Offsets are Kafka's: every appended record takes the next offset of its partition, including
records of transactions later aborted. A committed changelog offset is a *position*: the offset
of the next record to read, so recovery replays ``read_committed(tp, committed_offset)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from eos_harness.broker.spec import BrokerSpec, parse
from eos_harness.store import TopicPartition

__all__ = [
    "Broker",
    "BrokerError",
    "BrokerSpec",
    "ProducerFenced",
    "Record",
    "TransactionalProducer",
    "TransactionAborted",
    "connect",
]


class BrokerError(Exception):
    """The broker refused or failed an operation; the message says which and why."""


class ProducerFenced(BrokerError):
    """A newer instance with the same transactional id called ``init_transactions``: this one is a
    zombie. Every later call on it raises this; the task must close and never write again."""


class TransactionAborted(BrokerError):
    """The broker aborted the open transaction (e.g. it exceeded ``transaction.timeout.ms``)."""


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class TransactionalProducer(Protocol):
    """One transactional id; at most one live (unfenced) instance per id."""

    transactional_id: str

    def init_transactions(self) -> None:
        """Register the id: fence any older instance and abort its open transaction."""

    def begin_transaction(self) -> None: ...

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Append a record inside the open transaction (invisible to read-committed readers
        until ``commit_transaction``)."""

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        """Commit consumer ``group_id``'s input positions atomically with this transaction."""

    def commit_transaction(self) -> dict[TopicPartition, int]:
        """Commit atomically: records and offsets become visible together, or (on error) none.

        Returns, for every partition written in this transaction, the position after its last
        record (last offset + 1): the changelog offsets a store commits with."""

    def abort_transaction(self) -> None: ...

    def close(self) -> None: ...


class Broker(Protocol):
    """A connection to one cluster (or one embedded log)."""

    spec: str

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create the topic if it does not exist (idempotent)."""

    def produce(self, topic: str, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Append records non-transactionally (used to load input topics)."""

    def producer(self, transactional_id: str) -> TransactionalProducer: ...

    def read_committed(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        """Every record of committed transactions (and non-transactional records) from position
        ``start`` to the last stable offset, in offset order."""

    def read_uncommitted(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        """Every appended record from ``start``, aborted and open ones included."""

    def end_offset(self, tp: TopicPartition) -> int:
        """The log end offset (next offset to be assigned)."""

    def committed_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The input positions committed by ``group_id`` (None when never committed)."""

    def close(self) -> None: ...


def connect(spec: BrokerSpec | str) -> Broker:
    """Open a broker from a spec: ``embedded:PATH`` or ``kafka://HOST:PORT[?…]`` (a :class:`BrokerSpec`
    or its text). ``kafka-local`` and ``kafka-quorum`` must be started first (:func:`eos_harness.broker.opening.open_broker`)."""
    spec = parse(spec, internal=True)
    if spec.kind == "embedded" and spec.path is not None:
        from eos_harness.broker.embedded import EmbeddedBroker

        return EmbeddedBroker(spec.path)
    if spec.kind == "kafka":
        from eos_harness.broker.kafka import KafkaBroker

        return KafkaBroker(spec)
    raise ValueError(
        f"broker {spec.cli_text!r} cannot be connected to as it is: open it with "
        "eos_harness.broker.opening.open_broker (which starts kafka-local and kafka-quorum), or connect to "
        "'embedded:PATH' (a SQLite log file) or 'kafka://HOST:PORT' (a running Kafka cluster)"
    )
