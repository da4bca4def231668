"""The mutants of Kafka Streams' own code (Byteman rules that re-create a real kind of mistake inside
Kafka's classes, :mod:`eos_harness.kafka_streams.mutant_rules`): each is listed as a mutant of Kafka's store,
appears under its check in ``verify --list-checks``, and is caught by the check that names its mistake.

The CI-sized test drives each mutant through the conformance suite's own driver (its operations and its
checks, the store in its child and its JVM) along the few steps that meet its mistake; the ``slow`` tier runs
``verify`` on each, as a user would. The JVMs come from the shared build (built on first use)."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import psutil
import pytest
from eos_harness.kafka_streams.mutants import KAFKA_MUTANTS
from eos_harness.process.server import StoreServer
from eos_harness.stores.registry import builtin_spec
from eos_harness.suites.conformance.driver import ConformanceViolation, StoreUnderTest
from eos_harness.suites.conformance.runner import verify

PREFIX = "mutant-kafka-streams-4.4.0-rocksdb-tx-"
A, B = (b"a", b"v1"), (b"b", b"v2")


def _putall_skips_buffer(sut: StoreUnderTest) -> None:
    sut.put_all([A, B])
    sut.check_read_committed()  # Kafka's readOnly(READ_COMMITTED) before any commit


def _read_committed_sees_staged(sut: StoreUnderTest) -> None:
    sut.put(*A)
    sut.commit()
    sut.put(*B)
    sut.check_read_committed()


def _offsets_flushed_alone(sut: StoreUnderTest) -> None:
    sut.put(*A)
    sut.commit()
    sut.close_and_reopen()  # a clean close flushes both column families
    sut.put(*B)
    sut.commit()  # the mutant flushes the offsets column family alone
    sut.kill()  # RocksDB's memtable (the WAL is off) is lost: the data is the close's, the offsets are not


def _commit_records_last_offset(sut: StoreUnderTest) -> None:
    sut.put(*A)
    sut.commit()


def _closed_marker_in_buffer(sut: StoreUnderTest) -> None:
    sut.put(*A)
    sut.commit()
    sut.close_and_reopen()  # the marker on disk says OPEN: the reopen under exactly-once is refused


STEPS = {"putall-skips-buffer": _putall_skips_buffer, "read-committed-sees-staged": _read_committed_sees_staged,
         "offsets-flushed-alone": _offsets_flushed_alone, "commit-records-last-offset": _commit_records_last_offset,
         "closed-marker-in-buffer": _closed_marker_in_buffer}


def _jvms() -> list[psutil.Process]:
    """The store JVMs this test process started (its descendants) still running."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # gone meanwhile
            if any("eosharness.StoreServer" in part for part in process.cmdline()):
                found.append(process)
    return found


def test_kafkas_mutants_are_listed_as_mutants_of_kafkas_store_under_the_check_that_catches_them(cli):
    # the key-value store's mutants here; the session store's (a window mutant) in test_kafka_streams_session_stores.py
    assert {m for n, m in KAFKA_MUTANTS.items() if n.startswith(PREFIX)} == set(STEPS) and len(KAFKA_MUTANTS) >= 4
    listed = {row["name"]: row for row in json.loads(cli.invoke("stores", "--json").stdout)}
    checks = cli.invoke("verify", "--list-checks").stdout
    for name in KAFKA_MUTANTS:
        row = listed[name]
        assert (row["kind"], row["system"], row["version"], row["transactional"]) == \
            ("mutant" if name.startswith(PREFIX) else "window-mutant", "kafka-streams", "4.4.0", True), row
        spec = builtin_spec(name)
        assert spec.expected_to_fail and spec.caught_by
        check = spec.caught_by[0]
        block = checks.split(f"\n  {check:<34} ", 1)[1].split("\n  ", 2)  # the check's meaning, then its mutants
        assert any(name in line for line in block[1:]), (check, block)
    from eos_harness.suites.conformance.plan import subjects
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name, mistake in KAFKA_MUTANTS.items():  # the README's table: each mutant with the check that catches it
        assert re.search(rf"^\| `{mistake}` \|.*\| `{builtin_spec(name).caught_by[0]}` \|$", readme, re.M), mistake
    from eos_harness.suites.lifecycle.plan import default_stores

    assert not set(KAFKA_MUTANTS) & (set(default_stores()) | set(subjects(None)))  # run only when named


@pytest.mark.jvm
@pytest.mark.parametrize("mistake", list(STEPS))
def test_each_mutant_of_kafkas_code_is_caught_by_the_check_that_names_its_mistake(mistake, tmp_path):
    name = PREFIX + mistake
    spec = builtin_spec(name)
    with StoreServer(timeout=120) as server:
        sut = StoreUnderTest(server, name, f"mutant {mistake}")
        try:
            with pytest.raises(ConformanceViolation) as caught:
                STEPS[mistake](sut)
        finally:
            sut.dispose()
    assert caught.value.violation.check == spec.caught_by[0], caught.value.violation
    assert _jvms() == []


@pytest.mark.jvm
@pytest.mark.parametrize("mistake", list(STEPS))
def test_the_same_steps_on_kafkas_own_store_break_no_promise(mistake):
    # The control: without the mutant's rule, Kafka's store passes the same steps (the rule is the mistake).
    with StoreServer(timeout=120) as server:
        sut = StoreUnderTest(server, "kafka-streams-4.4.0-rocksdb-tx", f"control {mistake}")
        try:
            STEPS[mistake](sut)
        finally:
            sut.dispose()
    assert _jvms() == []


@pytest.mark.slow
@pytest.mark.jvm
@pytest.mark.parametrize("mistake", list(STEPS))
def test_verify_catches_each_mutant_of_kafkas_code_by_its_check(mistake):
    spec = builtin_spec(PREFIX + mistake)
    result = verify(spec.name, seed=1, examples=5, steps=12, shrink=False, store_timeout=60, max_findings=1)
    assert result["verdict"] == "fail", f"{spec.name} survived verify: a hole in the harness"
    fired = {v["check"] for v in result["violations"]}
    assert fired & set(spec.caught_by), (spec.caught_by, fired)
