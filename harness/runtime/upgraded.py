"""Opening a task's store on a directory an incompatible (newer) store format wrote (KIP-1035 downgrade).

A store from before offset management cannot open a database that an upgraded store wrote (its
offsets column family) unless that store was closed with ``upgrade.from`` set. Kafka Streams then
wipes the task's state and restores it from the changelog, and so does the runtime: the store
raises :class:`~eos_harness.store.IncompatibleStoreDirectory` from ``init``, the runtime deletes
the store's directory and its partitions from the task's ``.checkpoint`` (an offset without the data
it names would skip the changelog's records), reports a ``wipe`` event and opens the store again,
empty; recovery then replays the whole changelog. The same happens the other way round when an
upgraded store meets a legacy database it cannot trust (no ``.checkpoint`` offset to import: the
legacy task crashed under exactly-once and its data may hold uncommitted writes): the ``wipe``
event's ``reason`` says so.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from eos_harness.runtime.checkpoint import read_checkpoint, write_checkpoint
from eos_harness.store import IncompatibleStoreDirectory, StateStore, StoreContext

__all__ = ["open_or_wipe"]


def open_or_wipe(factory: Callable[[], StateStore], context: StoreContext,
                 emit: Callable[[dict], None]) -> StateStore:
    """A store from ``factory`` initialised with ``context``; when it cannot open the directory, the
    directory is wiped (with the store's offsets in the ``.checkpoint``) and the store opened empty."""
    store = factory()
    try:
        store.init(context)
        return store
    except IncompatibleStoreDirectory as exc:
        reason = str(exc)
    checkpoint = context.directory.parent.parent / ".checkpoint"
    own = set(context.changelogs)
    offsets = read_checkpoint(checkpoint)
    if own & set(offsets):
        others = {tp: o for tp, o in offsets.items() if tp not in own}
        if others:
            write_checkpoint(checkpoint, others)
        else:
            checkpoint.unlink(missing_ok=True)
    shutil.rmtree(context.directory, ignore_errors=True)
    context.directory.mkdir(parents=True, exist_ok=True)
    emit({"type": "wipe", "reason": reason, "directory": str(context.directory)})
    store = factory()
    store.init(context)
    return store
