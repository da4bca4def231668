"""Fixtures of the window store suite: the window stores under test come from ``--eos-store`` (those
that are window stores), else every built-in window store."""

from __future__ import annotations

import pytest
from eos_harness.faces.pytest_plugin import session_store_server, store_refs
from eos_harness.process.window_server import WindowStoreServer
from eos_harness.stores.probe import reached_window_points as reached_points
from eos_harness.stores.registry import builtin_specs
from eos_harness.suites.windows.plan import matrix_cases


def window_stores_under_test(config: pytest.Config) -> list[str]:
    chosen = [ref.spec for ref in store_refs(config) if ref.window]
    return chosen or [s.name for s in builtin_specs() if s.kind == "window-store"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    stores = window_stores_under_test(metafunc.config)
    if "window_matrix_case" in metafunc.fixturenames:
        metafunc.parametrize("window_matrix_case", [
            pytest.param((spec, wl, point), id=f"{spec}-{wl}-{point or 'kill'}")
            for spec in stores
            for wl, point in matrix_cases(reached_points(spec, metafunc.config.getoption("eos_store_timeout")))])
    elif "eos_window_store" in metafunc.fixturenames:
        metafunc.parametrize("eos_window_store", stores)


window_store_server = session_store_server(WindowStoreServer)
