"""Click parameter types of the CLI: every value is checked before anything runs, and a bad one is a
usage error (exit 2) that says what is allowed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click
from eos_harness.broker.spec import BrokerSpec, parse

__all__ = ["AT_LEAST_ONE", "POSITIVE_MINUTES", "STORE_LIST", "WORKLOAD_LIST", "BrokerParam", "NameList",
           "require_extra"]

AT_LEAST_ONE = click.IntRange(min=1)  # counts: records, scenarios, examples, steps, workers, …
POSITIVE_MINUTES = click.FloatRange(min=0, min_open=True)


class NameList(click.ParamType):
    """``a,b,c`` → ``["a", "b", "c"]`` (blanks dropped, repeats once), each among the allowed names;
    ``accept`` may allow more (a store factory ``module:function``) and says why it refuses one."""

    name = "name,name,…"

    def __init__(self, what: str, choices: Callable[[], Sequence[str]],
                 accept: Callable[[str], str | None] | None = None, accepted_also: str = "") -> None:
        self.what, self.choices, self.accept, self.accepted_also = what, choices, accept, accepted_also

    def convert(self, value, param, ctx) -> list[str]:
        if isinstance(value, list):
            return value
        names = list(dict.fromkeys(n.strip() for n in str(value).split(",") if n.strip()))
        allowed = list(self.choices())
        also = f", or {self.accepted_also}" if self.accepted_also else ""
        if not names:
            self.fail(f"give at least one {self.what}: choose among {', '.join(allowed)}{also}", param, ctx)
        for name in names:
            if name in allowed:
                continue
            problem = self.accept(name) if self.accept else "unknown"
            if problem is None:
                continue
            if problem == "unknown":
                self.fail(f"unknown {self.what} {name!r}: choose among {', '.join(allowed)}{also}", param, ctx)
            self.fail(problem, param, ctx)
        return names


def _store_names() -> list[str]:
    from eos_harness.stores.registry import builtin_specs

    return sorted(spec.name for spec in builtin_specs())  # stores, mutants and unsafe variants


def _store_factory_problem(name: str) -> str | None:
    """None when ``name`` is a store factory ``module:function`` that resolves, else why not."""
    from eos_harness.process.server import held_output
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.registry import resolve

    if ":" not in name:
        return "unknown"
    try:
        with held_output():  # its import may print or warn: kept for the run's log, off the terminal
            resolve(name)
    except StoreFactoryError as exc:
        return str(exc)
    return None


def _workload_names() -> list[str]:
    from eos_harness.models.workloads import WORKLOADS

    return list(WORKLOADS)


STORE_LIST = NameList("store", _store_names, _store_factory_problem, "a store factory 'module:function'")
WORKLOAD_LIST = NameList("workload", _workload_names)


def require_extra(extra: str, needed_by: str) -> None:
    """A usage error (exit 2), before anything starts, when the optional ``extra`` that
    ``needed_by`` (an option, a command) needs is not installed; it gives the pip command."""
    from eos_harness.extras import MissingExtra, require

    try:
        require(extra, needed_by)
    except MissingExtra as exc:
        raise click.UsageError(str(exc)) from None


class BrokerParam(click.ParamType):
    """``--broker``: parsed once into a :class:`~eos_harness.broker.spec.BrokerSpec`.

    ``needs_kafka``: who needs a Kafka broker (e.g. ``"the log checker"``); the embedded one is
    then refused, naming the Kafka forms."""

    name = "broker"

    def __init__(self, needs_kafka: str | None = None) -> None:
        self.needs_kafka = needs_kafka

    def convert(self, value, param, ctx) -> BrokerSpec:
        if isinstance(value, BrokerSpec):
            return value
        try:
            spec = parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if self.needs_kafka and not spec.is_kafka:
            self.fail(f"{value!r}: {self.needs_kafka} needs Kafka: kafka-local, kafka-local:3, kafka-quorum or "
                      "kafka://HOST:PORT",
                      param, ctx)
        return spec
