"""The EOS task runtime: one stateful task's lifecycle as KIP-844 describes it, for real.

A task owns one input partition. It recovers its store (``recover``, then replays the changelog
read-committed from the store's committed offset), resumes input from the committed input
position, and processes records with a workload's processor: every store write is appended to the
changelog inside the open EOS transaction, every output record to the output topic. Every
``commit_interval`` records (and on close) it commits in steps:

  (3) the EOS transaction (changelog + output records + input offsets), ``task.commit.after_eos``
  (4a) ``store.commit(changelog offsets)``,                            ``task.commit.after_store``
  (4b) the ``.checkpoint`` file,                                         ``task.commit.after_checkpoint``

A global store (a workload with several changelog partitions) logs each write to the partition of
its key and commits, checkpoints and restores every partition (``runtime.changelogs``).

Names follow Kafka Streams' state directory layout: the store lives in
``[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]`` and logs to
``[application.id]-[store.name]-changelog``.

The runtime reports what it does as events through an ``emit`` callback; it never writes the
history itself (the driver does).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eos_harness.broker import Broker, ProducerFenced, TransactionAborted, TransactionalProducer, connect
from eos_harness.faults.points import crash_point, declare
from eos_harness.models.workloads import Workload, workload
from eos_harness.process.guard import guarded
from eos_harness.runtime.changelogs import Changelogs
from eos_harness.runtime.checkpoint import read_checkpoint, write_checkpoint
from eos_harness.runtime.store_duties import StoreDuties
from eos_harness.runtime.upgraded import open_or_wipe
from eos_harness.store import (
    ChangelogRecord,
    StateStore,
    StoreContext,
    TopicPartition,
    capabilities_of,
    offers_restore,
)
from eos_harness.stores.registry import builtin_spec, resolve

__all__ = ["Task", "TaskConfig", "encode", "decode"]

P_MID_BATCH = declare("task.process.mid_batch", "after a record is processed, its writes uncommitted (step 2)")
P_BEFORE_EOS = declare("task.commit.before_eos", "before the EOS transaction commits (between steps 2 and 3)")
P_AFTER_EOS = declare("task.commit.after_eos", "EOS transaction committed, store not yet committed (3 to 4a)")
P_AFTER_STORE = declare("task.commit.after_store", "store committed, checkpoint not yet written (4a to 4b)")
P_AFTER_CHECKPOINT = declare("task.commit.after_checkpoint", "checkpoint written (after 4b)")
P_MID_REPLAY = declare("task.restore.mid_replay", "half of the changelog tail replayed into the store")
P_CLOSE_MID = declare("task.close.mid", "during close: final commit done, checkpoint and store close not")

def encode(data: bytes | None) -> str | None:
    """Bytes to a JSON-safe string, exactly reversible (latin-1)."""
    return None if data is None else data.decode("latin-1")


def decode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("latin-1")


@dataclass(frozen=True)
class TaskConfig:
    store: str
    broker: str
    state_dir: str
    workload: str
    application_id: str = "eos-app"
    store_name: str = "store"
    topic_group: int = 0
    partition: int = 0
    commit_interval: int = 10
    read_every: int = 3
    legacy_wipe: bool = True
    report_contents: bool = True
    changelog_partitions: int = 0  # the store's changelog partitions; 0: the workload's (a global store: several)
    upgrade_from: str | None = None  # Kafka's upgrade.from (KIP-1035 downgrade: the store hands back its offsets)

    @property
    def task_id(self) -> str:
        return f"{self.topic_group}_{self.partition}"

    @property
    def input_topic(self) -> str:
        return f"{self.application_id}-input"

    @property
    def output_topic(self) -> str:
        return f"{self.application_id}-output"

    @property
    def changelog_topic(self) -> str:
        return f"{self.application_id}-{self.store_name}-changelog"

    @property
    def task_dir(self) -> Path:
        return Path(self.state_dir) / self.application_id / self.task_id

    @property
    def store_dir(self) -> Path:
        return self.task_dir / "rocksdb" / self.store_name

    @property
    def checkpoint_path(self) -> Path:
        return self.task_dir / ".checkpoint"

    @property
    def input_tp(self) -> TopicPartition:
        return TopicPartition(self.input_topic, self.partition)

    @property
    def output_tp(self) -> TopicPartition:
        return TopicPartition(self.output_topic, self.partition)

    @property
    def changelog_tp(self) -> TopicPartition:
        return TopicPartition(self.changelog_topic, self.partition)

    @property
    def changelog_tps(self) -> tuple[TopicPartition, ...]:
        """Every changelog partition feeding the store: the task's own, or a global store's 0..n-1."""
        n = self.changelog_partitions or workload(self.workload).changelog_partitions
        return (self.changelog_tp,) if n <= 1 else tuple(TopicPartition(self.changelog_topic, p) for p in range(n))

    @property
    def transactional_id(self) -> str:
        return f"{self.application_id}-{self.task_id}"

    @property
    def group_id(self) -> str:
        return self.application_id

    @classmethod
    def for_store(cls, store: str, **kwargs) -> TaskConfig:
        """A config for ``store``; an unsafe runtime variant (``eos_harness.stores``) becomes its base store
        with the runtime settings it changes."""
        spec = builtin_spec(store)
        if spec is not None and spec.kind == "unsafe-runtime":
            return cls(store=spec.base, **{**spec.runtime, **kwargs})
        return cls(store=store, **kwargs)


def create_topics(broker: Broker, config: TaskConfig) -> None:
    partitions = config.partition + 1
    for topic in (config.input_topic, config.output_topic, config.changelog_topic):
        broker.create_topic(topic, max(partitions, len(config.changelog_tps)) if topic == config.changelog_topic
                            else partitions)


class _LoggingWriter:
    """Applies a processor's writes to the store and appends them to the changelog (each to its key's
    partition)."""

    def __init__(self, store: StateStore, producer: TransactionalProducer, changelogs: Changelogs) -> None:
        self.store, self.producer, self.changelogs = store, producer, changelogs
        self.put_all = capabilities_of(store).put_all  # a store that declares no put_all gets puts

    def write(self, writes: tuple[tuple[bytes, bytes | None], ...]) -> None:
        if len(writes) == 1 or not self.put_all:
            for key, value in writes:
                self.store.put(key, value)
        else:
            self.store.put_all(list(writes))
        for key, value in writes:
            tp = self.changelogs.of(key)
            self.producer.send(tp.topic, tp.partition, key, value)


class Task:
    """One task instance. ``run()`` recovers, processes the input to its end, and closes."""

    def __init__(self, config: TaskConfig, emit: Callable[[dict], None] = lambda event: None) -> None:
        self.config = config
        self.emit = emit
        self.workload: Workload = workload(config.workload)
        self.factory = guarded(resolve(config.store))  # every call checked against the protocol, timed
        spec = builtin_spec(config.store)
        if self.workload.windowed or (spec is not None and spec.window):
            from eos_harness.stores.registry import task_store_factory

            self.factory = guarded(task_store_factory(config.store, self.workload))  # a window store, as key-value
        self.broker: Broker | None = None
        self.producer: TransactionalProducer | None = None
        self.store: StateStore | None = None
        self.position = 0  # next input offset to process
        self.committed_position = 0
        self.store_committed_position = 0
        self.changelogs = Changelogs(config.changelog_tps)
        self.changelog_positions = dict.fromkeys(self.changelogs.tps, 0)
        self.duties = StoreDuties(config, emit)  # offsets cache, metrics, names, processor commits

    # -- lifecycle ------------------------------------------------------------------------
    def run(self) -> None:
        self.start()
        try:
            self.process_all()
            self.close()
        except ProducerFenced as exc:
            self.emit({"type": "fenced", "error": str(exc), "position": self.position})
            self._abandon()
        except TransactionAborted as exc:
            # The broker aborted the open transaction (a broker fault, a timeout): as Kafka Streams
            # does, close dirty and leave; the next instance recovers from the last commit.
            self.emit({"type": "aborted", "error": str(exc), "position": self.position})
            self._abandon()

    def start(self) -> None:
        config = self.config
        self.broker = connect(config.broker)
        self.producer = self.broker.producer(config.transactional_id)
        self.producer.init_transactions()
        committed = self.broker.committed_offsets(config.group_id, [config.input_tp]).get(config.input_tp)
        self.position = self.committed_position = committed or 0
        self.duties.on_start(self.broker, self.factory)
        self.recover()
        self.producer.begin_transaction()

    def _open_store(self) -> StateStore:
        config = self.config
        config.store_dir.mkdir(parents=True, exist_ok=True)
        context = StoreContext(
            directory=config.store_dir,
            application_id=config.application_id,
            task_id=config.task_id,
            store_name=config.store_name,
            changelog=config.changelog_tp,
            upgrade_from=config.upgrade_from,
            changelogs=self.changelogs.tps,
        )
        store = open_or_wipe(self.factory, context, self.emit)
        self.duties.opened(store, context)
        return store

    def _stored_offsets(self, store: StateStore) -> dict[TopicPartition, int | None]:
        checkpoint = {} if store.manages_offsets() else read_checkpoint(self.config.checkpoint_path)
        return self.changelogs.stored(store, checkpoint)

    def recover(self) -> None:
        """KIP-844 step 1: recover the store, then replay the committed changelog tail."""
        config, broker = self.config, self.broker
        assert broker is not None
        started = time.perf_counter()
        store = self._open_store()
        tps = self.changelogs.tps
        wiped = False
        starts = self._stored_offsets(store)
        trusted = store.recover(starts.get(config.changelog_tp))
        if store.persistent() and not trusted and None in starts.values() and config.legacy_wipe:
            # EOS and no checkpoint (for some partition): the contents may hold uncommitted writes. Wipe, restore all.
            store.close()
            shutil.rmtree(config.store_dir, ignore_errors=True)
            store = self._open_store()
            wiped = True
        if wiped or not store.persistent():
            starts = dict.fromkeys(tps, 0)
        starts = {tp: start or 0 for tp, start in starts.items()}
        self.store = store
        # What recover() left, before any replay: a transactional store's data must be exactly the
        # state its committed offset names (KIP-892: data and offsets are committed together).
        audit = config.report_contents and trusted and store.persistent() and store.transactional()
        recovered = self._stored_offsets(store) if audit else {}
        pre_replay = [[encode(k), encode(v)] for k, v in store.all()] if audit else None
        tails = {tp: broker.read_committed(tp, starts[tp]) for tp in tps}
        # the next offset to read (harness/store.py), each partition's
        ends = {tp: tail[-1].offset + 1 if tail else starts[tp] for tp, tail in tails.items()}
        records = [record for tp in tps for record in tails[tp]]  # a key's writes stay in order
        own_restore = offers_restore(store) and not self.changelogs.several  # restore() takes one partition
        if own_restore:
            # The store's own restore path gets the whole tail and commits it with ``end`` itself.
            if records:
                crash_point(P_MID_REPLAY)
        else:
            half = max(1, len(records) // 2)
            for i, record in enumerate(records):
                store.put(record.key, record.value)
                if i + 1 == half:
                    crash_point(P_MID_REPLAY)
        if store.persistent() and not store.transactional():
            # Under EOS the legacy checkpoint is removed while the task runs (Kafka's rule): a crash
            # then leaves no checkpoint, and the next start wipes the store.
            config.checkpoint_path.unlink(missing_ok=True)
        if own_restore:
            self._commit_store(ends, in_restore=True,
                               records=[ChangelogRecord(r.offset, r.key, r.value) for r in records])
        else:
            self._commit_store(ends, in_restore=True)
        self.changelog_positions = ends
        self.duties.recovered()
        self.emit(
            {
                "type": "recover",
                **self.changelogs.fields("store_offset", starts, "store_offsets"),
                "recover_result": trusted,
                "wiped": wiped,
                "replayed_records": len(records),
                "restored_by": "store.restore" if own_restore else "put and commit",
                "changelog_length": sum(broker.end_offset(tp) for tp in tps),
                "input_position": self.committed_position,
                "seconds": round(time.perf_counter() - started, 6),
                "transactional": store.transactional(),
                "persistent": store.persistent(),
                "manages_offsets": store.manages_offsets(),
                # a store whose commits are durable only once flushed (Capabilities.commit_durable) says so
                **({} if capabilities_of(store).commit_durable else {"commit_durable": False}),
                "contents": [[encode(k), encode(v)] for k, v in store.all()] if config.report_contents else None,
                **self.changelogs.fields("recovered_offset", recovered, "recovered_offsets"),
                "pre_replay_contents": pre_replay,
            }
        )

    def _commit_store(self, changelog_ends: dict[TopicPartition, int], in_restore: bool = False,
                      records: list[ChangelogRecord] | None = None) -> None:
        """Commit the store at ``changelog_ends`` (every partition's); with ``records`` (one partition),
        through the store's own ``restore(records, changelog_end)`` (which commits them itself)."""
        store = self.store
        assert store is not None
        positions = self.changelogs.positions(changelog_ends)
        self.emit({"type": "store_commit_begin", "input_position": self.committed_position, **positions})
        if records is not None:
            store.restore(records, changelog_ends[self.config.changelog_tp])
        else:
            self.duties.commit(store, dict(changelog_ends))  # measured: the commit metrics
        self.store_committed_position = self.committed_position
        self.emit({"type": "store_commit", "input_position": self.committed_position, **positions, "restore": in_restore})

    def _write_checkpoint(self, on_close: bool = False) -> None:
        store = self.store
        assert store is not None
        if not store.persistent():
            return
        legacy = not store.transactional()
        if legacy and not on_close:
            return  # under EOS a legacy store is checkpointed only on a clean close
        if store.manages_offsets() and not on_close:
            return  # KIP-892: offsets live in the store; .checkpoint is rewritten on close
        if on_close:
            self.duties.write_closing_checkpoint(store, self.changelog_positions)
            return
        write_checkpoint(self.config.checkpoint_path, self.changelog_positions)

    def process_all(self) -> None:
        config, broker, producer, store = self.config, self.broker, self.producer, self.store
        assert broker is not None and producer is not None and store is not None
        writer = _LoggingWriter(store, producer, self.changelogs)
        records = broker.read_committed(config.input_tp, self.position)
        uncommitted = 0
        for record in records:
            key, value = record.key or b"", record.value or b""
            effects = self.workload.process(key, value, self.duties.processor_view(store))
            writer.write(effects.writes)
            for out_key, out_value in effects.outputs:
                producer.send(config.output_topic, config.partition, out_key, out_value)
            self.position = record.offset + 1
            uncommitted += 1
            if config.read_every and uncommitted % config.read_every == 0:
                probe = effects.writes[0][0]
                self.emit(
                    {
                        "type": "read",
                        "index": record.offset,
                        "key": encode(probe),
                        "own": encode(store.get(probe)),
                        "committed": encode(store.read_committed().get(probe)),
                        "store_committed_position": self.store_committed_position,
                    }
                )
            crash_point(P_MID_BATCH)
            if self.duties.commit_requested(self.position) or uncommitted >= config.commit_interval:
                self.commit()
                uncommitted = 0

    def commit(self, begin_next: bool = True) -> None:
        """KIP-844 steps 3, 4a, 4b."""
        config, producer = self.config, self.producer
        assert producer is not None
        crash_point(P_BEFORE_EOS)
        producer.send_offsets_to_transaction({config.input_tp: self.position}, config.group_id)
        positions = producer.commit_transaction()
        self.committed_position = self.position
        self.changelog_positions = {tp: positions.get(tp, old) for tp, old in self.changelog_positions.items()}
        self.emit({"type": "commit", "input_position": self.position, **self.changelogs.positions(self.changelog_positions)})
        crash_point(P_AFTER_EOS)
        self._commit_store(self.changelog_positions)
        crash_point(P_AFTER_STORE)
        self._write_checkpoint()
        crash_point(P_AFTER_CHECKPOINT)
        if begin_next:
            producer.begin_transaction()

    def close(self) -> None:
        """KIP-844 step 5: final commit, checkpoint, release."""
        producer, store = self.producer, self.store
        assert producer is not None and store is not None
        if self.position != self.committed_position:
            self.commit(begin_next=False)
        else:
            producer.abort_transaction()  # the open transaction is empty
        crash_point(P_CLOSE_MID)
        self._write_checkpoint(on_close=True)
        store.close()
        self.duties.closed()
        producer.close()
        self.emit({"type": "done", "input_position": self.committed_position})

    def _abandon(self) -> None:
        self.duties.report_metrics()
        for closer in (getattr(self.store, "close", None), getattr(self.producer, "close", None)):
            try:
                if closer is not None:
                    closer()
            except Exception:  # noqa: BLE001 - a fenced zombie must release what it can and stop
                pass
