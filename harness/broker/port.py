"""The broker port's types: its errors, a record, and the two protocols an adapter implements
(:class:`Broker`, :class:`TransactionalProducer`). The adapters import them from here;
:mod:`eos_harness.broker` re-exports them beside ``connect``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from eos_harness.store import TopicPartition

__all__ = ["Broker", "BrokerError", "ProducerFenced", "Record", "TransactionAborted", "TransactionalProducer"]


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
