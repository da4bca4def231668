"""The one confluent-kafka client layer: every Kafka client of the harness is made here.

Used by the broker adapter (:mod:`eos_harness.broker.kafka`), the Kafka log suite's workload, the
Spark suite's topics (:mod:`eos_harness.spark.kafka`) and cluster readiness
(:mod:`eos_harness.cluster`). It holds what they share: the client configuration of a broker
(``bootstrap.servers`` and a quiet librdkafka log), the admin client, topic creation that waits
until every partition has a leader, producer and consumer construction, the reachability probe,
the brokers registered with a cluster, and the KafkaError inside a wrapped exception.

Every function takes the broker as a :class:`~eos_harness.broker.spec.BrokerSpec` (``kafka://``)
or as its bootstrap servers ``HOST:PORT[,HOST:PORT…]``. A spec's client properties are not added
here: the adapter gives them to its transactional producers (see :mod:`eos_harness.broker.kafka`).
Failures raise :class:`~eos_harness.broker.BrokerError` naming the topic or the address.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from eos_harness.broker.port import BrokerError
from eos_harness.broker.spec import BrokerSpec

__all__ = [
    "TOPIC_TIMEOUT_S",
    "admin_client",
    "bootstrap_of",
    "check_reachable",
    "client_config",
    "consumer",
    "create_topics",
    "error_of",
    "producer",
    "registered_brokers",
]

TOPIC_TIMEOUT_S = 30.0


def bootstrap_of(broker: BrokerSpec | str) -> str:
    """The bootstrap servers of a ``kafka://`` spec, or the servers string itself."""
    return broker.bootstrap_servers if isinstance(broker, BrokerSpec) else broker


def client_config(broker: BrokerSpec | str, **settings: object) -> dict:
    """librdkafka settings for ``broker``: its bootstrap servers, librdkafka's own log quiet
    (connection refused while a broker restarts, …: every error that matters reaches the caller as
    an exception), then ``settings`` (dotted names: pass them as ``**{"acks": "all"}``)."""
    return {"bootstrap.servers": bootstrap_of(broker), "log_level": 2, **settings}


def admin_client(broker: BrokerSpec | str, **settings: object) -> AdminClient:
    return AdminClient(client_config(broker, **settings))


def producer(broker: BrokerSpec | str, **settings: object) -> Producer:
    return Producer(client_config(broker, **settings))


def consumer(broker: BrokerSpec | str, group_id: str | None = None, **settings: object) -> Consumer:
    """A consumer that never commits on its own; ``group_id`` defaults to a fresh reader group."""
    return Consumer(client_config(broker, **{"group.id": group_id or f"eos-harness-reader-{uuid.uuid4().hex[:8]}",
                                             "enable.auto.commit": False, **settings}))


def error_of(exc: BaseException | None) -> KafkaError | None:
    """The KafkaError an exception carries, also when confluent-kafka wrapped it: a fatal error
    raised inside a delivery callback comes out as a SystemError whose cause is the KafkaException."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            return exc.args[0]
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def check_reachable(admin: AdminClient, bootstrap_servers: str, timeout: float = 10.0) -> None:
    """Raise BrokerError, naming the address, unless a broker answers a metadata request within ``timeout``."""
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = error_of(exc)
        raise BrokerError(f"no Kafka broker answers at {bootstrap_servers} (waited {timeout:.0f} s: "
                          f"{error.str() if error is not None else exc})") from None


def registered_brokers(admin: AdminClient, timeout: float = 2.0) -> set[int]:
    """The node ids of the brokers registered with the cluster (KafkaException when none answers)."""
    return set(admin.list_topics(timeout=timeout).brokers)


def create_topics(admin: AdminClient, topics: Mapping[str, int], timeout: float = TOPIC_TIMEOUT_S) -> None:
    """Create each topic (name → partitions) unless it exists, then wait until every partition
    has a leader, so that a first produce does not race the creation."""
    for name, partitions in topics.items():
        if partitions < 1:
            raise BrokerError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
    futures = admin.create_topics([NewTopic(name, num_partitions=n) for name, n in topics.items()],
                                  operation_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            error = error_of(exc)
            if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BrokerError(f"creating topic {name!r} failed: {exc}") from None
    deadline = time.monotonic() + timeout
    for name, partitions in topics.items():
        while True:
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) >= partitions and all(
                p.leader >= 0 for p in topic.partitions.values()
            ):
                break
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name!r} has no leader for every partition after {timeout:.0f} s")
            time.sleep(0.05)
