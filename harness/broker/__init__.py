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

from eos_harness.broker.port import (
    Broker,
    BrokerError,
    ProducerFenced,
    Record,
    TransactionAborted,
    TransactionalProducer,
)
from eos_harness.broker.spec import BrokerSpec, parse

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
