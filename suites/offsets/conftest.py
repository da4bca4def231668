"""Fixtures of the offsets suite: the store(s) under test come from ``--eos-store``; each scenario
of the suite is one test per store."""

from __future__ import annotations

import pytest
from eos_harness.faces.pytest_plugin import stores_under_test, suite_seed
from eos_harness.suites.offsets.runner import scenarios


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "offsets_case" in metafunc.fixturenames:
        stores = stores_under_test(metafunc.config)
        params = [pytest.param((spec, sc.name), id=f"{spec}-{sc.name}") for spec in stores for sc in scenarios()]
        metafunc.parametrize("offsets_case", params)


@pytest.fixture(scope="session")
def eos_seed(pytestconfig: pytest.Config) -> int:
    return suite_seed(pytestconfig)


def pytest_report_header(config: pytest.Config) -> str:
    return f"eos-harness offsets stores: {', '.join(stores_under_test(config))}"
