"""Benchmark of KIP-868 metadata transactions on the embedded broker, measured in one run.

For transactions of 1, 100 and 10,000 records (a config change wrapped in Begin … End, a topic of
99 partitions, a topic of 9,999 partitions; batches capped at 8 KiB):

1. transactions per second of the controller (records → batches → the log, applied to its state),
   against a baseline measured in the same run: the same batches appended to the log directly, with
   no markers, no controller and no reader;
2. visibility delay: from the controller's End committed to the image published by a live reader
   process following the log (median and worst).

``python -m benchmarks.bench_metadata [--seconds 5]``
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from eos_harness.history import History
from eos_harness.metadata import DEFAULT_MAX_BATCH_BYTES, LogSpec, MetadataLog, pack
from eos_harness.metadata.controller import Controller
from eos_harness.models.metadata import RECORD, Command, Entry, Image, records_of
from eos_harness.suites.metadata.instance import LiveReader

from benchmarks.common import parse_options, scratch_directory

SIZES = (1, 100, 10_000)


def _command(size: int, index: int) -> Command:
    if size == 1:
        return Command("set_config", resource="cluster", key="retention.ms", value=str(index))
    return Command("create_topic", topic=f"t{index:05d}", partitions=size - 1)


def controller_run(root: Path, size: int, seconds: float) -> tuple[int, float, list[float]]:
    """Transactions committed, seconds taken, and each one's visibility delay (s)."""
    spec = LogSpec(f"embedded:{root / f'controller-{size}.sqlite'}", "metadata", "controller")
    history = History(root / f"history-{size}.jsonl")
    with MetadataLog(spec) as log:
        log.create()
        reader = LiveReader(spec, history, None, None, 0, 0, report_images=False, poll_interval=0.001)
        committed: list[dict] = []
        controller = Controller(log, 1, DEFAULT_MAX_BATCH_BYTES, emit=committed.append, report_state=False,
                                always_transaction=True)
        controller.activate()
        started = time.monotonic()
        count = 0
        while time.monotonic() - started < seconds or not count:
            controller.execute(count, _command(size, count))
            count += 1
        elapsed = time.monotonic() - started
        reader.stop()
    published = sorted((e["position"], e["t"]) for e in reader.events if e["type"] == "published")
    delays = []
    for event in (e for e in committed if e["type"] == "committed"):
        seen = next((t for position, t in published if position >= event["position"]), None)
        if seen is not None:
            delays.append(seen - event["t"])
    return count, elapsed, delays


def baseline_run(root: Path, size: int, seconds: float) -> tuple[int, float]:
    """The same records appended as plain batches (no markers, controller or reader): appends per second."""
    spec = LogSpec(f"embedded:{root / f'baseline-{size}.sqlite'}", "metadata", "writer")
    image = Image()
    with MetadataLog(spec) as log:
        log.create()
        log.become_writer()
        started = time.monotonic()
        count = 0
        while time.monotonic() - started < seconds or not count:
            entries = [Entry(RECORD, r, None, count, 1, "0" * 10) for r in records_of(_command(size, count), image)]
            for batch in pack(entries, DEFAULT_MAX_BATCH_BYTES):
                log.append(batch)
            count += 1
        return count, time.monotonic() - started


def main() -> None:
    args = parse_options(__doc__,
                         ("--seconds", 5.0, "how long to run each size"))
    with scratch_directory("metadata") as root:
        print(f"{'records/txn':>11} {'txn/s':>9} {'baseline appends/s':>19} {'txn/baseline':>13} "
              f"{'visibility p50 ms':>18} {'max ms':>8}")
        for size in SIZES:
            count, elapsed, delays = controller_run(root, size, args.seconds)
            base_count, base_elapsed = baseline_run(root, size, args.seconds)
            rate, base_rate = count / elapsed, base_count / base_elapsed
            p50 = statistics.median(delays) * 1000 if delays else float("nan")
            worst = max(delays) * 1000 if delays else float("nan")
            print(f"{size:>11} {rate:>9.1f} {base_rate:>19.1f} {rate / base_rate:>13.2f} {p50:>18.2f} {worst:>8.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
