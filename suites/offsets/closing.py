"""Scenarios of closed stores, processors and names on disk (issue 15 items 4, 5 and 7), each with the
runtime's own code (``eos_harness.runtime.closing``, ``.processor``, ``.names``) around a live store.

- ``closing_checkpoint``: a task's store is reopened (the usual path in production; by the seed, after
  a reopen and a commit before), then the task closes; its ``.checkpoint`` holds the store's
  ``committed_offset`` of every changelog partition, although the store manages its offsets; a second task crashes
  (SIGKILL, no ``.checkpoint``). The offsets cache built from the task directories then gives both
  tasks' offset sums and lags, reading the first from its ``.checkpoint`` without opening its store
  and opening the second's store exactly once.
- ``commit_from_processor``: the store as a processor reaches it (the runtime's decorator) refuses
  ``commit`` with ``CommitFromProcessorError`` and commits nothing, ``flush()`` commits nothing either;
  the task commit the processor requests through its context then commits the writes.
- ``store_directory``: a store used, committed, closed, reopened and killed in
  ``[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]`` leaves no file outside it.
"""

from __future__ import annotations

from pathlib import Path

from eos_harness.runtime.checkpoint import read_checkpoint, write_checkpoint
from eos_harness.runtime.closing import OffsetsCache, closing_offsets
from eos_harness.runtime.names import outside_writes
from eos_harness.runtime.processor import ProcessorContext, ProcessorStore
from eos_harness.store import CommitFromProcessorError, StoreContext
from eos_harness.verdict import Violation

from .scenario import CHANGELOGS, SOURCE, Features, LiveStore, Scenario, show_offsets

__all__ = ["SCENARIOS"]


class _Remote:
    """A live store's calls as methods, so the runtime's code drives the store in its child."""

    def __init__(self, live: LiveStore) -> None:
        self._live = live
        self.name = "store"

    def __getattr__(self, method: str):
        return lambda *args: self._live.call(method, *args)


def _manages_persistently(features: Features) -> str | None:
    if not features.manages_offsets:
        return "the store does not manage offsets: the runtime keeps its .checkpoint as before KIP-892"
    if not features.persistent:
        return "the store is not persistent: there is nothing on disk for a closed task"
    return None


def run_closing_checkpoint(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    app_dir = workdir / "app"
    closed = {CHANGELOGS[0]: 11 + seed % 5, CHANGELOGS[1]: 30, CHANGELOGS[2]: 4}
    crashed = {CHANGELOGS[0]: 7, CHANGELOGS[1]: 2 + seed % 3, CHANGELOGS[2]: 9}
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        live.call("recover", None)
        live.call("put", b"a", b"v1")
        live.call("commit", {**closed, SOURCE: 3})
        live.told(f"task 0_0: put a=v1, commit {show_offsets(closed)} and the source position")
        # The usual production path: the task's store was reopened (a restart, a rebalance) before the task
        # closes, its .checkpoint written from what the reopened store answers; the seed draws whether it
        # was reopened and committed once before that.
        for n in range(seed % 2):
            live.close()
            live.start()
            live.call("recover", None)
            closed = {tp: offset + 2 for tp, offset in closed.items()}
            live.call("put", b"a", b"v%d" % (n + 2))
            live.call("commit", {**closed, SOURCE: 4 + n})
            live.told(f"task 0_0: close, reopen, recover; put a=v{n + 2}, commit {show_offsets(closed)}")
        live.close()
        live.start()
        live.call("recover", None)
        live.told("task 0_0: close, reopen, recover")
        live.told("close the task")
        checkpoint = app_dir / "0_0" / ".checkpoint"
        partitions = tuple(live.own(CHANGELOGS))  # a task's store: its own partition alone
        closed, crashed = live.own(closed), live.own(crashed)
        write_checkpoint(checkpoint, closing_offsets(_Remote(live), partitions, {}))
        live.close()
        if read_checkpoint(checkpoint) != closed:
            return [Violation("checkpoint_on_close", str(checkpoint), show_offsets(closed),
                              show_offsets(read_checkpoint(checkpoint)),
                              detail="the .checkpoint written when the task closed does not hold the store's "
                                     f"committed offsets (committed_offset after commit, before close)\n{live.recent()}")]
    with LiveStore(spec, workdir, store_timeout, {"task_id": "0_1"}) as live:
        live.directory = app_dir / "0_1" / "rocksdb" / "store"
        live.start()
        live.call("recover", None)
        live.call("put", b"b", b"v1")
        live.call("commit", crashed)
        live.told(f"task 0_1: put b=v1, commit {show_offsets(crashed)}")
        live.kill()
    opened: list[Path] = []
    with LiveStore(spec, workdir, store_timeout) as cache_live:

        def open_store(context: StoreContext):
            opened.append(context.directory)
            cache_live.directory = context.directory
            cache_live.context = {**cache_live.context, "task_id": context.task_id, "changelogs": partitions}
            cache_live.start()
            return _Remote(cache_live)

        cache = OffsetsCache.build(app_dir, "app", open_store, lambda task_id, store_name: partitions)
        story = cache_live.recent()
    ends = {tp: offset + 10 for tp, offset in closed.items()}
    want_sums = {"0_0": sum(closed.values()), "0_1": sum(crashed.values())}
    want_lags = {"0_0": sum(ends[tp] - o for tp, o in closed.items()), "0_1": sum(ends[tp] - o for tp, o in crashed.items())}
    lags = cache.lags({"0_0": ends, "0_1": ends})
    if opened != [app_dir / "0_1" / "rocksdb" / "store"]:
        return [Violation("offsets_cache_from_disk", "opened stores", ["0_1"], [str(p) for p in opened],
                          detail="building the offsets cache must open only the store of the task without a "
                                 ".checkpoint, once")]
    if cache.offset_sums() != want_sums or lags != want_lags:
        return [Violation("offsets_cache_from_disk", "offset sums and lags", {"sums": want_sums, "lags": want_lags},
                          {"sums": cache.offset_sums(), "lags": lags},
                          detail="task 0_0 closed (its .checkpoint), task 0_1 crashed (its store's committed_offset "
                                 f"of each changelog partition)\n{story}")]
    return []


def run_commit_from_processor(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    tp = CHANGELOGS[0]
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        live.call("recover", None)
        manages, transactional = live.call("manages_offsets"), live.call("transactional")
        live.call("put", b"a", b"v1")
        live.call("commit", {tp: 5})
        live.told(f"put a=v1, commit {{{tp}: 5}} (by the runtime)")
        context = ProcessorContext("0_0")
        view = ProcessorStore(_Remote(live), context)
        view.put(b"a", b"v2")
        live.told("the processor: put a=v2, then commit through its view of the store")
        try:
            view.commit({tp: 6})
        except CommitFromProcessorError:
            live.told("refused: CommitFromProcessorError")
        else:
            return [Violation("processor_commit_refused", "commit", "CommitFromProcessorError", "the commit returned",
                              detail=f"a processor committed the store through its context\n{live.recent()}")]
        view.flush()
        live.told("the processor: flush() through its view (a no-op)")
        leaked = []
        if manages and live.call("committed_offset", tp) != 5:
            leaked.append(f"committed_offset({tp}) is {live.call('committed_offset', tp)}, not 5")
        if transactional and live.call("rc_get", b"a") != b"v1":
            leaked.append(f"read_committed().get(a) is {live.call('rc_get', b'a')!r}, not b'v1'")
        if leaked:
            return [Violation("processor_commit_refused", "a", "nothing committed by the processor", "; ".join(leaked),
                              detail=f"a refused commit or a flush from a processor committed\n{live.recent()}")]
        context.commit()
        if context.take_request():  # the runtime honours the request: the task commits
            live.call("commit", {tp: 6})
            live.told(f"the processor: context.commit(); the runtime commits the task at {{{tp}: 6}}")
        found = []
        if manages and live.call("committed_offset", tp) != 6:
            found.append(f"committed_offset({tp}) is {live.call('committed_offset', tp)} after the requested commit")
        if live.call("rc_get", b"a") != b"v2":
            found.append("the processor's write is not committed by the commit it requested")
        live.call("close")
        return [Violation("processor_commit_refused", "a", "the requested task commit commits the writes",
                          "; ".join(found), detail=live.recent())] if found else []


def run_store_directory(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    with LiveStore(spec, workdir, store_timeout) as live:
        live.start()
        live.call("recover", None)
        for i in range(3):
            live.call("put", b"k%d" % i, b"v%d" % seed)
            live.call("commit", {CHANGELOGS[0]: i + 1})
        live.call("put", b"u", b"uncommitted")
        live.call("flush")
        live.close()
        live.start()
        live.call("recover", live.call("committed_offset", CHANGELOGS[0]))
        live.call("put", b"w", b"x")
        live.kill()
        task_dir = live.directory.parent.parent
        return [Violation("store_directory", path, f"nothing outside {live.directory}", f"the store wrote {path}",
                          detail=f"the store wrote {path}, outside its directory "
                                 "[state.dir]/[application.id]/[task.id]/rocksdb/[store.name] (Kafka Streams' state "
                                 "directory layout)")
                for path in outside_writes(task_dir, [live.directory])]


SCENARIOS = [
    Scenario("closing_checkpoint", ("checkpoint_on_close", "offsets_cache_from_disk"), _manages_persistently,
             run_closing_checkpoint, needs=("commit_durable",)),
    Scenario("commit_from_processor", ("processor_commit_refused",), lambda features: None, run_commit_from_processor),
    Scenario("store_directory", ("store_directory",), lambda features: None, run_store_directory),
]
