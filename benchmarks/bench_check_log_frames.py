"""Benchmark of the DataFrame checker of Kafka's log anomalies (``eos-harness check --engine spark`` on a kafka-log
campaign): a synthetic kafka-log history of ``--events`` events (10 million by default) written as Parquet as a
campaign on Spark writes it (``parquet/histories/suite=kafka-log/…``), judged by
:func:`eos_harness.suites.kafka_log.frames.check_frames` on ``local[1]`` and on ``local[2]`` in one run: events per
second per core of each. Then its answer against the in-process checker's
(:func:`eos_harness.suites.kafka_log.at_scale.check_in_process`) on a history both can hold (``--compare-events``,
200,000 by default): it must be the same.

Each synthetic scenario is a workload as the suite's runner produces it: ``--transactions`` transactions of 1 to 4
records over two partitions, about 3 in 10 aborted, each record's delivery offset; the read_committed reader's
reads (every committed record, in offset order); each partition's log end. One scenario in ``--broken`` (100 by
default) is broken one way (a record read twice, a committed record not read, the last one not read, an aborted record read, another
value read at an offset, the last stable offset below the log end), so the checker has anomalies to find.

``python -m benchmarks.bench_check_log_frames [--events 10000000] [--compare-events 200000] [--transactions 30]``
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_check_frames import _cpu_seconds, write_chunked, write_parquet_events
from benchmarks.common import parse_options, scratch_directory

BREAKS = ("read-twice", "not-read", "last-not-read", "aborted-read", "stranger", "hanging")
CHUNK = 500  # scenarios of one Parquet file


def _scenario_events(index: int, transactions: int, broken: int) -> Iterator[dict]:
    """One synthetic scenario's history (as :func:`eos_harness.suites.kafka_log.at_scale.history_events` writes it)."""
    from eos_harness.suites.kafka_log.at_scale import history_events
    from eos_harness.suites.kafka_log.checks import LogEnd, Read, Sent, Transaction

    rng = random.Random(index)
    fault = BREAKS[rng.randrange(len(BREAKS))] if rng.randrange(broken) == 0 else None
    next_offset = {0: 0, 1: 0}
    sent = []
    for number in range(transactions):
        records = []
        for i in range(rng.randint(1, 4)):
            p = rng.randrange(2)
            records.append(Sent(p, f"t{number}-{i}", next_offset[p]))
            next_offset[p] += 1
        for p in {r.partition for r in records}:
            next_offset[p] += 1  # its marker
        sent.append(Transaction(f"t{number}", "aborted" if rng.random() < 0.3 else "committed", tuple(records)))
    reads = sorted((Read(r.partition, r.offset, r.value) for t in sent if t.outcome == "committed" for r in t.records),
                   key=lambda r: (r.partition, r.offset))
    ends = [LogEnd(p, next_offset[p], next_offset[p], next_offset[p]) for p in (0, 1)]
    aborted = [r for t in sent if t.outcome == "aborted" for r in t.records]
    if fault == "read-twice" and reads:
        reads.append(reads[len(reads) // 2])
    elif fault == "not-read" and reads:
        reads.pop(len(reads) // 3)
    elif fault == "last-not-read" and reads:
        reads.pop()
    elif fault == "aborted-read" and aborted:
        rec = aborted[0]
        reads.append(Read(rec.partition, rec.offset, rec.value))
    elif fault == "stranger" and reads:
        reads.append(Read(reads[0].partition, reads[0].offset, "stranger"))
    elif fault == "hanging":
        ends[0] = LogEnd(0, ends[0].end, ends[0].end - 1, ends[0].position)
    scenario = {"system": "read_committed", "seed": index, "topic": f"eos-log-{index}", "transactions": transactions,
                "partitions": 2, "abort_ratio": 0.3}
    for seq, event in enumerate(history_events(scenario, sent, reads, ends)):
        yield {"seq": seq, "instance": 0, **event}


def _write_chunk(target: Path, chunk: int, first_index: int, transactions: int, broken: int) -> int:
    """Scenarios ``first_index + chunk * CHUNK`` onwards as one Parquet file; returns its events."""
    start = first_index + chunk * CHUNK
    return write_parquet_events(target / f"part-{chunk}.parquet",
                                ((index, event) for index in range(start, start + CHUNK)
                                 for event in _scenario_events(index, transactions, broken)))


def write_history(run_dir: Path, events: int, transactions: int, broken: int, first_index: int = 0) -> tuple[int, int]:
    """Scenarios (in files of :data:`CHUNK`, written by two processes) until at least ``events`` events, as
    ``run_dir/parquet/histories``: (events, scenarios) written."""
    target = run_dir / "parquet" / "histories" / "suite=kafka-log" / "subject=read_committed" / "verdict=pass"
    written, chunks = write_chunked(target, events, _write_chunk, first_index, transactions, broken)
    return written, chunks * CHUNK


def main() -> None:
    options = parse_options(__doc__, ("--events", 10_000_000, "events of the large history"),
                            ("--compare-events", 200_000, "events of the history both checkers judge"),
                            ("--transactions", 30, "transactions of each synthetic scenario"),
                            ("--broken", 100, "one scenario in this many is broken one way"),
                            ("--driver-memory", "4g", "the Spark driver's heap"))
    from eos_harness.spark.session import dataframe_session
    from eos_harness.suites.kafka_log.at_scale import check_in_process
    from eos_harness.suites.kafka_log.frames import check_frames

    with scratch_directory("check-log-frames") as scratch:
        started = time.perf_counter()
        events, scenarios = write_history(scratch / "large", options.events, options.transactions, options.broken)
        size = sum(f.stat().st_size for f in (scratch / "large").rglob("*.parquet"))
        print(f"synthetic history: {events:,} events in {scenarios:,} scenarios, {size / 1e6:.0f} MB of Parquet, "
              f"written in {time.perf_counter() - started:.0f} s", flush=True)
        small_events, small_scenarios = write_history(scratch / "small", options.compare_events, options.transactions,
                                                      options.broken, first_index=10_000_000)
        large = scratch / "large" / "parquet" / "histories"
        small = scratch / "small" / "parquet" / "histories"
        rates = {}
        for cores in (1, 2):
            log = scratch / f"spark-{cores}.log"
            started = time.perf_counter()
            with dataframe_session(f"local[{cores}]", log, "bench_check_log_frames", options.driver_memory) as spark:
                up = time.perf_counter() - started
                started, cpu, load = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
                answers = check_frames(spark, large)
                seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
                failed = sum(a["verdict"] == "fail" for a in answers)
                rates[cores] = events / seconds / cores
                print(f"local[{cores}]: {events:,} events checked in {seconds:.1f} s (session start {up:.1f} s; "
                      f"load average {load:.1f} to {os.getloadavg()[0]:.1f}): {events / seconds:,.0f} events/s, "
                      f"{rates[cores]:,.0f} events/s per core; {cpu:.0f} s of CPU, {events / cpu:,.0f} events per "
                      f"CPU second; {failed} of {len(answers):,} scenarios fail", flush=True)
                if cores == 2:
                    started = time.perf_counter()
                    frames = check_frames(spark, small)
                    frames_s = time.perf_counter() - started
        started = time.perf_counter()
        in_process = check_in_process(small)
        in_process_s = time.perf_counter() - started
        same = "the same verdicts and anomalies" if frames == in_process else "ANSWERS DIFFER"
        print(f"on {small_events:,} events ({small_scenarios} scenarios, "
              f"{sum(a['verdict'] == 'fail' for a in in_process)} failing): in-process {in_process_s:.1f} s, "
              f"DataFrames on local[2] {frames_s:.1f} s: {same}")
        print(f"2 cores against 1: {rates[2] * 2 / rates[1]:.2f} times the events per second")


if __name__ == "__main__":
    main()
