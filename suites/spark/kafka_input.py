"""A Kafka topic as the input of a user's own query (``--input kafka://HOST:PORT/TOPIC``), on the harness's side.

The query reads the topic with Spark's Kafka connector from its earliest offsets, ``maxOffsetsPerTrigger``
offsets per micro-batch (``--max-offsets-per-trigger``; by default the topic's offsets split into
:data:`DEFAULT_BATCHES`), ``read_committed``. Spark splits that limit over the partitions by what each has left
(:func:`micro_batches` does as Spark's ``KafkaMicroBatchStream.rateLimit``), so over the same topic the
micro-batches are the same in the crash-free run and in every run after a kill. That holds only while the topic
does not change, so :func:`snapshot` reads it whole before anything runs (with confluent-kafka, ``read_committed``,
up to the end offsets taken first): a digest of every record (partition, offset, timestamp, key, value,
headers), which keys the crash-free run's cache and is taken again before and after each scenario: a topic that
changed is an error verdict, never a pass or a fail. A malformed URL, a broker that does not answer within
:data:`CONNECT_TIMEOUT_S`, a missing or empty topic are usage errors (``ValueError``) before anything runs.
"""

from __future__ import annotations

import hashlib
import math
import re
import socket
import time
from dataclasses import dataclass

__all__ = ["CONNECT_TIMEOUT_S", "kafka_jars", "DEFAULT_BATCHES", "KafkaInput", "KafkaRecord", "TopicSnapshot",
           "default_limit", "is_kafka_input", "micro_batches", "parse_input", "read_micro_batches", "snapshot",
           "split_micro_batches"]

SCHEME = "kafka://"
CONNECT_TIMEOUT_S = 10.0  # a broker must answer a metadata request within this
READ_TIMEOUT_S = 60.0  # the topic must be read to its end offsets within this
DEFAULT_BATCHES = 5  # without --max-offsets-per-trigger: the topic's offsets split into this many micro-batches
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
FORM = "kafka://HOST:PORT[,HOST:PORT]/TOPIC, e.g. kafka://127.0.0.1:9092/events"


def is_kafka_input(text: str | None) -> bool:
    return bool(text) and str(text).startswith(SCHEME)


@dataclass(frozen=True)
class KafkaInput:
    bootstrap: str  # HOST:PORT[,HOST:PORT]
    topic: str

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.bootstrap}/{self.topic}"


def parse_input(text: str) -> KafkaInput:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC``; a ValueError saying what is wrong (a usage error)."""
    if not is_kafka_input(text):
        raise ValueError(f"--input {text!r} is not a Kafka topic: write {FORM}")
    rest = text[len(SCHEME):]
    if "?" in rest or "#" in rest:
        raise ValueError(f"--input {text!r}: a Kafka input takes no properties: write {FORM}")
    address, slash, topic = rest.partition("/")
    if not slash or not topic:
        raise ValueError(f"--input {text!r} names no topic: write {FORM}")
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"--input {text!r}: {topic!r} is not a Kafka topic name (letters, digits, '.', '_', '-', "
                         "at most 249)")
    servers = [h.strip() for h in address.split(",")]
    for host in servers:
        name, colon, port = host.rpartition(":")
        if not (name and colon and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"--input {text!r}: {repr(host) if host else 'an empty address'} is not HOST:PORT: "
                             f"write {FORM}")
    return KafkaInput(",".join(servers), topic)


@dataclass(frozen=True)
class TopicSnapshot:
    """What the topic held when it was read: each partition's ``(earliest, end)`` offsets, how many records a
    ``read_committed`` reader got, and the digest of them all."""

    offsets: tuple[tuple[int, int, int], ...]  # (partition, earliest, end), by partition
    records: int
    digest: str

    @property
    def span(self) -> int:
        """Offsets between the earliest and the end, over every partition (transaction markers included)."""
        return sum(end - start for _, start, end in self.offsets)

    def describe(self) -> str:
        parts = ", ".join(f"{p}: {s}..{e}" for p, s, e in self.offsets)
        return f"{self.records} records, offsets {parts}, digest {self.digest}"

    def to_json(self) -> dict:
        return {"offsets": [list(o) for o in self.offsets], "records": self.records, "digest": self.digest}

    @classmethod
    def from_json(cls, data: dict) -> TopicSnapshot:
        """The snapshot :meth:`to_json` wrote (a verdict's ``topic``)."""
        return cls(tuple(tuple(o) for o in data["offsets"]), data["records"], data["digest"])


def _kafka_error(exc: BaseException) -> str:
    from eos_harness.broker.kafka_client import error_of

    error = error_of(exc)
    return error.str() if error is not None else str(exc)


def _check_listening(source: KafkaInput, timeout: float) -> None:
    """A ValueError at once when no bootstrap server takes a TCP connection (refused, no such host), rather than
    after librdkafka's whole metadata timeout."""
    refused = []
    for server in source.bootstrap.split(","):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            refused.append(f"{server}: {exc.strerror or exc}")
    raise ValueError(f"--input {source.url}: no Kafka broker answers at {source.bootstrap} ({'; '.join(refused)})")


def snapshot(source: KafkaInput, connect_timeout: float = CONNECT_TIMEOUT_S,
             read_timeout: float = READ_TIMEOUT_S) -> TopicSnapshot:
    """Read ``source``'s topic whole (``read_committed``, every partition from its earliest offset up to the end
    offset taken first) into a :class:`TopicSnapshot`. A ValueError naming the broker and topic when no broker
    answers within ``connect_timeout``, the topic does not exist or holds no record, or it cannot be read to its
    end within ``read_timeout`` (an open transaction, or the topic being written)."""
    return _read_topic(source, connect_timeout, read_timeout, None)


@dataclass(frozen=True)
class KafkaRecord:
    """One committed record as Spark's Kafka source gives it (``KafkaRecordToRowConverter``: no headers, the harness
    never sets ``includeHeaders``): ``timestamp`` in milliseconds, ``timestamp_type`` Kafka's id (-1 none, 0
    CreateTime, 1 LogAppendTime)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None


def read_micro_batches(source: KafkaInput, expected: TopicSnapshot, limit: int,
                       connect_timeout: float = CONNECT_TIMEOUT_S,
                       read_timeout: float = READ_TIMEOUT_S) -> list[list[KafkaRecord]]:
    """The committed records of each micro-batch Spark's Kafka source plans over ``source``'s topic with
    ``maxOffsetsPerTrigger`` ``limit`` (:func:`micro_batches`), each batch's by partition and offset: the topic read
    whole again, as :func:`snapshot` reads it. A ValueError when it cannot be read, or when it is not ``expected``
    any more (its digest: records added, removed, compacted since)."""
    kept: list[KafkaRecord] = []
    now = _read_topic(source, connect_timeout, read_timeout, kept)
    if now != expected:
        raise ValueError(f"the topic {source.url} changed since it was judged (then: {expected.describe()}; now: "
                         f"{now.describe()})")
    return split_micro_batches(kept, expected, limit)


def split_micro_batches(records: list[KafkaRecord], topic: TopicSnapshot, limit: int) -> list[list[KafkaRecord]]:
    """``records`` of ``topic`` cut into the micro-batches of :func:`micro_batches` (a batch of markers or aborted
    records only: empty), each batch's by partition and offset."""
    start = {p: low for p, low, _ in topic.offsets}
    batches = []
    for end in micro_batches(topic, limit):
        batches.append(sorted((r for r in records if start[r.partition] <= r.offset < end[r.partition]),
                              key=lambda r: (r.partition, r.offset)))
        start = end
    return batches


def _read_topic(source: KafkaInput, connect_timeout: float, read_timeout: float,
                kept: list[KafkaRecord] | None) -> TopicSnapshot:
    """:func:`snapshot`; each record read also appended to ``kept`` (not None)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from eos_harness.broker import kafka_client

    where = f"{source.topic!r} at {source.bootstrap}"
    _check_listening(source, connect_timeout)
    admin = kafka_client.admin_client(source.bootstrap, **{"socket.timeout.ms": int(connect_timeout * 1000)})
    try:  # every topic's metadata, not the one topic's: asking for a missing topic may create it
        topics = admin.list_topics(timeout=connect_timeout).topics
    except KafkaException as exc:
        raise ValueError(f"--input {source.url}: no Kafka broker answers at {source.bootstrap} (waited "
                         f"{connect_timeout:g} s: {_kafka_error(exc)})") from None
    metadata = topics.get(source.topic)
    if metadata is None:
        raise ValueError(f"--input {source.url}: the topic {source.topic!r} does not exist at {source.bootstrap}")
    if metadata.error is not None:
        raise ValueError(f"--input {source.url}: the topic {where} cannot be read: {metadata.error.str()}")
    partitions = sorted(metadata.partitions)
    probe = kafka_client.consumer(source.bootstrap, **{"isolation.level": "read_committed"})
    try:
        offsets = []
        for p in partitions:
            low, high = probe.get_watermark_offsets(TopicPartition(source.topic, p), timeout=connect_timeout)
            offsets.append((p, low, high))
    except KafkaException as exc:
        raise ValueError(f"--input {source.url}: the offsets of {where}: {_kafka_error(exc)}") from None
    finally:
        probe.close()
    if not any(high > low for _, low, high in offsets):
        raise ValueError(f"--input {source.url}: the topic {where} holds no record (a query over it has no "
                         "micro-batch to kill)")
    ends = {p: high for p, _, high in offsets}
    position = {p: low for p, low, high in offsets if high > low}
    digests = {p: hashlib.sha256() for p in position}
    records = 0
    consumer = kafka_client.consumer(source.bootstrap, **{"isolation.level": "read_committed",
                                                          "enable.partition.eof": True, "fetch.wait.max.ms": 10})
    try:
        consumer.assign([TopicPartition(source.topic, p, position[p]) for p in position])
        deadline = time.monotonic() + read_timeout
        while any(position[p] < ends[p] for p in position):
            if time.monotonic() > deadline:
                behind = ", ".join(f"partition {p} at offset {position[p]} of {ends[p]}" for p in position
                                   if position[p] < ends[p])
                raise ValueError(f"--input {source.url}: {where} could not be read to its end offsets within "
                                 f"{read_timeout:g} s ({behind}): an open transaction (read_committed stops at its "
                                 "first record), or the topic is being written; the input must not change while "
                                 "the harness runs")
            for msg in consumer.consume(500, 0.2):
                p = msg.partition()
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise ValueError(f"--input {source.url}: reading {where}: {msg.error().str()}")
                    position[p] = max(position[p], msg.offset())
                    continue
                if msg.offset() >= ends[p]:  # written after the end offsets were taken: not this snapshot's
                    position[p] = max(position[p], msg.offset())
                    continue
                kind, stamp = msg.timestamp()
                digest = digests[p]
                for part in (msg.offset(), kind, stamp):
                    digest.update(str(part).encode() + b"\0")
                for part in (msg.key(), msg.value()):
                    digest.update(b"-\0" if part is None else str(len(part)).encode() + b":" + part)
                for name, value in msg.headers() or []:
                    digest.update(b"h" + name.encode() + b"\0" + (value or b""))
                position[p] = msg.offset() + 1
                records += 1
                if kept is not None:  # confluent-kafka's timestamp kinds (0 none, 1 create, 2 append): Kafka's id + 1
                    kept.append(KafkaRecord(source.topic, p, msg.offset(), stamp, kind - 1, msg.key(), msg.value()))
    except KafkaException as exc:
        raise ValueError(f"--input {source.url}: reading {where}: {_kafka_error(exc)}") from None
    finally:
        consumer.close()
    if not records:
        raise ValueError(f"--input {source.url}: the topic {where} holds no committed record (offsets "
                         + ", ".join(f"{p}: {low}..{high}" for p, low, high in offsets)
                         + ": aborted transactions and markers only)")
    whole = hashlib.sha256(source.topic.encode() + b"\0")
    for p, low, high in offsets:
        whole.update(f"{p}:{low}:{high}\0".encode())
        if p in digests:
            whole.update(digests[p].digest())
    return TopicSnapshot(tuple(offsets), records, whole.hexdigest()[:20])


def default_limit(topic: TopicSnapshot) -> int:
    """``maxOffsetsPerTrigger`` splitting the topic's offsets into :data:`DEFAULT_BATCHES` micro-batches."""
    return max(1, math.ceil(topic.span / DEFAULT_BATCHES))


def micro_batches(topic: TopicSnapshot, limit: int) -> list[dict[int, int]]:
    """The end offset of each partition after each micro-batch Spark's Kafka source plans over ``topic`` with
    ``maxOffsetsPerTrigger`` ``limit`` and ``availableNow`` (``KafkaMicroBatchStream.rateLimit``: the limit split
    over the partitions by what each has left, floored, at least one offset for a partition with any left)."""
    start = {p: low for p, low, _ in topic.offsets}
    until = {p: high for p, _, high in topic.offsets}
    batches: list[dict[int, int]] = []
    while start != until:
        sizes = {p: until[p] - start[p] for p in until if until[p] - start[p] > 0}
        total = float(sum(sizes.values()))
        end = {}
        for p in until:
            if p not in sizes:
                end[p] = until[p]
                continue
            prorate = limit * (sizes[p] / total)
            end[p] = min(until[p], start[p] + (math.ceil(prorate) if prorate < 1 else math.floor(prorate)))
        batches.append(end)
        start = end
    return batches


def kafka_jars() -> list[str]:
    """Spark's Kafka connector and its dependencies (bundle ``spark-kafka``), for ``spark.jars``."""
    import eos_harness.spark  # noqa: F401  (registers the bundle)
    from eos_harness.jars import JarFetchError, ensure

    try:
        return [str(p) for p in ensure("spark-kafka")]
    except JarFetchError as exc:
        raise RuntimeError(f"the Kafka source and sink need Spark's Kafka connector: {exc}. Fetch it ahead of "
                           "time with: python -m eos_harness.jars spark-kafka") from exc
