"""The Kafka releases the harness starts (:mod:`eos_harness.cluster.local` pins their jars), and the
check of ``$EOS_KAFKA_VERSION`` every command and pytest session make before anything runs: this module
imports nothing of the harness, so the check costs a command's start-up nothing."""

from __future__ import annotations

import os

__all__ = ["KAFKA_VERSION", "KAFKA_VERSIONS", "VERSION_ENV", "chosen_version", "unknown_version"]

# The Kafka releases whose brokers the harness starts from pinned jars; the first is the default.
# ``EOS_KAFKA_VERSION=3.9.1`` (the environment of the command, of pytest) selects another.
KAFKA_VERSIONS = ("4.4.0", "3.9.1")
KAFKA_VERSION = KAFKA_VERSIONS[0]
VERSION_ENV = "EOS_KAFKA_VERSION"


def chosen_version() -> str:
    """``$EOS_KAFKA_VERSION`` if set, else :data:`KAFKA_VERSION` (whether the harness has it or not)."""
    return os.environ.get(VERSION_ENV, "").strip() or KAFKA_VERSION


def unknown_version() -> str | None:
    """What is wrong with ``$EOS_KAFKA_VERSION`` (a release the harness has no jars for), or ``None``."""
    version = chosen_version()
    if version in KAFKA_VERSIONS:
        return None
    return f"{VERSION_ENV}={version!r}: the harness starts Kafka {' or '.join(KAFKA_VERSIONS)} (default {KAFKA_VERSION})"
