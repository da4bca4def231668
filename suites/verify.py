"""``eos-harness verify STORE``: the store suites a store gets, chosen by what kind of store it is.

A window store (of a window kind, or a factory whose store has ``window_config``) gets the window
store suite (KIP-428); any other store the conformance suite (KIP-844/KIP-892) with the offsets suite
(KIP-892/KIP-1035) joined to its verdict. The verdict names its ``suite`` and how long it took.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.stores import StoreRef

__all__ = ["VerifyOptionError", "check_options", "junit_suites", "listed_checks", "verify_store"]

# The suites ``verify`` runs, each with what it says of the stores it checks and the kind of built-in mutant
# that tests its checks (``verify --list-checks``).
VERIFY_SUITES = (("conformance", "every key-value store", "mutant"),
                 ("offsets", "checks a store does not qualify for are not_applicable, with the reason", "mutant"),
                 ("windows", "window stores", "window-mutant"))


class VerifyOptionError(ValueError):
    """An option of ``verify`` names what it has not: ``option`` (``--allow``) and the message (a usage error)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def check_options(allow: Iterable[str] = (), offsets_scenarios: Iterable[str] = (), window: bool | None = None) -> None:
    """A :class:`VerifyOptionError` for a waived check no suite of ``verify`` has (``window``: the store's
    kind once known, a window store's suite or the key-value suites), or an offsets scenario the offsets
    suite has not (before anything runs)."""
    from eos_harness.suites.conformance.checks import ALLOWABLE
    from eos_harness.suites.windows.checks import WAIVABLE

    known = {None: (*ALLOWABLE, *WAIVABLE), True: WAIVABLE, False: ALLOWABLE}[window]
    unknown = [c for c in allow if c not in known]
    if unknown:
        what = " for a window store" if window else " for a key-value store" if window is False else ""
        raise VerifyOptionError("--allow", f"unknown check {unknown[0]!r}{what}; one of: {', '.join(known)}")
    offsets_scenarios = list(offsets_scenarios)
    if offsets_scenarios:
        from eos_harness.suites.offsets.runner import scenarios

        known = [s.name for s in scenarios()]
        unknown = [n for n in offsets_scenarios if n not in known]
        if unknown:
            raise VerifyOptionError("--offsets-scenario", f"no offsets scenario {unknown[0]!r}; one of: "
                                    f"{', '.join(known)}")


def listed_checks() -> tuple[list[tuple[str, str, list[tuple[str, str, list[str], list[str]]]]],
                             list[tuple[str, list[str]]]]:
    """Every check ``verify`` may report: per suite (its name, a line saying what it checks), each check with
    its meaning, the built-in mutants it alone catches and the mutants of Kafka Streams' own code it is the
    first to catch (run only when named); and the offsets suite's scenarios with their checks."""
    from eos_harness.stores.registry import caught_alone_by, opt_in_specs
    from eos_harness.suite import SUITES
    from eos_harness.suites.offsets.runner import scenarios

    kafka = [s for s in opt_in_specs() if s.kind in ("mutant", "window-mutant")]
    suites = [(name, f"{SUITES[name].title} ({note})",
               [(check, meaning, caught_alone_by(check, kind),
                 [s.name for s in kafka if s.caught_by[0] == check and s.kind == kind])
                for check, meaning in SUITES[name].checks().items()])
              for name, note, kind in VERIFY_SUITES]
    return suites, [(scenario.name, list(scenario.checks)) for scenario in scenarios()]


def junit_suites(result: dict) -> list:
    """A verdict of ``verify`` as JUnit testsuites (:func:`eos_harness.suites.conformance.junit.verify_suites`),
    with the checks of the suite it ran."""
    from eos_harness.suites.conformance.junit import verify_suites

    return verify_suites(result, result["suite"] == "windows")


def verify_store(store: str | StoreRef, seed: int, *, examples: int = 40, steps: int = 25, shrink: bool = True,
                 store_timeout: float = STORE_TIMEOUT_S, log: str | Path, allow: Iterable[str] = (),
                 max_findings: int | None = None, offsets_scenarios: Iterable[str] = ()) -> dict:
    """The verdict of the suite ``store`` gets (see the module), with ``suite`` and ``seconds``. A
    store given by its spec is resolved here (:func:`~eos_harness.stores.child_probe.store_ref`: its
    module imported in a child, its output going to ``log``, as everything the store prints)."""
    from eos_harness.kafka_streams.pool import shared
    from eos_harness.process.server import children_output, forkserver_context
    from eos_harness.stores.child_probe import store_ref

    started = time.monotonic()
    with children_output(log):
        ref = store_ref(store, store_timeout)
    # One pool of store JVMs (Kafka Streams' stores) for every case: a JVM whose store closed cleanly serves
    # the next case's store instead of a fresh start, and a spare, booted, waits for the next crash's restart.
    with shared(lambda: forkserver_context().output, spare=1):
        window = ref.window
        if window:
            from eos_harness.suites.windows.runner import verify

            with children_output(log):  # the store processes' and their JVMs' output (Kafka's SLF4J lines)
                result = verify(ref, seed, examples=examples, steps=steps, shrink=shrink,
                                store_timeout=store_timeout, allow=allow)
        else:
            from eos_harness.suites.conformance.runner import verify

            result = verify(ref, seed, examples=examples, steps=steps, shrink=shrink, store_timeout=store_timeout,
                            log=log, allow=allow, offsets_scenarios=offsets_scenarios,
                            **({} if max_findings is None else {"max_findings": max_findings}))
    return {"suite": "windows" if window else "conformance", **result,
            "seconds": round(time.monotonic() - started, 3)}
