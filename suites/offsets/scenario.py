"""What a scenario of the offsets suite is, and the live store it drives.

A :class:`Scenario` is ``(name, checks, applies, run, needs)``: ``applies(features)`` is None when the
scenario applies to a store with these :class:`Features`, else the reason it does not (reported as
``not_applicable``); ``needs``: the optional capabilities (``harness/store.Capabilities`` field names)
it checks: a store that declares it lacks one is not checked by it (reported as ``not_checked``);
``run(store_spec, workdir, seed, store_timeout)`` drives the store and returns the violations it
found (``[]`` when every promise held): a plain list (one case), or :class:`Findings`, which also
says how many cases it ran and notes what it left out. The store runs in a child of a
:class:`~eos_harness.process.server.StoreServer` (:class:`LiveStore`), so every call is bounded and
a crash is real: a SIGKILL, or an armed crash point firing inside the store.

A scenario may let :class:`~eos_harness.process.server.StoreCallError` or
:class:`~eos_harness.process.server.StoreHang` escape: the runner reports it as the guard's check
(``store_raised``, ``store_hang`` …) for that scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.process.server import ChildCrashed, StoreProcess, StoreServer
from eos_harness.store import Capabilities, TopicPartition
from eos_harness.verdict import Violation

__all__ = ["CHANGELOGS", "KEYS", "NEVER_COMMITTED", "SOURCE", "Features", "Findings", "LiveStore", "Scenario",
           "show_offsets"]

# A global store fed by three changelog partitions, and one source partition whose KIP-796 position
# the store keeps beside them. NEVER_COMMITTED is never given to a commit.
CHANGELOGS = tuple(TopicPartition("app-store-changelog", p) for p in range(3))
SOURCE = TopicPartition("app-input", 0)
NEVER_COMMITTED = TopicPartition("app-store-changelog", 3)
KEYS = [b"a", b"b", b"c", b"d", b"e"]


@dataclass(frozen=True)
class Features:
    """What a store says of itself, asked once in a child before the scenarios run."""

    persistent: bool
    transactional: bool
    manages_offsets: bool
    offers: Capabilities = field(default_factory=Capabilities)
    has_restore: bool = False


@dataclass(frozen=True)
class Scenario:
    """One scenario of the offsets suite (see the module docstring)."""

    name: str
    checks: tuple[str, ...]
    applies: Callable[[Features], str | None]
    run: Callable[[str, Path, int, float], list[Violation]]
    needs: tuple[str, ...] = ()
    # Checks of the scenario that only a store fed by several changelog partitions can break: a task's
    # store (Capabilities(several_changelog_partitions=False)) runs the scenario without them.
    several_only: tuple[str, ...] = ()
    # Stores it applies to by name (None when it applies to ``spec``, else why not): a scenario of one
    # system's own upgrade path (Kafka Streams 4.3.1 -> 4.4.0). None: any store whose features it applies to.
    applies_to: Callable[[str], str | None] | None = None

    def lacking(self, features: Features) -> list[str]:
        """The capabilities this scenario checks that the store declares it lacks."""
        return [name for name in self.needs if name in features.offers.lacking()]

    def checked(self, features: Features) -> tuple[str, ...]:
        """The checks this scenario checks on a store with these features."""
        if features.offers.several_changelog_partitions:
            return self.checks
        return tuple(check for check in self.checks if check not in self.several_only)


class Findings(list):
    """A scenario's violations (a ``list``), with ``cases``: how many cases it ran (each case one
    store history: a crash at one point, one malformed file …), and ``notes``: what it left out, in
    words (e.g. crash points the store never reaches)."""

    def __init__(self, violations: Iterable[Violation] = (), cases: int = 1, notes: Iterable[str] = ()) -> None:
        super().__init__(violations)
        self.cases = cases
        self.notes = list(notes)


def show_offsets(offsets: dict[TopicPartition, int | None]) -> dict[str, int | None]:
    """Offsets keyed by ``topic-partition`` text, for verdicts a person reads."""
    return {str(tp): offset for tp, offset in sorted(offsets.items())}


class LiveStore:
    """One store in a child process, reopened in the same directory after each crash or close.

    ``with LiveStore(spec, workdir, timeout) as live:`` … every child is killed at the end. The
    store's context names :data:`CHANGELOGS` (``context`` overrides or adds fields)."""

    def __init__(self, spec: str, workdir: Path, timeout: float, context: dict | None = None) -> None:
        self.spec = spec
        self.directory = workdir / "app" / "0_0" / "rocksdb" / "store"
        self.context = {"changelogs": CHANGELOGS, **(context or {})}
        self.server = StoreServer(timeout=timeout)
        self.proc: StoreProcess | None = None
        self.story: list[str] = []  # what happened, in a store implementer's words
        self.several: bool | None = None  # fed by several changelog partitions (asked at the first start)

    def __enter__(self) -> LiveStore:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def told(self, line: str) -> None:
        self.story.append(line)

    def start(self, arms: list[tuple[str, int]] | None = None, trace: bool = False) -> LiveStore:
        """Open the store (a new child) in its directory. A task's store (it declares
        ``Capabilities(several_changelog_partitions=False)``) is opened naming its own changelog
        partition alone, and is committed and asked for that one only (:meth:`own`)."""
        if self.several is None:
            self.several = _SEVERAL.get(self.spec)
        if self.several is None:  # not asked yet (a scenario run alone): ask the store in a child of its own
            asked = self.server.start(self.spec, self.directory, context=self.context)
            self.several = asked.call("capabilities").several_changelog_partitions
            asked.call("close")
        if not self.several:
            self.context = {**self.context, "changelogs": CHANGELOGS[:1]}
        self.proc = self.server.start(self.spec, self.directory, arms=arms, trace=trace, context=self.context)
        return self

    def own(self, offsets: Mapping[TopicPartition, int | None] | Iterable[TopicPartition]) -> dict:
        """Of ``offsets`` (a mapping, or partitions), those of the partitions the store is committed and
        asked for: every one for a store fed by several partitions, its changelog partition alone for a
        task's store."""
        if isinstance(offsets, Mapping):
            return {tp: offset for tp, offset in offsets.items() if self.several or tp == CHANGELOGS[0]}
        return {tp: None for tp in offsets if self.several or tp == CHANGELOGS[0]}

    def call(self, method: str, *args):
        if method == "commit":
            args = (self.own(args[0]), *args[1:])
        return self.proc.call(method, *args)

    def kill(self) -> None:
        """SIGKILL the store's process (a crash between two calls)."""
        self.told("SIGKILL of the store's process")
        self.proc.kill()

    def close(self) -> list:
        """A clean close (the trace of crash points reached, for a child started with ``trace``)."""
        self.told("close()")
        return self.call("close") or []

    def commit_crashing(self, offsets: dict[TopicPartition, int], point: str, hit: int) -> bool:
        """``commit(offsets)`` with ``point`` armed for its hit #``hit``: True when the store died there."""
        self.call("arm", point, hit)
        try:
            self.proc.call("commit", self.own(offsets))
        except ChildCrashed:
            self.told(f"commit {show_offsets(offsets)}: the process died at crash point {point} (hit #{hit})")
            return True
        self.call("disarm")
        self.told(f"commit {show_offsets(offsets)}: crash point {point} (hit #{hit}) not reached; committed")
        return False

    def offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """``committed_offset`` of each of ``tps`` the store is asked for (:meth:`own`)."""
        return {tp: self.call("committed_offset", tp) for tp in self.own(tps)}

    def contents(self, offers: Capabilities, committed: bool = False) -> dict[bytes, bytes]:
        """Every live entry (key by key over :data:`KEYS` for a store that declares no range scans)."""
        prefix = "rc_" if committed else ""
        if offers.range_scans:
            return dict(self.call(prefix + "all"))
        return {k: v for k in KEYS if (v := self.call(prefix + "get", k)) is not None}

    def put_all(self, entries: list[tuple[bytes, bytes | None]], offers: Capabilities) -> None:
        if offers.put_all:
            self.call("put_all", entries)
        else:
            for key, value in entries:
                self.call("put", key, value)

    def recent(self, lines: int = 8) -> str:
        return "\n".join(f"  {line}" for line in self.story[-lines:])


def features_of(spec: str, workdir: Path, timeout: float) -> Features:
    """Ask the store what it is (in a child, in ``workdir``)."""
    with LiveStore(spec, workdir, timeout) as live:
        live.several = True  # asked with a global store's context; a task's store ignores the others
        live.start()
        features = Features(live.call("persistent"), live.call("transactional"), live.call("manages_offsets"),
                            live.call("capabilities"), live.call("offers_restore"))
        live.call("close")
    _SEVERAL[spec] = features.offers.several_changelog_partitions
    return features


# Whether each store asked (features_of) is fed by several changelog partitions, for its LiveStores.
_SEVERAL: dict[str, bool] = {}
