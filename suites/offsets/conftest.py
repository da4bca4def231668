"""Fixtures of the offsets suite: the store(s) under test come from ``--eos-store``; each scenario
that applies to a store is one test.

What each store is (persistent, transactional, manages offsets, the capabilities it declares) is
asked once per session, at collection, in a child process whose every call is bounded by
``--eos-store-timeout``; the scenarios that do not apply to it, or that check what it declares it
lacks, are not collected: the terminal summary lists them with the reason. A store that cannot be
asked is one failing test (``STORE-probe``) saying why.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from eos_harness.faces.pytest_plugin import stores_under_test
from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang
from eos_harness.process.zygote import ZygoteError
from eos_harness.suites.offsets.checks import CAPABILITIES
from eos_harness.suites.offsets.runner import scenarios
from eos_harness.suites.offsets.scenario import features_of
from eos_harness.verdict import error_reason

PROBE = "probe"
_PLAN = pytest.StashKey[dict]()


def _plan(config: pytest.Config) -> dict[str, tuple[list[str], list[str], str | None]]:
    """store -> (scenarios that apply, lines for what is left out and why, the probe's failure), once."""
    if _PLAN not in config.stash:
        plan = {}
        for spec in stores_under_test(config):
            with tempfile.TemporaryDirectory(prefix="eos-offsets-probe-") as workdir:
                try:
                    features = features_of(spec, Path(workdir), config.getoption("eos_store_timeout"))
                except (StoreCallError, StoreHang, ChildCrashed, ZygoteError, OSError) as exc:
                    plan[spec] = ([], [], f"asking the store what it is failed: {error_reason(exc)}")
                    continue
            chosen, left_out = [], []
            for scenario in scenarios():
                lacking = scenario.lacking(features)
                reason = scenario.applies(features) or (scenario.applies_to(spec) if scenario.applies_to else None)
                if lacking:
                    left_out.append(f"{scenario.name}: not checked: "
                                    f"{'; '.join(CAPABILITIES[name][0] for name in lacking)}")
                elif reason is not None:
                    left_out.append(f"{scenario.name}: not applicable: {reason}")
                else:
                    chosen.append(scenario.name)
            plan[spec] = (chosen, left_out, None)
        config.stash[_PLAN] = plan
    return config.stash[_PLAN]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "offsets_case" in metafunc.fixturenames:
        params = []
        for spec, (chosen, _, failed) in _plan(metafunc.config).items():
            if failed is not None:
                params.append(pytest.param((spec, PROBE, failed), id=f"{spec}-{PROBE}"))
            params += [pytest.param((spec, name, None), id=f"{spec}-{name}") for name in chosen]
        metafunc.parametrize("offsets_case", params)


def pytest_report_header(config: pytest.Config) -> str:
    return f"eos-harness offsets stores: {', '.join(stores_under_test(config))}"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """The scenarios not collected for a store, and why (shown with -q too)."""
    left = [(spec, line) for spec, (_, left_out, _) in config.stash.get(_PLAN, {}).items() for line in left_out]
    if left:
        terminalreporter.section("offsets scenarios left out")
        for spec, line in left:
            terminalreporter.write_line(f"{spec}: {line}")
