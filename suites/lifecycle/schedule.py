"""Fault schedules of the lifecycle suite: ``task.commit.after_eos@2,kill@7`` → faults."""

from __future__ import annotations

from dataclasses import dataclass

from eos_harness.faults import points
from eos_harness.faults.kafka import BROKER_FAULTS


class ScheduleError(ValueError):
    """A fault schedule that names an unknown point or is malformed."""


@dataclass(frozen=True)
class Fault:
    """One fault, armed in one task instance."""

    point: str  # a crash point, "kill" (the driver SIGKILLs after ``hit`` events) or a Kafka fault
    hit: int = 1
    action: str = "kill"  # or "freeze": the process SIGSTOPs itself at the point (a zombie)

    def __str__(self) -> str:
        text = self.point if self.hit == 1 else f"{self.point}@{self.hit}"
        return f"freeze:{text}" if self.action == "freeze" else text


def parse_schedule(text: str | list[str] | tuple[str, ...]) -> tuple[Fault, ...]:
    """``"task.commit.after_eos@2,kill@7"`` → faults, checked against the declared points."""
    items = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    faults = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        action = "kill"
        if item.startswith("freeze:"):
            action, item = "freeze", item.removeprefix("freeze:")
        name, _, hit = item.partition("@")
        if hit and not hit.isdigit():
            raise ScheduleError(f"bad fault {item!r}: the part after '@' must be a count, e.g. {name}@2")
        if hit and int(hit) < 1:
            # @0 is never reached: a crash point would be armed for nothing, a kill never sent.
            raise ScheduleError(f"bad fault {item!r}: the count after '@' must be at least 1 "
                                f"(the first time reached is {name}@1)")
        if name != "kill" and name not in BROKER_FAULTS:
            try:
                points.check_known(name)
            except points.UnknownCrashPoint as exc:
                raise ScheduleError(str(exc)) from None
        if (name == "kill" or name in BROKER_FAULTS) and action == "freeze":
            raise ScheduleError(f"freeze: takes a crash point, not {name}")
        faults.append(Fault(name, int(hit or 1), action))
    return tuple(faults)
