"""The Kafka version the harness starts (4.4.0 by default, 3.9.1 with ``EOS_KAFKA_VERSION=3.9.1``):
the option, its usage errors and the pinned bundles. Nothing is started here (the brokers themselves
are checked where the Kafka tier starts them: suites/broker/test_kafka.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from eos_harness.cluster.local import (
    KAFKA_BUNDLES,
    KAFKA_VERSION,
    ClusterError,
    dump_log_class,
    kafka_version,
    log_options,
    version_of,
)


def test_the_default_is_4_4_0_and_the_environment_picks_3_9_1(monkeypatch):
    monkeypatch.delenv("EOS_KAFKA_VERSION", raising=False)
    assert KAFKA_VERSION == kafka_version() == "4.4.0"
    monkeypatch.setenv("EOS_KAFKA_VERSION", "3.9.1")
    assert kafka_version() == "3.9.1"
    assert version_of("kafka-local:3") == version_of("kafka-quorum") == "3.9.1"
    assert version_of("embedded") is None and version_of("kafka://127.0.0.1:9") is None  # not ours to ask
    monkeypatch.setenv("EOS_KAFKA_VERSION", "3.8.0")
    with pytest.raises(ClusterError, match="EOS_KAFKA_VERSION='3.8.0': the harness starts Kafka 4.4.0 or 3.9.1"):
        kafka_version()


def test_each_version_is_a_pinned_bundle_with_its_own_tools_and_logging():
    assert KAFKA_BUNDLES["4.4.0"].artifacts[:2] == ("org.apache.kafka:kafka_2.13:4.4.0",
                                                    "org.apache.kafka:kafka-tools:4.4.0")
    assert KAFKA_BUNDLES["3.9.1"].artifacts[0] == "org.apache.kafka:kafka_2.13:3.9.1"
    assert (KAFKA_BUNDLES["4.4.0"].folder, KAFKA_BUNDLES["3.9.1"].folder) == ("kafka-4.4.0", "kafka-3.9.1")
    assert dump_log_class("4.4.0") == "org.apache.kafka.tools.DumpLogSegments"
    assert dump_log_class("3.9.1") == "kafka.tools.DumpLogSegments"
    assert log_options("4.4.0", None) == ["-Dlog4j2.level=OFF"]
    assert log_options("3.9.1", None) == ["-Dlog4j.configuration=file:/dev/null"]


@pytest.mark.parametrize("command", [["eos-harness", "run", "--broker", "kafka-local", "--seed", "1"],
                                     ["pytest", "-m", "kafka", "--co", "-q"]])
def test_an_unknown_version_is_a_usage_error_before_anything_runs(command, tmp_path):
    program = [sys.executable, "-m", "eos_harness.faces.cli"] if command[0] == "eos-harness" else \
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    done = subprocess.run([*program, *command[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "EOS_KAFKA_VERSION": "2.8"}, stdin=subprocess.DEVNULL)
    assert done.returncode in (2, 4), done.stdout + done.stderr  # click's and pytest's usage errors
    assert "EOS_KAFKA_VERSION='2.8': the harness starts Kafka 4.4.0 or 3.9.1 (default 4.4.0)" in done.stdout + done.stderr
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_a_printed_command_carries_the_kafka_version_it_ran_on(monkeypatch):
    """A finding on 3.9.1 pasted into another shell must run on 3.9.1 again, not on the default."""
    from eos_harness.commands import command_line

    monkeypatch.delenv("EOS_KAFKA_VERSION", raising=False)
    assert command_line("chaos", "--resume", "runs/my run") == "eos-harness chaos --resume 'runs/my run'"
    monkeypatch.setenv("EOS_KAFKA_VERSION", "3.9.1")
    line = command_line("run", "--broker", "kafka-local", "--seed", 1)
    assert line == "EOS_KAFKA_VERSION=3.9.1 eos-harness run --broker kafka-local --seed 1"
    # what a shell runs from it: the variable set for the command, the words as they were
    shown = subprocess.run(["sh", "-c", line.replace("eos-harness", """sh -c 'printf "%s|" "$EOS_KAFKA_VERSION" "$@"' sh""", 1)],
                           capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                                if k != "EOS_KAFKA_VERSION"})
    assert shown.stdout == "3.9.1|run|--broker|kafka-local|--seed|1|"
