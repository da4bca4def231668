"""The metadata transactions suite (KIP-868) users run: ``pytest --pyargs eos_harness.suites.metadata``.

Each scenario runs the controller and a live reader in child processes on the embedded broker,
crashes the controller in one of KIP-868's failover windows (after Begin, between batches, before
End, after End, during the new controller's abort, a zombie controller, a driver kill), and checks
the history against the model. The scenarios are the campaign plan's coverage for the session's
seed (``--eos-seed``). A failure prints the violations and the command that replays it."""

from __future__ import annotations

import itertools

import pytest
from eos_harness.faces.pytest_plugin import suite_seed
from eos_harness.suites.metadata.plan import plan
from eos_harness.suites.metadata.runner import REAL, run_scenario


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "eos_metadata_scenario" in metafunc.fixturenames:
        seed = suite_seed(metafunc.config)
        coverage = list(itertools.islice(plan(seed, systems=(REAL,)), 9))
        metafunc.parametrize("eos_metadata_scenario", coverage,
                             ids=["+".join(map(str, s.schedule)) for s in coverage])


def test_failover_window(eos_metadata_scenario, tmp_path):
    result = run_scenario(eos_metadata_scenario, tmp_path / "run")
    broken = "\n".join(f"  {v['check']}: {v['key']}: expected {v['expected']}, observed {v['observed']}"
                       for v in result["violations"][:10])
    assert result["verdict"] == "pass", f"{result['verdict']}:\n{broken}\nreplay: {result['repro']}"
    assert result["crash_points"], f"no fault was injected; replay: {result['repro']}"
