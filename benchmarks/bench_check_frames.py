"""Benchmark of the DataFrame checker (``eos-harness check --engine spark``): a synthetic lifecycle history of
``--events`` events (10 million by default) written as Parquet as a campaign on Spark writes it
(``parquet/histories/suite=lifecycle/…``), judged by :func:`eos_harness.suites.lifecycle.frames.check_frames` on
``local[1]`` and on ``local[2]`` in one run: events per second per core of each. Then its verdicts against the
in-process checkers' (:func:`eos_harness.suites.lifecycle.at_scale.check_in_process`) on a history both can hold
(``--compare-events``, 200,000 by default): they must be the same.

Each synthetic scenario is a counter task over ``--records`` input records, committed every 10 records: a read
of its key after every record (its own value and the committed view's), a crash after the commit at a drawn
position, the recovery (the store's contents, the last committed state), the rest of the input read again from
there, the end, a last recovery and the read-committed output. One scenario in ``--broken`` (100 by default) has
one broken promise injected (a dirty read, a duplicate or a lost output record, an uncommitted write kept by
the recovery, a committed write lost by it), so the checker has violations to find. The driver's heap is
``--driver-memory`` (4g: the machine is shared).

``python -m benchmarks.bench_check_frames [--events 10000000] [--compare-events 200000] [--records 300]``
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from pathlib import Path

from benchmarks.common import parse_options, scratch_directory

INJECTIONS = ("dirty-read", "duplicate-output", "lost-output", "uncommitted-survives", "committed-forgotten")


SEEDS = 64  # the synthetic scenarios draw their input from this many seeds (a model each, built once per process)
_models: dict = {}


def _scenario_events(index: int, records: int, broken: int) -> Iterator[dict]:
    """One synthetic scenario's history (events without ``seq``: numbered by the caller)."""
    from eos_harness.suites.lifecycle.at_scale import model_of

    seed = 1_000_003 * (index % SEEDS) + 17
    first = {"type": "scenario", "store": "rocksdb-indexed", "workload": "counter", "seed": seed, "records": records,
             "instance": 0}
    if (seed, records) not in _models:
        _models[seed, records] = model_of(first, None)
    model = _models[seed, records]
    rng = random.Random(index)
    inject = INJECTIONS[rng.randrange(len(INJECTIONS))] if rng.randrange(broken) == 0 else None
    crash_at = rng.randrange(10, records - 10)
    committed = (crash_at // 10) * 10

    def text(data: bytes | None) -> str | None:
        return None if data is None else data.decode("latin-1")

    def reads(instance: int, start: int, end: int, dirty_at: int | None) -> Iterator[dict]:
        position = start
        for i in range(start, end):
            key = model.records[i][0]
            committed_value = text(model.state_at(position).get(key))
            own = text(model.value_after(i, key))
            if i == dirty_at:
                committed_value = own if own != committed_value else "dirty"
            yield {"type": "read", "instance": instance, "index": i, "key": text(key), "own": own,
                   "committed": committed_value, "store_committed_position": position}
            if (i + 1) % 10 == 0:
                position = i + 1
                yield {"type": "commit", "instance": instance, "input_position": position, "changelog_position": position}

    def recovery(instance: int, position: int, change: str | None) -> dict:
        contents = dict(model.state_at(position))
        if change == "uncommitted-survives":
            later = model.state_at(len(model.records))
            key = next((k for k in sorted(later) if later[k] != contents.get(k)), None)
            if key is not None:
                contents[key] = later[key]
        elif change == "committed-forgotten" and contents:
            contents.pop(sorted(contents)[0])
        return {"type": "recover", "instance": instance, "input_position": position, "transactional": True,
                "persistent": True, "wiped": False, "replayed_records": 0, "changelog_length": position,
                "contents": [[text(k), text(v)] for k, v in sorted(contents.items())]}

    yield first
    yield {"type": "start", "instance": 1, "mode": "run"}
    yield recovery(1, 0, None)
    yield from reads(1, 0, crash_at, crash_at // 2 if inject == "dirty-read" else None)
    yield {"type": "crash", "instance": 1, "point": "task.commit.before_eos"}
    yield {"type": "start", "instance": 2, "mode": "run"}
    yield recovery(2, committed, inject)
    yield from reads(2, committed, records, None)
    yield {"type": "done", "instance": 2, "input_position": records}
    yield {"type": "start", "instance": 3, "mode": "verify"}
    yield recovery(3, records, None)
    output = [[text(k), text(v)] for k, v in model.expected_output(records)]
    if inject == "duplicate-output":
        output.append(output[len(output) // 2])
    elif inject == "lost-output":
        output.pop(len(output) // 3)
    yield {"type": "output", "instance": 0, "committed_position": records, "records": output}


CHUNK = 200  # scenarios of one Parquet file


def write_parquet_events(path: Path, events: Iterable[tuple[int, dict]]) -> int:
    """``events`` (each its scenario's index and the event, with its ``seq`` and ``instance``) as one Parquet file
    of the histories' columns (:func:`eos_harness.results_parquet.write_histories`); returns how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list] = {name: [] for name in ("index", "seq", "instance", "type", "event")}
    for index, event in events:
        for name, value in (("index", index), ("seq", event["seq"]), ("instance", event["instance"]),
                            ("type", event["type"]), ("event", json.dumps(event))):
            columns[name].append(value)
    schema = pa.schema([("index", pa.int64()), ("seq", pa.int64()), ("instance", pa.int64()), ("type", pa.string()),
                        ("event", pa.string())])
    pq.write_table(pa.table(columns, schema=schema), path)
    return len(columns["index"])


def write_chunked(target: Path, events: int, write_chunk: Callable[..., int], *args) -> tuple[int, int]:
    """Chunk files ``write_chunk(target, chunk, *args)`` (each returns its events) into the new folder ``target``:
    the first here, the rest by two processes, until at least ``events`` events: (events, chunks) written."""
    from concurrent.futures import ProcessPoolExecutor

    target.mkdir(parents=True)
    per_chunk = write_chunk(target, 0, *args)
    chunks = max(1, -(-events // per_chunk))
    with ProcessPoolExecutor(2) as pool:
        rest = range(1, chunks)
        written = per_chunk + sum(pool.map(write_chunk, repeat(target, len(rest)), rest,
                                           *(repeat(arg, len(rest)) for arg in args)))
    return written, chunks


def _write_chunk(target: Path, chunk: int, first_index: int, records: int, broken: int) -> int:
    """Scenarios ``first_index + chunk * CHUNK`` onwards as one Parquet file; returns its events."""
    start = first_index + chunk * CHUNK
    return write_parquet_events(target / f"part-{chunk}.parquet",
                                ((index, {"seq": seq, **event}) for index in range(start, start + CHUNK)
                                 for seq, event in enumerate(_scenario_events(index, records, broken))))


def write_history(run_dir: Path, events: int, records: int, broken: int, first_index: int = 0) -> tuple[int, int]:
    """Scenarios (in files of :data:`CHUNK`, written by two processes) until at least ``events`` events, as
    ``run_dir/parquet/histories``: (events, scenarios) written."""
    target = run_dir / "parquet" / "histories" / "suite=lifecycle" / "subject=rocksdb-indexed" / "verdict=pass"
    written, chunks = write_chunked(target, events, _write_chunk, first_index, records, broken)
    return written, chunks * CHUNK


def _cpu_seconds() -> float:
    """CPU time of this process and every process under it (the Spark JVM, its Python workers), so far."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def main() -> None:
    options = parse_options(__doc__, ("--events", 10_000_000, "events of the large history"),
                            ("--compare-events", 200_000, "events of the history both checkers judge"),
                            ("--records", 300, "input records of each synthetic scenario"),
                            ("--broken", 100, "one scenario in this many has a broken promise injected"),
                            ("--driver-memory", "4g", "the Spark driver's heap"))
    from eos_harness.spark.session import dataframe_session
    from eos_harness.suites.lifecycle.at_scale import (
        check_in_process,
        lifecycle_histories,
        semantics_resolver,
    )
    from eos_harness.suites.lifecycle.frames import check_frames

    semantics = semantics_resolver()
    with scratch_directory("check-frames") as scratch:
        started = time.perf_counter()
        events, scenarios = write_history(scratch / "large", options.events, options.records, options.broken)
        size = sum(f.stat().st_size for f in (scratch / "large").rglob("*.parquet"))
        print(f"synthetic history: {events:,} events in {scenarios:,} scenarios, {size / 1e6:.0f} MB of Parquet, "
              f"written in {time.perf_counter() - started:.0f} s", flush=True)
        small_events, small_scenarios = write_history(scratch / "small", options.compare_events, options.records,
                                                      options.broken, first_index=10_000_000)
        large, small = lifecycle_histories(scratch / "large"), lifecycle_histories(scratch / "small")
        rates = {}
        for cores in (1, 2):
            log = scratch / f"spark-{cores}.log"
            started = time.perf_counter()
            with dataframe_session(f"local[{cores}]", log, "bench_check_frames", options.driver_memory) as spark:
                up = time.perf_counter() - started
                started, cpu, load = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
                answers = check_frames(spark, large, semantics)
                seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
                failed = sum(a["verdict"] == "fail" for a in answers)
                rates[cores] = events / seconds / cores
                print(f"local[{cores}]: {events:,} events checked in {seconds:.1f} s (session start {up:.1f} s; "
                      f"load average {load:.1f} to {os.getloadavg()[0]:.1f}): {events / seconds:,.0f} events/s, "
                      f"{rates[cores]:,.0f} events/s per core; {cpu:.0f} s of CPU, {events / cpu:,.0f} events per "
                      f"CPU second; {failed} of {len(answers):,} scenarios fail", flush=True)
                if cores == 2:
                    started = time.perf_counter()
                    frames = check_frames(spark, small, semantics)
                    frames_s = time.perf_counter() - started
        started = time.perf_counter()
        in_process = check_in_process(small, semantics)
        in_process_s = time.perf_counter() - started
        same = "the same verdicts and violations" if frames == in_process else "ANSWERS DIFFER"
        print(f"on {small_events:,} events ({small_scenarios} scenarios, "
              f"{sum(a['verdict'] == 'fail' for a in in_process)} failing): in-process {in_process_s:.1f} s, "
              f"DataFrames on local[2] {frames_s:.1f} s: {same}")
        print(f"2 cores against 1: {rates[2] * 2 / rates[1]:.2f} times the events per second")


if __name__ == "__main__":
    main()
