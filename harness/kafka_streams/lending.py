"""What the process of one of Kafka Streams' stores borrows from the store server: a JVM of the store's
Kafka version (:class:`~eos_harness.stores.Lending`), from the server's pool
(:mod:`eos_harness.kafka_streams.pool`), its pipes handed to the store (:func:`eos_harness.kafka_streams.store.lend`).
"""

from __future__ import annotations

from eos_harness.kafka_streams.pool import AGENT, VERIFYING, JvmPool, current
from eos_harness.kafka_streams.store import lend
from eos_harness.stores import Lending

__all__ = ["lending"]


def lending(version: str, verify: bool = False, agent: bool = False) -> Lending:
    """A JVM of Kafka Streams ``version``, lent to the store's process; ``verify``: one that verifies the
    classes it loads from jars (a user's store's: :data:`~eos_harness.kafka_streams.pool.VERIFYING`); ``agent``:
    one started with the agent Byteman's is installed through (a mutant's: :data:`~eos_harness.kafka_streams.pool.AGENT`)."""
    return Lending("jvm", version + (VERIFYING if verify else "") + (AGENT if agent else ""), _server_pool, lend)


def _server_pool(output) -> tuple[JvmPool, bool]:
    """The pool a store server lends JVMs from: the shared one (:func:`~eos_harness.kafka_streams.pool.shared`,
    not the server's to shut down), else its own."""
    shared = current()
    return (shared, False) if shared is not None else (JvmPool(output), True)
