"""The ``kafka`` adapter of the broker port: confluent-kafka (librdkafka) against a real Kafka cluster.

``KafkaBroker("127.0.0.1:9092")`` (or ``connect("kafka://127.0.0.1:9092")``). Client settings may
follow the address as a query, e.g. ``kafka://127.0.0.1:9092?transaction.timeout.ms=5000``; they go
to every transactional producer.

Transactions are Kafka's own: ``commit_transaction`` flushes, then commits records and the
consumer offsets sent with ``send_offsets_to_transaction`` atomically; the positions it returns
come from the delivery reports of the records written in that transaction. Reads assign a
partition, seek, and consume up to the end known when the read began: the last stable offset for
``read_committed`` (``isolation.level=read_committed``), the high watermark otherwise.

Errors: a fenced or fatally failed producer (``_FENCED``, ``PRODUCER_FENCED``,
``INVALID_PRODUCER_EPOCH``, any fatal error) raises :class:`ProducerFenced` from then on; a
transaction the broker aborted (an abortable error) raises :class:`TransactionAborted`.
Clients are created lazily, never at import: safe to import before ``fork``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from eos_harness.broker import kafka_client
from eos_harness.broker.kafka_client import error_of as _error_of
from eos_harness.broker.kafka_points import COMMIT_IN_FLIGHT_MEANING
from eos_harness.broker.port import BrokerError, ProducerFenced, Record, TransactionAborted
from eos_harness.broker.spec import BrokerSpec, parse
from eos_harness.faults.kafka import COMMIT_IN_FLIGHT
from eos_harness.faults.points import crash_point, declare
from eos_harness.store import TopicPartition

__all__ = ["KafkaBroker", "KafkaProducer"]

OPERATION_TIMEOUT_S = 30.0
# librdkafka's send_offsets_to_transaction can block past its own timeout when the group
# coordinator it cached was a broker that restarted (confluentinc/librdkafka#5456, #5511): the call
# runs in a thread, and a producer stuck longer than this gives up its transaction.
STUCK_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 30.0
P_COMMIT_IN_FLIGHT = declare(COMMIT_IN_FLIGHT, COMMIT_IN_FLIGHT_MEANING)  # eos_harness.broker.kafka_points
# ``_FATAL``: librdkafka raises it from ``produce()`` once the producer has failed fatally (e.g.
# fenced by a newer instance) even before the error callback ran, and that error's ``fatal()`` is
# False: it is the fatal state reported, not the fatal error itself.
_FENCING_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                  KafkaError._FATAL}


def _is_fencing(error: KafkaError) -> bool:
    return error.code() in _FENCING_CODES or error.fatal()


# What a client meets while a partition has no leader for a moment: a broker paused past its session
# (broker-pause) is fenced by the controller until its next heartbeat, a killed one restarts. Retried
# until the operation's bound (a partition that stays leaderless is still an error), never at once the
# broker failing the task.
_LEADERLESS_CODES = {KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE,
                     KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.FENCED_LEADER_EPOCH, KafkaError._TRANSPORT,
                     KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def _is_transient(error: KafkaError | None) -> bool:
    return error is not None and not error.fatal() and (error.retriable() or error.code() in _LEADERLESS_CODES)


# A partition the cluster's metadata keeps answering is not there (its topic unknown, or fewer
# partitions) for this long is missing, not leaderless: a broker's metadata trails the controller's
# by milliseconds, a topic being created by another client appears within this.
MISSING_PARTITION_S = 3.0


def _absent(consumer: Consumer, tp: TopicPartition, timeout: float) -> bool:
    """Whether a broker answers the metadata of ``tp``'s topic and it has no such partition (False when
    no broker answers: that is not knowing, retried as leaderless)."""
    try:
        topic = consumer.list_topics(tp.topic, timeout=timeout).topics.get(tp.topic)
    except KafkaException:
        return False
    if topic is None:
        return True
    if topic.error is not None:
        return topic.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    return tp.partition not in topic.partitions


def _watermarks(consumer: Consumer, tp: TopicPartition, what: str) -> tuple[int, int]:
    """``get_watermark_offsets`` of ``tp``, retried while the partition is leaderless for a moment
    (:data:`_LEADERLESS_CODES`) within :data:`OPERATION_TIMEOUT_S`; else a BrokerError saying ``what``.
    A partition the metadata says is not there for :data:`MISSING_PARTITION_S` fails then."""
    ktp = KafkaTopicPartition(tp.topic, tp.partition)
    deadline = time.monotonic() + OPERATION_TIMEOUT_S
    absent_since: float | None = None
    while True:
        try:
            return consumer.get_watermark_offsets(ktp, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            now = time.monotonic()
            if _is_transient(_error_of(exc)) and now < deadline:
                time.sleep(0.1)
                # A client that neither assigned nor subscribed the topic keeps its leaderless metadata (no
                # refresh of a topic not in use): ask for the topic's metadata again.
                if not _absent(consumer, tp, max(1.0, min(5.0, deadline - time.monotonic()))):
                    absent_since = None
                    continue
                absent_since = now if absent_since is None else absent_since
                if now - absent_since < MISSING_PARTITION_S:
                    continue
            raise BrokerError(f"{what}: {exc}") from None


class KafkaBroker:
    """A connection to a Kafka cluster: a ``kafka://`` :class:`BrokerSpec`, or its text without the
    scheme (``HOST:PORT[,HOST:PORT…][?client.setting=value&…]``)."""

    def __init__(self, address: BrokerSpec | str) -> None:
        if isinstance(address, str):
            try:
                address = parse(address if address.startswith("kafka://") else f"kafka://{address}")
            except ValueError as exc:
                raise BrokerError(str(exc)) from None
        if address.kind != "kafka":
            raise BrokerError(f"the Kafka adapter needs a kafka://HOST:PORT spec, not {address.cli_text!r}")
        self.bootstrap_servers = address.bootstrap_servers
        self.client_settings = address.client_properties
        self.spec = address.text
        self._admin: AdminClient | None = None
        self._plain_producer: Producer | None = None
        self._readers: dict[str, Consumer] = {}

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        if self._plain_producer is not None:
            self._plain_producer.flush(5)
            self._plain_producer = None
        self._admin = None

    # -- topics -------------------------------------------------------------------------------
    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = kafka_client.admin_client(self.bootstrap_servers)
        return self._admin

    def check_reachable(self, timeout: float = 10.0) -> None:
        """Raise BrokerError, naming the address, unless a broker answers a metadata request within ``timeout``."""
        kafka_client.check_reachable(self._admin_client(), self.bootstrap_servers, timeout)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        kafka_client.create_topics(self._admin_client(), {name: partitions}, OPERATION_TIMEOUT_S)

    # -- writes -------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        if self._plain_producer is None:
            self._plain_producer = kafka_client.producer(
                self.bootstrap_servers, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5})
        producer = self._plain_producer
        errors: list[KafkaError] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(err)

        for key, value in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        left = producer.flush(OPERATION_TIMEOUT_S)
        if left or errors:
            raise BrokerError(
                f"producing to {topic}-{partition} failed: "
                + (f"{left} records undelivered after {OPERATION_TIMEOUT_S:.0f} s" if left else str(errors[0]))
            )

    def producer(self, transactional_id: str) -> KafkaProducer:
        return KafkaProducer(self, transactional_id)

    # -- reads --------------------------------------------------------------------------------
    def _reader(self, isolation: str) -> Consumer:
        if isolation not in self._readers:
            self._readers[isolation] = kafka_client.consumer(self.bootstrap_servers, **{
                "enable.auto.offset.store": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
            })
        return self._readers[isolation]

    def _read(self, tp: TopicPartition, start: int, isolation: str) -> list[Record]:
        consumer = self._reader(isolation)
        _low, end = _watermarks(consumer, tp, f"reading {tp}: cannot get its end offset")
        if start >= end:
            return []
        records: list[Record] = []
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, start)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        try:
            while True:
                for msg in consumer.consume(1000, timeout=0.05):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            if msg.offset() >= end:
                                return records
                            continue
                        if _is_transient(error):  # the consumer fetches again (bounded by READ_TIMEOUT_S)
                            continue
                        raise BrokerError(f"reading {tp} ({isolation}) failed: {error}")
                    records.append(Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
                    if msg.offset() + 1 >= end:
                        return records
                if time.monotonic() > deadline:
                    raise BrokerError(
                        f"reading {tp} ({isolation}) from {start} to {end} timed out after {READ_TIMEOUT_S:.0f} s "
                        f"with {len(records)} records read"
                    )
        finally:
            consumer.unassign()

    def await_stable(self, positions: Mapping[TopicPartition, int], timeout: float = OPERATION_TIMEOUT_S) -> None:
        """Wait until read_committed readers see every partition up to ``positions``.

        ``commit_transaction`` returns once the coordinator has logged the commit; the markers that
        make the records readable follow asynchronously. The port promises visibility on return."""
        reader = self._reader("read_committed")
        deadline = time.monotonic() + timeout
        for tp, position in positions.items():
            ktp = KafkaTopicPartition(tp.topic, tp.partition)
            while True:
                try:
                    _low, stable = reader.get_watermark_offsets(ktp, timeout=OPERATION_TIMEOUT_S)
                except KafkaException:
                    stable = -1
                if stable >= position:
                    break
                if time.monotonic() > deadline:
                    raise BrokerError(
                        f"{tp}: the transaction committed but its records are not readable committed after "
                        f"{timeout:.0f} s (last stable offset {stable} < {position})"
                    )
                time.sleep(0.005)

    def await_stable_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> None:
        """Wait until ``group_id``'s offsets of ``tps`` hold no pending transactional commit (an
        OffsetFetch that requires stable offsets, as a read_committed consumer sends, retries
        until the commit markers are written)."""
        self._committed(group_id, list(tps), stable=True)

    def read_committed(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        return self._read(tp, start, "read_committed")

    def read_uncommitted(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        return self._read(tp, start, "read_uncommitted")

    def end_offset(self, tp: TopicPartition) -> int:
        _low, high = _watermarks(self._reader("read_uncommitted"), tp, f"end offset of {tp}")
        return high

    def committed_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self._committed(group_id, list(tps), stable=False)

    def _committed(self, group_id: str, tps: list[TopicPartition], stable: bool) -> dict[TopicPartition, int | None]:
        # Not "stable": an open transaction's pending offsets are not committed yet; answer without them.
        key = f"{'stable' if stable else 'committed'}:{group_id}"
        if key not in self._readers:
            self._readers[key] = kafka_client.consumer(
                self.bootstrap_servers, group_id,
                **{"isolation.level": "read_committed" if stable else "read_uncommitted"})
        consumer = self._readers[key]
        deadline = time.monotonic() + OPERATION_TIMEOUT_S
        while True:
            try:
                found = consumer.committed([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps],
                                           timeout=max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                error = _error_of(exc)
                # The group coordinator may still be loading (a fresh cluster, a moved coordinator).
                if error is not None and (_is_transient(error) or error.code() in (
                    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.COORDINATOR_NOT_AVAILABLE,
                )) and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise BrokerError(f"committed offsets of group {group_id!r}: {exc}") from None
        out: dict[TopicPartition, int | None] = {}
        for ktp in found:
            out[TopicPartition(ktp.topic, ktp.partition)] = ktp.offset if ktp.offset >= 0 else None
        return {tp: out.get(tp) for tp in tps}


class KafkaProducer:
    """A Kafka transactional producer for one ``transactional.id``."""

    def __init__(self, broker: KafkaBroker, transactional_id: str) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self._fatal: KafkaError | None = None
        self._producer: Producer | None = None
        self._group_metadata: dict[str, object] = {}
        self._written: dict[TopicPartition, int] = {}
        self._delivery_errors: list[KafkaError] = []
        self._offsets_sent: dict[str, list[TopicPartition]] = {}
        self._open = False

    # -- plumbing -----------------------------------------------------------------------------
    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error

    def _on_delivery(self, error: KafkaError | None, msg) -> None:
        if error is not None:
            self._delivery_errors.append(error)
            if _is_fencing(error):
                self._fatal = self._fatal or error
            return
        tp = TopicPartition(msg.topic(), msg.partition())
        self._written[tp] = max(self._written.get(tp, -1), msg.offset())

    def _client(self) -> Producer:
        if self._producer is None:
            raise BrokerError(f"producer {self.transactional_id!r}: call init_transactions() first")
        self._check()
        return self._producer

    def _check(self) -> None:
        if self._fatal is not None:
            raise ProducerFenced(f"producer {self.transactional_id!r} is fenced or failed fatally: {self._fatal}")

    def _call(self, what: str, fn, *args) -> object:
        """Run a transactional API call, retrying retriable errors, mapping the others."""
        deadline = time.monotonic() + OPERATION_TIMEOUT_S
        while True:
            self._check()
            try:
                return fn(*args)
            except (KafkaException, SystemError) as exc:
                error = _error_of(exc)
                if error is None:
                    raise BrokerError(f"{what} of {self.transactional_id!r}: {exc}") from None
                if _is_fencing(error):
                    self._fatal = error
                    raise ProducerFenced(f"{what}: producer {self.transactional_id!r} fenced: {error}") from None
                if error.txn_requires_abort():
                    raise TransactionAborted(
                        f"{what}: the broker aborted the transaction of {self.transactional_id!r}: {error}"
                    ) from None
                if error.retriable() and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise BrokerError(f"{what} of {self.transactional_id!r} failed: {error}") from None

    def _bounded(self, what: str, fn, *args) -> object:
        """``_call`` in a thread, given up after :data:`STUCK_TIMEOUT_S`: a client stuck in a call
        that ignores its timeout cannot finish the transaction, so it is abandoned (the next
        instance's ``init_transactions`` aborts it) instead of hanging the task."""
        result: dict[str, object] = {}

        def target() -> None:
            try:
                result["value"] = self._call(what, fn, *args)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                result["error"] = exc

        worker = threading.Thread(target=target, name=f"kafka-{what}", daemon=True)
        worker.start()
        worker.join(STUCK_TIMEOUT_S)
        if worker.is_alive():
            raise TransactionAborted(
                f"{what} of {self.transactional_id!r} did not return within {STUCK_TIMEOUT_S:.0f} s (librdkafka "
                "stuck on a stale group coordinator after a broker restart, confluentinc/librdkafka#5511); "
                "the transaction is abandoned"
            )
        if "error" in result:
            raise result["error"]  # type: ignore[misc]
        return result.get("value")

    # -- the port ------------------------------------------------------------------------------
    def init_transactions(self) -> None:
        if self._producer is None:
            settings = {
                "transactional.id": self.transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "transaction.timeout.ms": 60000,
                # Short-lived coordinator cache and metadata: after a broker restarts the producer
                # looks its group coordinator up again instead of waiting on the dead broker's
                # handle (confluentinc/librdkafka#5511: send_offsets_to_transaction hangs).
                "metadata.max.age.ms": 2000,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": self._on_error,
                **self.broker.client_settings,
            }
            self._producer = kafka_client.producer(self.broker.bootstrap_servers, **settings)
        self._call("init_transactions", self._producer.init_transactions, OPERATION_TIMEOUT_S)
        self._open = False
        self._written.clear()
        self._delivery_errors.clear()

    def begin_transaction(self) -> None:
        producer = self._client()
        if self._open:
            raise BrokerError(f"producer {self.transactional_id!r}: a transaction is already open")
        self._call("begin_transaction", producer.begin_transaction)
        self._written.clear()
        self._delivery_errors.clear()
        self._offsets_sent.clear()
        self._open = True

    def _require_open(self) -> Producer:
        producer = self._client()
        if not self._open:
            raise BrokerError(f"producer {self.transactional_id!r}: no open transaction; call begin_transaction()")
        return producer

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        producer = self._require_open()
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, on_delivery=self._on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as exc:
                error = _error_of(exc)
                if error is not None and error.code() == KafkaError._STATE:
                    # The transaction is already in an error state: fenced (e.g. the broker aborted it
                    # on transaction.timeout.ms and bumped the epoch), or abortable. Aborting tells
                    # which: a fenced producer raises ProducerFenced here.
                    producer.poll(0)
                    self._check()
                    self._call("abort_transaction", producer.abort_transaction, OPERATION_TIMEOUT_S)
                    self._open = False
                    raise TransactionAborted(
                        f"send: the transaction of {self.transactional_id!r} was in an error state ({error}); aborted"
                    ) from None
                self._call("send", _raise, exc)
        producer.poll(0)
        self._check()

    def _flush(self, producer: Producer) -> int:
        """Deliver everything queued; a fatal error (fencing) raised from inside the client's
        callbacks surfaces as :class:`ProducerFenced`."""
        try:
            left = producer.flush(OPERATION_TIMEOUT_S)
        except (KafkaException, SystemError) as exc:
            error = _error_of(exc)
            if error is not None and _is_fencing(error):
                self._fatal = self._fatal or error
            self._check()
            raise BrokerError(f"producer {self.transactional_id!r}: flush failed: {exc}") from None
        self._check()
        return left

    def _metadata(self, group_id: str) -> object:
        if group_id not in self._group_metadata:
            consumer = kafka_client.consumer(self.broker.bootstrap_servers, group_id)
            self._group_metadata[group_id] = consumer.consumer_group_metadata()
            consumer.close()
        return self._group_metadata[group_id]

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        producer = self._require_open()
        positions = [KafkaTopicPartition(tp.topic, tp.partition, position) for tp, position in offsets.items()]
        self._bounded("send_offsets_to_transaction", producer.send_offsets_to_transaction,
                      positions, self._metadata(group_id), OPERATION_TIMEOUT_S)
        self._offsets_sent.setdefault(group_id, []).extend(offsets)

    def commit_transaction(self) -> dict[TopicPartition, int]:
        producer = self._require_open()
        left = self._flush(producer)
        if self._delivery_errors:
            error = self._delivery_errors[0]
            raise TransactionAborted(
                f"producer {self.transactional_id!r}: a record of the transaction was not delivered ({error}); "
                "abort the transaction"
            )
        if left:
            raise BrokerError(f"producer {self.transactional_id!r}: {left} records undelivered; abort the transaction")
        crash_point(P_COMMIT_IN_FLIGHT)
        self._call("commit_transaction", producer.commit_transaction, OPERATION_TIMEOUT_S)
        positions = {tp: last + 1 for tp, last in self._written.items()}
        self._written.clear()
        self._open = False
        self.broker.await_stable(positions)
        for group_id, tps in self._offsets_sent.items():
            self.broker.await_stable_offsets(group_id, tps)
        self._offsets_sent.clear()
        return positions

    def abort_transaction(self) -> None:
        producer = self._require_open()
        # Deliver what was sent first, so the aborted records take their offsets in the log (as the
        # port promises) instead of being purged from the client's queue by the abort.
        self._flush(producer)
        self._call("abort_transaction", producer.abort_transaction, OPERATION_TIMEOUT_S)
        self._written.clear()
        self._delivery_errors.clear()
        self._open = False

    def close(self) -> None:
        """Release the client. An open transaction is left to the broker (a newer instance's
        ``init_transactions`` or ``transaction.timeout.ms`` aborts it). A fenced producer closes
        too: librdkafka may raise the fencing of a send still in flight from this last poll (seen on
        Kafka 3.9.1: ``_FENCED`` after ``commit_transaction`` had already raised ProducerFenced)."""
        if self._producer is not None:
            with contextlib.suppress(KafkaException):
                self._producer.purge(in_queue=True, in_flight=False)
                self._producer.poll(0)
        self._producer = None
        self._open = False


def _raise(exc: BaseException) -> None:
    raise exc
