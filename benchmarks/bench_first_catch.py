"""How fast a default chaos campaign catches each built-in mutant: scenarios-to-first-catch.

Runs ``eos-harness chaos --minutes M --seed S`` (every default store, the embedded broker) and reads
each mutant's ``scenarios_to_first_catch`` from the campaign JSON: how many of that mutant's
scenarios ran, in plan order, up to its first failure. The goal is at most 10 for every mutant; a
mutant not caught within the campaign shows as ``not caught``.

``python -m benchmarks.bench_first_catch [--minutes 1] [--seed 7] [--workers 2]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL = 10


def first_catches(minutes: float, seed: int, workers: int) -> tuple[dict[str, int | None], int, float]:
    """Per mutant (every store expected to fail), its scenarios-to-first-catch (None: not caught), the
    campaign's scenario count and seconds."""
    eos = str(Path(sys.executable).with_name("eos-harness"))
    with tempfile.TemporaryDirectory(prefix="eos-bench-first-catch-") as tmp:
        out = Path(tmp) / "run"
        subprocess.run([eos, "chaos", "--minutes", f"{minutes:g}", "--seed", str(seed), "--workers", str(workers),
                        "--out", str(out)], capture_output=True, text=True, check=False)
        campaign = json.loads((out / "chaos.json").read_text())
    stores = campaign["summary"]["stores"]
    found = {name: tally.get("scenarios_to_first_catch") for name, tally in stores.items()
             if tally["expected"] == "fail"}
    return found, campaign["summary"]["total"], campaign["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    found, total, seconds = first_catches(args.minutes, args.seed, args.workers)
    print(f"chaos --minutes {args.minutes:g} --seed {args.seed}: {total} scenarios in {seconds:.0f} s")
    for name, count in found.items():
        print(f"  {name:<40} {'not caught' if count is None else count}")
    caught = [c for c in found.values() if c is not None]
    if caught:
        print(f"scenarios to first catch: median {statistics.median(caught):g}, max {max(caught)} "
              f"(goal: max <= {GOAL}); not caught: {len(found) - len(caught)} of {len(found)}")


if __name__ == "__main__":
    main()
