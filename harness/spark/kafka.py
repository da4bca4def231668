"""Kafka topics of a Spark scenario (runs in the harness, never in the pipeline's driver).

- :func:`create_topics` makes the scenario's input and output topics (one partition each, so
  batch ``n`` of the Kafka source is records ``[n·k, (n+1)·k)`` with ``maxOffsetsPerTrigger=k``).
- :func:`produce_input` writes the seeded input records into the input topic before the query starts
  (as the file source's input files are all written first).
- :class:`SinkFollower` reads the output topic while the pipeline runs. The Kafka sink has no file of
  its own that says a batch reached the topic, so the follower writes one: ``output/_batches/N``
  (renamed into place) once ``offsets/N`` exists and the topic holds every row the model expects from
  batches ``0..N``. That is the sink step the watcher kills after (``sink@N``) and the crash
  classifier sees. For a batch that outputs nothing the step is vacuous: the marker follows ``offsets/N``.
- :func:`read_topic` reads the whole output topic back (``read_committed``; the Kafka sink is not
  transactional, so that is every record) for the checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections import Counter
from pathlib import Path

from eos_harness.process.wait import WaitTimeout, wait_until

__all__ = ["SinkFollower", "create_topics", "produce_input", "read_topic", "topic_names"]

TIMEOUT_S = 60.0


class KafkaSetupError(RuntimeError):
    """The scenario's topics could not be made or read; the message names the broker."""


def topic_names(run_dir: Path) -> dict[str, str]:
    """Input and output topic of one scenario: unique, so scenarios can share a broker."""
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in run_dir.name)[-60:]
    run = uuid.uuid4().hex[:8]
    return {"input": f"eos-spark-{stem}-{run}-in", "output": f"eos-spark-{stem}-{run}-out"}


def create_topics(bootstrap: str, names: list[str]) -> None:
    """The topics, one partition each, every partition with a leader on return."""
    from eos_harness.broker import kafka_client

    try:
        kafka_client.create_topics(kafka_client.admin_client(bootstrap, **{"socket.timeout.ms": 10000}),
                                   dict.fromkeys(names, 1))
    except Exception as exc:
        raise KafkaSetupError(f"cannot create topics {', '.join(names)} on the Kafka at {bootstrap}: {exc}. Is the "
                              "broker running and reachable (--broker kafka://HOST:PORT), and may this client "
                              "create topics?") from exc


def produce_input(bootstrap: str, topic: str, batches: list[list[tuple[str, int]]]) -> None:
    """Every input record, in batch order, into partition 0 of ``topic`` (idempotent producer, acks=all)."""
    from eos_harness.broker import kafka_client

    producer = kafka_client.producer(bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    for batch in batches:
        for key, ts in batch:
            producer.produce(topic, key=key.encode(), value=json.dumps({"key": key, "ts": ts}).encode(),
                             partition=0, on_delivery=delivered)
    left = producer.flush(TIMEOUT_S)
    if left or errors:
        raise KafkaSetupError(f"producing the input into {topic} at {bootstrap} failed: "
                              f"{left} undelivered, errors {errors[:3]}")


def _consumer(bootstrap: str, topic: str, isolation: str = "read_committed"):
    from confluent_kafka import TopicPartition
    from eos_harness.broker import kafka_client

    consumer = kafka_client.consumer(bootstrap, **{"isolation.level": isolation, "fetch.wait.max.ms": 5,
                                                   "fetch.min.bytes": 1, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    return consumer


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[dict]:
    """Every record of partition 0 of ``topic`` as the JSON object of its value, in offset order."""
    from confluent_kafka import KafkaError, TopicPartition
    from eos_harness.broker import kafka_client

    probe = kafka_client.consumer(bootstrap, "eos-harness-probe")
    try:
        _, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    finally:
        probe.close()
    consumer = _consumer(bootstrap, topic, isolation)
    rows: list[dict] = []
    position = 0

    def read_to_high() -> bool:
        nonlocal position
        msg = consumer.poll(0.5)
        if msg is not None and msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaSetupError(f"reading {topic} at {bootstrap}: {msg.error()}")
            position = max(position, msg.offset())
        elif msg is not None:
            rows.append(json.loads(msg.value()))
            position = msg.offset() + 1
        return position >= high

    try:
        if high > 0:
            wait_until(read_to_high, TIMEOUT_S, 0, f"{topic} at {bootstrap} to be read up to offset {high}")
    except WaitTimeout:
        raise KafkaSetupError(f"reading {topic} at {bootstrap}: offset {position} of {high} after "
                              f"{TIMEOUT_S:.0f} s") from None
    finally:
        consumer.close()
    return rows


class SinkFollower:
    """Follows the Kafka sink's output topic and writes ``<output>/_batches/N`` once batch N's
    model output is all in the topic (see the module's doc). A context manager; a daemon thread."""

    def __init__(self, bootstrap: str, topic: str, columns: tuple[str, ...], expected: list[list[tuple]],
                 checkpoint: Path, output: Path) -> None:
        self.bootstrap, self.topic, self.columns = bootstrap, topic, columns
        self.expected = expected  # model output of batch 0, 1, …
        self.checkpoint, self.markers = checkpoint, output / "_batches"
        self.markers.mkdir(parents=True, exist_ok=True)
        self.seen: Counter = Counter()
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="spark-kafka-sink-follower", daemon=True)

    def __enter__(self) -> SinkFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _next_batch(self) -> int:
        n = 0
        while (self.markers / str(n)).exists():
            n += 1
        return n

    def _complete(self, batch: int) -> bool:
        if batch >= len(self.expected) or not (self.checkpoint / "offsets" / str(batch)).exists():
            return False
        need = Counter(row for b in range(batch + 1) for row in self.expected[b])
        return all(self.seen[row] >= count for row, count in need.items())

    def _mark(self, batch: int) -> None:
        marker = self.markers / str(batch)
        tmp = marker.with_name(f".{batch}.tmp")
        tmp.write_text(str(len(self.expected[batch])))
        os.replace(tmp, marker)

    def _loop(self) -> None:
        from confluent_kafka import KafkaError

        try:
            consumer = _consumer(self.bootstrap, self.topic)
        except Exception as exc:  # reported in the verdict; the kill target is then not reached
            self.error = f"{type(exc).__name__}: {exc}"
            return
        try:
            batch = self._next_batch()
            while not self._stop.is_set():
                msg = consumer.poll(0.01)
                if msg is not None and not msg.error():
                    row = json.loads(msg.value())
                    self.seen[tuple(row.get(c) for c in self.columns)] += 1
                elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                    self.error = str(msg.error())
                while self._complete(batch):
                    self._mark(batch)
                    batch += 1
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
