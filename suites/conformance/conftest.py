"""Fixtures of the conformance suite: the store(s) under test come from ``--eos-store``."""

from __future__ import annotations

import pytest
from eos_harness.faces.pytest_plugin import session_store_server, stores_under_test
from eos_harness.process.server import StoreServer
from eos_harness.stores.probe import StoreProbeFailed, reached_points
from eos_harness.suites.conformance.plan import matrix_cases
from eos_harness.suites.conformance.runner import PROBE


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    stores = stores_under_test(metafunc.config)
    if "matrix_case" in metafunc.fixturenames:
        params = []
        for spec in stores:
            try:
                crash_points = reached_points(spec, metafunc.config.getoption("eos_store_timeout"))
            except StoreProbeFailed as exc:  # one failing case that says what the store did
                params.append(pytest.param((spec, PROBE, exc.finding), id=f"{spec}-probe"))
                continue
            params += [pytest.param((spec, wl, point), id=f"{spec}-{wl}-{point or 'kill'}")
                       for wl, point in matrix_cases(crash_points)]
        metafunc.parametrize("matrix_case", params)
    elif "eos_store" in metafunc.fixturenames:
        metafunc.parametrize("eos_store", stores)


store_server = session_store_server(StoreServer)


def pytest_report_header(config: pytest.Config) -> str:
    return f"eos-harness conformance stores: {', '.join(stores_under_test(config))}"
