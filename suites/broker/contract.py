"""The broker port's contract, as plain tests on a ``broker`` fixture: every adapter (embedded,
Kafka) must pass them. Topic names are unique per test so a shared cluster can run them all."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from eos_harness.broker import ProducerFenced
from eos_harness.process.server import forkserver_context
from eos_harness.store import TopicPartition


def fresh_topic(broker, partitions: int = 1) -> str:
    name = f"contract-{uuid.uuid4().hex[:10]}"
    broker.create_topic(name, partitions)
    return name


def fresh_partition(broker) -> tuple[str, TopicPartition]:
    """A new topic of one partition: its name and its partition."""
    topic = fresh_topic(broker)
    return topic, TopicPartition(topic, 0)


def transaction_begun(broker, topic: str):
    """The transactional producer ``tx-TOPIC`` of ``broker``, its transactions initialised (fencing
    any older instance) and one begun."""
    producer = broker.producer(f"tx-{topic}")
    producer.init_transactions()
    producer.begin_transaction()
    return producer


def values(records) -> list[bytes | None]:
    return [r.value for r in records]


def test_read_committed_sees_a_transaction_only_after_commit(broker):
    topic, tp = fresh_partition(broker)
    producer = transaction_begun(broker, topic)
    producer.send(topic, 0, b"k", b"v1")
    producer.send(topic, 0, b"k", b"v2")
    assert broker.read_committed(tp) == []
    positions = producer.commit_transaction()
    records = broker.read_committed(tp)
    assert values(records) == [b"v1", b"v2"]
    assert positions == {tp: records[-1].offset + 1}
    producer.close()


def test_an_aborted_transaction_is_never_read_committed_but_takes_offsets(broker):
    topic, tp = fresh_partition(broker)
    producer = transaction_begun(broker, topic)
    producer.send(topic, 0, None, b"aborted")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic, 0, None, b"kept")
    producer.commit_transaction()
    committed = broker.read_committed(tp)
    assert values(committed) == [b"kept"]
    assert b"aborted" in values(broker.read_uncommitted(tp))
    assert committed[0].offset >= 1
    assert broker.end_offset(tp) > committed[0].offset
    producer.close()


def test_input_offsets_commit_atomically_with_the_records(broker):
    topic = fresh_topic(broker)
    tp, input_tp = TopicPartition(topic, 0), TopicPartition(topic + "-in", 0)
    broker.create_topic(input_tp.topic)  # Kafka refuses offsets of a topic that does not exist
    group = f"group-{topic}"
    producer = transaction_begun(broker, topic)
    producer.send(topic, 0, b"k", b"v")
    producer.send_offsets_to_transaction({input_tp: 7}, group)
    assert broker.committed_offsets(group, [input_tp]) == {input_tp: None}
    producer.abort_transaction()
    assert broker.committed_offsets(group, [input_tp]) == {input_tp: None}
    producer.begin_transaction()
    producer.send(topic, 0, b"k", b"v")
    producer.send_offsets_to_transaction({input_tp: 7}, group)
    producer.commit_transaction()
    assert broker.committed_offsets(group, [input_tp]) == {input_tp: 7}
    assert values(broker.read_committed(tp)) == [b"v"]
    producer.close()


def test_a_newer_instance_fences_the_zombie(broker):
    topic, tp = fresh_partition(broker)
    zombie = transaction_begun(broker, topic)
    zombie.send(topic, 0, None, b"zombie")
    successor = transaction_begun(broker, topic)
    successor.send(topic, 0, None, b"successor")
    successor.commit_transaction()
    with pytest.raises(ProducerFenced):
        zombie.send(topic, 0, None, b"zombie-later")
        zombie.commit_transaction()
    assert values(broker.read_committed(tp)) == [b"successor"]
    successor.close()
    zombie.close()


def _open_a_transaction_and_die(spec: str, topic: str) -> None:  # in the child
    from eos_harness.broker import connect

    producer = transaction_begun(connect(spec), topic)
    producer.send(topic, 0, None, b"dead")
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_dead_process_open_transaction_stays_invisible(broker):
    topic, tp = fresh_partition(broker)
    # The child comes from the preloaded zygote, not os.fork() of this process, whose client
    # threads (librdkafka's) may hold a lock at the moment of the fork.
    child = forkserver_context().Process(target=_open_a_transaction_and_die, args=(broker.spec, topic), daemon=True)
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    successor = transaction_begun(broker, topic)
    successor.send(topic, 0, None, b"alive")
    successor.commit_transaction()
    assert values(broker.read_committed(tp)) == [b"alive"]
    successor.close()


def test_non_transactional_produce_and_read_from_a_position(broker):
    topic = fresh_topic(broker, partitions=2)
    broker.produce(topic, 1, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    tp = TopicPartition(topic, 1)
    records = broker.read_committed(tp)
    assert [r.key for r in records] == [b"a", b"b", b"c"]
    assert values(broker.read_committed(tp, records[1].offset)) == [b"2", b"3"]
    assert broker.read_committed(TopicPartition(topic, 0)) == []
