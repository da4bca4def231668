"""Fault schedules of the lifecycle suite: ``task.commit.after_eos@2,kill@7`` → faults.

Each item is spelled as its kind in :mod:`eos_harness.faults.kinds` says (``POINT[@n]``,
``freeze:POINT[@n]``, ``kill@n``, ``broker-kill@n``, …); this module only splits items and counts.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from eos_harness.faults import kinds, points


class ScheduleError(ValueError):
    """A fault schedule that names an unknown point or is malformed."""


@dataclass(frozen=True)
class Fault:
    """One fault, armed in one task instance."""

    point: str  # a crash point, or the name of a fault kind (``kill``, ``broker-kill``, …)
    hit: int = 1
    action: str = points.KILL  # what a crash point does: kill, or freeze (the process SIGSTOPs itself)

    def __str__(self) -> str:
        text = self.point if self.hit == 1 else f"{self.point}@{self.hit}"
        return kinds.kind_of(self).prefix + text


def parse_schedule(text: str | list[str] | tuple[str, ...]) -> tuple[Fault, ...]:
    """``"task.commit.after_eos@2,kill@7"`` → faults, checked against the fault kinds and the
    declared points (a user's store module is loaded first, with its store)."""
    points.load_declarations()
    prefixed = [k for k in kinds.kinds(kinds.LIFECYCLE) if k.prefix]
    items = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    faults = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        modifier = next((k for k in prefixed if item.startswith(k.prefix)), None)
        name, _, hit = item.removeprefix(modifier.prefix if modifier else "").partition("@")
        if hit and not hit.isdigit():
            raise ScheduleError(f"bad fault {item!r}: the part after '@' must be a count, e.g. {name}@2")
        if hit and int(hit) < 1:
            # @0 is never reached: a crash point would be armed for nothing, a kill never sent.
            raise ScheduleError(f"bad fault {item!r}: the count after '@' must be at least 1 "
                                f"(the first time reached is {name}@1)")
        kind = kinds.named(name)
        if modifier is not None and kind is not None:
            raise ScheduleError(f"{modifier.prefix} takes a crash point, not {name}")
        kind = modifier or kind or kinds.CRASH_POINT
        if kind.at_point:
            try:
                points.check_known(name)
            except points.UnknownCrashPoint as exc:
                words = [k.name for k in kinds.kinds(kinds.LIFECYCLE) if not k.at_point]
                close = difflib.get_close_matches(name, words, n=1)
                hint = f"; did you mean the fault kind {close[0]}?" if close and modifier is None else ""
                raise ScheduleError(f"{exc}{hint}") from None
        faults.append(Fault(name, int(hit or 1), kind.action))
    return tuple(faults)


def parse_store_schedule(store: str, text: str | list[str] | tuple[str, ...],
                         timeout: float | None = None) -> tuple[tuple[Fault, ...], str | None]:
    """:func:`parse_schedule` for a run of ``store``, and the warning to show. A schedule that names a
    crash point no module declares, with a user's store (``module:function``): the store is probed
    once (in a child), and the points it reaches but never declared are declared for the run, as
    ``chaos`` and ``verify`` do (the replay command of a campaign's scenario names them); the warning
    names them and says how to declare them."""
    try:
        return parse_schedule(text), None
    except ScheduleError:
        from eos_harness.stores.probe import probe_store
        from eos_harness.stores.registry import builtin_spec

        if ":" not in store or builtin_spec(store) is not None:
            raise
    probe = probe_store(store, timeout)
    for name in probe.undeclared:
        points.declare_for_run(name)
    return parse_schedule(text), probe.undeclared_warning(store)
