"""pytest plugin of eos-harness: the suites users point at their own store with one option.

``pytest --pyargs eos_harness.suites.conformance eos_harness.suites.lifecycle --eos-store=my_pkg:make_store``
runs the conformance suite and the lifecycle suite against ``my_pkg.make_store``. The plugin
adds only ``--eos-…`` options and ``eos_…`` fixtures (``eos_seed``: the session's seed, drawn once;
``eos_kafka_cluster``: a real Kafka on 127.0.0.1 for ``-m kafka`` tests; ``eos_spark_pipeline``:
``eos_spark_pipeline.verify(build, batches=…, windows=…)``, a team's own Structured Streaming query killed in
each commit window and judged against its crash-free run), and nothing runs unless a suite of ours is collected.
"""

from __future__ import annotations

import random

import pytest
from eos_harness.cluster.fixtures import eos_kafka_cluster  # noqa: F401 - a real Kafka for -m kafka tests
from eos_harness.process.guard import STORE_TIMEOUT_S

_SEED = pytest.StashKey[int]()
_REFS = pytest.StashKey[list]()


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


def pytest_configure(config: pytest.Config) -> None:
    """A bad ``--eos-store`` or ``$EOS_KAFKA_VERSION`` is a usage error before anything is collected (a
    store's module learned in a child)."""
    from eos_harness.kafka_versions import unknown_version

    problem = unknown_version()  # the Kafka that eos_kafka_cluster and every kafka-local of the session start
    if problem is not None:
        raise pytest.UsageError(problem)
    if config.getoption("eos_store", None):
        store_refs(config)


def stores_under_test(config: pytest.Config) -> list[str]:
    """The stores the suites run against: ``--eos-store`` (checked at collection), or every built-in real store."""
    from eos_harness.stores.registry import builtin_specs

    chosen = config.getoption("eos_store")
    if chosen:
        store_refs(config)  # a clear error at collection for a bad factory (a store_* finding fails its tests)
        return chosen
    return [s.name for s in builtin_specs() if s.kind == "store"]


def store_refs(config: pytest.Config) -> list:
    """The :class:`~eos_harness.stores.StoreRef` of each ``--eos-store``, resolved once per session (a
    user's module imported, and its factory called, in a child under ``--eos-store-timeout``)."""
    from eos_harness.stores import StoreFactoryError
    from eos_harness.stores.child_probe import store_ref

    if _REFS not in config.stash:
        try:
            config.stash[_REFS] = [store_ref(spec, config.getoption("eos_store_timeout"))
                                   for spec in config.getoption("eos_store") or []]
        except StoreFactoryError as exc:
            raise pytest.UsageError(f"--eos-store: {exc}") from None
    return config.stash[_REFS]


def suite_seed(config: pytest.Config) -> int:
    """The session's seed: ``--eos-seed``, or one drawn once per session (printed in the header). Under
    pytest-xdist (``-n``) every worker takes the seed its controller drew, so all collect the same scenarios."""
    if _SEED not in config.stash:
        given = config.getoption("eos_seed")
        if given is None:
            given = getattr(config, "workerinput", {}).get("eos_seed")
        config.stash[_SEED] = given if given is not None else random.SystemRandom().randrange(2**31)
    return config.stash[_SEED]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist's controller hands each worker the session's seed (:func:`suite_seed`)."""
    node.workerinput["eos_seed"] = suite_seed(node.config)


def session_store_server(server_class: type):
    """A session fixture of a store suite: one ``server_class`` (a store server) whose calls into a store are
    bounded by ``--eos-store-timeout``, stopped at the session's end. A suite's conftest assigns it to the
    fixture's name."""

    @pytest.fixture(scope="session")
    def server(pytestconfig: pytest.Config):
        with server_class(timeout=pytestconfig.getoption("eos_store_timeout")) as started:
            yield started

    return server


@pytest.fixture(scope="session")
def eos_seed(pytestconfig: pytest.Config) -> int:
    """The session's seed (:func:`suite_seed`), the one every suite's scenarios are drawn from."""
    return suite_seed(pytestconfig)


@pytest.fixture(scope="session")
def eos_spark_pipeline(tmp_path_factory: pytest.TempPathFactory):
    """``eos_spark_pipeline.verify(build, batches=[[row, …], …], windows=("sink", "commit"))``: the query of
    ``build`` (module level; ``build(source)`` returns a DataStreamWriter, not started) killed in each window,
    restarted and judged against its own crash-free run (run once per query, input and configuration in the
    session); the test fails with the violations and the replay commands
    (:mod:`eos_harness.suites.spark.pipeline_fixture`). Needs the ``spark`` extra."""
    from eos_harness.extras import require

    require("spark", "the eos_spark_pipeline fixture")
    from eos_harness.suites.spark.pipeline_fixture import SparkPipelineFixture

    return SparkPipelineFixture(tmp_path_factory.mktemp("eos-spark-pipelines"))
