"""The offsets suite users run: ``pytest --pyargs eos_harness.suites.offsets --eos-store=module:function``.

One test per store and scenario; a scenario that does not apply to the store (it does not manage
offsets, is not persistent …) is skipped with the reason, as ``eos-harness verify`` reports it
``not_applicable``."""

from __future__ import annotations

import pytest
from eos_harness.suites.offsets.runner import verify_offsets


def test_offsets_scenario(offsets_case, eos_seed, pytestconfig):
    spec, name = offsets_case
    result = verify_offsets(spec, eos_seed, store_timeout=pytestconfig.getoption("eos_store_timeout"), only=[name])
    print(f"seed: {eos_seed}  replay: {result['repro']}")
    if result["not_applicable"]:
        pytest.skip(f"not applicable to {spec}: {result['not_applicable'][0]['reason']}")
    if result.get("error"):
        pytest.fail(f"error: {result['error']}", pytrace=False)
    if result["violations"]:
        pytest.fail("\n".join(f"{v['check']}: {v['detail'] or v['observed']}" for v in result["violations"]),
                    pytrace=False)
