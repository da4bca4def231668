"""The offsets suite's upgrade and downgrade scenarios (KIP-1035; issue 15 items 2 and 3).

* ``upgrade_from_legacy_files``: a store holding keys but no offsets (as a database written before
  offset management) is opened on a directory with the task's ``.checkpoint`` (its own partitions and
  another store's) and its ``.position``; once with no crash (tracing the crash points the store
  reaches), then with a crash at each step of the migration (``store.migrate.*``) the store reached,
  followed by a restart. Afterwards the store holds exactly the files'
  offsets and every key, and the files no longer hold its offsets.
* ``malformed_offsets_files``: a malformed ``.checkpoint`` or ``.position`` stops ``init`` with an
  error naming the file and the line; the file and the store are left as they were.
* ``upgrade_without_checkpoint``: a legacy database (written by ``rocksdb-legacy``, the harness's store
  from before offset management) whose task crashed with writes of an uncommitted transaction on
  disk and, as under exactly-once, no ``.checkpoint``: the store must not import it (``init`` raises
  ``IncompatibleStoreDirectory``, so the runtime wipes and restores it) nor present its data.
* ``downgrade_with_upgrade_from``: ``close()`` with ``upgrade_from="3.9"`` hands the offsets back to
  the files and keeps none itself; with a crash at each step of the downgrade (``store.downgrade.*``)
  the store reached without a crash, a restart finds every offset (in the store or in the files) and
  every key.

A crash point of a migration or downgrade that the store never reaches (a store of the user's own,
with steps of its own) is not run as a crash case: the run says so in its notes.

Both are what Kafka's own RocksDB store does; a store that declares it lacks them
(``Capabilities(legacy_offsets_import=False)`` / ``legacy_downgrade=False``) is not checked for them.

The real path under the task runtime (``rocksdb-legacy`` → ``rocksdb-indexed`` → back) is
:func:`eos_harness.suites.offsets.upgrade_path.round_trip`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from eos_harness.process.server import ChildCrashed, StoreCallError, StoreProcess, StoreServer
from eos_harness.store import TopicPartition
from eos_harness.stores.migration import (
    DOWNGRADE_POINTS,
    MIGRATION_POINTS,
    read_offsets_file,
    write_offsets_file,
)
from eos_harness.verdict import Violation

from .scenario import CHANGELOGS, KEYS, SOURCE, Features, Findings, Scenario, show_offsets

__all__ = ["MALFORMED", "SCENARIOS"]

OTHER_STORE = TopicPartition("app-other-changelog", 0)  # another store of the same task: its .checkpoint entry stays
DOWNGRADE_TO = "3.9"


class _Dir:
    """One store directory laid out as ``[state.dir]/[app]/[task]/rocksdb/[store]``; children of one server."""

    def __init__(self, server: StoreServer, spec: str, root: Path) -> None:
        self.server, self.spec = server, spec
        self.directory = root / "app" / "0_0" / "rocksdb" / "store"
        self.checkpoint = self.directory.parent.parent / ".checkpoint"
        self.position = self.directory / ".position"

    def open(self, upgrade_from: str | None = None, init_arms: list[tuple[str, int]] | None = None,
             arms: list[tuple[str, int]] | None = None, trace: bool = False) -> StoreProcess:
        context = {"changelogs": CHANGELOGS, **({"upgrade_from": upgrade_from} if upgrade_from else {})}
        return self.server.start(self.spec, self.directory, arms=arms, context=context, init_arms=init_arms,
                                 trace=trace)

    def contents(self, proc: StoreProcess) -> dict[bytes, bytes]:
        return {k: v for k in KEYS if (v := proc.call("get", k)) is not None}

    def offsets(self, proc: StoreProcess, tps) -> dict[TopicPartition, int | None]:
        return {tp: proc.call("committed_offset", tp) for tp in tps}


def _keys(rng: random.Random) -> dict[bytes, bytes]:
    return {k: b"v%d" % rng.randrange(1000) for k in KEYS}


def _applies(features: Features) -> str | None:
    if not features.persistent:
        return "the store is not persistent: nothing on disk to upgrade or downgrade"
    if not features.manages_offsets:
        return "the store does not manage offsets: the runtime keeps its .checkpoint (KIP-1035 upgrade applies to " \
               "stores that manage offsets)"
    return None


def _put(proc: StoreProcess, entries: dict[bytes, bytes]) -> None:
    for key, value in entries.items():
        proc.call("put", key, value)


def _close_tracing(proc: StoreProcess, steps: tuple[str, ...], reached: list[str] | None) -> None:
    """Close a store started with ``trace``; ``reached`` gets the points of ``steps`` it reached."""
    traced = {name for name, _ in proc.call("close") or []}
    if reached is not None:
        reached.extend(p for p in steps if p in traced)


def _crash_cases(server: StoreServer, spec: str, workdir: Path, rng: random.Random, findings: Findings,
                 what: str, steps: tuple[str, ...],
                 label: str) -> Iterator[tuple[str | None, str, _Dir, dict[bytes, bytes], list[str] | None]]:
    """The cases of ``what`` (the migration, the downgrade): first without a crash, which notes the
    points of ``steps`` the store reached, then a crash at each step it reached; each counted in
    ``findings``, in a new store directory, with keys of its own. Yields (the crash point or None,
    the case's name, its directory, its keys, the list the case without a crash notes the steps it
    reached in: None for the others). The steps never reached are noted at the end."""
    reached: list[str] = []
    for point in (None, *steps):
        if point is not None and point not in reached:
            continue
        findings.cases += 1
        case = f"{label}, {'no crash' if point is None else f'crash at {point}'}"
        d = _Dir(server, spec, workdir / f"{label.split()[0]}-{point or 'none'}")
        yield point, case, d, _keys(rng), reached if point is None else None
    missed = [p for p in steps if p not in reached]
    if missed:
        findings.notes.append(f"crash points of the {what} the store never reached (its {what} has steps of its "
                              f"own, or none): {', '.join(missed)}; no crash case was run at them, the case "
                              f"without a crash covers them")


# -- upgrade ----------------------------------------------------------------------------------------

def _upgrade(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    rng = random.Random(seed)
    violations = Findings(cases=0)
    with StoreServer(timeout=store_timeout) as server:
        for point, case, d, keys, reached in _crash_cases(server, spec, workdir, rng, violations, "migration",
                                                          MIGRATION_POINTS, "upgrade from legacy files"):
            proc = d.open()
            _put(proc, keys)
            proc.call("commit", {})  # data written before offset management: no offsets in the store
            proc.close()
            changelog = {tp: rng.randrange(10, 10_000) for tp in CHANGELOGS}
            positions = {SOURCE: rng.randrange(10, 10_000)}
            other = rng.randrange(10, 10_000)
            write_offsets_file(d.checkpoint, {**changelog, OTHER_STORE: other})
            write_offsets_file(d.position, positions)
            story = f"{case}: .checkpoint {show_offsets({**changelog, OTHER_STORE: other})}, " \
                    f".position {show_offsets(positions)}"
            try:
                proc = d.open(init_arms=[(point, 1)] if point else None, trace=point is None)
            except ChildCrashed:
                story += f"; the process died at {point}; restarted"
                proc = d.open()
            expected = {**changelog, **positions}
            got = d.offsets(proc, expected)
            for tp, want in expected.items():
                if got[tp] is None:
                    where = "still in its legacy file" if tp in (read_offsets_file(
                        d.position if tp == SOURCE else d.checkpoint) or {}) else "in neither the file nor the store"
                    violations.append(Violation("migration_keeps_offsets", str(tp), f"committed_offset {want}",
                                                f"None ({where})", case=case, detail=story))
                elif got[tp] != want:
                    violations.append(Violation("migration_offset_exact", str(tp), f"committed_offset {want}",
                                                str(got[tp]), case=case,
                                                detail=story + f"; the store imported {got[tp]}, the file held {want}"))
            contents = d.contents(proc)
            if contents != keys:
                violations.append(Violation("migration_keeps_keys", None, repr(sorted(keys.items())),
                                            repr(sorted(contents.items())), case=case, detail=story))
            _close_tracing(proc, MIGRATION_POINTS, reached)
            left_checkpoint, left_position = read_offsets_file(d.checkpoint), d.position.exists()
            if left_checkpoint != {OTHER_STORE: other} or left_position:
                violations.append(Violation(
                    "migration_cleans_files", None, f".checkpoint {show_offsets({OTHER_STORE: other})}, no .position",
                    f".checkpoint {show_offsets(left_checkpoint) if left_checkpoint is not None else 'absent'}, "
                    f".position {'still there' if left_position else 'absent'}", case=case, detail=story))
    return violations


# -- a legacy database without offsets -------------------------------------------------------------

LEGACY_STORE = "rocksdb-legacy"


def _untrusted(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    rng = random.Random(seed)
    violations: list[Violation] = []
    with StoreServer(timeout=store_timeout) as server:
        d = _Dir(server, spec, workdir / "untrusted")
        committed, uncommitted = _keys(rng), {b"never-committed": b"u%d" % rng.randrange(1000)}
        legacy = server.start(LEGACY_STORE, d.directory)
        _put(legacy, committed)
        legacy.call("commit", {})
        _put(legacy, uncommitted)  # a transaction that never commits: the task is killed
        legacy.kill()
        case = "upgrade from a legacy database without a .checkpoint"
        story = (f"{case}: {LEGACY_STORE} wrote {sorted(committed)} and committed, then wrote {sorted(uncommitted)} "
                 "and was killed (under exactly-once the task has no .checkpoint while it runs)")
        try:
            proc = d.open()
        except StoreCallError as exc:
            if exc.kind != "IncompatibleStoreDirectory":
                raise
            return violations  # refused: the runtime wipes the directory and restores it from the changelog
        contents = d.contents(proc) | {k: v for k in uncommitted if (v := proc.call("get", k)) is not None}
        offsets = d.offsets(proc, CHANGELOGS)
        proc.close()
        if contents:
            survived = sorted(k for k in contents if k in uncommitted)
            violations.append(Violation(
                "migration_refuses_unchecked_legacy", None,
                "init raises IncompatibleStoreDirectory (the runtime wipes and restores from the changelog), "
                "or the store holds none of the legacy database's keys",
                f"opened with {len(contents)} of its keys, offsets {show_offsets(offsets)}"
                + (f", the uncommitted write of {survived} among them" if survived else ""), case=case,
                detail=story + "; the store imported data no committed offset vouches for: the changelog replayed "
                "over it never rewrites a key only the aborted transaction wrote"))
    return violations


# -- malformed files --------------------------------------------------------------------------------

# (which file, its text, the line the error must name)
MALFORMED = (
    ("checkpoint", "1\n1\napp-store-changelog 0 5\n", 1),
    ("checkpoint", "0\ntwo\napp-store-changelog 0 5\n", 2),
    ("checkpoint", "0\n2\napp-store-changelog 0 5\napp-store-changelog one 7\n", 4),
    ("checkpoint", "0\n3\napp-store-changelog 0 5\napp-store-changelog 1 7\n", 5),
    ("position", "0\n1\napp-input 0 5 9\n", 3),
    ("position", "0\n1\napp-input 0 5\napp-input 1 6\n", 4),
)


def _malformed(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    rng = random.Random(seed)
    violations = Findings(cases=len(MALFORMED))
    with StoreServer(timeout=store_timeout) as server:
        for number, (which, text, line) in enumerate(MALFORMED):
            d = _Dir(server, spec, workdir / f"malformed-{number}")
            keys = _keys(rng)
            committed = {CHANGELOGS[0]: rng.randrange(10, 10_000)}
            proc = d.open()
            _put(proc, keys)
            proc.call("commit", committed)
            proc.close()
            path = d.checkpoint if which == "checkpoint" else d.position
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            case = f"malformed .{which} (line {line} wrong): {text!r}"
            try:
                proc = d.open()
            except StoreCallError as exc:
                message = str(exc)
                if str(path) not in message or f"line {line}" not in message:
                    violations.append(Violation("malformed_offsets_file", None,
                                                f"an error naming {path} and line {line}", message[:400], case=case))
            else:
                violations.append(Violation("malformed_offsets_file", None, f"init fails naming {path} and line {line}",
                                            "init succeeded", case=case))
                proc.close()
            if not path.exists() or path.read_text() != text:
                violations.append(Violation("malformed_offsets_file", None, f"{path} left as it was",
                                            "changed" if path.exists() else "deleted", case=case))
            path.unlink(missing_ok=True)
            proc = d.open()
            contents, offsets = d.contents(proc), d.offsets(proc, committed)
            proc.close()
            if contents != keys or offsets != committed:
                violations.append(Violation(
                    "malformed_offsets_file", None, f"the store's data untouched: {sorted(keys.items())!r}, "
                    f"offsets {show_offsets(committed)}", f"{sorted(contents.items())!r}, offsets {show_offsets(offsets)}",
                    case=case, detail="after the failed open, the malformed file was removed and the store reopened"))
    return violations


# -- downgrade --------------------------------------------------------------------------------------

def _downgrade(spec: str, workdir: Path, seed: int, store_timeout: float) -> list[Violation]:
    rng = random.Random(seed)
    violations = Findings(cases=0)
    with StoreServer(timeout=store_timeout) as server:
        for point, case, d, keys, reached in _crash_cases(server, spec, workdir, rng, violations, "downgrade",
                                                          DOWNGRADE_POINTS, f"downgrade with upgrade_from={DOWNGRADE_TO}"):
            changelog = {tp: rng.randrange(10, 10_000) for tp in CHANGELOGS}
            positions = {SOURCE: rng.randrange(10, 10_000)}
            proc = d.open()
            _put(proc, keys)
            proc.call("commit", {**changelog, **positions})
            proc.close()
            proc = d.open(upgrade_from=DOWNGRADE_TO, arms=[(point, 1)] if point else None, trace=point is None)
            story = f"{case}: committed {show_offsets({**changelog, **positions})}, reopened with upgrade_from, closed"
            crashed = False
            try:
                _close_tracing(proc, DOWNGRADE_POINTS, reached)
            except ChildCrashed:
                crashed = True
                story += f"; the process died at {point}"
            if not crashed:
                checkpoint, position = read_offsets_file(d.checkpoint) or {}, read_offsets_file(d.position) or {}
                if checkpoint != changelog or position != positions:
                    violations.append(Violation(
                        "downgrade_hands_back_offsets", None,
                        f".checkpoint {show_offsets(changelog)}, .position {show_offsets(positions)}",
                        f".checkpoint {show_offsets(checkpoint) or 'absent'}, .position {show_offsets(position) or 'absent'}",
                        case=case, detail=story))
                aside = {p: p.read_bytes() for p in (d.checkpoint, d.position) if p.exists()}
                for p in aside:
                    p.unlink()
                try:
                    proc = d.open()
                except StoreCallError as exc:
                    if exc.kind != "IncompatibleStoreDirectory":
                        raise
                    kept = {}  # it refused its own database without offsets: it kept none
                else:
                    kept = {tp: o for tp, o in d.offsets(proc, {**changelog, **positions}).items() if o is not None}
                    proc.close()
                for p, data in aside.items():
                    p.write_bytes(data)
                if kept:
                    violations.append(Violation(
                        "downgrade_hands_back_offsets", None, "no offsets left in the store",
                        f"the store still holds {show_offsets(kept)}", case=case,
                        detail=story + "; with the files moved aside, the store reopened and asked for its offsets"))
                story += "; the files were moved aside, the store reopened empty of offsets, files put back"
            proc = d.open()  # a restart of the same version: it upgrades again from whatever is there
            got = d.offsets(proc, {**changelog, **positions})
            contents = d.contents(proc)
            proc.close()
            want = {**changelog, **positions}
            if got != want or contents != keys:
                violations.append(Violation(
                    "downgrade_keeps_offsets", None, f"offsets {show_offsets(want)}, keys {sorted(keys.items())!r}",
                    f"offsets {show_offsets(got)}, keys {sorted(contents.items())!r}", case=case,
                    detail=story + "; restarted without upgrade_from"))
    return violations


SCENARIOS = [
    Scenario("upgrade_from_legacy_files",
             ("migration_keeps_offsets", "migration_offset_exact", "migration_keeps_keys", "migration_cleans_files"),
             _applies, _upgrade, needs=("legacy_offsets_import", "several_changelog_partitions")),
    Scenario("upgrade_without_checkpoint", ("migration_refuses_unchecked_legacy",), _applies, _untrusted,
             needs=("legacy_offsets_import", "several_changelog_partitions")),
    Scenario("malformed_offsets_files", ("malformed_offsets_file",), _applies, _malformed,
             needs=("legacy_offsets_import", "several_changelog_partitions")),
    Scenario("downgrade_with_upgrade_from", ("downgrade_hands_back_offsets", "downgrade_keeps_offsets"),
             _applies, _downgrade, needs=("legacy_downgrade", "several_changelog_partitions")),
]
