"""The conformance suite users run: ``pytest suites/conformance --eos-store=module:function``.

Each store is driven in a real child process and crashed for real; the promises checked follow
the store's own ``persistent()``, ``transactional()`` and ``manages_offsets()``."""

from __future__ import annotations

import pytest
from eos_harness.seeding import seed_only
from eos_harness.stores.probe import StoreProbeFailed, reached_points
from eos_harness.suites.conformance.driver import features_of
from eos_harness.suites.conformance.plan import machine_for
from eos_harness.suites.conformance.runner import PROBE, run_case, verify_repro
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test


def _store_broke_the_protocol(finding: dict) -> None:
    pytest.fail(f"{finding['check']}: {finding['observed']}\n{finding['detail'] or ''}", pytrace=False)


def test_crash_matrix(matrix_case, store_server):
    spec, workload, point = matrix_case
    if workload == PROBE:
        _store_broke_the_protocol(point)
    run_case(store_server, spec, workload, point)


STEPS = 20  # per example (verify's --steps)


def test_state_machine(eos_store, store_server, eos_seed, pytestconfig):
    examples = pytestconfig.getoption("eos_examples") or 15
    try:
        crash_points = reached_points(eos_store, store_server.timeout)
    except StoreProbeFailed as exc:
        _store_broke_the_protocol(exc.finding)
    offers, has_restore = features_of(store_server, eos_store)
    machine = machine_for(eos_store, store_server, crash_points, offers=offers, has_restore=has_restore)
    hypothesis_seed(eos_seed)(machine)
    print(f"seed: {eos_seed}  replay: {verify_repro(eos_store, eos_seed, examples, STEPS, store_server.timeout)}")
    with seed_only():  # the steps of verify --seed: no constants drawn from the loaded modules (nor cached in cwd)
        run_state_machine_as_test(
            machine,
            settings=settings(max_examples=examples, stateful_step_count=STEPS, deadline=None, database=None,
                              suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink]),
        )
