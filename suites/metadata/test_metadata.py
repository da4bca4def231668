"""The metadata transactions suite (KIP-868) users run: ``pytest --pyargs eos_harness.suites.metadata``.

Each scenario runs the controller and a live reader in child processes on the embedded broker,
crashes the controller in one of KIP-868's failover windows (after Begin, between batches, before
End, after End, during the new controller's abort, a zombie controller, a driver kill), and checks
the history against the model. The scenarios are the campaign plan's coverage for the session's
seed (``--eos-seed``). A failure prints the violations and the command that replays it."""

from __future__ import annotations

import itertools
import json

import pytest
from eos_harness.faces.pytest_plugin import suite_seed
from eos_harness.metadata.controller import POINTS
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
    # The window was exercised, not only survived: a partial transaction left behind was aborted by the
    # new controller, and a frozen (zombie) controller woke to find itself fenced.
    points = {f.point for f in eos_metadata_scenario.schedule}
    with open(result["history"]) as history:
        events = [json.loads(line) for line in history]
    if points & set(POINTS[:3]):
        assert result["log"]["aborts"], f"the new controller appended no Abort; replay: {result['repro']}"
        if "metadata.controller.abort.after_append" not in points:
            assert any(e["type"] == "activated" and e["aborted"] for e in events), result["repro"]
    if any(f.action == "freeze" for f in eos_metadata_scenario.schedule):
        assert any(e["type"] == "fenced" for e in events), f"the zombie was never fenced; replay: {result['repro']}"
