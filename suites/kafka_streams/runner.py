"""The kafka-streams suite's runner: one scenario is a real Kafka Streams 4.4.0 application (a JVM per
instance, :mod:`eos_harness.kafka_streams.app`) on a real broker, fed a seeded workload with confluent-kafka,
killed (SIGKILL) at named steps of Streams' own commit (:mod:`eos_harness.kafka_streams.app_points`) and
restarted, then judged by :mod:`.checks`.

A scenario is a sequence of instances ("lives"). Each starts with the crash point it arms (the last with
none), reaches RUNNING (the restore listener says what it restored), processes every input produced so far
(read back by a read_committed consumer), is asked for its store (READ_COMMITTED), then is given its next
batch, produced over about a second so that several commits happen, until its point fires and the JVM is
SIGKILLed; an instance armed with a point of the clean close (phase ``close``) processes its batch, is checked,
then is closed cleanly and SIGKILLed where its close reaches the point. The last instance processes the last
batch, is queried and closed cleanly.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.broker.spec import parse
from eos_harness.cluster.local import version_of
from eos_harness.kafka_streams.app import VERSION, StreamsAppProcess, ensure_app_built
from eos_harness.kafka_streams.app_points import POINTS_BY_NAME, RANDOM_KILL, rules_text
from eos_harness.verdict import Violation, check_coverage, unfired_is_error, verdict_of
from eos_harness.verdict import error_result as verdict_error_result

from .checks import (
    CHECKS,
    CONDITIONS,
    WINDOW_RETENTION_MS,
    InputRecord,
    Restore,
    changelog_state,
    check_changelog,
    check_liveness,
    check_no_wipe,
    check_output,
    check_state,
    workload,
)
from .history import HARNESS, history_rows, jvm_rows, link_violations, write_history

__all__ = ["CHILDREN_LOG", "campaign_fields", "campaign_session", "error_result", "run_one"]

CHILDREN_LOG = "streams-apps.log"
SPARE_BATCHES = 2  # batches more, in one instance, while its armed point has not fired
STATE_SETTLE_S = 10.0  # the store's commit follows the transaction's: a query waits this long for the model


@dataclass
class Life:
    """What one instance did (the result's ``lives``)."""

    number: int
    point: str | None
    hit: int | None
    fired: bool = False
    running_s: float | None = None  # from the JVM's start to RUNNING
    first_state_s: float | None = None  # from the JVM's start to its first state change (the JVM's start-up)
    caught_up_s: float | None = None  # from RUNNING to every input produced so far read in the output
    restores: list[dict] = field(default_factory=list)
    state_checked: bool = False
    # at its kill: whether a store partition ("sums-0", the join's table "rates-1") had its commit on disk
    durable: dict[str, bool] = field(default_factory=dict)
    uncaught: list[str] = field(default_factory=list)
    _inputs: list[tuple[float, int, int]] = field(default_factory=list)  # (when, first seq, last seq) given to it

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class OutputReader:
    """A read_committed consumer of the output topic from its start, read on demand."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka import TopicPartition
        from eos_harness.broker import kafka_client

        self.outputs: list[tuple[str, int, int]] = []
        self.seqs: set[int] = set()
        self._consumer = kafka_client.consumer(bootstrap, **{"isolation.level": "read_committed",
                                                             "auto.offset.reset": "earliest"})
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def read(self, timeout: float = 0.2) -> None:
        for msg in self._consumer.consume(500, timeout=timeout):
            if msg.error() is not None:
                continue
            seq, _, total = msg.value().decode().partition(",")
            self.outputs.append((msg.key().decode(), int(seq), int(total)))
            self.seqs.add(int(seq))

    def wait_covering(self, seqs: set[int], timeout: float, alive: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + timeout
        while not seqs <= self.seqs:
            if time.monotonic() > deadline or not alive():
                self.read(0.5)
                return seqs <= self.seqs
            self.read()
        return True

    def close(self) -> None:
        self._consumer.close()


class Producing:
    """A batch produced over about ``seconds`` in the background (several commits of the application)."""

    def __init__(self, producer, topic: str, batch: list[InputRecord], seconds: float = 1.0) -> None:
        self.table = topic[:-len("-in")] + "-table"  # the join's table topic (used only by records with an update)
        self._thread = threading.Thread(target=self._run, args=(producer, topic, batch, seconds), daemon=True)
        self.error: BaseException | None = None
        self._thread.start()

    def _run(self, producer, topic, batch, seconds) -> None:
        try:
            chunks = [batch[i:i + 10] for i in range(0, len(batch), 10)]
            for chunk in chunks:
                for r in chunk:
                    if r.update is not None:  # the join's table update, between the records before and after it:
                        # acknowledged after those before it and before those after it are sent (Streams waits to
                        # fetch data already on the broker, then goes in timestamp order; data not yet sent it
                        # does not wait for)
                        key, rate, partition = r.update
                        producer.flush(30)
                        producer.produce(self.table, key=key.encode(), value=str(rate).encode(),
                                         partition=partition, timestamp=r.ts - 1)
                        producer.flush(30)
                    producer.produce(topic, key=r.key.encode(), value=f"{r.seq},{r.delta}".encode(),
                                     partition=r.partition, timestamp=r.ts)
                producer.flush(30)
                time.sleep(seconds / max(len(chunks), 1))
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario
            self.error = exc

    def join(self) -> None:
        self._thread.join(60)
        if self.error is not None:
            raise RuntimeError(f"producing the input failed: {self.error}")


class BrokerFaults:
    """The scenario's broker faults (``--crash-at broker-kill@N``, :mod:`eos_harness.faults.kafka`): each started
    in the background, as the lifecycle suite starts its own, once the broker acknowledged the scenario's N-th
    input record (the rest of the instance's batch still to come), on the broker that coordinates the running
    instance's transactions (the transactional id of its first stream thread under exactly_once_v2:
    ``APP-PROCESSID-1``, from its thread's name), while the application goes on processing its input."""

    def __init__(self, cluster, faults: tuple[tuple[str, int], ...], topic: str) -> None:
        self.cluster = cluster
        self.pending = list(faults)
        self.done: list[dict] = []
        self.app: StreamsAppProcess | None = None  # the instance whose transactions the fault aims at
        self.topic = topic
        self._sent = 0
        self._unacknowledged = 0
        self._threads: list[threading.Thread] = []

    def wrap(self, producer) -> _CountingProducer:
        """``producer`` whose flushes count the input records acknowledged (and start the faults due)."""
        return _CountingProducer(producer, self)

    def transactional_id(self) -> str | None:
        app = self.app
        names = [e.words[0] for e in list(app.events) if e.kind == "THREAD" and e.words] if app is not None else []
        for name in names:
            client, _, index = name.rpartition("-StreamThread-")
            if client and index.isdigit():
                return f"{client}-{index}"
        return None

    def acknowledged(self) -> None:
        self._sent += self._unacknowledged
        self._unacknowledged = 0
        self._start_due(self._sent)

    def _start_due(self, inputs: int) -> None:
        from eos_harness.faults.kinds import run_broker_fault

        for fault in [f for f in self.pending if f[1] <= inputs]:
            self.pending.remove(fault)
            name, hit = fault
            transactional_id = self.transactional_id()

            def inject(name=name, hit=hit, transactional_id=transactional_id) -> None:
                try:
                    done = run_broker_fault(self.cluster, name, transactional_id)
                    self.done.append({**done, "at": f"{name}@{hit}", "after_inputs": inputs,
                                      "transactional_id": transactional_id})
                except Exception as exc:  # noqa: BLE001 - the scenario asked for was not run: an error
                    self.done.append({"fault": name, "at": f"{name}@{hit}", "error": repr(exc)})

            thread = threading.Thread(target=inject, name=f"broker-fault-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _CountingProducer:
    """A confluent-kafka producer that tells :class:`BrokerFaults` how many input records each flush acknowledged."""

    def __init__(self, producer, faults: BrokerFaults) -> None:
        self._producer = producer
        self._faults = faults

    def produce(self, topic: str, *args, **kwargs) -> None:
        self._producer.produce(topic, *args, **kwargs)
        if topic == self._faults.topic:
            self._faults._unacknowledged += 1

    def flush(self, *args) -> int:
        left = self._producer.flush(*args)
        if left == 0:
            self._faults.acknowledged()
        return left

    def __getattr__(self, name: str):
        return getattr(self._producer, name)


def _durable(state: Path, app_id: str, partitions: int, store: str = "sums") -> dict[int, bool]:
    """Per task (input partition): whether its RocksDB store ``store`` ("sums", or the join's table "rates") has
    its committed offset on disk: a table file holding the key of its changelog partition, which only the store's
    offsets column family has (KIP-892: written with the commit, uncompressed). A table file of the data
    alone (a memtable flushed during a restoration or between commits, with no commit since the last flush)
    is no commit on disk: the store has no committed offset and Streams restores it from the changelog's start."""
    durable = {}
    for p in range(partitions):
        folder = state / app_id / f"0_{p}" / "rocksdb" / store  # a window store: a folder per segment in it
        key = f"{app_id}-{store}-changelog-{p}".encode()
        durable[p] = any(key in _read(f) for f in sorted(folder.rglob("*.sst")))
    return durable


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # deleted by a compaction of the killed instance's last moments
        return b""


def _changelogged(config) -> tuple[str, ...]:
    """The application's changelogged stores: the aggregate's "sums", and the stream-table join's table "rates"
    (a GlobalKTable's store has no changelog: the global thread restores it from its own topic)."""
    return ("sums", "rates") if config.join and not config.global_table else ("sums",)


def _durable_stores(state: Path, app_id: str, partitions: int, stores: tuple[str, ...]) -> dict[str, bool]:
    """:func:`_durable` of each of ``stores``, as ``"STORE-PARTITION"`` -> on disk."""
    return {f"{store}-{p}": on_disk for store in stores
            for p, on_disk in _durable(state, app_id, partitions, store).items()}


def _restores(app: StreamsAppProcess, life: int, durable: Mapping[str, bool],
              stores: tuple[str, ...] = ("sums",)) -> list[Restore]:
    """The restorations of ``stores`` the instance's restore listener said (the global table's aside)."""
    started = {}
    done = {}
    for e in list(app.events):
        if not e.words or e.words[0] not in stores:
            continue
        where = (e.words[0], int(e.words[1]))
        if e.kind == "RESTORE_START":
            started[where] = (int(e.words[2]), int(e.words[3]))
        elif e.kind == "RESTORE_END":
            done[where] = (int(e.words[2]), int(e.words[3]))
    return [Restore(life, p, s, end, *(done.get((store, p)) or (None, None)),
                    durable=bool(durable.get(f"{store}-{p}")), store=store)
            for (store, p), (s, end) in sorted(started.items())]


CHANGELOG_SETTLE_S = 20.0  # a killed instance's transaction aborted by its transaction.timeout.ms (10 s) at the latest


def _read_changelogs(bootstrap: str, app_id: str, stores: tuple[str, ...], partitions: int,
                     window_ms: int) -> dict[str, int | str] | None:
    """Each store's changelog topic (``APP-STORE-changelog``) read committed from its start to its end, the last
    value of each key (:func:`.checks.changelog_state`, the table's keys as ``rate:KEY``), all stores together;
    None if a transaction still kept the stable offset below the end after :data:`CHANGELOG_SETTLE_S`."""
    from confluent_kafka import KafkaError, TopicPartition
    from eos_harness.broker import kafka_client

    out: dict[str, int | str] = {}
    for store in stores:
        topic = f"{app_id}-{store}-changelog"
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        plain = kafka_client.consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
        committed = kafka_client.consumer(bootstrap, **{"isolation.level": "read_committed",
                                                        "auto.offset.reset": "earliest", "enable.partition.eof": True})
        try:
            deadline = time.monotonic() + CHANGELOG_SETTLE_S
            while True:
                high = {tp.partition: plain.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
                stable = {tp.partition: committed.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
                if all(stable[p] >= high[p] for p in high):
                    break
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.2)
            committed.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            last: dict[bytes, bytes | None] = {}
            at_end = {p for p, end in high.items() if end == 0}
            deadline = time.monotonic() + 30
            while len(at_end) < partitions:
                if time.monotonic() > deadline:
                    return None
                for msg in committed.consume(500, timeout=0.2):
                    if msg.error() is not None:
                        if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= high[msg.partition()]:
                            at_end.add(msg.partition())
                        continue
                    last[msg.key()] = msg.value()
        finally:
            plain.close()
            committed.close()
        out.update(changelog_state(last, window=bool(window_ms) and store == "sums",
                                   prefix="rate:" if store == "rates" else ""))
    return out


def _write_history(directory: Path, started: float, jvms, marks: list[dict], lives: list[Life],
                   violations: list[dict]) -> str | None:
    """The scenario's history (:mod:`.history`) written to ``directory/history.jsonl``, its violations marked
    on their events; its path (None if it could not be written)."""
    rows = [{**mark, "at": round(mark["at"] - started, 3)} for mark in marks]
    for app, lane, life in jvms:
        if app.started_at:
            rows.append({"type": "start", "at": round(app.started_at - started, 3), "lane": lane,
                         **({"instance": life} if life is not None else {}), "line": "JVM started"})
            rows += jvm_rows(list(app.events), app.started_at - started, lane, life)
    for life in lives:
        rows += [{"type": "input", "at": round(at - started, 3), "lane": HARNESS, "batch": f"{first}-{last}",
                  "line": f"input {first} to {last} produced (for instance {life.number})"}
                 for at, first, last in life._inputs]
    rows = history_rows(rows)
    link_violations(violations, rows)
    path = directory / "history.jsonl"
    try:
        write_history(path, rows)
    except OSError:
        return None
    return str(path)


def run_scenario(scenario, bootstrap: str, directory: Path) -> dict:
    """One scenario (:class:`.plan.Scenario`) on the broker at ``bootstrap``; its complete result."""
    from eos_harness.broker import kafka_client

    from .plan import expected, settings_of

    started = time.monotonic()
    config = settings_of(scenario.system)
    cluster = None
    if scenario.broker_faults:
        from eos_harness.cluster import cluster_for

        cluster = cluster_for(f"kafka://{bootstrap}")
        if cluster is None:
            raise ValueError(f"the broker faults {', '.join(f'{f}@{n}' for f, n in scenario.broker_faults)} kill or "
                             "stop a broker: they need a cluster this process started (--broker kafka-local or "
                             "kafka-quorum)")
    build = ensure_app_built(VERSION)
    app_id = f"ks-{scenario.seed}-{uuid.uuid4().hex[:6]}"
    topics = {f"{app_id}-in": scenario.partitions, f"{app_id}-out": scenario.partitions,
              **({f"{app_id}-{'global' if config.global_table else 'table'}": scenario.partitions}
                 if config.join else {})}
    admin = kafka_client.admin_client(bootstrap)
    t0 = time.monotonic()
    kafka_client.create_topics(admin, topics)
    timings = {"topic_creation_s": round(time.monotonic() - t0, 3)}
    batches = workload(scenario.seed, len(scenario.kills) + 1 + SPARE_BATCHES, scenario.records, scenario.keys,
                       scenario.partitions, int(time.time() // 60) * 60_000,
                       table=config.join and not config.global_table, global_table=config.global_table)
    spare = iter(batches)
    produced: list[InputRecord] = []
    state = directory / "state"
    directory.mkdir(parents=True, exist_ok=True)
    producer = kafka_client.producer(bootstrap, **{"linger.ms": 1, "enable.idempotence": True, "acks": "all"})
    reader = OutputReader(bootstrap, f"{app_id}-out", scenario.partitions)
    lives: list[Life] = []
    violations = []
    restores: list[Restore] = []
    exercised: dict[str, int] = {}
    not_fired: list[str] = []
    durable: dict[str, bool] = {}
    stores = _changelogged(config)
    changelog_note = "not read: the last instance did not process all its input"
    jvms: list[tuple[StreamsAppProcess, str, int | None]] = []  # each instance's JVM, its lane, its life
    marks: list[dict] = []  # what the harness did, for the history (``at``: monotonic until written)
    schedule = [*scenario.kills, (None, None)]
    base = {"bootstrap": bootstrap, "app": app_id, "input": f"{app_id}-in", "output": f"{app_id}-out",
            "state": state, "guarantee": config.guarantee, "tx": str(config.transactional).lower(),
            "store": config.store, "memtable_kb": scenario.memtable_kb if config.store == "rocksdb" else 0,
            "pad": scenario.pad, "threads": scenario.threads,
            **({"window_ms": config.window_ms, "retention_ms": WINDOW_RETENTION_MS} if config.window_ms else {}),
            **({"upgrade_from": config.upgrade_from} if config.upgrade_from else {}),
            **({("global" if config.global_table else "table"): f"{app_id}-{'global' if config.global_table else 'table'}"}
               if config.join else {})}
    partner = None  # with --instances 2: instance 1, never killed, beside each life of instance 0
    faults = BrokerFaults(cluster, scenario.broker_faults, f"{app_id}-in") if scenario.broker_faults else None
    if faults is not None:
        producer = faults.wrap(producer)
    try:
        if scenario.instances == 2:
            partner_rules = None
            if config.mutant_rules:
                partner_rules = directory / "rules-partner.btm"
                partner_rules.write_text(rules_text(None, config.mutant))
            partner = StreamsAppProcess(build, {**base, "instance": 1, "state": directory / "state-partner"},
                                        directory / CHILDREN_LOG, partner_rules).start()
            jvms.append((partner, "second instance", None))
            exercised["liveness"] = 1
        if config.zombie:
            schedule = []  # its own course (:func:`_zombie`)
            _zombie(build, base, directory, scenario, reader, produced, spare, producer, lives, violations, exercised,
                    jvms, marks)
        for number, (point, hit) in enumerate(schedule):
            life = Life(number, point, hit)
            lives.append(life)
            exercised["liveness"] = exercised.get("liveness", 0) + 1
            rules = None
            step = point if point in POINTS_BY_NAME else None  # a Byteman point (not a kill at a random time)
            if step is not None or config.mutant_rules:
                rules = directory / f"rules-{number}.btm"
                rules.write_text(rules_text(step, config.mutant))
            # a restoration's point armed from the start; a commit's when the instance is given its input; a
            # close's when it is closed
            properties = ({"eosharness.arm": f"{step}@{hit}"} if step and POINTS_BY_NAME[step].phase in ("start", "restore")
                          else {})
            with StreamsAppProcess(build, base, directory / CHILDREN_LOG, rules, properties) as app:
                jvms.append((app, f"instance {number}", number))
                if faults is not None:
                    faults.app = app
                peers = (partner,) if partner is not None else ()
                outcome = _live(app, life, scenario, reader, produced, spare, producer, peers)
                life.uncaught = [e.text for e in app.events if e.kind == "UNCAUGHT"]
                if partner is not None:
                    life.uncaught += [f"instance 1: {e.text}" for e in partner.events if e.kind == "UNCAUGHT"
                                      and f"instance 1: {e.text}" not in [u for past in lives for u in past.uncaught]]
                first = next((e for e in app.events if e.kind == "STATE"), None)
                life.first_state_s = first.at if first else None
                if life.fired:
                    life.durable = durable_now = _durable_stores(state, app_id, scenario.partitions, stores)
                    app.kill()
                    marks.append({"type": "kill", "at": time.monotonic(), "lane": f"instance {number}",
                                  "instance": number, "point": f"{point}@{hit}", "line": "SIGKILL"})
                else:
                    durable_now = {}
                these = _restores(app, number, durable, stores)
                restores.extend(these)
                life.restores = [r.__dict__ for r in these]
                durable = durable_now
                if outcome == "stuck":
                    violations.extend(check_liveness(number, life.running_s, life.caught_up_s, scenario.liveness_s,
                                                     "; ".join(life.uncaught) or None))
                    break
                if point is not None and not life.fired:
                    not_fired.append(f"{point}@{hit}")
                if outcome == "last":
                    marks.append({"type": "stop", "at": time.monotonic(), "lane": f"instance {number}",
                                  "instance": number, "line": "a clean close (KafkaStreams.close)"})
                    app.stop()
                    if partner is not None:
                        partner.stop()
        if faults is not None:
            faults.join()  # the broker back before the last reads
        complete = bool(lives) and lives[-1].caught_up_s is not None and not lives[-1].fired
        reader.read(0.5)
        if complete and len(lives) > 1:
            exercised["exactly_once_output"] = 1
        if reader.outputs:
            exercised["output_values"] = len(reader.outputs)
        violations.extend(check_output(produced, reader.outputs, complete, config.window_ms, config.join))
        for life in lives:
            violations.extend(life.__dict__.pop("_state_violations", []))
        exercised["state"] = sum(1 for life in lives if life.state_checked and life.number > 0)
        queried = lives[-1].__dict__.get("_store") if lives else None
        for life in lives:
            life.__dict__.pop("_store", None)
        if complete:  # every store's changelog, read committed, against the model and the last answer
            changelog = _read_changelogs(bootstrap, app_id, stores, scenario.partitions, config.window_ms)
            if changelog is None:
                changelog_note = "not read: a transaction of the changelogs still open (not judged)"
            else:
                violations.extend(check_changelog(produced, changelog, queried, config.window_ms,
                                                  WINDOW_RETENTION_MS, config.join, "rates" in stores))
                exercised["state"] += 1
                changelog_note = f"{len(changelog)} keys read committed from {', '.join(stores)}' changelogs"
            marks.append({"type": "changelog", "at": time.monotonic(), "lane": HARNESS, "line": changelog_note})
        found, met = check_no_wipe(restores, config.store == "rocksdb" and config.transactional
                                   and config.guarantee == "exactly_once_v2")
        violations.extend(found)
        exercised["no_wipe"] = met
    finally:
        if partner is not None:
            partner.kill()
        if faults is not None:
            faults.join()  # never a broker left down or stopped
        reader.close()
        producer.flush(10)
        for folder in (state, directory / "state-zombie", directory / "state-partner"):
            shutil.rmtree(folder, ignore_errors=True)
    not_applicable = {} if config.store == "rocksdb" and config.transactional else {
        "no_wipe": "KIP-892 promises no wipe only for transactional persistent stores; reported, not judged"}
    if not config.zombie:
        not_applicable["zombie_fenced"] = "no instance of this scenario is frozen and resumed"
    coverage = check_coverage(CHECKS, CONDITIONS, exercised, not_applicable)
    crashes = [r for r in restores if r.life > 0]
    shown = [v.to_json() for v in violations[:200]]
    history = _write_history(directory, started, jvms, marks, lives, shown)
    must_fail, caught_by = expected(scenario.system)
    result = {
        "suite": "kafka-streams", "system": scenario.system, "expected": "fail" if must_fail else "pass",
        "seed": scenario.seed, "broker": scenario.broker, "kafka_version": version_of(scenario.opened or scenario.broker),
        "streams_version": VERSION, "application_id": app_id, "configuration": config.to_json(),
        "instances": 2 if config.zombie else scenario.instances, "threads": scenario.threads,
        "kills": [f"{p}@{h}" for p, h in scenario.kills], "records_produced": len(produced),
        **({"table_updates": sum(1 for r in produced if r.update) + sum(len(r.global_updates) for r in produced)}
           if config.join else {}),
        "outputs_read": len(reader.outputs), "verdict": verdict_of(violations),
        "violations": shown, "coverage": coverage, "history": history,
        "exercised": sorted(c for c, n in coverage["exercised"].items() if n),
        "restored_per_crash": [r.restored for r in crashes], "restore_ms": [r.ms for r in crashes],
        "lives": [life.to_json() for life in lives], "changelog": changelog_note,
        "not_fired": not_fired + ([f"{f}@{n}" for f, n in faults.pending] if faults is not None else []),
        **({"broker_faults": faults.done} if faults is not None else {}),
        "zombie_outcome": next((line for life in lives for line in life.uncaught if line.startswith("ZOMBIE_")), None),
        "timings": {**timings, "jvm_start_s": [life.first_state_s for life in lives],
                    "to_running_s": [life.running_s for life in lives],
                    "caught_up_s": [life.caught_up_s for life in lives]},
        "repro": scenario.repro(), "seconds": round(time.monotonic() - started, 3),
    }
    failed = [d for d in (faults.done if faults is not None else []) if "error" in d]
    if failed and result["verdict"] == "pass":  # what was asked for was not done: never a pass
        result = {**result, "verdict": "error",
                  "error": "; ".join(f"{d['at']}: the broker fault failed: {d['error']}" for d in failed)}
    return unfired_is_error(result)


ZOMBIE_FROZEN_S = 13.0  # Kafka Streams' transaction.timeout.ms under exactly-once (10 s), and the broker's abort sweep
ZOMBIE_ANSWER_S = 30.0


def _zombie(build, base: dict, directory: Path, scenario, reader: OutputReader, produced: list[InputRecord],
            spare: Iterator[list[InputRecord]], producer, lives: list[Life], violations: list,
            exercised: dict[str, int], jvms: list, marks: list[dict]) -> None:
    """Instance 0 frozen (SIGSTOP) inside its commit, its transaction open; instance 1 (another state
    directory) takes its tasks and processes the input; once instance 0 was frozen past transaction.timeout.ms
    it is resumed and its commit goes on: it must be fenced. Then both process a last batch, and the store
    (both instances' partitions) must equal the model."""
    point, hit = scenario.kills[0]
    rules = directory / "rules-0.btm"
    rules.write_text(rules_text(point, None, zombie=True))
    zombie_life, taker_life = Life(0, point, hit), Life(1, None, None)
    lives.extend([zombie_life, taker_life])
    exercised["liveness"] = 2
    log = directory / CHILDREN_LOG
    zombie = StreamsAppProcess(build, {**base, "instance": 0, "state": directory / "state-zombie"}, log, rules)
    taker = StreamsAppProcess(build, {**base, "instance": 1}, log, None)
    jvms += [(zombie, "instance 0", 0), (taker, "instance 1", 1)]
    try:
        _zombie_course(zombie, taker, zombie_life, taker_life, scenario, reader, produced, spare, producer,
                       violations, exercised, base["input"], marks)
    finally:
        zombie.kill()
        taker.kill()
        zombie_life.uncaught = [e.text for e in zombie.events if e.kind in ("UNCAUGHT", "ZOMBIE_FENCED",
                                                                           "ZOMBIE_COMMITTED")]
        taker_life.uncaught = [e.text for e in taker.events if e.kind == "UNCAUGHT"]


def _zombie_course(zombie: StreamsAppProcess, taker: StreamsAppProcess, zombie_life: Life, taker_life: Life, scenario,
                   reader: OutputReader, produced: list[InputRecord], spare, producer, violations: list,
                   exercised: dict[str, int], topic: str, marks: list[dict]) -> None:
    zombie.start()
    outcome = _live(zombie, zombie_life, scenario, reader, produced, spare, producer)
    if outcome != "fired":
        if outcome == "stuck":
            violations.extend(check_liveness(0, zombie_life.running_s, zombie_life.caught_up_s, scenario.liveness_s))
        return
    zombie.freeze()
    frozen_at = time.monotonic()
    marks.append({"type": "frozen", "at": frozen_at, "lane": "instance 0", "instance": 0, "line": "SIGSTOP"})
    taker.start()
    running = taker.state_reached("RUNNING", scenario.liveness_s)
    taker_life.running_s = running.at if running else None
    if running is None or not _caught_up(taker, taker_life, scenario, reader, produced, time.monotonic()):
        violations.extend(check_liveness(1, taker_life.running_s, taker_life.caught_up_s, scenario.liveness_s))
        return
    time.sleep(max(0.0, ZOMBIE_FROZEN_S - (time.monotonic() - frozen_at)))
    zombie.resume()
    marks.append({"type": "resumed", "at": time.monotonic(), "lane": "instance 0", "instance": 0, "line": "SIGCONT"})
    zombie.release()
    said = zombie.wait_for(lambda evs: next((e for e in evs if e.kind.startswith("ZOMBIE_")), None), ZOMBIE_ANSWER_S)
    if said is not None:
        exercised["zombie_fenced"] = 1
        if said.kind == "ZOMBIE_COMMITTED":
            violations.append(Violation("zombie_fenced", "instance 0", "its commitTransaction fails (fenced)",
                                        f"it committed after {time.monotonic() - frozen_at:.1f} s frozen"))
    batch = next(spare, None)
    if batch is not None:
        Producing(producer, topic, batch).join()
        produced.extend(batch)
    if not reader.wait_covering({r.seq for r in produced}, scenario.liveness_s, taker.alive):
        violations.extend(check_liveness(1, taker_life.running_s, None, scenario.liveness_s))
        return
    taker_life.caught_up_s = round(time.monotonic() - frozen_at, 3)
    deadline = time.monotonic() + STATE_SETTLE_S
    while True:  # each instance answers for its own partitions: together, the model
        answers = [app.query() for app in (zombie, taker) if app.alive()]
        stores = [_parse_store(a.text) for a in answers if a is not None and a.kind == "STORE"]
        merged = {k: v for store in stores for k, v in store.items()}
        found = check_state(produced, merged, 1)
        if not found or time.monotonic() > deadline:
            taker_life.__dict__["_store"] = merged
            break
        time.sleep(0.3)
    taker_life.state_checked = True
    violations.extend(found)
    for app in (zombie, taker):
        app.stop()


def _live(app: StreamsAppProcess, life: Life, scenario, reader: OutputReader, produced: list[InputRecord],
          spare: Iterator[list[InputRecord]], producer, peers: tuple[StreamsAppProcess, ...] = ()) -> str:
    """One instance's life: ``fired`` (its point fired: it waits for its kill), ``next`` (its point never
    fired), ``last`` (the unarmed last one processed everything), ``stuck`` (liveness broken). ``peers``: the
    other instances of the application, running beside it (their stores answer for their tasks)."""
    bound = scenario.liveness_s

    def running_or_point(evs):
        return next((e for e in evs if e.kind == "POINT" or (e.kind == "STATE" and e.words[-1] in
                                                             ("RUNNING", "ERROR", "PENDING_ERROR"))), None)

    event = app.wait_for(running_or_point, bound)
    if event is not None and event.kind == "POINT":
        life.fired = True
        return "fired"
    if event is None or event.words[-1] != "RUNNING":
        return "stuck"
    life.running_s = event.at
    running_at = time.monotonic()
    if produced and not _caught_up(app, life, scenario, reader, produced, running_at, peers):
        return "stuck" if not app.point_fired() else _fired(life)
    if app.point_fired():
        return _fired(life)
    step = POINTS_BY_NAME.get(life.point or "")
    if step is not None and step.phase == "close":
        return _close(app, life, scenario, reader, produced, spare, producer, running_at, peers)
    if step is not None and step.phase == "commit" and not app.arm(f"{life.point}@{life.hit}"):
        return "stuck"
    for _ in range(1 + (SPARE_BATCHES if life.point else 0)):
        batch = next(spare, None)
        if batch is None:
            break
        if batch[0].global_updates:
            _update_global(app, producer, batch, produced, scenario)
        life._inputs.append((time.monotonic(), batch[0].seq, batch[-1].seq))
        sending = Producing(producer, f"{app.arguments['input']}", batch)
        produced.extend(batch)
        if life.point == RANDOM_KILL:  # killed wherever it is, the drawn milliseconds after its input began
            time.sleep(life.hit / 1000)
            sending.join()
            return _fired(life)
        fired = app.wait_for(lambda evs: next((e for e in evs if e.kind == "POINT"), None), 1.5)
        sending.join()
        if fired or app.point_fired():
            return _fired(life)
        if not _caught_up(app, life, scenario, reader, produced, running_at, peers):
            return _fired(life) if app.point_fired() else "stuck"
        if app.point_fired():
            return _fired(life)
        if life.point is None:
            return "last"
    return "next" if life.point else "last"


def _close(app: StreamsAppProcess, life: Life, scenario, reader: OutputReader, produced: list[InputRecord],
           spare: Iterator[list[InputRecord]], producer, running_at: float, peers: tuple[StreamsAppProcess, ...]) -> str:
    """A life killed inside its clean close: it is given its batch and processes it (the output and the store
    checked), then is closed (``KafkaStreams.close``) with its close point armed: ``fired`` once the point is
    reached (the JVM waits there for its kill), ``next`` if the close ended without reaching it."""
    batch = next(spare, None)
    if batch is not None:
        if batch[0].global_updates:
            _update_global(app, producer, batch, produced, scenario)
        life._inputs.append((time.monotonic(), batch[0].seq, batch[-1].seq))
        sending = Producing(producer, f"{app.arguments['input']}", batch)
        produced.extend(batch)
        sending.join()
        if not _caught_up(app, life, scenario, reader, produced, running_at, peers):
            return "stuck"
    return _fired(life) if app.close_at(f"{life.point}@{life.hit}") is not None else "next"


def _update_global(app: StreamsAppProcess, producer, batch: list[InputRecord], produced: list[InputRecord],
                   scenario) -> None:
    """The global table's updates of ``batch`` sent, then waited for in the instance's global store (its
    global thread is not synchronised with its tasks): the batch's records are all processed after them. A
    store that never shows them is found by the state check."""
    from .checks import joined

    for key, rate, partition in batch[0].global_updates:
        producer.produce(app.arguments["global"], key=key.encode(), value=str(rate).encode(), partition=partition,
                         timestamp=batch[0].ts - 1)
    producer.flush(30)
    want = {f"rate:{k}": v for k, v in joined([*produced, batch[0]])[1].items()}
    deadline = time.monotonic() + scenario.liveness_s
    while time.monotonic() < deadline and app.alive() and not app.point_fired():
        answer = app.query()
        if answer is None:
            return
        if answer.kind == "STORE" and all(_parse_store(answer.text).get(k) == v for k, v in want.items()):
            return
        time.sleep(0.1)


def _fired(life: Life) -> str:
    life.fired = True
    return "fired"


def _caught_up(app: StreamsAppProcess, life: Life, scenario, reader: OutputReader, produced: list[InputRecord],
               running_at: float, peers: tuple[StreamsAppProcess, ...] = ()) -> bool:
    """Wait until the output covers every input produced (liveness), then check the store (with ``peers``,
    every instance's, each answering for its own tasks) against the model."""
    if not reader.wait_covering({r.seq for r in produced}, scenario.liveness_s,
                                lambda: app.alive() and not app.point_fired()):
        return False
    life.caught_up_s = round(time.monotonic() - running_at, 3)
    deadline = time.monotonic() + STATE_SETTLE_S
    found = []
    while True:
        if app.point_fired():
            return True
        answer = app.query()
        if answer is None:
            return True  # frozen at its point (or gone): no answer to judge
        # each instance answers for its own tasks: together, the whole store
        answers = [answer, *(peer.query() if peer.alive() else None for peer in peers)]
        answer = next((a for a in answers if a is None or a.kind != "STORE"), answer)
        if answer is not None and answer.kind == "STORE":
            store = {k: v for a in answers for k, v in _parse_store(a.text).items()}
            config = _settings(scenario)
            found = check_state(produced, store, life.number, config.window_ms, WINDOW_RETENTION_MS, config.join)
            if not found or time.monotonic() > deadline:
                life.__dict__["_store"] = store  # its last answer: compared with the changelog at the end
                break
        elif time.monotonic() > deadline:
            found = []  # the store never answered: reported, not judged
            life.uncaught.append(answer.text if answer is not None else "instance 1 did not answer its query")
            return True
        time.sleep(0.3)
    life.state_checked = True
    life.__dict__["_state_violations"] = found
    return True


def _settings(scenario):
    from .plan import settings_of

    return settings_of(scenario.system)


def _parse_store(text: str) -> dict[str, int]:
    import json

    return {k: int(v) for k, v in json.loads(text[text.index("{"):]).items()}


def run_one(scenario, directory: Path | None = None) -> dict:
    """One scenario as a campaign's complete result (its state directory removed at its end)."""
    import tempfile

    if directory is None:
        with tempfile.TemporaryDirectory(prefix="eos-ks-app-") as tmp:
            return {**run_scenario(scenario, parse(scenario.opened or scenario.broker).bootstrap_servers, Path(tmp)),
                    "history": None}  # removed with its directory
    return run_scenario(scenario, parse(scenario.opened or scenario.broker).bootstrap_servers, Path(directory))


def error_result(scenario, exc: BaseException) -> dict:
    """The result of a scenario that could not be run to its end."""
    return {"suite": "kafka-streams", **verdict_error_result({"system": scenario.system}, scenario.seed, scenario.repro(),
                                                             exc), "broker": scenario.broker,
            "kafka_version": version_of(scenario.opened or scenario.broker), "streams_version": VERSION}


def campaign_fields(campaign: Mapping) -> dict:
    """What the campaign JSON says besides its tallies: transactional state stores on and off side by side
    (:func:`.compare.transactional_comparison`), per configuration."""
    from .compare import transactional_comparison

    return {"transactional_stores": transactional_comparison(campaign["scenarios"])}


@contextlib.contextmanager
def campaign_session(options: Mapping, say: Callable[[str], object] = lambda text: None) -> Iterator[dict]:
    """The campaign's broker, opened once for every scenario (``kafka-local`` started and always stopped), and
    the application built before the first scenario."""
    from eos_harness.broker.opening import open_broker

    ensure_app_built(VERSION)
    with open_broker(options["broker"], say=say) as opened:
        yield {**options, "opened": opened.spec.text}

