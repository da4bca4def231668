"""``memory``: an in-memory, non-persistent, non-transactional store (Kafka's InMemoryKeyValueStore).

Writes are visible to every reader at once; a restart starts empty and the runtime restores it
from the changelog.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping

from eos_harness.store import CommitFromProcessorError, StoreContext, TopicPartition
from eos_harness.store_kit import LatestView, PutAllAndDeleteByPut


class MemoryStore(PutAllAndDeleteByPut):
    """A sorted dict in memory. ``recover`` returns False: there is nothing to trust."""

    def __init__(self, name: str = "store") -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._context: StoreContext | None = None

    def init(self, context: StoreContext) -> None:
        self._context = context

    def persistent(self) -> bool:
        return False

    def transactional(self) -> bool:
        return False

    def manages_offsets(self) -> bool:
        return False

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            if self._data.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]
            return
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def delete(self, key: bytes) -> bytes | None:
        old = self._data.get(key)
        self.put(key, None)
        return old

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        start = bisect.bisect_left(self._keys, lo)
        end = bisect.bisect_right(self._keys, hi)
        return iter([(k, self._data[k]) for k in self._keys[start:end]])

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter([(k, self._data[k]) for k in self._keys])

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._context is not None and self._context.via_processor:
            raise CommitFromProcessorError(
                f"store {self.name!r}: processors must not commit stores; call context.commit() to request a task commit"
            )

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return None

    def recover(self, changelog_offset: int | None) -> bool:
        return False

    def read_committed(self) -> LatestView:
        return LatestView(self)

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op."""

    def close(self) -> None:
        self._data.clear()
        self._keys.clear()
