"""Benchmark: ``verify`` of a user's store module against the same store built in.

The user's module (``tests/fixtures/slow_noisy_store.py``) takes 0.3 s to import and warns on import,
as a real library's adapter does; its store is the built-in ``rocksdb-indexed``. Each ``verify`` runs
as the user runs it (``eos-harness verify``, a fresh process, the same seed), alternately, and the
ratio of the medians is printed (target <= 1.5: the module is imported once per run, not once per
child).

``python -m benchmarks.bench_user_store [--examples 10] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EOS_BIN = Path(sys.executable).parent / "eos-harness"
BUILT_IN, USER = "rocksdb-indexed", "slow_noisy_store:make_store"
TARGET = 1.5


def timed_verify(store: str, examples: int, seed: int) -> float:
    """Seconds one ``eos-harness verify STORE`` takes (it must pass)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    proc = subprocess.run([str(EOS_BIN), "verify", store, "--seed", str(seed), "--examples", str(examples)],
                          capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"verify {store} did not pass (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10, help="Hypothesis examples per verify")
    parser.add_argument("--rounds", type=int, default=2, help="verify runs of each store, alternating")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    times: dict[str, list[float]] = {BUILT_IN: [], USER: []}
    for _ in range(args.rounds):
        for store in (BUILT_IN, USER):
            times[store].append(timed_verify(store, args.examples, args.seed))
    built_in, user = statistics.median(times[BUILT_IN]), statistics.median(times[USER])
    print(f"verify {BUILT_IN} (built in):              {built_in:7.1f} s  (runs: "
          f"{', '.join(f'{t:.1f}' for t in times[BUILT_IN])})")
    print(f"verify {USER} (user module, 0.3 s import): {user:7.1f} s  (runs: "
          f"{', '.join(f'{t:.1f}' for t in times[USER])})")
    ratio = user / built_in
    print(f"ratio user/built-in: {ratio:.2f} (target <= {TARGET}){'' if ratio <= TARGET else '  ABOVE TARGET'}")


if __name__ == "__main__":
    main()
