"""pytest plugin of eos-harness: the suites users point at their own store with one option.

``pytest --pyargs eos_harness.suites.conformance eos_harness.suites.lifecycle --eos-store=my_pkg:make_store``
runs the conformance suite and the lifecycle suite against ``my_pkg.make_store``. The plugin
adds only ``--eos-…`` options and ``eos_…`` fixtures (``eos_kafka_cluster``: a real Kafka on 127.0.0.1
for ``-m kafka`` tests), and nothing runs unless a suite of ours is collected.
"""

from __future__ import annotations

import random

import pytest
from eos_harness.cluster.fixtures import eos_kafka_cluster  # noqa: F401 - a real Kafka for -m kafka tests
from eos_harness.process.guard import STORE_TIMEOUT_S

_SEED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eos-harness")
    group.addoption(
        "--eos-store",
        action="append",
        default=None,
        help="Store under test for the conformance and lifecycle suites: a built-in name or a factory "
        "module:function (repeatable; default: every built-in real store).",
    )
    group.addoption("--eos-seed", type=int, default=None, help="Seed of the suites (printed when not given).")
    group.addoption("--eos-examples", type=int, default=None, help="Hypothesis examples per store.")
    group.addoption("--eos-store-timeout", type=float, default=STORE_TIMEOUT_S, metavar="SECONDS",
                    help=f"Bound on each call into the store (default {STORE_TIMEOUT_S:g}); a longer call fails the "
                    "test with store_hang and the store's stack.")


def stores_under_test(config: pytest.Config) -> list[str]:
    """The stores the suites run against: ``--eos-store`` (checked at collection), or every built-in real store."""
    from eos_harness.stores.registry import builtin_specs, resolve

    chosen = config.getoption("eos_store")
    if chosen:
        for spec in chosen:
            resolve(spec)  # a clear error at collection for a bad factory
        return chosen
    return [s.name for s in builtin_specs() if s.kind == "store"]


def suite_seed(config: pytest.Config) -> int:
    """The session's seed: ``--eos-seed``, or one drawn once per session (printed in the header)."""
    if _SEED not in config.stash:
        given = config.getoption("eos_seed")
        config.stash[_SEED] = given if given is not None else random.SystemRandom().randrange(2**31)
    return config.stash[_SEED]
