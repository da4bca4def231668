"""pytest plugin: ``--eos-store=module:function`` points the conformance suite at a user's store."""

from __future__ import annotations

import pytest
from eos_harness.cluster.fixtures import eos_kafka_cluster  # noqa: F401 - a real Kafka for -m kafka tests


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eos-harness")
    group.addoption(
        "--eos-store",
        action="append",
        default=None,
        help="Store under test for the conformance suite: a built-in name or a factory module:function "
        "(repeatable; default: every built-in real store).",
    )
    group.addoption("--eos-seed", type=int, default=None, help="Seed of the conformance suite (printed).")
    group.addoption("--eos-examples", type=int, default=None, help="Hypothesis examples per store.")
