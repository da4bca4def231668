"""What a processor sees of its task (KIP-892, "flush deprecation"): the store through a decorator
that refuses ``commit``, and a context through which it may request a task commit instead.

A processor must never commit a store itself: it does not know the changelog offsets of what the
store holds, and a commit from inside processing would make the store claim records whose EOS
transaction has not committed. Kafka Streams wraps every store handed to a processor in a
read-write decorator whose ``commit`` throws; :class:`ProcessorStore` is that decorator. A processor
that needs its work durable sooner calls ``context.commit()`` (:class:`ProcessorContext`): the
runtime commits the whole task (EOS transaction, then the store, then the checkpoint) right after
the record that asked, instead of waiting for ``commit_interval``. ``flush()`` is a no-op, as the
KIP makes it, and is neither forwarded to the store nor counted by the commit metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eos_harness.store import CommitFromProcessorError, KeyValueView, StateStore, TopicPartition
from eos_harness.store_kit import LatestView

__all__ = ["ProcessorContext", "ProcessorStore", "request_commit"]


class ProcessorContext:
    """The part of Kafka's ``ProcessingContext`` a processor uses here: ``commit()`` requests a task
    commit, which the runtime honours after the record being processed."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.requested = 0  # commit requests not yet honoured

    def commit(self) -> None:
        """Request a commit of the whole task at the next step (KIP-892's ``ProcessorContext#commit``)."""
        self.requested += 1

    def take_request(self) -> bool:
        """True (and forgets the request) when the processor asked for a commit since the last call."""
        asked, self.requested = self.requested > 0, 0
        return asked


class ProcessorStore(LatestView):
    """A store as a processor reaches it: reads (:class:`LatestView`) and writes go to the store,
    ``commit`` raises :class:`CommitFromProcessorError`, ``flush`` does nothing. ``context`` is the
    processor's :class:`ProcessorContext`."""

    def __init__(self, store: StateStore, context: ProcessorContext) -> None:
        super().__init__(store)
        self.context = context
        self.name = getattr(store, "name", "store")

    def put(self, key: bytes, value: bytes | None) -> None:
        self._store.put(key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._store.put_all(entries)

    def delete(self, key: bytes) -> bytes | None:
        return self._store.delete(key)

    def read_committed(self) -> KeyValueView:
        return self._store.read_committed()

    def commit(self, changelog_offsets: Mapping[TopicPartition, int] | None = None) -> None:
        raise CommitFromProcessorError(
            f"store {self.name!r}: a processor must not commit a state store (KIP-892; it does not know the "
            "changelog offsets of what the store holds): call context.commit() on the processor's context to "
            "request a task commit instead")

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op, not forwarded to the store and not counted as a commit."""


def request_commit(store: object) -> bool:
    """Ask for a task commit through the processor context of ``store`` (a :class:`ProcessorStore`);
    False, and nothing happens, where there is none (the model runs processors against a dict)."""
    context = getattr(store, "context", None)
    if context is None:
        return False
    context.commit()
    return True
