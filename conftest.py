"""The repository's own pytest configuration (a user's session gets only the opt-in plugin).

The harness's tests and suites run against the installed ``eos_harness`` package; Hypothesis keeps
its example database off (every suite sets ``database=None``) so no ``.hypothesis/`` is written.

Their temp directory is ``/dev/shm`` (a tmpfs) when it exists and ``TMPDIR`` is not set: every fault
the tests inject kills or freezes a process (no power cut), which loses nothing the page cache holds,
so a disk's fsync (RocksDB's open, close and synced commit, Kafka's and KRaft's logs) only costs time:
about 60 ms per RocksDB open and close on an ext4 disk, 5 ms on tmpfs. ``TMPDIR=/tmp make test`` runs
them on the disk.
"""

import os
import tempfile
import time

import pytest

TEST_TEMP_DIR = "/dev/shm"  # the tests' TMPDIR unless one is set (see the module's docstring)
TEST_TEMP_MIN_FREE = 2 << 30  # bytes free on it, or the tests stay on the default temp directory


def pytest_configure(config: pytest.Config) -> None:
    """``TMPDIR`` for the session and everything it starts (xdist workers, commands, brokers); xdist's
    controller hands out the files in the order the workers collect them (longest first, below)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    _RAN["started"] = time.monotonic()
    if "TMPDIR" in os.environ or not os.path.isdir(TEST_TEMP_DIR) or not os.access(TEST_TEMP_DIR, os.W_OK | os.X_OK):
        return
    stat = os.statvfs(TEST_TEMP_DIR)
    if stat.f_bavail * stat.f_frsize < TEST_TEMP_MIN_FREE:
        return
    os.environ["TMPDIR"] = TEST_TEMP_DIR
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

pytest_plugins = ["pytester"]

# `make check`, the edit loop (no Kafka, no Spark, no JVM; under 3 minutes on 2 cores), leaves out the
# tests marked `heavy` here; `make test` (CI) runs them. Heavy: the suites' own matrices, campaigns,
# nested pytest sessions, commands interrupted or killed mid-campaign, and the every-mutant matrices.
# An entry is a folder (ending in /), a file, or a file::test (every parametrization of it).
HEAVY = {
    "suites/conformance/", "suites/lifecycle/", "suites/windows/", "suites/offsets/", "suites/metadata/",
    "tests/test_campaign_controls.py", "tests/test_metadata_controls.py", "tests/test_reliability_store.py",
    "tests/test_store_implementers.py", "tests/test_global_store.py", "tests/test_replays.py",
    "tests/test_lifecycle.py::test_the_chaos_campaign_passes_a_real_store_and_catches_every_mutant",
    "tests/test_lifecycle.py::test_a_scenario_that_cannot_run_is_an_error_verdict_and_the_campaign_goes_on",
    "tests/test_lifecycle.py::test_a_zombie_is_fenced_and_none_of_its_writes_is_read_committed",
    "tests/test_metadata.py::test_each_mutant_is_caught_by_the_check_that_names_it",
    "tests/test_metadata.py::test_the_chaos_campaign_exits_0_when_the_controller_passes_and_its_mutants_are_caught",
    "tests/test_verify.py::test_every_mutant_is_caught_by_the_check_naming_its_mistake",
    "tests/test_verify.py::test_verify_exercises_every_check_that_applies_to_the_store",
    "tests/test_window_stores.py::test_a_window_store_exercises_every_check_that_applies",
    "tests/test_verify.py::test_a_user_store_outside_the_package_passes_verify_and_the_pytest_suite",
    "tests/test_implementers.py::test_two_independent_bugs_are_both_reported_each_shrunk_with_a_replay_that_reproduces_it",
    "tests/test_implementers.py::test_the_same_seed_generates_the_same_steps_from_the_command_line_and_in_a_test",
    "tests/test_implementers.py::test_allow_waives_one_bug_the_other_is_still_reported_and_the_verdict_names_what_was_waived",
    "tests/test_implementers.py::test_a_store_with_its_own_restore_passes_and_a_restore_that_keeps_the_last_offset_is_caught",
    "tests/test_implementers.py::test_an_empty_commit_that_records_no_offset_is_explained_and_passes_once_declared",
    "tests/test_implementers.py::test_a_store_that_offers_range_scans_and_gets_them_wrong_is_still_caught",
    "tests/test_implementers.py::test_a_store_declaring_no_range_scans_passes_and_the_verdict_says_range_is_not_checked",
    "tests/test_offsets_suite.py::test_every_offsets_mutant_is_caught_by_the_check_naming_its_mistake",
    "tests/test_offsets_suite.py::test_a_transactional_store_that_manages_offsets_gets_every_scenario_in_one_verdict",
    "tests/test_offsets_suite.py::test_the_pytest_entry_collects_only_the_scenarios_that_apply_and_says_why_the_rest_are_left_out",
    "tests/test_offsets_suite.py::test_an_offsets_finding_replays_alone_from_its_command_in_json_terminal_and_junit",
    "tests/test_offsets_suite.py::test_a_store_that_claims_the_legacy_parts_gets_each_broken_check_once_explained_with_how_to_declare",
    "tests/test_offsets_suite.py::test_a_new_store_that_declares_no_legacy_files_and_no_downgrade_passes_and_is_told_what_was_not_checked",
    "tests/test_offsets_suite.py::test_verify_joins_the_offsets_verdict_in_json_and_junit",
    "tests/test_offsets_migration.py::test_each_migration_mutant_is_caught_by_the_check_naming_its_mistake",
    "tests/test_offsets_migration.py::test_the_real_path_legacy_to_upgraded_and_back_keeps_every_offset_and_key_through_a_crash_at_each_step",
    "tests/test_reliability_io.py::test_an_interrupted_campaign_keeps_what_finished_and_leaves_nothing",
    "tests/test_reliability_io.py::test_a_killed_command_leaves_a_temp_root_the_next_one_removes",
    "tests/test_reliability_io.py::test_a_full_disk_stops_the_campaign_with_one_message",
    "tests/test_reliability_io.py::test_demo_reuses_its_own_directory",
    "tests/test_reliability_validate.py::test_a_short_campaign_exits_0_and_lists_the_stores_it_did_not_reach_as_not_run",
    "tests/test_report.py::test_the_report_holds_the_numbers_of_the_campaign_json",
    "tests/test_report.py::test_the_report_fetches_nothing_from_a_network",
    "tests/test_report.py::test_a_truncated_history_and_a_corrupt_campaign_json_are_named_at_the_top",
    "tests/test_store_duties.py::test_the_lifecycle_pytest_suite_prints_the_commit_metrics_per_store",
    "tests/test_store_duties.py::test_the_chaos_json_has_the_metrics_per_store",
    "tests/test_window_stores.py::test_every_window_mutant_is_caught_by_the_check_naming_its_mistake",
    "tests/test_window_stores.py::test_chaos_runs_windowed_workloads_on_window_stores_through_every_lifecycle_crash_point",
    "tests/test_new_store.py::test_new_store_filled_around_a_dict_passes_verify_and_its_pytest_file_runs_it",
    "tests/test_packaging.py::test_a_regular_install_beside_a_users_own_models_package",
    "tests/test_verify.py::test_verify_cli_writes_json_and_leaves_no_process",
    "tests/test_run_directories.py::test_runs_without_out_get_a_new_directory_each_and_latest_points_to_the_newest",
    "tests/test_run_directories.py::test_a_second_command_on_a_running_campaigns_directory_is_refused_naming_the_holder",
    "tests/test_reliability_validate.py::test_a_truncated_jar_is_found_and_fetched_again_or_named_with_the_command_that_clears_it",
    "tests/test_reliability_io.py::test_overwrite_replaces_only_the_harness_results",
    "tests/test_report.py::test_a_run_without_failures_says_so_at_the_top",
    "tests/test_implementers.py::test_a_store_without_put_all_passes_verify_and_the_lifecycle_writes_through_put",
    "tests/test_implementers.py::test_a_stores_exception_reads_as_a_finding_about_that_store_in_verify_and_run",
    "tests/test_offsets_migration.py::test_the_real_path_catches_a_migration_that_deletes_the_checkpoint_first",
    "tests/test_metadata.py::test_run_exit_codes",
    "tests/test_packaging.py::test_the_pytest_plugin_adds_only_namespaced_options_and_fixtures",
    "tests/test_reliability_io.py::test_verify_writes_nothing_into_the_working_directory",
}


def _heavy(nodeid: str) -> bool:
    test = nodeid.split("[", 1)[0]
    return (test in HEAVY or test.split("::", 1)[0] in HEAVY
            or any(test.startswith(folder) for folder in HEAVY if folder.endswith("/")))


# `make test`'s workers (pytest-xdist, --dist loadfile) take the test files longest first, so that no
# long file starts last on one worker while the other has nothing left: the files' seconds on one worker
# of `make test` on 2 cores (the run prints them, "seconds per file"), for a file not listed an estimate
# from its tests (ESTIMATE_S). xdist would otherwise hand out the files with the most tests first, and a
# file with one long test (a whole chaos campaign) last.
FILE_SECONDS = {  # from the 25 slowest tests of clean-clone runs (quiet-machine seconds, rounded)
    "tests/test_verify.py": 220, "tests/test_spark_user_pipelines.py": 130, "suites/spark/test_spark.py": 100,
    "tests/test_kafka_metadata.py": 100, "tests/test_replays.py": 95, "tests/test_spark_kafka.py": 90,
    "tests/test_implementers.py": 60, "tests/test_metadata.py": 60, "tests/test_kafka_faults.py": 60,
    "tests/test_lifecycle.py": 55, "tests/test_reliability_io.py": 50, "tests/test_campaign_controls.py": 45,
    "tests/test_metadata_controls.py": 40, "tests/test_spark_user_fixture.py": 40,
    "tests/test_kafka_streams_upgrade.py": 35, "tests/test_kafka_chaos.py": 35, "tests/test_spark_tempfiles.py": 30,
    "tests/test_damaged_runs.py": 25, "tests/test_printed_commands.py": 20, "tests/test_spark_models.py": 10,
    # measured on one worker (-n 1) at load 6 to 10
    "tests/test_window_stores.py": 25, "suites/conformance/test_conformance.py": 25, "tests/test_global_store.py": 20,
    "suites/broker/test_kafka.py": 8, "suites/windows/test_windows.py": 6, "suites/offsets/test_offsets.py": 5,
    "suites/lifecycle/test_lifecycle.py": 5, "suites/kafka_streams/test_kafka_streams.py": 60,
    # alone (-n 0): 158 s at load 15 to 19, its two Spark queries 124 s of it, at once
    "tests/test_spark_user_kafka_input.py": 70,
}
ESTIMATE_S = {"spark": 10.0, "kafka": 4.0, "jvm": 4.0, "heavy": 1.0}  # per test of that marker; others 0.3 s
SUMMARY_FILES = 20  # the longest files the per-worker summary lists
_RAN: dict = {"started": 0.0, "files": {}, "workers": {}}  # xdist's controller: path -> (worker, s); worker -> done at


def _estimate(items: list[pytest.Item]) -> float:
    path = items[0].nodeid.split("::", 1)[0]
    if path in FILE_SECONDS:
        return FILE_SECONDS[path]
    return sum(max([s for m, s in ESTIMATE_S.items() if item.get_closest_marker(m)], default=0.3) for item in items)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _heavy(item.nodeid):
            item.add_marker(pytest.mark.heavy)
    if hasattr(config, "workerinput"):  # an xdist worker: every worker orders the same collection the same way
        files: dict[str, list[pytest.Item]] = {}
        for item in items:
            files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
        # The first worker to reach a Spark test makes the driver's class archive while the others wait
        # for it (pytest_runtest_setup): of the first file each worker gets, one at most has Spark.
        first, rest, workers = [], [], config.workerinput.get("workercount", 2)
        for group in sorted(files.values(), key=_estimate, reverse=True):
            spark = any(item.get_closest_marker("spark") for item in group)
            if len(first) < workers and not (spark and any(has for _, has in first)):
                first.append((group, spark))
            else:
                rest.append(group)
        items[:] = [item for group in [g for g, _ in first] + rest for item in group]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before this process's first Spark test (its fixtures start pipeline runs): the Spark driver's class
    archive, made once (suites/spark/warmup.py; a second worker waits for the first one's)."""
    if item.get_closest_marker("spark") is None or _SPARK_ARCHIVE:
        return
    from eos_harness.suites.spark.warmup import make_archive

    _SPARK_ARCHIVE.append(make_archive())


_SPARK_ARCHIVE: list[str] = []  # what make_archive said, once it ran in this process


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On xdist's controller: each worker's seconds per file, and when its last test ended."""
    node = getattr(report, "node", None)
    if node is None:
        return
    worker, path = node.gateway.id, report.nodeid.split("::", 1)[0]
    _, seconds = _RAN["files"].get(path, (worker, 0.0))
    _RAN["files"][path] = (worker, seconds + report.duration)
    _RAN["workers"][worker] = time.monotonic() - _RAN["started"]


def pytest_terminal_summary(terminalreporter) -> None:
    """After `make test`'s slowest tests: when each worker was done and the longest files (FILE_SECONDS)."""
    if not _RAN["workers"]:
        return
    write = terminalreporter.write_line
    for worker, done in sorted(_RAN["workers"].items()):
        mine = [s for w, s in _RAN["files"].values() if w == worker]
        write(f"{worker}: {len(mine)} files, {sum(mine):.0f} s of tests, its last test done {done:.0f} s after the start")
    longest = sorted(_RAN["files"].items(), key=lambda kv: -kv[1][1])[:SUMMARY_FILES]
    write("seconds per file: " + ", ".join(f"{path} {s:.0f} ({w})" for path, (w, s) in longest))
