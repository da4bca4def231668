"""The pinned jars of Kafka Streams' own stores (fetched from Maven Central by :mod:`eos_harness.jars`).

One bundle per Kafka Streams version (``kafka-streams``, ``kafka-streams-test-utils`` and their
runtime dependencies: ``kafka-clients``, ``rocksdbjni``), and Byteman for the crash points inside the
JVM. ``python -m eos_harness.jars kafka-streams-4.4.0`` fetches one ahead of time.
"""

from __future__ import annotations

from eos_harness.jars import Bundle, register

__all__ = ["BYTEMAN", "BYTEMAN_VERSION", "VERSIONS", "streams_bundle"]

VERSIONS = ("4.4.0", "4.3.1")  # the Kafka Streams releases whose stores the harness opens
BYTEMAN_VERSION = "4.0.27"

for _version in VERSIONS:
    register(Bundle(
        f"kafka-streams-{_version}", _version,
        (f"org.apache.kafka:kafka-streams:{_version}", f"org.apache.kafka:kafka-streams-test-utils:{_version}"),
        description=f"Kafka Streams {_version} (its state stores, RocksDB's JNI library) and its test utilities",
    ))

BYTEMAN = register(Bundle("byteman", BYTEMAN_VERSION, (f"org.jboss.byteman:byteman:{BYTEMAN_VERSION}",),
                          description="Byteman: its ASM weaves the crash points into Kafka's classes, its agent the mutants' rules"))


def streams_bundle(version: str) -> str:
    """The bundle name of Kafka Streams ``version``."""
    return f"kafka-streams-{version}"
