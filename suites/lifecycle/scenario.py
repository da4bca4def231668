"""A scenario of the lifecycle suite: a store, a workload, a seed and a fault schedule, on a broker; its
replay command. What the plan draws (:mod:`.plan`) and the runner runs (:mod:`.runner`)."""

from __future__ import annotations

from dataclasses import dataclass

from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.suites.lifecycle.schedule import Fault

__all__ = ["Scenario"]


@dataclass(frozen=True)
class Scenario:
    """One scenario. ``broker``: what it runs on, a :class:`BrokerSpec` (its text is accepted and
    parsed): a started ``kafka-local`` is a ``kafka://127.0.0.1:…`` spec whose CLI text, in the
    replay command, stays ``kafka-local``."""

    store: str
    workload: str
    seed: int
    schedule: tuple[Fault, ...] = ()
    broker: BrokerSpec = EMBEDDED
    records: int | None = None
    commit_interval: int = 10
    store_timeout: float = STORE_TIMEOUT_S  # bound on one call into the store (a longer one: store_hang)
    allow: tuple[str, ...] = ()  # the checks waived (``--allow``): counted, not judged

    def __post_init__(self) -> None:
        object.__setattr__(self, "broker", parse(self.broker, internal=True))

    def repro(self) -> str:
        from eos_harness.commands import command_line

        words = ["run", "--store", self.store, "--workload", self.workload]
        if self.schedule:
            words += ["--crash-at", ",".join(map(str, self.schedule))]
        if self.broker.is_kafka:
            words += ["--broker", self.broker.cli_text]
        if self.records is not None:
            words += ["--records", self.records]
        if self.commit_interval != 10:
            words += ["--commit-interval", self.commit_interval]
        if self.store_timeout != STORE_TIMEOUT_S:
            words += ["--store-timeout", f"{self.store_timeout:g}"]
        words += [word for check in self.allow for word in ("--allow", check)]
        return command_line(*words, "--seed", self.seed)
