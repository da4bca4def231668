"""KIP-868's own test plan on a real KRaft quorum (3 dedicated controllers, N brokers, pinned jars).

Two phases, each on a fresh :class:`~eos_harness.cluster.quorum.KafkaQuorum`:

- ``failover``: topics of ``partitions`` partitions each are created continuously (confluent-kafka
  ``create_topics``, acknowledged ones recorded) while the active controller is SIGKILLed
  ``controller_kills`` times (and restarted after a new leader took over). Every broker is
  watched through its own listener the whole time.
- ``bootstrap``: a fresh quorum's controllers are started, and the first leader is SIGKILLed the
  moment its metadata log holds its first non-control batch (the bootstrap records); it is
  restarted, a broker joins and a topic is created to prove the quorum works.

Then each controller's ``__cluster_metadata-0`` segments are decoded with Kafka's own
``DumpLogSegments --cluster-metadata-decoder`` and :mod:`.checks` judges everything.

Brokers are asked directly: librdkafka sends a metadata request to whichever broker it likes,
so :func:`broker_topics` speaks the Metadata API (v1) to one broker's socket itself.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eos_harness.cluster.local import ClusterError, version_of
from eos_harness.cluster.quorum import KafkaQuorum, decode_metadata_logs
from eos_harness.commands import command_line
from eos_harness.process.wait import wait_until
from eos_harness.suites.kafka_metadata.checks import (
    CHECKS,
    LogEntry,
    Observation,
    check_logs,
    check_topics,
    parse_dump,
    transactions_of,
)
from eos_harness.verdict import ERROR, Violation, error_reason, unfired_is_error, verdict_of
from eos_harness.verdict import error_result as verdict_error_result

__all__ = ["Plan", "broker_topics", "error_result", "run", "run_one"]

# The longest any step waits for the quorum (nodes up, a leader elected, a restarted controller caught
# up): reached only when it is broken. These take 2 to 50 s on 2 cores with a load average of 30 (JVMs
# starting side by side); a bound near that made the CI-sized run fail on a busy machine.
QUORUM_WAIT = 300.0


@dataclass(frozen=True)
class Plan:
    """What one run does. ``topics``: topics created in the failover phase (each of ``partitions``);
    ``controller_kills``: SIGKILLs of the active controller while they are created;
    ``bootstrap_kills``: fresh quorums whose first leader is killed during the bootstrap
    (``bootstrap_topic``: then a broker joins and a topic is created on the recovered quorum)."""

    seed: int
    topics: int = 6
    partitions: int = 1000
    controller_kills: int = 1
    bootstrap_kills: int = 1
    brokers: int = 3
    creators: int = 2
    bootstrap_topic: bool = True  # after a bootstrap cut, a broker joins and one topic is created
    heap: str = "384m"

    def repro(self) -> str:
        """The command that runs this plan again (every option that decides the run)."""
        return command_line("kafka-metadata", "--seed", self.seed, "--topics", self.topics, "--partitions",
                            self.partitions, "--controller-kills", self.controller_kills, "--bootstrap-kills",
                            self.bootstrap_kills, "--brokers", self.brokers,
                            *(("--heap", self.heap) if self.heap != "384m" else ()))
    # Brokers catching up are waited for while they progress, up to settle_seconds (a busy 2-core machine:
    # over 300 s for 30,000 partitions); one that shows no progress for settle_stall_seconds has settled.
    settle_seconds: float = 1800.0
    settle_stall_seconds: float = 120.0


# -- one broker's own metadata, over the wire ----------------------------------------------------


def broker_topics(address: str, timeout: float = 10.0) -> dict[str, int]:
    """topic -> partition count, as the broker at ``address`` answers a Metadata (v1) request for
    every topic. Raises ``OSError`` when the broker does not answer."""
    host, _, port = address.rpartition(":")
    client = b"eos-harness-kip868"
    request = struct.pack(">hhih", 3, 1, 1, len(client)) + client + struct.pack(">i", -1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(sock, 4))[0]
        data = _read(sock, size)
    reader = _Reader(data)
    reader.int32()  # correlation id
    for _ in range(reader.int32()):  # brokers
        reader.int32()
        reader.string()
        reader.int32()
        reader.string()  # rack (nullable)
    reader.int32()  # controller id
    topics: dict[str, int] = {}
    for _ in range(reader.int32()):
        error = reader.int16()
        name = reader.string()
        reader.int8()  # is_internal
        partitions = reader.int32()
        for _ in range(partitions):
            reader.int16()
            reader.int32()
            reader.int32()
            reader.skip(4 * reader.int32())  # replicas
            reader.skip(4 * reader.int32())  # isr
        if name is not None and error in (0, 9):  # 9: REPLICA_NOT_AVAILABLE still lists partitions
            topics[name] = partitions
    return topics


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(min(n - len(chunks), 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection mid-response")
        chunks += chunk
    return bytes(chunks)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def _take(self, fmt: str, size: int):
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += size
        return value

    def int8(self) -> int:
        return self._take(">b", 1)

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def skip(self, n: int) -> None:
        self.at += n

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        text = self.data[self.at:self.at + length].decode()
        self.at += length
        return text


# -- the failover phase ---------------------------------------------------------------------------


@dataclass
class Creation:
    topic: str
    partitions: int
    outcome: str  # acknowledged / failed
    error: str | None
    started: float
    seconds: float


@dataclass
class Kill:
    phase: str
    controller: int
    at: float
    new_leader: int | None = None
    failover_seconds: float | None = None
    detail: str = ""


@dataclass
class PhaseResult:
    name: str
    creations: list[Creation] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    polls: Counter = field(default_factory=Counter)
    final: dict[int, dict[str, int]] = field(default_factory=dict)
    logs: dict[int, list[LogEntry]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def violations(self) -> list[Violation]:
        requested = {c.topic: c.partitions for c in self.creations}
        # On a fresh quorum only this run creates these names: TOPIC_ALREADY_EXISTS answers the retry of
        # a creation the killed controller committed (the controller answers a request that wrote nothing only
        # once the state it read is committed),
        # so that topic must exist whole as much as an acknowledged one.
        acknowledged = [c.topic for c in self.creations if c.outcome == "acknowledged" or c.error == ALREADY_EXISTS]
        return check_topics(requested, self.observations, acknowledged, self.final) + check_logs(self.logs)

    def to_json(self) -> dict:
        transactions = {c: [t.to_json() for t in transactions_of(e)] for c, e in self.logs.items()}
        outcomes = Counter(c.outcome for c in self.creations)
        return {
            "phase": self.name,
            "controller_kills": len(self.kills),
            "kills": [asdict(k) for k in self.kills],
            "topics_attempted": len(self.creations),
            "topics_acknowledged": outcomes["acknowledged"],
            "topics_failed": outcomes["failed"],
            "partitions_acknowledged": sum(c.partitions for c in self.creations if c.outcome == "acknowledged"),
            "creation_errors": dict(Counter(c.error for c in self.creations if c.error)),
            "broker_polls": {str(b): n for b, n in sorted(self.polls.items())},
            "partial_sightings": len(self.observations),
            "log_records": {str(c): len(e) for c, e in sorted(self.logs.items())},
            "transactions": {str(c): t for c, t in sorted(transactions.items())},
            "notes": self.notes,
            "seconds": round(self.seconds, 1),
        }


class _Watcher(threading.Thread):
    """Asks one broker for every topic's partition count, again and again, and records each sighting
    of a topic with fewer partitions than requested."""

    def __init__(self, broker: int, address: str, requested: dict[str, int], result: PhaseResult,
                 stop: threading.Event, started: float) -> None:
        super().__init__(name=f"watch-{broker}", daemon=True)
        self.broker, self.address, self.requested, self.result = broker, address, requested, result
        self.stop_event, self.started = stop, started

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                topics = broker_topics(self.address, timeout=5)
            except (OSError, struct.error):
                self.stop_event.wait(0.2)
                continue
            self.result.polls[self.broker] += 1
            now = time.monotonic() - self.started
            for name, count in topics.items():
                wanted = self.requested.get(name)
                if wanted is not None and count < wanted:
                    self.result.observations.append(Observation(self.broker, name, count, wanted, now))
            self.stop_event.wait(0.05)


def _create_topics(quorum: KafkaQuorum, names: list[str], partitions: int, requested: dict[str, int],
                   result: PhaseResult, lock: threading.Lock, started: float) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": quorum.bootstrap_servers, "log_level": 0})
    for name in names:
        with lock:
            requested[name] = partitions
        begin = time.monotonic()
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions)], operation_timeout=60,
                                request_timeout=90)[name].result(120)
            outcome, error = "acknowledged", None
        except Exception as exc:  # noqa: BLE001 - a failed creation is recorded, not fatal
            outcome, error = "failed", _error_name(exc)
        with lock:
            result.creations.append(Creation(name, partitions, outcome, error, round(begin - started, 3),
                                             round(time.monotonic() - begin, 3)))


ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"


def _error_name(exc: Exception) -> str:
    inner = exc.args[0] if exc.args else exc
    name = getattr(inner, "name", None)
    return name() if callable(name) else type(exc).__name__


def run_failover(plan: Plan, directory: Path, rng: random.Random) -> PhaseResult:
    """Create ``plan.topics`` topics with ``plan.creators`` threads while killing the active
    controller ``plan.controller_kills`` times; then settle, read every broker, decode the logs."""
    result = PhaseResult("failover")
    started = time.monotonic()
    with KafkaQuorum(controllers=3, brokers=plan.brokers, directory=directory, heap=plan.heap,
                     start_timeout=QUORUM_WAIT) as quorum:
        requested: dict[str, int] = {}
        lock = threading.Lock()
        stop = threading.Event()
        watchers = [_Watcher(n.node_id, quorum.broker_address(n.node_id), requested, result, stop, started)
                    for n in quorum.broker_nodes()]
        for watcher in watchers:
            watcher.start()
        names = [f"kip868-{plan.seed}-{i:04d}" for i in range(plan.topics)]
        creators = [threading.Thread(target=_create_topics, name=f"create-{k}", daemon=True,
                                     args=(quorum, names[k::plan.creators], plan.partitions, requested, result,
                                           lock, started))
                    for k in range(plan.creators)]
        for creator in creators:
            creator.start()
        try:
            for k in range(plan.controller_kills):
                # Spread the kills over the run; each lands while creations are in flight.
                target = (k + 1) * plan.topics // (plan.controller_kills + 1)
                while len(result.creations) < target and any(c.is_alive() for c in creators):
                    time.sleep(0.02)
                if not any(c.is_alive() for c in creators):
                    result.notes.append(f"kill {k + 1}: every topic was created before it could land")
                    break
                time.sleep(rng.uniform(0, 0.3))
                leader = quorum.wait_active_controller(QUORUM_WAIT)
                at = time.monotonic()
                quorum.kill_node(leader)
                kill = Kill("failover", leader, round(at - started, 3))
                result.kills.append(kill)
                kill.new_leader = quorum.wait_active_controller(QUORUM_WAIT, other_than=leader)
                kill.failover_seconds = round(time.monotonic() - at, 3)
                quorum.start_node(leader, wait=False)
            for creator in creators:
                creator.join()
            _settle(quorum, requested, result, plan.settle_seconds, plan.settle_stall_seconds)
        finally:
            stop.set()
            for watcher in watchers:
                watcher.join(10)
        result.logs = _decode_all(quorum)
    result.seconds = time.monotonic() - started
    return result


def _settle(quorum: KafkaQuorum, requested: dict[str, int], result: PhaseResult, timeout: float,
            stall: float = 120.0) -> None:
    """Wait until every broker shows every acknowledged topic whole, or has settled as it is; keep
    what each shows.

    A broker behind the controller is not a finding: on a busy machine a broker creates its
    partitions' logs for minutes after the controller committed them (it publishes the next topics
    only after that). So the wait is bounded by progress: while a broker's metadata shows more
    partitions or it creates more partition logs, it is waited for (up to ``timeout`` s); a broker
    that shows neither for ``stall`` s has settled, and what it lacks then is judged. Still catching
    up at ``timeout``, dead, or not answering: :class:`ClusterError` (an error verdict, never a false
    ``acknowledged_topic_whole``)."""
    acknowledged = {c.topic for c in result.creations if c.outcome == "acknowledged" or c.error == ALREADY_EXISTS}
    began = time.monotonic()
    deadline = began + timeout
    progress: dict[int, tuple[int, int]] = {}
    moved = began
    final: dict[int, dict[str, int]] = {}
    while True:
        unanswered = []
        for node in quorum.broker_nodes():
            try:
                # a broker that keeps a request ``stall`` s has not answered for ``stall`` s
                final[node.node_id] = broker_topics(quorum.broker_address(node.node_id), timeout=min(10.0, stall))
            except (OSError, struct.error):
                if not quorum.alive(node.node_id):
                    raise ClusterError(f"broker {node.node_id} died while the brokers settled; its log "
                                       f"({node.log}) ends:\n{quorum.log_tail(node.node_id)}") from None
                unanswered.append(node.node_id)
            now = (sum(final.get(node.node_id, {}).values()), _partition_logs(node.directory / "data"))
            if now != progress.get(node.node_id):
                progress[node.node_id], moved = now, time.monotonic()
        whole = not unanswered and len(final) == len(quorum.broker_nodes()) and all(
            topics.get(t) == requested[t] for topics in final.values() for t in acknowledged)
        lagging = {b: sorted(t for t in acknowledged if topics.get(t) != requested[t]) for b, topics in final.items()}
        lagging = {b: t for b, t in lagging.items() if t}
        clock = time.monotonic()
        if not whole and clock > deadline:
            raise ClusterError(f"the brokers were still catching up after {timeout:.0f} s (still without whole "
                               f"topics: {lagging}; not answering: {unanswered}): no verdict on whether every "
                               f"acknowledged topic exists; the machine is too busy for this plan: run it with "
                               f"fewer --topics or --partitions, or on a quieter machine")
        if whole or clock - moved > stall:
            if unanswered:
                raise ClusterError(f"brokers {unanswered} stopped answering metadata requests for {stall:.0f} s "
                                   f"while they settled: no verdict on whether every acknowledged topic exists")
            result.final = dict(final)
            result.observations.extend(
                Observation(broker, name, count, requested[name], clock) for broker, topics in final.items()
                for name, count in topics.items() if name in requested and count < requested[name])
            result.notes.append(f"brokers settled in {clock - began:.1f} s" if whole else
                                f"brokers settled (nothing moved for {stall:.0f} s) after {clock - began:.1f} s; "
                                f"still without whole topics: {lagging}")
            return
        time.sleep(0.5)


def _partition_logs(data: Path) -> int:
    """How many partition logs a broker has created (its data directory's entries)."""
    try:
        with os.scandir(data) as entries:
            return sum(1 for _ in entries)
    except OSError:
        return 0


def _decode_all(quorum: KafkaQuorum, extra: dict | None = None) -> dict:
    """Each controller's decoded log (controller id -> entries), plus ``extra`` (key -> segments).

    Every controller is running again; the restarted ones get a moment to catch up, then the logs
    are read at rest (every node SIGKILLed: a broker stopped politely would wait for a controller
    for its controlled shutdown) so nothing is written while the decoder reads."""
    _wait_caught_up(quorum)
    for node in quorum.controller_nodes() + quorum.broker_nodes():
        quorum.kill_node(node.node_id)
    groups = {n.node_id: quorum.metadata_segments(n.node_id) for n in quorum.controller_nodes()}
    texts = decode_metadata_logs({**groups, **(extra or {})})
    return {key: parse_dump(text) for key, text in texts.items()}


def _wait_caught_up(quorum: KafkaQuorum, timeout: float = QUORUM_WAIT) -> None:
    """Block until every controller follows the active one in its epoch and holds the leader's last
    batch as it was when they all followed (same base offset, same leader epoch: by Raft's log
    matching, the same log up to there). A restarted controller first truncates what it wrote as a
    leader that was never committed, which can be more bytes than the new leader has written since,
    so the size of its log says nothing."""
    leader = quorum.wait_active_controller(timeout)
    epoch = (quorum.quorum_state(leader) or {}).get("leaderEpoch")

    def following() -> bool:
        return all(quorum.alive(n.node_id) and (quorum.quorum_state(n.node_id) or {}).get("leaderEpoch") == epoch
                   and quorum.quorum_state(n.node_id).get("leaderId") == leader for n in quorum.controller_nodes())

    wait_until(following, timeout, 0.1, f"every controller to follow controller {leader} in epoch {epoch}")
    target = wait_until(lambda: last_batch(quorum.metadata_segments(leader)), timeout, 0.1,
                        f"controller {leader}'s metadata log to hold a batch")
    wait_until(lambda: all(target in batches_of(quorum.metadata_segments(n.node_id)) for n in quorum.controller_nodes()),
               timeout, 0.1, f"every controller's metadata log to hold the leader's batch (base offset, epoch) {target}")


def batches_of(segments: list[Path]) -> set[tuple[int, int]]:
    """(base offset, leader epoch) of every whole record batch in these log segments."""
    return {(base, epoch) for base, epoch, _ in _batch_headers(segments)}


def last_batch(segments: list[Path]) -> tuple[int, int] | None:
    """(base offset, leader epoch) of the last whole record batch in these log segments, or None."""
    last = None
    for base, epoch, _ in _batch_headers(segments):
        last = (base, epoch)
    return last


def _batch_headers(segments: list[Path]):
    """(base offset, partition leader epoch, attributes) of each whole v2 batch, reading headers only."""
    for segment in segments:
        try:
            with segment.open("rb") as f:
                size = os.fstat(f.fileno()).st_size
                at = 0
                while at + 23 <= size:
                    f.seek(at)
                    header = f.read(23)
                    if len(header) < 23:
                        break
                    base, length, epoch = struct.unpack_from(">qii", header, 0)
                    if length <= 0 or at + 12 + length > size:
                        break
                    yield base, epoch, struct.unpack_from(">h", header, 21)[0]
                    at += 12 + length
        except OSError:
            continue


# -- the bootstrap phase --------------------------------------------------------------------------


_CONTROL_BIT = 0x20


def first_data_batch(segment: Path) -> bool:
    """Whether the log segment holds a non-control record batch (the v2 batch header's attributes)."""
    return any(not attributes & _CONTROL_BIT for _, _, attributes in _batch_headers([segment]))


def run_bootstrap_cut(plan: Plan, directory: Path, number: int) -> PhaseResult:
    """Start a fresh quorum's controllers, SIGKILL the first leader as soon as its log holds the
    bootstrap batch, restart it (with ``plan.bootstrap_topic``: add a broker, create a topic);
    decode the logs, and what the killed leader had on disk at the kill."""
    result = PhaseResult(f"bootstrap-{number}")
    started = time.monotonic()
    quorum = KafkaQuorum(controllers=3, brokers=1 if plan.bootstrap_topic else 0, directory=directory,
                         heap=plan.heap, start_timeout=QUORUM_WAIT)
    try:
        quorum.start(wait=False)
        for node in quorum.controller_nodes():
            quorum.start_node(node.node_id, wait=False)

        def leader_wrote() -> int | None:
            for node in quorum.controller_nodes():
                state = quorum.quorum_state(node.node_id)
                if state and state.get("leaderId") == node.node_id and any(
                        first_data_batch(s) for s in quorum.metadata_segments(node.node_id)):
                    return node.node_id
            return None

        leader = wait_until(leader_wrote, QUORUM_WAIT, 0.001, "the first KRaft leader to write its bootstrap batch")
        at = time.monotonic()
        quorum.kill_node(leader)
        kill = Kill("bootstrap", leader, round(at - started, 3))
        result.kills.append(kill)
        # What the killed leader had on disk when it died, decoded later.
        cut = directory / "at-kill"
        cut.mkdir()
        for segment in quorum.metadata_segments(leader):
            shutil.copy(segment, cut / segment.name)
        kill.new_leader = quorum.wait_active_controller(QUORUM_WAIT, other_than=leader)
        kill.failover_seconds = round(time.monotonic() - at, 3)
        quorum.start_node(leader, wait=False)
        if plan.bootstrap_topic:
            broker = quorum.broker_nodes()[0]
            quorum.start_node(broker.node_id, wait=True)
            name = f"kip868-{plan.seed}-bootstrap-{number}"
            _create_topics(quorum, [name], plan.partitions, {}, result, threading.Lock(), started)
            _settle(quorum, {name: plan.partitions}, result, plan.settle_seconds, plan.settle_stall_seconds)
        else:
            quorum.wait_active_controller(QUORUM_WAIT)
        logs = _decode_all(quorum, {"at-kill": sorted(cut.glob("*.log"))})
        at_kill = logs.pop("at-kill")
        result.logs = logs
        kill.detail = "on the killed leader's disk at the kill: " + "; ".join(e.text() for e in at_kill if not e.control)
    finally:
        quorum.stop()
    result.seconds = time.monotonic() - started
    return result


# -- the run ----------------------------------------------------------------------------------------


def run(plan: Plan, directory: Path | None = None) -> dict:
    """Run both phases and judge them: the result JSON (``verdict``, ``violations``, ``checks``)."""
    own = directory is None
    root = Path(tempfile.mkdtemp(prefix="eos-kip868-")) if own else Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(plan.seed)
    phases: list[PhaseResult] = []
    error = None
    started = time.monotonic()
    try:
        if plan.controller_kills >= 0 and plan.topics > 0:
            phases.append(run_failover(plan, root / "failover", rng))
        for number in range(1, plan.bootstrap_kills + 1):
            phases.append(run_bootstrap_cut(plan, root / f"bootstrap-{number}", number))
    except Exception as exc:  # noqa: BLE001 - the run could not be completed: an error verdict
        error = error_reason(exc)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    violations = [v for phase in phases for v in phase.violations()]
    failed = {v.check for v in violations}
    verdict = ERROR if error and not violations else verdict_of(violations, error=error)
    return unfired_is_error({
        "suite": "kafka-metadata",
        "seed": plan.seed,
        "kafka_version": version_of("kafka-quorum"),  # its controllers and brokers
        "repro": plan.repro(),
        "plan": asdict(plan),
        "verdict": verdict,
        "error": error,
        "checks": {name: ("fail" if name in failed else "pass") for name in CHECKS},
        "controller_kills": sum(len(p.kills) for p in phases if p.name == "failover"),
        "bootstrap_kills": sum(len(p.kills) for p in phases if p.name.startswith("bootstrap")),
        "topics_acknowledged": sum(1 for p in phases for c in p.creations if c.outcome == "acknowledged"),
        "partitions_acknowledged": sum(c.partitions for p in phases for c in p.creations
                                       if c.outcome == "acknowledged"),
        "phases": [p.to_json() for p in phases],
        "violations": [v.to_json() for v in violations[:200]],
        "seconds": round(time.monotonic() - started, 1),
        "not_fired": [] if error else _not_fired(plan, phases),
    })


def _not_fired(plan: Plan, phases: list[PhaseResult]) -> list[str]:
    """The kills the plan asked for that never landed: a controller kill whose topics were all created
    before it (or with no topic to create), a bootstrap cut whose phase did not run."""
    landed = sum(len(p.kills) for p in phases if p.name == "failover")
    cuts = sum(len(p.kills) for p in phases if p.name.startswith("bootstrap"))
    return ([f"controller kill {k} (while topics are created)" for k in range(landed + 1, plan.controller_kills + 1)]
            + [f"bootstrap kill {k}" for k in range(cuts + 1, plan.bootstrap_kills + 1)])


# -- a campaign's scenario (``eos-harness chaos --suite kafka-metadata``) ------------------------------


def run_one(plan: Plan, directory: Path | None = None) -> dict:
    """One run of ``plan`` as a campaign's result: the system (the KRaft quorum), expected to pass. Its
    nodes' directories are removed at its end (a run to read them is ``kafka-metadata --keep DIR``)."""
    return {"system": "kraft", "expected": "pass", **run(plan)}


def error_result(plan: Plan, exc: BaseException) -> dict:
    """The result of a run that could not be run to its end."""
    return {"suite": "kafka-metadata", **verdict_error_result({"system": "kraft"}, plan.seed, plan.repro(), exc),
            "kafka_version": version_of("kafka-quorum")}
