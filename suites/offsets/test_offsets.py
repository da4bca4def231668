"""The offsets suite users run: ``pytest --pyargs eos_harness.suites.offsets --eos-store=module:function``.

One test per store and scenario that applies to it: the scenarios that do not apply (the store does
not manage offsets, is not persistent …) or that check what it declares it lacks are not collected,
and the terminal summary lists them with the reason (see ``conftest.py``). Each failure names every
check broken once, with its replay command."""

from __future__ import annotations

import pytest
from eos_harness.suites.offsets.runner import verify_offsets


def test_offsets_scenario(offsets_case, eos_seed, pytestconfig):
    spec, name, probe_failed = offsets_case
    if probe_failed is not None:  # the store could not even be asked what it is
        pytest.fail(f"{spec}: {probe_failed}", pytrace=False)
    result = verify_offsets(spec, eos_seed, store_timeout=pytestconfig.getoption("eos_store_timeout"), only=[name])
    print(f"seed: {eos_seed}  replay: {result['repro']} --offsets-scenario {name}")
    if result.get("error"):
        pytest.fail(f"error: {result['error']}", pytrace=False)
    if result["violations"]:
        pytest.fail("\n".join(f"{v['check']} (fired in {v['fired']['cases']} of {v['fired']['of']} cases): "
                              f"{v['detail'] or v['observed']}\n  replay: {v['replay']}"
                              for v in result["violations"]), pytrace=False)
