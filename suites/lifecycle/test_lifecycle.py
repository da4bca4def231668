"""The lifecycle suite users run: ``pytest --pyargs eos_harness.suites.lifecycle --eos-store=module:function``.

Each scenario runs a real task (KIP-844's lifecycle) on the embedded broker in child processes,
kills it in one crash window, restarts it until the input is done, and checks the history against
the lifecycle model. A failure prints the violations and the command that replays the scenario."""

from __future__ import annotations

import json

from eos_harness.suites.lifecycle.conftest import COMMIT_METRICS
from eos_harness.suites.lifecycle.plan import LIFECYCLE_POINTS
from eos_harness.suites.lifecycle.runner import run_scenario


def test_crash_window(eos_lifecycle_scenario, tmp_path, record_property):
    result = run_scenario(eos_lifecycle_scenario, tmp_path / "run")
    # KIP-892's commit metrics: summed up per store at the end of the run (conftest), and in --junitxml.
    record_property(COMMIT_METRICS, json.dumps({"store": result["store"], "metrics": result.get("metrics", [])}))
    broken = "\n".join(f"  {v['check']}: key {v['key']}: expected {v['expected']}, observed {v['observed']}"
                       for v in result["violations"][:10])
    assert result["verdict"] == "pass", f"{result['verdict']}:\n{broken}\nreplay: {result['repro']}"
    assert result["crash_points"], f"no fault was injected; replay: {result['repro']}"
    # Every crash window of the task's lifecycle scheduled here was reached: the crash happened there.
    missed = {f.point for f in eos_lifecycle_scenario.schedule if f.point in LIFECYCLE_POINTS} - set(result["crash_points"])
    assert not missed, f"never reached {sorted(missed)}: not exercised; replay: {result['repro']}"
