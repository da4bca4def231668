"""Fixtures of the lifecycle suite: its scenarios come from the campaign's plan for each
store under test (``--eos-store``), its coverage part: every lifecycle crash window and every crash
point the store itself reaches, once each, then a crash in the middle of a recovery."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
from eos_harness.faces.pytest_plugin import stores_under_test, suite_seed
from eos_harness.models.workloads import DEFAULT_WORKLOADS
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.runtime.store_duties import store_metrics
from eos_harness.stores.probe import reached_points
from eos_harness.stores.registry import base_store
from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS, plan

COMMIT_METRICS = "eos_commit_metrics"  # the user property each scenario records its commit metrics under


def coverage(store: str, seed: int, store_timeout: float = STORE_TIMEOUT_S) -> list:
    """The store's coverage scenarios of the campaign plan (the plan's random tail left out), each
    call into the store bounded by ``store_timeout`` (``--eos-store-timeout``)."""
    reached = {store: reached_points(base_store(store), store_timeout)}
    count = len(LIFECYCLE_POINTS) + len(reached[store]) + 1
    return [replace(s, store_timeout=store_timeout)
            for s in itertools.islice(plan(seed, [store], list(DEFAULT_WORKLOADS), reached=reached), count)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "eos_lifecycle_scenario" in metafunc.fixturenames:
        seed = suite_seed(metafunc.config)
        params = [pytest.param(scenario, id=f"{store}-{scenario.workload}-{'+'.join(map(str, scenario.schedule))}")
                  for store in stores_under_test(metafunc.config)
                  for scenario in coverage(store, seed, metafunc.config.getoption("eos_store_timeout"))]
        metafunc.parametrize("eos_lifecycle_scenario", params)


def pytest_report_header(config: pytest.Config) -> str:
    return f"eos-harness lifecycle seed: {suite_seed(config)}"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """KIP-892's commit metrics of every store under test, over the scenarios that ran."""
    results = [json.loads(value) for outcome in ("passed", "failed") for report in terminalreporter.getreports(outcome)
               if report.when == "call"
               for name, value in getattr(report, "user_properties", ()) if name == COMMIT_METRICS]
    per_store = store_metrics(results)
    if not per_store:
        return
    terminalreporter.section("commit metrics (stream-state-metrics, KIP-892)")
    for store, m in per_store.items():
        terminalreporter.write_line(f"{store}: {m['commits']} commits, commit-rate {m['commit-rate']:.1f}/s, "
                                    f"commit-latency-avg {m['commit-latency-avg']:.3f} ms, "
                                    f"commit-latency-max {m['commit-latency-max']:.3f} ms")
