"""Kafka Streams' own key-value stores as harness stores: each call goes to the store's JVM.

:class:`KafkaStreamsStore` speaks the harness's store protocol (:mod:`eos_harness.store`) and runs, as any
store does, in the store's process (a child of the store server, or a task's process). At ``init`` that
process uses the JVM the store server lent it (:mod:`eos_harness.kafka_streams.pool`: the server kills
that JVM when the store's process dies), or else starts its own (``eosharness.StoreServer``, built on
first use: :mod:`eos_harness.kafka_streams.build`) as its child, in its process group, with the
parent-death signal set, so that a SIGKILL of the store's process kills it too; either way a JVM whose
pipe closes halts at once, its store not closed, as a crash leaves it. Every call becomes one JSON line
to the JVM and one back.

Kafka's answers are used as they are: a value, an iterator's pairs, ``committedOffset``, an exception (a
``store_raised`` finding, with Kafka's stack trace). Its read-committed view is Kafka's own
``readOnly(IsolationLevel.READ_COMMITTED)`` (KIP-892, 4.4.0) where the store is transactional.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping

from eos_harness.faults import points
from eos_harness.store import (
    Capabilities,
    CommitFromProcessorError,
    IncompatibleStoreDirectory,
    StoreContext,
    StoreError,
    TopicPartition,
)

__all__ = ["KafkaStoreError", "KafkaStreamsStore", "lend"]

_lent: tuple[int, int] | None = None  # (to the JVM, from the JVM): the pipes of a JVM the store server lent


def lend(to_jvm: int, from_jvm: int) -> None:
    """In a store process: the next store opened uses the JVM on these pipes (lent by the store server)."""
    global _lent
    _lent = (to_jvm, from_jvm)


class KafkaStoreError(StoreError):
    """Kafka's store raised; the message is the Java exception's class, message and stack trace."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


class KafkaStreamsStore:
    """One of Kafka Streams ``version``'s key-value stores: ``kind`` "rocksdb"
    (``Stores.persistentKeyValueStore``) or "memory" (``Stores.inMemoryKeyValueStore``), built with
    ``Stores.keyValueStoreBuilder`` (change logging on, caching off) under ``enable.transactional.statestores``
    = ``transactional`` (4.4.0; 4.3.1 has no such setting)."""

    def __init__(self, version: str, kind: str, transactional: bool, name: str = "store", mutant: str = "",
                 supplier: str = "", classpath: str = "") -> None:
        self.version, self.kind, self._transactional = version, kind, transactional
        # kind "user": a user's own supplier or builder class on classpath (eos_harness.kafka_streams.user); what
        # it is (persistent, managing offsets) is its answer at init
        self.supplier, self.classpath = supplier, classpath
        self._opened: dict = {}
        self.mutant = mutant  # a mutant of Kafka's code (kafka_streams.mutant_rules): its rules act in this store
        self.name = name
        self._jvm = False  # open: talking to a JVM
        self._own = None  # the JVM this store started itself (none when the store server lent one)
        self._context: StoreContext | None = None

    # -- what it is ---------------------------------------------------------------------------------
    def persistent(self) -> bool:
        if self.kind == "user":
            return bool(self._opened.get("persistent"))
        return self.kind == "rocksdb"

    def transactional(self) -> bool:
        return self._transactional

    def manages_offsets(self) -> bool:
        if self.kind == "user":
            return bool(self._opened.get("manages_offsets"))
        return self.kind == "rocksdb"  # KIP-1035 (4.3 on): the RocksDB store keeps its changelog offsets

    def capabilities(self) -> Capabilities:
        # The store alone, opened with a processor context: importing a legacy .checkpoint and writing it
        # back for an older version is the task's state manager's work in Kafka, not the store's. Its
        # RocksDB writes go with the write-ahead log off (RocksDBStore: wOptions.setDisableWAL(true)): a
        # commit is on disk at the next flush (a full memtable, a clean close), and Kafka restores the rest
        # from the changelog (Capabilities.commit_durable).
        return Capabilities(legacy_offsets_import=False, legacy_downgrade=False,
                            commit_durable=self.kind == "memory")  # a user's store may write as Kafka's RocksDB

    @property
    def metrics_scope(self) -> str:
        return "rocksdb" if self.kind == "rocksdb" else "in-memory"

    # -- the JVM ------------------------------------------------------------------------------------
    def _start(self) -> None:
        global _lent
        if _lent is not None:
            (to_jvm, from_jvm), _lent = _lent, None
            self._own = None
        else:
            from eos_harness.kafka_streams.build import BuildError
            from eos_harness.kafka_streams.pool import Jvm, JvmStartError

            try:
                self._own = Jvm(self.version, _command(self.version, verify=self.kind == "user", agent=bool(self.mutant)))
                self._own.wait_ready()
            except (BuildError, JvmStartError) as exc:
                raise StoreError(str(exc)) from None
            to_jvm, from_jvm = self._own.pipes()
        self._to = os.fdopen(to_jvm, "wb", buffering=0)
        self._from = os.fdopen(from_jvm, "rb")
        self._jvm = True

    def _call(self, op: str, **fields):
        if not self._jvm:
            raise StoreError(f"{op} on a store that is not open (call init first)")
        fields["op"] = op
        if points.active():  # the JVM asks about each point named (every one while traced)
            fields["points"] = True if points.tracing() else sorted(points.armed())
        try:
            self._to.write(json.dumps(fields).encode() + b"\n")
        except OSError as exc:
            raise StoreError(f"the store's JVM is gone ({exc})") from None
        while True:
            line = self._from.readline()
            if not line:
                raise StoreError(f"the store's JVM ended during {op}")
            answer = json.loads(line)
            if "point" in answer:  # a crash point inside Kafka's code: armed, it kills this process here
                points.crash_point(answer["point"])
                self._to.write(b'{"go":true}\n')
                continue
            if "raise" in answer:
                kind, message = answer["raise"]
                raise KafkaStoreError(f"{kind}: {message}")
            return answer["ok"]

    # -- the protocol -------------------------------------------------------------------------------
    def init(self, context: StoreContext) -> None:
        self._context = context
        if not self._jvm:
            self._start()
        try:
            opened = self._call("open", kind=self.kind, transactional=self._transactional,
                                state_dir=str(context.directory), name=context.store_name,
                                application_id=context.application_id, task_id=context.task_id,
                                **({"mutant": self.mutant} if self.mutant else {}),
                                **({"supplier": self.supplier, "classpath": self.classpath} if self.kind == "user" else {}))
        except KafkaStoreError as exc:
            if "TaskCorruptedException" in str(exc).partition(":")[0]:
                raise IncompatibleStoreDirectory(str(exc)) from None  # Kafka wipes it and restores it
            raise
        if self.kind == "user":
            self._opened = opened
        elif opened["persistent"] != self.persistent() or opened["manages_offsets"] != self.manages_offsets():
            raise StoreError(f"Kafka Streams {self.version}'s {self.kind} store says persistent={opened['persistent']}, "
                             f"managesOffsets={opened['manages_offsets']}; the harness expected "
                             f"{self.persistent()}, {self.manages_offsets()}")

    def get(self, key: bytes) -> bytes | None:
        return _unb64(self._call("get", key=_b64(key)))

    def put(self, key: bytes, value: bytes | None) -> None:
        self._call("put", key=_b64(key), value=None if value is None else _b64(value))

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._call("put_all", entries=[[_b64(k), None if v is None else _b64(v)] for k, v in entries])

    def delete(self, key: bytes) -> bytes | None:
        return _unb64(self._call("delete", key=_b64(key)))

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._pairs(self._call("range", lo=_b64(lo), hi=_b64(hi))))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._pairs(self._call("all")))

    @staticmethod
    def _pairs(listing: list) -> list[tuple[bytes, bytes]]:
        return [(base64.b64decode(k), base64.b64decode(v)) for k, v in listing]

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        if self._context is not None and self._context.via_processor:
            raise CommitFromProcessorError("a store reached through a processor's context is committed by its "
                                           "task: call context.commit() (KIP-892)")
        self._call("commit", offsets=[[tp.topic, tp.partition, offset] for tp, offset in changelog_offsets.items()])

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return self._call("committed_offset", topic=tp.topic, partition=tp.partition)

    def recover(self, changelog_offset: int | None) -> bool:
        # Kafka's transactional store reopens at a state that matches its own committed offset (KIP-892);
        # a non-transactional one may hold writes of no commit, and under exactly-once Kafka wipes it.
        del changelog_offset
        return self.persistent() and self._transactional

    def read_committed(self) -> _CommittedView:
        return _CommittedView(self)

    def flush(self) -> None:
        """Deprecated (KIP-892): a no-op."""

    def close(self) -> None:
        if not self._jvm:
            return
        try:
            self._call("close")
        finally:
            self._jvm = False
            for pipe in (self._to, self._from):
                with contextlib.suppress(OSError):
                    pipe.close()
            if self._own is not None:  # our own JVM halts at the end of its input
                self._own.process.stdin.close()
                self._own.process.wait()
                self._own.kill()


def _command(version: str, verify: bool = False, agent: bool = False) -> list[str]:
    from eos_harness.kafka_streams.build import ensure_built

    return ensure_built(version).command(verify=verify, agent=agent)


class _CommittedView:
    """Kafka's read-committed view of the store (the store itself where Kafka has none)."""

    def __init__(self, store: KafkaStreamsStore) -> None:
        self._store = store

    def get(self, key: bytes) -> bytes | None:
        return _unb64(self._store._call("rc_get", key=_b64(key)))

    def range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._store._pairs(self._store._call("rc_range", lo=_b64(lo), hi=_b64(hi))))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._store._pairs(self._store._call("rc_all")))
