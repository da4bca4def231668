"""``make bench`` (``python -m benchmarks``): its benchmarks' campaigns run."""

from __future__ import annotations


def test_the_benchmarks_chaos_rate_runs_a_campaign_into_a_folder_it_makes(tmp_path):
    # bench_lifecycle and bench_kafka time a lifecycle campaign through run_suite_campaign, which holds its run
    # directory: make bench stopped at bench_kafka with "chaos-kafka: cannot be used: No such file or directory"
    from benchmarks.bench_lifecycle import scenarios_per_second

    total, elapsed = scenarios_per_second(0.5, tmp_path / "chaos")
    assert total >= 1 and elapsed > 0
    assert (tmp_path / "chaos" / "results.jsonl").read_text().count("\n") == total  # each scenario kept
