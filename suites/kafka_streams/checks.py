"""The kafka-streams suite's model and checks: pure functions of what the harness produced, what a
read-committed consumer read from the application's output, what the application's store answered and what
its restore listener said, after each restart. No Kafka here.

The application (:mod:`eos_harness.kafka_streams.app`) adds each input record's delta to its key's sum and
outputs ``SEQ,SUM``. The model is the same fold over the input in each partition's order: record ``SEQ``'s
expected output is its key's sum after it, and the store after input ``S`` is every key's sum over ``S``.
The stream-table join (``join-`` applications) first multiplies each delta by its key's rate in a KTable fed
by a second topic (1 while the key has none): the model applies each table update before the stream records
of later timestamps (Streams documents that with ``max.task.idle.ms`` 0 it processes a task's records in
timestamp order when they are on the broker; 4.4.0 does not always, see :func:`join_orders` and the README).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from eos_harness.verdict import Violation

__all__ = ["CHECKS", "CONDITIONS", "InputRecord", "Restore", "changelog_state", "check_changelog", "check_liveness",
           "check_no_wipe", "check_output", "check_state", "expected_outputs", "joined", "join_orders",
           "model_state", "workload"]

# Each check, in report order, with the promise it tests.
CHECKS = {
    "exactly_once_output": "each input record's output read once by a read_committed consumer: none repeated "
                           "(the effect of exactly_once_v2), none lost",
    "output_values": "each output carries its key's sum after its input record, as the model folds the input",
    "state": "after every restart, once the input is processed, the store read with READ_COMMITTED (interactive "
             "queries v2) equals the model; after the last instance, so does each store's changelog topic read "
             "committed (last value per key)",
    "no_wipe": "with transactional RocksDB stores (KIP-892), a crash does not wipe the store: its restoration "
               "starts from the offset of its last commit that reached disk, not the changelog's start",
    "liveness": "each instance reaches RUNNING and processes the input it was given within the bound",
    "zombie_fenced": "an instance frozen inside its commit past transaction.timeout.ms while another took its "
                     "tasks, then resumed (a zombie), is fenced: its producer's commitTransaction fails",
}
# When each check's condition arises (a check whose condition never arose is "not exercised", never passed).
CONDITIONS = {
    "exactly_once_output": "the application was killed while it had input to process, then processed it all",
    "output_values": "an output record was read",
    "state": "an instance restarted after a kill processed all its input and answered a query, or the stores' "
             "changelogs were read once the last instance processed all its input",
    "no_wipe": "a transactional RocksDB store (the aggregate's, or the join's table) had its committed offset on "
               "disk (a table file of its offsets column family) when its instance was killed",
    "liveness": "an instance was started",
    "zombie_fenced": "a frozen instance was resumed and its commit came to an end",
}


@dataclass(frozen=True)
class InputRecord:
    seq: int
    key: str
    delta: int
    partition: int
    ts: int = 0  # the record's timestamp (ms): the windowed aggregate's window
    # the join's table update produced (and acknowledged) just before this record, at its timestamp - 1:
    # (key, rate, partition)
    update: tuple[str, int, int] | None = None
    # the global table's updates (the first record of a batch): sent, and seen in the application's global
    # store, before the batch is
    global_updates: tuple[tuple[str, int, int], ...] = ()

    def group(self, window_ms: int) -> str:
        """What the application sums over: the key, or with windows the key and its window's start."""
        return self.key if not window_ms else f"{self.key}@{self.ts - self.ts % window_ms}"


TIME_STEP_MS = 400  # between one input record's timestamp and the next's
TABLE_EVERY = 5  # the join's table: an update before every 5th input record


def workload(seed: int, batches: int, per_batch: int, keys: int, partitions: int,
             base_ms: int = 0, table: bool = False, global_table: bool = False) -> list[list[InputRecord]]:
    """The seeded input: ``batches`` batches of ``per_batch`` records over ``keys`` keys; a key's records all
    go to one partition (key index modulo ``partitions``), so the model's per-key order is Kafka's. Record
    ``seq``'s timestamp is ``base_ms + seq * TIME_STEP_MS`` (a run gives the time it starts, a whole minute:
    timestamps years old would have the broker delete a window store's changelog by its retention). With
    ``table``, every :data:`TABLE_EVERY`-th record carries a table update (a key's new rate, 1-5), drawn from
    a second generator: the stream records are the same as without. With ``global_table``, each batch's first
    record carries 3 updates of the global table (3 keys' new rates)."""
    rng = random.Random(seed)
    table_rng = random.Random(f"table-{seed}")
    out, seq = [], 0
    for _ in range(batches):
        batch = []
        for _ in range(per_batch):
            news = ()
            if global_table and not batch:
                news = tuple((f"k{t}", table_rng.randint(1, 5), t % partitions)
                             for t in table_rng.sample(range(keys), min(3, keys)))
            k = rng.randrange(keys)
            update = None
            if table and seq % TABLE_EVERY == 0:
                t = table_rng.randrange(keys)
                update = (f"k{t}", table_rng.randint(1, 5), t % partitions)
            batch.append(InputRecord(seq, f"k{k}", rng.randint(1, 9), k % partitions, base_ms + seq * TIME_STEP_MS,
                                     update, news))
            seq += 1
        out.append(batch)
    return out


def joined(records: Iterable[InputRecord]) -> tuple[list[InputRecord], dict[str, int]]:
    """The stream-table join's input to the aggregate: each record's delta times its key's rate at its
    timestamp (1 while the key has none); and the table after ``records`` (key -> rate). A key's table updates
    and stream records share a partition only by chance: an update at ``ts - 1`` is applied before every
    record of a later timestamp in its own partition, which is every later record (timestamps grow with seq)."""
    rates: dict[str, int] = {}
    out = []
    for r in sorted(records, key=lambda r: r.seq):
        for key, rate, _ in ((r.update,) if r.update is not None else ()) + r.global_updates:
            rates[key] = rate
        out.append(replace(r, delta=r.delta * rates.get(r.key, 1)))
    return out, rates


def join_orders(records: list[InputRecord], outputs: Iterable[tuple[str, int, int]]) -> dict[int, str]:
    """Why the stream-table join's outputs differ from the model, where its key's table explains it: input seq ->
    what it says. An output's error less its key's previous output's is its own record's (the sums are read in
    full): the record was joined with ``rate model + that / delta``; a rate of one of its key's table updates (or
    1, none yet) says which update Streams processed out of timestamp order: one before the record that it had
    not applied yet (acknowledged before the record was sent), or one after it that it had already applied (sent
    after the record was acknowledged). An output right about its own record but off by an earlier one names
    that one."""
    got = {seq: total for _, seq, total in outputs}
    products, _ = joined(records)
    want = expected_outputs(products)
    updates: dict[str, list[tuple[int, int, int]]] = {}  # key -> [(input, rate, timestamp)], input order
    for r in sorted(records, key=lambda r: r.seq):
        if r.update is not None:
            updates.setdefault(r.update[0], []).append((r.seq, r.update[1], r.ts - 1))
    said: dict[int, str] = {}
    # key -> (its previous output's error, the input that made it); None after an output not read
    previous: dict[str, tuple[int, int | None] | None] = {}
    for r, p in sorted(zip(records, products, strict=True), key=lambda rp: rp[0].seq):
        if r.seq not in got:
            previous[r.key] = None  # the next output's own error is unknown
            continue
        error = got[r.seq] - want[r.seq][1]
        last = previous.get(r.key, (0, None))
        previous[r.key] = (error, None if last is None else last[1])
        if last is None or error == 0:
            continue
        before, cause = last
        own = error - before
        if own == 0:
            if cause is not None:
                said[r.seq] = f" (input {cause}'s join carried)"
            continue
        if own % r.delta:
            continue
        rate = p.delta // r.delta + own // r.delta
        chain = [(None, 1, None)] + updates.get(r.key, [])  # the key's rates in order: none yet, then each update's
        at = max(i for i, (u, _, _) in enumerate(chain) if u is None or u <= r.seq)  # the model's
        stale = [i for i in range(at) if chain[i][1] == rate]
        early = [i for i in range(at + 1, len(chain)) if chain[i][1] == rate]
        if stale and (not early or at - stale[-1] <= early[0] - at):
            u, new, ts = chain[stale[-1] + 1]
            why = (f"joined with rate {rate}, from before the table update of input {u} ({r.key} -> {new}, "
                   f"timestamp {ts}), which the broker had acknowledged before input {r.seq} was sent")
        elif early:
            u, _, ts = chain[early[0]]
            why = (f"joined with rate {rate} of the table update of input {u} (timestamp {ts}, after input "
                   f"{r.seq}'s {r.ts}), sent after the broker had acknowledged input {r.seq}")
        else:
            continue
        previous[r.key] = (error, r.seq)
        said[r.seq] = (f": input {r.seq} was {why} (max.task.idle.ms=0: records already on the broker are "
                       f"processed in timestamp order)")
    return said


def expected_outputs(records: Iterable[InputRecord], window_ms: int = 0) -> dict[int, tuple[str, int]]:
    """seq -> (key, the key's sum, in its window with ``window_ms``, after that record)."""
    sums: Counter = Counter()
    out = {}
    for r in records:
        sums[r.group(window_ms)] += r.delta
        out[r.seq] = (r.key, sums[r.group(window_ms)])
    return out


def model_state(records: Iterable[InputRecord], window_ms: int = 0) -> dict[str, int]:
    """key (with windows ``key@windowStart``) -> sum."""
    sums: Counter = Counter()
    for r in records:
        sums[r.group(window_ms)] += r.delta
    return dict(sums)


def check_output(records: list[InputRecord], outputs: list[tuple[str, int, int]], complete: bool,
                 window_ms: int = 0, join: bool = False) -> list[Violation]:
    """``outputs``: (key, seq, sum) as read committed, in read order; ``complete``: the application processed
    all its input (else a missing output is liveness's, not a loss); ``join``: the stream-table join's."""
    raw = records
    if join:
        records = joined(records)[0]
    want = expected_outputs(records, window_ms)
    seen = Counter(seq for _, seq, _ in outputs)
    found: list[Violation] = []
    for seq, n in sorted(seen.items()):
        if n > 1:
            found.append(Violation("exactly_once_output", f"input {seq} ({want.get(seq, ('?',))[0]})", "read once",
                                   f"read {n} times"))
    if complete:
        missing = sorted(set(want) - set(seen))
        if missing:
            found.append(Violation("exactly_once_output", f"inputs {missing[:10]}", "each read once",
                                   f"{len(missing)} never read though the application processed its input"))
    wrong = [(key, seq, got) for key, seq, got in outputs if seq in want and want[seq] != (key, got)]
    orders = join_orders(raw, outputs) if join and wrong else {}
    for key, seq, got in wrong[:20]:
        why = orders.get(seq, "") if want[seq][0] == key else ""
        found.append(Violation("output_values", f"input {seq} ({key})", f"sum {want[seq][1]}", f"sum {got}{why}"))
    if len(wrong) > 20:
        found.append(Violation("output_values", "more", "", f"{len(wrong) - 20} more wrong outputs"))
    unknown = sorted(seq for _, seq, _ in outputs if seq not in want)
    if unknown:
        found.append(Violation("exactly_once_output", f"outputs {unknown[:10]}", "only outputs of input",
                               f"{len(unknown)} outputs of no input record"))
    return found


WINDOW_RETENTION_MS = 120_000  # the window store's retention
SEGMENT_MS = 60_000  # its segment interval: max(retention / 2, 60 s)


def live_windows(records: list[InputRecord], retention_ms: int) -> dict[str, int]:
    """Per key, the earliest window start surely still in the window store: Streams drops a segment (segment id
    ``start // SEGMENT_MS``) below the segment of its stream time minus the retention; the store's stream time
    (its latest window start) is at most the partition's latest timestamp, so rounding up is safe."""
    latest: dict[int, int] = {}
    for r in records:
        latest[r.partition] = max(latest.get(r.partition, r.ts), r.ts)
    cutoff = {p: -(-(t - retention_ms) // SEGMENT_MS) * SEGMENT_MS for p, t in latest.items()}
    return {r.key: cutoff[r.partition] for r in records}


def wanted_state(records: list[InputRecord], window_ms: int = 0, retention_ms: int = 0,
                 join: bool = False) -> tuple[dict[str, int], Callable[[str], bool]]:
    """The model's store once ``records`` were all processed (key, or ``key@windowStart``, -> sum; with the join
    also the table as ``rate:KEY`` -> rate), and which keys are compared: with windows, only those the store
    surely still holds (:func:`live_windows`)."""
    if join:
        records, rates = joined(records)
        want = {**model_state(records), **{f"rate:{k}": v for k, v in rates.items()}}
    else:
        want = model_state(records, window_ms)
    if not window_ms:
        return want, lambda name: True
    live = live_windows(records, retention_ms)

    def kept(name: str) -> bool:
        key, _, start = name.partition("@")
        return int(start) >= live.get(key, 0)

    return {k: v for k, v in want.items() if kept(k)}, kept


def check_state(records: list[InputRecord], store: Mapping[str, int], life: int, window_ms: int = 0,
                retention_ms: int = 0, join: bool = False) -> list[Violation]:
    """The store (key, or ``key@windowStart``, -> sum, read committed) once the input ``records`` were all
    processed; with windows, only those the store surely still holds (:func:`live_windows`) are compared; with
    the join, the sums of the joined deltas and the table's store as ``rate:KEY`` -> rate."""
    want, kept = wanted_state(records, window_ms, retention_ms, join)
    store = {k: v for k, v in store.items() if kept(k)}
    diff = sorted(k for k in set(want) | set(store) if want.get(k) != store.get(k))
    if not diff:
        return []
    shown = ", ".join(f"{k}: {store.get(k)} (model {want.get(k)})" for k in diff[:8])
    return [Violation("state", f"instance {life}", f"the model's {len(want)} sums",
                      f"{len(diff)} keys differ: {shown}")]


WINDOW_KEY_SUFFIX = 12  # a window store's changelog key: the key, its window's start (8 bytes), a sequence number (4)


def changelog_state(last: Mapping[bytes, bytes | None], window: bool = False, prefix: str = "") -> dict[str, int | str]:
    """A store as its changelog says it is: ``last`` is each changelog key's last value read committed (None: a
    tombstone, the key deleted); a value's part before ``;`` (the application pads its sums), as a number where
    it is one. A window store's key is ``key@windowStart``; ``prefix`` names the store's keys as the model does
    (the join's table: ``rate:``)."""
    out: dict[str, int | str] = {}
    for raw, value in last.items():
        if window:
            start = int.from_bytes(raw[-WINDOW_KEY_SUFFIX:-4], "big", signed=True)
            name = f"{raw[:-WINDOW_KEY_SUFFIX].decode(errors='replace')}@{start}"
        else:
            name = raw.decode(errors="replace")
        if value is None:
            out.pop(prefix + name, None)
            continue
        text = value.decode(errors="replace").split(";")[0]
        out[prefix + name] = int(text) if text.lstrip("-").isdigit() else text
    return out


def check_changelog(records: list[InputRecord], changelog: Mapping[str, int | str], queried: Mapping[str, int] | None,
                    window_ms: int = 0, retention_ms: int = 0, join: bool = False,
                    table_changelog: bool = True) -> list[Violation]:
    """The stores' changelog topics, read committed once the last instance processed all the input ``records``
    (``changelog``: :func:`changelog_state` of each, together), against the model, each key that differs named
    with what the changelog and what the store's last answer to a query (``queried``; None: it gave none) said:
    which of the two differs from the model. (A key the query alone got wrong is the ``state`` violation of that
    instance already.) ``table_changelog`` False: the join's table is a GlobalKTable, whose store has no changelog
    (its keys are not compared here)."""
    want, kept = wanted_state(records, window_ms, retention_ms, join)
    if join and not table_changelog:
        want = {k: v for k, v in want.items() if not k.startswith("rate:")}
    changelog = {k: v for k, v in changelog.items() if kept(k)}
    diff = sorted(k for k in set(want) | set(changelog) if want.get(k) != changelog.get(k))
    found = []
    for key in diff[:20]:
        model, logged = want.get(key), changelog.get(key)
        if queried is None:
            query = "the store gave no answer to compare"
        else:
            answer = queried.get(key)
            query = (f"interactive query {answer if answer is not None else 'no such key'} "
                     f"({'agrees with the model: the changelog alone differs' if answer == model else 'differs too'})")
        found.append(Violation("state", f"changelog {key}", f"model {model if model is not None else 'no such key'}",
                               f"changelog {logged if logged is not None else 'no record'}; {query}"))
    if len(diff) > 20:
        found.append(Violation("state", "changelog: more", "", f"{len(diff) - 20} more keys differ"))
    return found


@dataclass(frozen=True)
class Restore:
    """One store partition's restoration in one instance, as its restore listener said."""

    life: int
    partition: int
    start: int  # the changelog offset it restored from
    end: int
    restored: int | None  # records restored (None: it never finished)
    ms: int | None
    durable: bool  # this store partition's committed offset was on disk (a table file of its offsets column family)
    # when the instance before was killed (table files of its data alone are no commit: see runner._durable)
    store: str = "sums"  # the aggregate's store, or the join's table "rates"


def check_no_wipe(restores: Iterable[Restore], applies: bool) -> tuple[list[Violation], int]:
    """Violations and how many restorations met the condition (a store partition with a commit on disk when
    killed, and a changelog with records to restore: from an empty one, offset 0 is both its start and its end,
    and no restoration can say whether the store was wiped). Judged only where KIP-892 promises it
    (``applies``: transactional RocksDB stores)."""
    if not applies:
        return [], 0
    met = [r for r in restores if r.durable and r.end > 0]
    return [Violation("no_wipe", f"instance {r.life} store {r.store} partition {r.partition}",
                      "restoration from the store's last commit on disk",
                      f"restored from offset {r.start} (the changelog's start) to {r.end}: "
                      f"{r.restored} records, as a wiped store")
            for r in met if r.start == 0], len(met)


def check_liveness(life: int, running_s: float | None, caught_up_s: float | None, bound: float,
                   why: str | None = None) -> list[Violation]:
    if running_s is None:
        return [Violation("liveness", f"instance {life}", f"RUNNING within {bound:g} s",
                          why or f"not RUNNING after {bound:g} s")]
    if caught_up_s is None:
        return [Violation("liveness", f"instance {life}", f"its input processed within {bound:g} s",
                          why or f"not all its input processed after {bound:g} s")]
    return []
