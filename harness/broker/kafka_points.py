"""The crash point of the ``kafka`` adapter (:mod:`eos_harness.broker.kafka`), declared without importing
confluent-kafka: ``eos-harness points`` and the check of a schedule (:func:`eos_harness.faults.points.load_declarations`)
know it without loading the adapter. Without confluent-kafka (the kafka extra) it does not exist, as the
adapter does not."""

from __future__ import annotations

import importlib.util

from eos_harness.faults.kafka import COMMIT_IN_FLIGHT
from eos_harness.faults.points import declare

__all__ = ["COMMIT_IN_FLIGHT_MEANING"]

COMMIT_IN_FLIGHT_MEANING = "Kafka commit in flight: the transaction's records delivered, EndTxn about to be sent"


def _kafka_installed() -> bool:
    try:
        return importlib.util.find_spec("confluent_kafka") is not None
    except ImportError:  # an import system that refuses it
        return False


if _kafka_installed():
    declare(COMMIT_IN_FLIGHT, COMMIT_IN_FLIGHT_MEANING)
