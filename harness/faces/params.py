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
        if isinstance(value, list | tuple):
            return list(value)
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
    from eos_harness.stores.registry import builtin_specs, opt_in_specs

    # stores, mutants and unsafe variants, and the stores run only when named (Kafka Streams' own)
    return sorted(spec.name for spec in [*builtin_specs(), *opt_in_specs()])


def _store_factory_problem(name: str) -> str | None:
    """None when ``name`` looks like a store factory ``module:function`` whose module can be found, else
    why not. Nothing of the module runs here (before the command's session): the command learns the
    rest in a child (:func:`eos_harness.stores.child_probe.store_ref`)."""
    import importlib.machinery
    import sys

    if ":" not in name:
        return "unknown"
    module, _, attribute = name.partition(":")
    top = module.partition(".")[0]
    if not attribute or not top.isidentifier():
        return f"store factory {name!r} is not 'module:function'"
    if top in sys.modules or importlib.machinery.PathFinder.find_spec(top, sys.path) is not None:
        return None
    return (f"store factory {name!r} not found: cannot import module {module!r} (No module named {top!r}); "
            "check the module is on PYTHONPATH (or run from its directory)")


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
