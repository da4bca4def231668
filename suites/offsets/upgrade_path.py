"""The real upgrade and downgrade path under the task runtime (KIP-1035), end to end.

A task runs with ``rocksdb-legacy`` on the embedded broker and closes cleanly (its ``.checkpoint``
written); the same task then restarts with ``rocksdb-indexed`` or ``rocksdb-secondary`` (which first
adopts the legacy ``db/`` as its ``main/``), which imports the offsets, with a crash at each step of
the migration and a restart; it goes back to ``rocksdb-legacy`` either through
a downgrade (``upgrade_from="3.9"``, a crash at each step of it) or without one (the legacy store
cannot open the upgraded database: the runtime wipes it and restores from the changelog). After
each restart the store's offset is the changelog position the previous instance committed (never
lower, never lost) and its contents are the changelog's committed writes. A legacy task killed
mid-batch (uncommitted writes on disk, no ``.checkpoint`` under EOS) restarted with the upgraded
store is wiped and restored: no uncommitted write survives (:func:`untrusted_legacy`). Every task runs in a child
process forked from the zygote; a crash is an armed crash point SIGKILLing it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eos_harness.faults import points
from eos_harness.models.lifecycle import LifecycleModel
from eos_harness.models.workloads import workload
from eos_harness.process.child_events import report_fault_firings, run_reporting_child
from eos_harness.process.server import forkserver_context
from eos_harness.runtime import P_MID_BATCH, Task, TaskConfig, create_topics, decode
from eos_harness.runtime.checkpoint import read_checkpoint
from eos_harness.stores.migration import DOWNGRADE_POINTS, MIGRATION_POINTS
from eos_harness.suites.lifecycle.checks import check_recovered_state
from eos_harness.verdict import Violation

__all__ = ["round_trip", "run_task", "untrusted_legacy"]

LEGACY, UPGRADED, DOWNGRADE_TO = "rocksdb-legacy", "rocksdb-indexed", "3.9"


def _task_main(config: TaskConfig, arm: str | tuple[str, int] | None, conn) -> None:
    def run_task() -> None:
        report_fault_firings(conn)
        task = Task(config, emit=conn.send)
        if arm is not None:
            points.load_declarations()
            points.arm(*((arm, 1) if isinstance(arm, str) else arm))
        task.run()

    run_reporting_child(conn, run_task)


def run_task(config: TaskConfig, arm: str | tuple[str, int] | None = None) -> tuple[list[dict], str | None]:
    """Run one task instance to its end in a child; its events and the crash point it died at (if any)."""
    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_task_main, args=(config, arm, child), daemon=True)
    process.start()
    child.close()
    events: list[dict] = []
    try:
        while True:
            try:
                events.append(parent.recv())
            except EOFError:
                break
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()
        parent.close()
    errors = [e["error"] for e in events if e["type"] == "error"]
    if errors:
        raise RuntimeError(f"task instance failed:\n{errors[0]}")
    fired = [e["point"] for e in events if e["type"] == "fault_fired"]
    return events, fired[0] if fired else None


class _Trip:
    """One task's state directory and broker; each ``run`` is an instance of the task."""

    def __init__(self, root: Path, seed: int) -> None:
        from eos_harness.broker import connect

        self.root = root
        self.broker_text = f"embedded:{root / 'broker.sqlite'}"
        self.base = TaskConfig(store=LEGACY, broker=self.broker_text, state_dir=str(root / "state"), workload="counter",
                               commit_interval=7)
        self.broker = connect(self.broker_text)
        create_topics(self.broker, self.base)
        import random

        self.rng = random.Random(seed)
        self.workload = workload("counter")

    def feed(self, n: int) -> None:
        self.broker.produce(self.base.input_topic, 0, self.workload.generate(self.rng, n))

    def run(self, store: str, arm: str | tuple[str, int] | None = None, upgrade_from: str | None = None) -> tuple[list[dict], str | None]:
        return run_task(replace(self.base, store=store, upgrade_from=upgrade_from), arm)

    def changelog_state(self) -> dict[str, str]:
        state: dict[str, str] = {}
        for record in self.broker.read_committed(self.base.changelog_tp, 0):
            key = record.key.decode("latin-1")
            if record.value is None:
                state.pop(key, None)
            else:
                state[key] = record.value.decode("latin-1")
        return state

    def checkpoint_offset(self) -> int | None:
        return read_checkpoint(self.base.checkpoint_path).get(self.base.changelog_tp)

    def close(self) -> None:
        self.broker.close()


def _recover(events: list[dict]) -> dict:
    return next(e for e in events if e["type"] == "recover")


def _contents(event: dict) -> dict[str, str]:
    return {k: v for k, v in (event["contents"] or [])}


def _check_restart(want: dict[str, str], events: list[dict], offset: int | None, check: str, case: str,
                   wipe_expected: bool | None = None) -> list[Violation]:
    """After a restart: the store started from ``offset`` (the previous instance's committed changelog
    position; any offset when the store was wiped) and, restored, holds ``want`` (the changelog's
    committed writes when the instance started)."""
    violations = []
    recover = _recover(events)
    wiped = any(e["type"] == "wipe" for e in events)
    if wipe_expected is not None and wiped != wipe_expected:
        violations.append(Violation(check, None, "the store wiped and restored" if wipe_expected else
                                    "the store opened the directory as it is",
                                    "wiped" if wiped else "not wiped", case=case))
    if not wiped and recover["store_offset"] != offset:
        violations.append(Violation(check, None, f"the store starts from changelog offset {offset}",
                                    f"it started from {recover['store_offset']}", case=case,
                                    detail="a lower offset replays records twice; None or 0 means the offset was lost"))
    got = _contents(recover)
    if got != want:
        wrong = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))[:5]
        violations.append(Violation(check.replace("offsets", "keys") if "migration" in check else check, None,
                                    f"{len(want)} keys as the changelog has them",
                                    f"{len(got)} keys, wrong or missing: {[decode(k) for k in wrong]}", case=case))
    return violations


def _steps(upgraded: str) -> tuple[tuple[str, ...], tuple[str, ...], frozenset]:
    """The crash points of ``upgraded``'s migration and downgrade, and the downgrade's last points: a
    crash there (or none) leaves a directory the legacy store opens as it is (else it wipes)."""
    from eos_harness.stores.registry import resolve
    from eos_harness.stores.secondary import ADOPT_POINTS, HANDBACK_POINTS, SecondaryRocksStore

    if isinstance(resolve(upgraded)(), SecondaryRocksStore):  # its main store lives in main/, not db/
        return (*ADOPT_POINTS, *MIGRATION_POINTS), (*DOWNGRADE_POINTS, *HANDBACK_POINTS), \
            frozenset({None, HANDBACK_POINTS[-1]})
    return MIGRATION_POINTS, DOWNGRADE_POINTS, frozenset({None, DOWNGRADE_POINTS[-1]})


FRESH_KEYS = 10  # records of keys the task never wrote before, fed after the legacy task's clean close
KILLED_AFTER = 3  # the legacy task is killed after processing this many of them (before its next commit)


def _history(records: list[tuple[bytes, bytes]], events: list[dict]) -> tuple[LifecycleModel, list[dict]]:
    model = LifecycleModel(workload("counter"), records)
    return model, [{**event, "seq": seq, "instance": 1} for seq, event in enumerate(events)]


def untrusted_legacy(workdir: Path, seed: int = 1, upgraded: str = UPGRADED) -> list[Violation]:
    """A legacy task killed mid-batch (writes of its open transaction on disk and, under EOS, no
    ``.checkpoint``) restarted with ``upgraded``: the runtime must wipe the directory (a ``wipe``
    event) and restore it; the lifecycle checks of the recovered state (``no_uncommitted_survives``,
    ``committed_rolls_forward``) and every committed key as the changelog has it."""
    case = f"legacy killed mid-batch (no .checkpoint) -> {upgraded}"
    trip = _Trip(workdir / "untrusted", seed)
    try:
        trip.feed(40)
        trip.run(LEGACY)
        trip.broker.produce(trip.base.input_topic, 0, [(b"fresh%02d" % i, b"1") for i in range(FRESH_KEYS)])
        _, fired = trip.run(LEGACY, arm=(P_MID_BATCH, KILLED_AFTER))
        assert fired == P_MID_BATCH, "the legacy task was not killed mid-batch"
        assert trip.checkpoint_offset() is None and (trip.base.store_dir / "db").exists()
        want = trip.changelog_state()
        events, _ = trip.run(upgraded)
        records = [(r.key or b"", r.value or b"") for r in trip.broker.read_committed(trip.base.input_tp, 0)]
    finally:
        trip.close()
    model, history = _history(records, events)
    violations = [replace(v, case=case) for v in check_recovered_state(history, model)]
    return violations + _check_restart(want, events, 0, "migration_refuses_unchecked_legacy", case,
                                       wipe_expected=True)  # not wiped, it replays the whole changelog


def round_trip(workdir: Path, seed: int = 1, upgraded: str = UPGRADED) -> dict:
    """Every case of the real path with ``upgraded`` as the store that manages offsets; the verdict:
    ``violations``, ``cases`` (each case run) and ``crashes`` (how many instances died at a migration
    or downgrade step)."""
    violations: list[Violation] = []
    cases: list[str] = []
    crashes = 0
    migration_points, downgrade_points, handed_back = _steps(upgraded)
    for number, point in enumerate((None, *migration_points)):
        case = f"legacy -> {upgraded}, {'no crash' if point is None else f'crash at {point}'}"
        trip = _Trip(workdir / f"upgrade-{number}", seed + number)
        try:
            trip.feed(40)
            trip.run(LEGACY)
            legacy_offset = trip.checkpoint_offset()
            trip.feed(30)
            want = trip.changelog_state()
            events, fired = trip.run(upgraded, arm=point)
            if fired is not None:
                crashes += 1
                events, _ = trip.run(upgraded)
            violations += _check_restart(want, events, legacy_offset, "migration_keeps_offsets", case)
            cases.append(case)
        finally:
            trip.close()
    for number, point in enumerate((None, *downgrade_points)):
        case = f"legacy -> {upgraded} -> legacy with upgrade_from={DOWNGRADE_TO}, " \
               f"{'no crash' if point is None else f'crash at {point}'}"
        trip = _Trip(workdir / f"downgrade-{number}", seed + 100 + number)
        try:
            trip.feed(40)
            trip.run(LEGACY)
            trip.feed(30)
            events, fired = trip.run(upgraded, arm=point, upgrade_from=DOWNGRADE_TO)
            if fired is not None:
                crashes += 1
            upgraded_offset = next(e for e in reversed(events) if e["type"] == "store_commit")["changelog_position"]
            trip.feed(20)
            want = trip.changelog_state()
            events, _ = trip.run(LEGACY)
            dropped = point in handed_back  # the offsets column family is gone (and the database in db/)
            violations += _check_restart(want, events, upgraded_offset, "downgrade_keeps_offsets", case,
                                         wipe_expected=not dropped)
            cases.append(case)
        finally:
            trip.close()
    case = f"legacy -> {upgraded} -> legacy without upgrade_from (wiped and restored)"
    trip = _Trip(workdir / "no-downgrade", seed + 200)
    try:
        trip.feed(40)
        trip.run(LEGACY)
        trip.feed(30)
        trip.run(upgraded)
        want = trip.changelog_state()
        events, _ = trip.run(LEGACY)
        violations += _check_restart(want, events, None, "downgrade_keeps_offsets", case, wipe_expected=True)
        cases.append(case)
    finally:
        trip.close()
    violations += untrusted_legacy(workdir, seed + 300, upgraded)
    cases.append(f"legacy killed mid-batch (no .checkpoint) -> {upgraded}")
    return {"violations": violations, "cases": cases, "crashes": crashes}
