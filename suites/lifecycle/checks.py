"""Checkers of the EOS task lifecycle: pure functions of a recorded history and the lifecycle model.

The history is the driver's list of events (dicts with ``seq``, ``instance``, ``type`` …; see
:mod:`eos_harness.suites.lifecycle.runner`). Each check returns :class:`Violation` s; ``check_all``
runs every check.

The checks and what each promises are listed in :data:`CHECKS` (names are public: verdicts, chaos
summaries and mutants' ``caught_by`` use them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from eos_harness.models.lifecycle import LifecycleModel
from eos_harness.models.workloads import changelog_partition
from eos_harness.verdict import Violation, finding_violation, hang_finding

CHECKS = {
    "atomic_commit": "what a transactional store holds right after recover (before any replay) is exactly the "
                     "state its committed offset names: data and offsets were committed together",
    "partitions_one_commit": "a store fed by several changelog partitions (a global store) recovers every "
                             "partition's offset from one and the same commit, never one partition's from "
                             "another commit than the others'",
    "no_uncommitted_survives": "after recovery the store holds no write of an uncommitted record",
    "committed_rolls_forward": "after recovery every committed write is there (rolled forward from the changelog "
                               "when the crash fell between the EOS commit and the store commit)",
    "recovery_idempotent": "a crash during recovery leaves the same state once a later recovery ends",
    "state_matches_model": "every recovered value is explained by a committed or uncommitted prefix of the input",
    "exactly_once_output": "the read-committed output equals the model's: no duplicate, no loss",
    "read_your_own_writes": "the writer reads its own uncommitted writes",
    "read_committed_isolation": "a read-committed query during processing never sees an uncommitted write "
                                "(transactional stores)",
    "no_wipe": "a transactional store is never wiped, and replays exactly the changelog tail written after its "
               "last store commit",
    "task_finishes": "the task reaches the end of its input (no error, no hang)",
    "store_hang": "every call into the store returns within the store timeout (--store-timeout); the finding "
                  "carries the store's stack",
    "store_raised": "the store raises no exception where the protocol allows none; the finding carries the "
                    "store's traceback",
    "store_return_type": "the store returns the types the protocol requires (get: bytes or None, …)",
    "store_directory": "the store lives in [state.dir]/[application.id]/[task.id]/rocksdb/[store.name], logs to "
                       "[application.id]-[store.name]-changelog and writes nothing outside its directory (the path "
                       "is reported)",
    "zombie_fenced": "an instance frozen while a newer one took over is fenced when it wakes; an instance stalled "
                     "past transaction.timeout.ms never commits once it wakes",
}
# The checks ``--allow`` may waive (``run`` and ``chaos``): what a history shows of the store, the task and its
# output; never that the task reached its end (past that nothing is judged) nor the store's own calls.
WAIVABLE = tuple(c for c in CHECKS if c not in ("task_finishes", "store_hang", "store_raised", "store_return_type"))


def _b(text: str | None) -> bytes | None:
    return None if text is None else text.encode("latin-1")


def _show(data: bytes | None, limit: int = 60) -> str | None:
    if data is None:
        return None
    text = data.decode("latin-1")
    return text if len(text) <= limit else f"{text[:limit]}… ({len(data)} bytes)"


def _instances_crashed_in_restore(history: list[dict]) -> set[int]:
    """Instances that died before their ``recover`` event (a crash during recovery)."""
    recovered = {e["instance"] for e in history if e["type"] == "recover"}
    return {e["instance"] for e in history if e["type"] == "crash" and e["instance"] not in recovered}


def check_recovered_state(history: list[dict], model: LifecycleModel) -> list[Violation]:
    violations: list[Violation] = []
    crashed_in_restore = _instances_crashed_in_restore(history)
    last_len = len(model.records)
    for event in history:
        if event["type"] != "recover" or event.get("contents") is None:
            continue
        position = event["input_position"]
        expected = model.state_at(position)
        observed = model.within_retention(position, {_b(k): _b(v) for k, v in event["contents"]})
        after_restore_crash = (event["instance"] - 1) in crashed_in_restore
        for key in sorted(set(expected) | set(observed)):
            exp, obs = expected.get(key), observed.get(key)
            if exp == obs:
                continue
            held = model.positions_with(key, obs)
            later = [q for q in held if position < q <= last_len]
            earlier = [q for q in held if q < position]
            if after_restore_crash:
                check = "recovery_idempotent"
            elif later and not earlier:
                check = "no_uncommitted_survives"
            elif earlier and not later:
                check = "committed_rolls_forward"
            elif obs is not None and later:
                check = "no_uncommitted_survives"
            else:
                check = "state_matches_model"
            violations.append(
                Violation(check, _show(key), _show(exp), _show(obs), event["seq"], detail=_partition_of(key, event))
            )
    return violations


def _partition_of(key: bytes, event: dict) -> str | None:
    """For a store fed by several changelog partitions: the partition ``key``'s writes go to."""
    partitions = len(event.get("store_offsets") or ())
    return f"changelog partition {changelog_partition(key, partitions)}" if partitions > 1 else None


def _offsets(event: dict, one: str, several: str) -> int | tuple | None:
    """An event's changelog offsets: the one partition's (``one``), or every partition's, in partition
    order (``several``: a global store), as a tuple."""
    return tuple(event[several]) if several in event else event[one]


def _never_committed(offset: int | tuple | None) -> bool:
    return not any(offset) if isinstance(offset, tuple) else not offset


def _torn(offset: tuple, committed_with: dict) -> Violation | None:
    """A ``partitions_one_commit`` violation when each partition's offset is one some commit gave, but no
    one commit gave them all (offsets of one partition written apart from another's)."""
    commits = [commit for commit in committed_with if isinstance(commit, tuple) and len(commit) == len(offset)]
    if not commits:
        return None
    per_partition = [{commit[i] for commit in commits} | {None} for i in range(len(offset))]
    if not all(o in given for o, given in zip(offset, per_partition, strict=True)):
        return None
    last = max(commits, key=lambda commit: max(committed_with[commit]))
    apart = [f"partition {i}: {'no offset (forgotten)' if o is None else o}"
             for i, (o, want) in enumerate(zip(offset, last, strict=True)) if o != want]
    return Violation("partitions_one_commit", None, "every partition's offset from one commit",
                     f"offsets {list(offset)} (no commit gave them together)", None,
                     detail=f"the last commit begun gave {list(last)}; apart from it: {', '.join(apart)}")


def check_atomic_commit(history: list[dict], model: LifecycleModel) -> list[Violation]:
    violations: list[Violation] = []
    # changelog offsets a store committed (a global store's: a tuple, one per partition) -> the input
    # positions committed with them
    committed_with: dict[int | tuple, set[int]] = {}
    for event in history:
        kind = event["type"]
        if kind == "migrated":
            committed_with = {}
        elif kind in ("store_commit_begin", "store_commit") and "changelog_position" in event:
            # a commit that began may have completed
            offsets = _offsets(event, "changelog_position", "changelog_positions")
            committed_with.setdefault(offsets, set()).add(event["input_position"])
        elif kind == "recover" and event.get("pre_replay_contents") is not None:
            offset = _offsets(event, "recovered_offset", "recovered_offsets")
            candidates = {0} if _never_committed(offset) else committed_with.get(offset, set())
            if not candidates and isinstance(offset, tuple) and (torn := _torn(offset, committed_with)):
                violations.append(replace(torn, event=event["seq"]))
                continue
            if not candidates:
                shown = list(offset) if isinstance(offset, tuple) else offset
                violations.append(Violation("atomic_commit", None, "a changelog offset some commit gave",
                                            f"committed offset {shown}", event["seq"]))
                continue
            contents = {_b(k): _b(v) for k, v in event["pre_replay_contents"]}
            if any(model.state_at(p) == model.within_retention(p, contents) for p in candidates):
                continue
            position = max(candidates)
            expected = model.state_at(position)
            observed = model.within_retention(position, contents)
            key = next(k for k in sorted(set(expected) | set(observed)) if expected.get(k) != observed.get(k))
            obs = observed.get(key)
            uncommitted = [q for q in model.positions_with(key, obs) if q > event["input_position"]]
            committed = [q for q in model.positions_with(key, obs) if q <= event["input_position"]]
            check = "no_uncommitted_survives" if uncommitted and not committed else "atomic_commit"
            violations.append(Violation(check, _show(key), f"{_show(expected.get(key))} (the state at committed "
                                        f"offset {offset})", f"{_show(obs)} (data and offset disagree)", event["seq"]))
    return violations


def _expected_tails(history: list[dict], model: LifecycleModel) -> dict[int, set[int]]:
    """For each recover event (by seq): the changelog tail lengths a correct store replays.

    The tail is the changelog written by records committed after the store's last commit; a
    crash inside ``store.commit`` allows the tail of either side of that commit. A store whose commits
    are durable only once flushed (its ``recover`` events say ``commit_durable: False``: Kafka Streams'
    RocksDB store, which writes with RocksDB's write-ahead log off and counts on the changelog) may come
    back at any commit since its last clean close (the task's ``done``), and replays the tail after it."""
    tails: dict[int, set[int]] = {}
    store_positions = {0}
    durable = all(event.get("commit_durable", True) for event in history if event["type"] == "recover")
    last_commit: int | None = None
    pending_begin: int | None = None
    # The store commit that ends a restore comes before its ``recover`` event; the tail that the
    # recovery replayed depends on the store's position before it, so it applies after that event.
    restore_commit: int | None = None
    for event in history:
        kind = event["type"]
        if kind == "migrated":  # a fresh state directory: the store starts from nothing
            store_positions = {0}
            pending_begin = restore_commit = None
        elif kind == "store_commit_begin":
            pending_begin = event["input_position"]
        elif kind == "store_commit":
            if event.get("restore"):
                restore_commit = event["input_position"]
            else:
                last_commit = event["input_position"]
                store_positions = {last_commit} if durable else store_positions | {last_commit}
            pending_begin = None
        elif kind == "done" and not durable and last_commit is not None:
            store_positions = {last_commit}  # a clean close flushed every commit
        elif kind == "crash":
            if restore_commit is not None:
                store_positions = {restore_commit} if durable else store_positions | {restore_commit}
                restore_commit = None
            if pending_begin is not None:
                store_positions = store_positions | {pending_begin}
                pending_begin = None
        elif kind == "recover":
            committed = len(model.changelog(event["input_position"]))
            tails[event["seq"]] = {committed - len(model.changelog(p)) for p in store_positions}
            if restore_commit is not None:
                store_positions = {restore_commit} if durable else store_positions | {restore_commit}
                last_commit, restore_commit = restore_commit, None
    return tails


def check_no_wipe(history: list[dict], model: LifecycleModel) -> list[Violation]:
    violations = []
    tails = _expected_tails(history, model)
    for event in history:
        if event["type"] != "recover" or not (event["transactional"] and event["persistent"]):
            continue
        if event["wiped"]:
            violations.append(Violation("no_wipe", None, "store kept", "store wiped", event["seq"]))
        allowed = tails[event["seq"]]
        if event["replayed_records"] not in allowed:
            violations.append(
                Violation(
                    "no_wipe",
                    None,
                    f"replay of the uncommitted tail ({' or '.join(map(str, sorted(allowed)))} records)",
                    f"{event['replayed_records']} records replayed",
                    event["seq"],
                )
            )
    return violations


def check_reads(history: list[dict], model: LifecycleModel) -> list[Violation]:
    violations = []
    transactional = next((e["transactional"] for e in history if e["type"] == "recover"), True)
    for event in history:
        if event["type"] != "read":
            continue
        key = _b(event["key"])
        own, committed = _b(event["own"]), _b(event["committed"])
        expected_own = model.value_after(event["index"], key)
        if own != expected_own:
            violations.append(
                Violation("read_your_own_writes", _show(key), _show(expected_own), _show(own), event["seq"])
            )
        if transactional:
            expected_committed = model.state_at(event["store_committed_position"]).get(key)
            if committed != expected_committed:
                violations.append(
                    Violation(
                        "read_committed_isolation", _show(key), _show(expected_committed), _show(committed), event["seq"]
                    )
                )
    return violations


def check_output(history: list[dict], model: LifecycleModel) -> list[Violation]:
    outputs = [e for e in history if e["type"] == "output"]
    if not outputs:
        return []
    event = outputs[-1]
    finished = any(e["type"] == "done" for e in history)
    position = len(model.records) if finished else event.get("committed_position", 0)
    expected = model.expected_output(position)
    observed = [(_b(k), _b(v)) for k, v in event["records"]]
    if observed == expected:
        return []
    exp_count, obs_count = Counter(expected), Counter(observed)
    violations = []
    for rec in sorted(obs_count - exp_count):
        what = "duplicate" if rec in exp_count else "unexpected"
        violations.append(
            Violation("exactly_once_output", _show(rec[0]), f"{exp_count[rec]}x {_show(rec[1])}", f"{obs_count[rec]}x ({what})", event["seq"])
        )
    for rec in sorted(exp_count - obs_count):
        violations.append(
            Violation("exactly_once_output", _show(rec[0]), f"{exp_count[rec]}x {_show(rec[1])}", f"{obs_count[rec]}x (lost)", event["seq"])
        )
    if not violations:
        first = next(i for i, (a, b) in enumerate(zip(expected, observed, strict=False)) if a != b)
        violations.append(
            Violation("exactly_once_output", _show(expected[first][0]), f"output #{first} in input order", "out of order", event["seq"])
        )
    return violations


def _store_finding(event: dict) -> dict | None:
    """The finding about the store's own calls an event carries (a hang inside a store call, a raise
    or a wrong return type the guard caught), or None."""
    if event["type"] == "hang" and event.get("operation"):
        return hang_finding(event["operation"], event["seconds"], event.get("stack", ""))
    if event["type"] == "error":
        return event.get("store")
    return None


def _with_output(text: str, event: dict) -> str:
    """``text`` and the first lines the child wrote before ``event`` (its stdout and stderr, kept in the
    run's log file), when it wrote any."""
    output = event.get("output")
    if not output:
        return text
    return f"{text}\n" * bool(text) + f"the process wrote (first lines, from the run's log):\n{output}"


def check_store_calls(history: list[dict], model: LifecycleModel) -> list[Violation]:
    """``store_hang``, ``store_raised``, ``store_return_type``: the store broke the protocol itself."""
    return [finding_violation(f, event=e["seq"]) for e in history if (f := _store_finding(e)) is not None]


def check_finishes(history: list[dict], model: LifecycleModel) -> list[Violation]:
    store_findings = any(_store_finding(e) for e in history)  # reported by check_store_calls
    violations = [
        Violation("task_finishes", None, "no error", e["error"].strip().splitlines()[-1], e["seq"],
                  detail=_with_output(e["error"].strip(), e))
        for e in history
        if e["type"] == "error" and not _store_finding(e) and not e.get("broker")
    ]
    violations += [
        Violation("task_finishes", None, "the task makes progress", f"no event for {e['seconds']} s", e["seq"],
                  detail=e.get("stack"))
        for e in history
        if e["type"] == "hang" and not _store_finding(e)
    ]
    frozen = {e["instance"] for e in history if e["type"] == "frozen"}
    fenced = {e["instance"] for e in history if e["type"] == "fenced"}
    for instance in sorted(frozen - fenced):
        violations.append(
            Violation("zombie_fenced", None, f"woken zombie instance {instance} is fenced", "it was not", None)
        )
    # An instance stopped past transaction.timeout.ms (Kafka's txn-timeout fault): the broker aborted
    # its transaction and bumped its epoch, so once woken it must never commit again.
    stalled = {e["instance"]: e["seq"] for e in history if e["type"] == "stalled"}
    for e in history:
        if e["type"] == "commit" and e["instance"] in stalled and e["seq"] > stalled[e["instance"]]:
            violations.append(Violation("zombie_fenced", None, f"instance {e['instance']}, stalled past its "
                                        "transaction timeout, is fenced", "it committed after waking", e["seq"]))
    broker_failed = any(e["type"] == "error" and e.get("broker") for e in history)  # see broker_failure
    finished = any(e["type"] == "done" for e in history)
    if not finished and not violations and not store_findings and not broker_failed:
        died = [e for e in history if e["type"] == "crash" and e.get("output")]  # outside any fault
        violations.append(Violation("task_finishes", None, "the task reaches the end of its input", "it never did", None,
                                    detail=_with_output("", died[-1]) if died else None))
    return violations


def check_store_directory(history: list[dict], model: LifecycleModel) -> list[Violation]:
    """Kafka Streams' state directory layout, from the runtime's ``store_directory`` events: each path or problem once."""
    seen: dict[str, Violation] = {}
    for e in history:
        if e["type"] != "store_directory":
            continue
        for path in e["outside"]:
            seen.setdefault(path, Violation("store_directory", path, f"nothing outside {e['store']}'s directory",
                                            f"store wrote {path}", e["seq"],
                                            detail=f"the store {e['store']!r} wrote {path}, outside its directory "
                                                   "[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]"))
        for problem in e["naming"]:
            seen.setdefault(problem, Violation("store_directory", e["store"], "Kafka Streams' state directory layout",
                                               problem, e["seq"]))
    return list(seen.values())


CHECKERS = (check_atomic_commit, check_recovered_state, check_no_wipe, check_reads, check_output, check_store_calls,
            check_finishes, check_store_directory)


def check_all(history: list[dict], model: LifecycleModel) -> list[Violation]:
    found: list[Violation] = []
    for checker in CHECKERS:
        found.extend(checker(history, model))
    return found


def recovery_report(history: list[dict], model: LifecycleModel) -> list[dict]:
    """The ``recovery`` entries of a verdict: what each recovery replayed vs. the uncommitted tail."""
    tails = _expected_tails(history, model)
    report = []
    for event in history:
        if event["type"] != "recover":
            continue
        allowed = tails[event["seq"]]
        tail = event["replayed_records"] if event["replayed_records"] in allowed else min(allowed)
        report.append(
            {
                "instance": event["instance"],
                "replayed_records": event["replayed_records"],
                "uncommitted_tail": tail,
                "changelog_length": event["changelog_length"],
                "wiped": event["wiped"],
                "seconds": event["seconds"],
            }
        )
    return report


def broker_failure(history: list[dict]) -> str | None:
    """Why the run could not finish when the broker failed the task (a ``BrokerError`` in the task:
    the broker did not answer within its bound, refused an operation, …), else None.

    That is the environment, not the store: the scenario's verdict is ``error`` with this reason
    (unless a check found a broken promise in what the task did before), never a ``task_finishes``
    finding. Seen under heavy load, where a killed broker took longer to come back than the
    client's bound."""
    for e in history:
        if e["type"] == "error" and e.get("broker"):
            return (f"the broker failed instance {e['instance']}, so the task could not finish: {e['broker']} "
                    "(what the task did before was checked)")
    return None
