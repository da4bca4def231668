"""Benchmarks of the EOS lifecycle on the embedded broker, measured in one run.

1. Scenarios per second of the chaos driver (target ≥ 10/s on 2 cores).
2. Recovery time after a crash between the EOS commit and the store commit, at 10k, 100k and 1M
   keys: ``rocksdb-indexed`` replays only the uncommitted tail (flat in state size) while
   ``rocksdb-legacy`` is wiped and replays the whole changelog (linear); the ratio at 1M is the
   figure that matters (target ≥ 20).

``python -m benchmarks.bench_lifecycle [--sizes 10000,100000,1000000] [--seconds 20]``
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from eos_harness.broker import connect
from eos_harness.faults import points
from eos_harness.process.server import forkserver_context
from eos_harness.runtime import P_AFTER_EOS, Task, TaskConfig, create_topics

from benchmarks.common import parse_options, scratch_directory


def scenarios_per_second(seconds: float, out: Path) -> tuple[int, float]:
    from eos_harness.suite import SUITES
    from eos_harness.suite_campaign import defaults, run_suite_campaign

    started = time.monotonic()
    entry = SUITES["lifecycle"]
    out.mkdir(parents=True, exist_ok=True)  # a campaign holds its run directory, which must exist
    campaign = run_suite_campaign(entry, 11, defaults(entry), out, minutes=seconds / 60)
    elapsed = time.monotonic() - started
    return campaign["summary"]["total"], elapsed


def _run_until_crash(config: TaskConfig, commits: int) -> None:  # in the child
    points.arm(P_AFTER_EOS, commits)
    Task(config).run()


def _crash_after_last_eos_commit(config: TaskConfig, commits: int) -> None:
    """Build the state in a child forked by the preloaded zygote (never ``os.fork()`` of this
    process: once it has run RocksDB, a forked child can wait forever on a lock or a flush thread
    that only exists here), and let it die at the last EOS commit."""
    child = forkserver_context().Process(target=_run_until_crash, args=(config, commits), daemon=True)
    child.start()
    child.join()
    if child.exitcode != -signal.SIGKILL:
        raise RuntimeError(f"the task did not crash at {P_AFTER_EOS} (exit code {child.exitcode})")


def recovery_seconds(store: str, keys: int, interval: int, root: Path) -> tuple[float, int]:
    run = root / f"{store}-{keys}"
    run.mkdir(parents=True)
    spec = f"embedded:{run / 'broker.sqlite'}"
    config = TaskConfig.for_store(store, broker=spec, state_dir=str(run / "state"), workload="many-keys",
                                  commit_interval=interval, read_every=0, report_contents=False)
    broker = connect(spec)
    create_topics(broker, config)
    batch = 50_000
    for start in range(0, keys, batch):
        broker.produce(config.input_topic, 0, [(b"m%09d" % i, b"x") for i in range(start, min(keys, start + batch))])
    broker.close()
    _crash_after_last_eos_commit(config, keys // interval)
    events: list[dict] = []
    task = Task(config, emit=events.append)
    task.start()
    task._abandon()
    recover = next(e for e in events if e["type"] == "recover")
    return recover["seconds"], recover["replayed_records"]


def main() -> None:
    args = parse_options(__doc__,
                         ("--sizes", "10000,100000,1000000", "keys of each recovery measurement, comma-separated"),
                         ("--seconds", 20.0, "how long to run the chaos driver"),
                         ("--interval", 1000, "commit interval (records) when building state"))
    with scratch_directory("lifecycle") as root:
        total, elapsed = scenarios_per_second(args.seconds, root / "chaos")
        print(f"chaos driver: {total} scenarios in {elapsed:.1f} s = {total / elapsed:.1f} scenarios/s (target >= 10)")
        print()
        print(f"{'keys':>9} {'indexed s':>10} {'replayed':>9} {'legacy s':>10} {'replayed':>9} {'legacy/indexed':>15}")
        for keys in (int(s) for s in args.sizes.split(",")):
            t_idx, n_idx = recovery_seconds("rocksdb-indexed", keys, args.interval, root)
            t_leg, n_leg = recovery_seconds("rocksdb-legacy", keys, args.interval, root)
            print(f"{keys:>9} {t_idx:>10.4f} {n_idx:>9} {t_leg:>10.4f} {n_leg:>9} {t_leg / t_idx:>15.1f}")


if __name__ == "__main__":
    main()
