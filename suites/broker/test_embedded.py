"""The broker contract on the embedded (SQLite) adapter."""

from __future__ import annotations

import pytest
from eos_harness.broker import BrokerError
from eos_harness.broker.embedded import EmbeddedBroker
from eos_harness.suites.broker.contract import *  # noqa: F403


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "log.sqlite") as b:
        yield b


def test_writing_to_a_missing_topic_names_it(broker):
    with pytest.raises(BrokerError, match="nowhere-0 does not exist; create it first"):
        broker.produce("nowhere", 0, [(None, b"x")])
