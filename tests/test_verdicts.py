"""One verdict vocabulary: a verdict and an exit code computed from a violation's fields, never from
its text; the Spark campaign judged by ``strict_only``; an ``error`` verdict (the run could not be
completed) exits 3, a broken promise 1, a pass 0, through the real CLI (a Spark run whose kill is
never reached: tests/test_spark_tempfiles.py)."""

from __future__ import annotations

import json

from eos_harness.suite import SUITES
from eos_harness.suite_campaign import exit_code as suite_exit_code
from eos_harness.suite_campaign import subjects_judged
from eos_harness.suite_campaign import summarize as summarize_campaign
from eos_harness.suites.lifecycle.runner import Scenario, error_verdict, verdict
from eos_harness.suites.spark.plan import MATRIX_SINKS, counted_violations, judge, unexpected
from eos_harness.verdict import (
    ERROR,
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_PASS,
    FAIL,
    NOT_APPLICABLE,
    PASS,
    Violation,
    error_reason,
    exit_code,
    verdict_of,
)

LIFECYCLE, SPARK = SUITES["lifecycle"], SUITES["spark"]


def summarize(results: list[dict], stores: list[str]) -> dict:
    """A lifecycle campaign's summary, as the shared campaign writes it."""
    return summarize_campaign(LIFECYCLE, results, stores)


def campaign_exit_code(campaign: dict) -> int:
    return suite_exit_code(LIFECYCLE, campaign)


def spark_summary(results: list[dict], strict: bool) -> dict:
    """A Spark campaign's summary (its results ran with ``strict``), with what the suite adds to it."""
    from eos_harness.suites.spark.runner import campaign_fields

    assert all(r["strict"] == strict for r in results)
    summary = summarize_campaign(SPARK, results, subjects_judged(SPARK, MATRIX_SINKS))
    return campaign_fields({"scenarios": results, "summary": summary, "source": "file",
                            "sinks": list(MATRIX_SINKS)})["summary"]


def spark_exit_code(campaign: dict, strict: bool) -> int:
    assert all(r["strict"] == strict for r in campaign["scenarios"])
    return suite_exit_code(SPARK, campaign)


BROKEN = Violation("exactly_once_output", "batch 2", "applied once", "applied 2×", 7)
AT_LEAST_ONCE = Violation("exactly_once_output", '["a", 3]', "1×", "2×", 9, strict_only=True)


# -- verdict_of and exit_code ----------------------------------------------------------------------


def test_a_verdict_is_fail_when_a_violation_counts_else_error_when_the_check_could_not_finish():
    assert verdict_of([]) == PASS
    assert verdict_of([BROKEN]) == FAIL
    assert verdict_of([], error="BrokerError: no answer") == ERROR
    assert verdict_of([BROKEN], error="BrokerError: no answer") == FAIL  # a broken promise is a finding
    # a strict_only violation (the Kafka sink's documented at-least-once duplicates) counts only under --strict
    assert verdict_of([AT_LEAST_ONCE]) == PASS
    assert verdict_of([AT_LEAST_ONCE], strict=True) == FAIL
    assert verdict_of([AT_LEAST_ONCE], error="x") == ERROR


def test_exit_codes_say_broken_then_incomplete_then_pass():
    assert exit_code([]) == exit_code([PASS, NOT_APPLICABLE]) == EXIT_PASS == 0
    assert exit_code([PASS, FAIL, ERROR]) == EXIT_FAIL == 1
    assert exit_code([PASS, ERROR]) == EXIT_INCOMPLETE == 3
    assert exit_code([PASS], incomplete=True) == 3  # a scheduled fault that could not be injected
    assert exit_code([FAIL], incomplete=True) == 1
    # a campaign: an expected failure (a caught mutant) is not a broken promise; an unexpected result is
    assert exit_code([FAIL, PASS], unexpected=False) == 0
    assert exit_code([PASS], unexpected=True) == 1
    assert exit_code([FAIL, ERROR], unexpected=False) == 3


def test_a_violation_round_trips_through_its_json():
    for v in (BROKEN, AT_LEAST_ONCE, Violation("store_error", None, "put succeeds", "boom", case="matrix: x")):
        assert Violation.from_json(json.loads(json.dumps(v.to_json()))) == v
    assert error_reason(TimeoutError("no event for 30 s")) == "TimeoutError: no event for 30 s"


# -- the Spark campaign judges by fields ----------------------------------------------------------


def spark_result(violations: list[Violation], *, sink: str = "kafka", strict: bool = False,
                 expected: str = "pass", verdict: str | None = None) -> dict:
    """A scenario result shaped as ``suites/spark/runner.py`` writes it (verdict from verdict_of)."""
    return {
        "pipeline": "count", "sink": sink, "seed": 5, "schedule": ["sink@2"], "strict": strict,
        "configuration": {"state_provider": "rocksdb", "changelog_checkpointing": False, "checkpoint_format": 1,
                          "source": "file"},
        "repro": f"eos-harness run --suite spark --pipeline count --sink {sink}{' --strict' if strict else ''} --seed 5",
        "verdict": verdict or verdict_of(violations, strict),
        "violations": [v.to_json() for v in violations],
        "crash_windows": [{"window": "after_sink", "batch": 2}],
        "duplicates": {"count": 2, "windows": ["after_sink"]},
        "expected": expected,
    }


def test_a_violation_whose_text_says_duplicate_and_strict_but_whose_fields_do_not_is_an_unexpected_failure():
    # The words the campaign once searched for, on a violation that is not strict_only: a real failure.
    worded = Violation("exactly_once_output", '["a", 3]', "1×",
                       "2× (duplicate, at-least-once sink, --strict; after after_sink)", 9, strict_only=False)
    for strict in (False, True):
        result = spark_result([worded], strict=strict)
        assert result["verdict"] == FAIL
        assert judge(result, strict) == FAIL
        assert unexpected(result, strict), f"strict={strict}"
        assert spark_summary([result], strict)["unexpected"] == [result["sink"]]


def test_a_strict_only_violation_without_those_words_fails_the_campaign_only_under_strict():
    assert "duplicate" not in str(AT_LEAST_ONCE.observed) and "strict" not in str(AT_LEAST_ONCE.observed)
    lenient = spark_result([AT_LEAST_ONCE], strict=False)
    assert lenient["verdict"] == PASS and not unexpected(lenient, strict=False)
    summary = spark_summary([lenient], strict=False)
    assert (summary["total"], summary["failed"], summary["not_applicable"], summary["errors"], summary["unexpected"],
            summary["duplicates"], summary["sinks"]["kafka"]["status"]) == (1, 0, 0, [], [], 2, "ok")
    assert counted_violations(lenient, strict=False) == []  # tables show no check that fired
    strict = spark_result([AT_LEAST_ONCE], strict=True)
    assert strict["verdict"] == FAIL and unexpected(strict, strict=True)
    assert counted_violations(strict, strict=True) == [AT_LEAST_ONCE.to_json()]
    # the judge reads the fields, not the recorded word: the same result judged with --strict fails
    assert unexpected(lenient, strict=True)


def test_the_mutant_sink_is_expected_to_be_caught_and_errors_are_not_failures():
    caught = spark_result([BROKEN], sink="foreach-nocheck", expected="caught")
    assert not unexpected(caught, strict=False)
    missed = spark_result([AT_LEAST_ONCE], sink="foreach-nocheck", expected="caught")
    assert unexpected(missed, strict=False)  # its only finding is one that does not count
    errored = {**spark_result([], sink="file"), "verdict": ERROR, "error": "RuntimeError: no Java"}
    refused = {**spark_result([], sink="file"), "verdict": NOT_APPLICABLE, "reason": "Spark refuses it"}
    assert judge(errored, False) == ERROR and not unexpected(errored, strict=False)
    assert judge(refused, False) == NOT_APPLICABLE and not unexpected(refused, strict=False)
    summary = spark_summary([caught, errored, refused], strict=False)
    assert (summary["failed"], summary["not_applicable"], len(summary["errors"]), summary["unexpected"]) == (1, 1, 1, [])
    assert summary["errors"][0].startswith("scenario ? (file): RuntimeError: no Java; replay: eos-harness run")
    assert summary["sinks"]["foreach-nocheck"]["status"] == "caught"

    def campaign(*results: dict, **more) -> dict:
        return {"scenarios": list(results), "summary": spark_summary(list(results), strict=False), **more}

    assert spark_exit_code(campaign(caught, errored, refused), strict=False) == EXIT_INCOMPLETE
    assert spark_exit_code(campaign(caught, refused), strict=False) == EXIT_PASS
    assert spark_exit_code(campaign(refused, missed), strict=False) == EXIT_FAIL  # the mutant sink never caught
    # as in every suite, a mutant is caught when one of its scenarios catches it
    assert spark_exit_code(campaign(caught, missed), strict=False) == EXIT_PASS
    # stopped early (a broken environment): a mutant not yet caught says nothing, a real sink's failure does
    stopped = {"why": "environment", "message": "stopped: no space left on device (ENOSPC)"}
    assert spark_exit_code(campaign(missed, stopped=stopped), strict=False) == EXIT_INCOMPLETE
    failed = spark_result([BROKEN], sink="file")
    assert spark_exit_code(campaign(failed, stopped=stopped), strict=False) == EXIT_FAIL


# -- the lifecycle campaign ---------------------------------------------------------------------


def test_an_error_verdict_carries_its_reason_and_the_campaign_exits_3_unless_a_result_was_unexpected():
    scenario = Scenario("memory", "counter", 4)
    error = error_verdict(scenario, ConnectionError("broker at 127.0.0.1:9092 stopped answering"))
    assert error["verdict"] == ERROR and error["violations"] == []
    assert error["error"] == "ConnectionError: broker at 127.0.0.1:9092 stopped answering"
    assert error["repro"] == "eos-harness run --store memory --workload counter --seed 4"
    passed = verdict(scenario, [], [], [])
    assert passed["verdict"] == PASS and "error" not in passed
    campaign = {"scenarios": [passed, error], "summary": summarize([passed, error], ["memory"])}
    assert campaign["summary"]["errors"] and campaign["summary"]["stores"]["memory"]["status"] == "ERROR"
    assert campaign_exit_code(campaign) == EXIT_INCOMPLETE
    campaign = {"scenarios": [passed], "summary": summarize([passed], ["memory"])}
    assert campaign_exit_code(campaign) == EXIT_PASS
    campaign["summary"]["fault_errors"] = ["scenario 0: broker-kill: the broker did not restart"]
    assert campaign_exit_code(campaign) == EXIT_INCOMPLETE
    # an unsafe variant that was never caught is a hole in the harness: exit 1 even beside an error
    unsafe = {**passed, "store": "rocksdb-legacy-nowipe"}
    campaign = {"scenarios": [unsafe, error], "summary": summarize([unsafe, error], ["memory", "rocksdb-legacy-nowipe"])}
    assert campaign["summary"]["unexpected"] == ["rocksdb-legacy-nowipe"]
    assert campaign_exit_code(campaign) == EXIT_FAIL
    # … unless the campaign was stopped early (a broken environment): then it did not test what it planned
    assert campaign_exit_code({**campaign, "stopped": {"why": "environment", "message": "stopped"}}) == EXIT_INCOMPLETE
    # a store whose every scenario ended in error was not tested: not unexpected, the campaign exits 3
    only_errors = {**error, "store": "rocksdb-legacy-nowipe"}
    campaign = {"scenarios": [only_errors], "summary": summarize([only_errors], ["rocksdb-legacy-nowipe"])}
    assert campaign["summary"]["unexpected"] == [] and campaign_exit_code(campaign) == EXIT_INCOMPLETE


# -- the CLI ----------------------------------------------------------------------------------------


def test_run_exits_3_with_an_error_verdict_when_the_scenario_cannot_be_run_to_its_end(cli, tmp_path):
    # The store kills the process the harness forks task instances from: no instance can follow.
    out = tmp_path / "verdict.json"
    proc = cli("run", "--store", "harness_breaking_store:make_store", "--seed", "1", "--json", str(out),
               "--out", str(tmp_path / "run"))
    assert proc.returncode == EXIT_INCOMPLETE, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == ERROR and result["violations"] == []
    assert isinstance(result["error"], str) and "zygote" in result["error"]
    assert "could not be run to its end" in proc.stdout and "Traceback" not in proc.stderr
    assert result["repro"] == "eos-harness run --store harness_breaking_store:make_store --workload counter --seed 1"


# `run` exits 1 when a promise is broken, 0 when every promise holds: tests/test_lifecycle.py
# (test_run_cli_writes_the_verdict_json_and_rejects_bad_input, test_a_store_commit_that_splits_…).


def test_a_campaign_whose_scenarios_could_not_be_run_exits_3(cli, tmp_path):
    out = tmp_path / "chaos.json"
    proc = cli("chaos", "--stores", "harness_breaking_store:make_store", "--scenarios", "2", "--seed", "1",
               "--workers", "1", "--json", str(out), "--out", str(tmp_path / "c"))
    assert proc.returncode == EXIT_INCOMPLETE, proc.stdout + proc.stderr
    campaign = json.loads(out.read_text())
    assert campaign["summary"]["unexpected"] == []
    assert {r["verdict"] for r in campaign["scenarios"]} == {ERROR}
    assert all(r["error"] for r in campaign["scenarios"])
