"""The task's ``.checkpoint`` file: changelog offsets the harness keeps for stores that do not
manage their own (KIP-892), in Kafka's format: a version line, a count line, ``topic partition
offset`` lines. Written to a temp file, fsynced and renamed, so a crash never leaves half a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from eos_harness.store import TopicPartition
from eos_harness.stores.migration import write_offsets

VERSION = 0


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    write_offsets(path, offsets)


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; empty when the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.split("\n")
    try:
        if int(lines[0]) != VERSION:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        offsets = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"corrupt checkpoint file {path}: {exc}; delete it to restore from the changelog") from exc
    return offsets
