"""The window store suite users run: ``pytest --pyargs eos_harness.suites.windows --eos-store=module:function``.

Each window store is driven in a real child process and crashed for real; the rules checked are
those of the semantics the store declares (``window_config().semantics``)."""

from __future__ import annotations

from eos_harness.seeding import seed_only
from eos_harness.stores.probe import reached_window_points as reached_points
from eos_harness.suites.conformance.runner import verify_repro
from eos_harness.suites.windows.runner import machine_for, run_case, window_facts
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test


def test_argument_validation(eos_window_store, window_store_server):
    assert window_facts(eos_window_store, window_store_server.timeout)[2] == []


def test_crash_matrix(window_matrix_case, window_store_server):
    spec, workload, point = window_matrix_case
    run_case(window_store_server, spec, workload, point)


STEPS = 15  # per example (verify's --steps)


def test_state_machine(eos_window_store, window_store_server, eos_seed, pytestconfig):
    examples = pytestconfig.getoption("eos_examples") or 5
    config = window_facts(eos_window_store, window_store_server.timeout)[0]
    machine = machine_for(eos_window_store, window_store_server,
                          reached_points(eos_window_store, window_store_server.timeout), config)
    hypothesis_seed(eos_seed)(machine)
    print(f"seed: {eos_seed}  replay: {verify_repro(eos_window_store, eos_seed, examples, STEPS)}")
    with seed_only():  # the steps of verify --seed: no constants drawn from the loaded modules (nor cached in cwd)
        run_state_machine_as_test(machine, settings=settings(
            max_examples=examples, stateful_step_count=STEPS, deadline=None, database=None,
            suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink]))
