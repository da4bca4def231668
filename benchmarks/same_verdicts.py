"""Two campaigns of the same seed compared scenario by scenario (a run on ``--engine spark`` against one on
``--engine local``, say): for each plan index both finished, its subject, its verdict and the checks that fired
must be the same. Prints the count compared, the verdicts' tally, and every index that differs or that only one
of them finished (a campaign cut short finished fewer). Exit 0 when every index both finished agrees, 1 otherwise.
(Not a benchmark: ``python -m benchmarks`` runs only the ``bench_*`` modules.)

``python -m benchmarks.same_verdicts RUN_DIR_A RUN_DIR_B``
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

SUBJECTS = ("store", "system", "sink")


def scenarios(run_dir: Path) -> dict[int, tuple]:
    """Each finished plan index of the campaign in ``run_dir`` (its ``results.jsonl``: what finished, also of a
    campaign stopped before its JSON): (subject, verdict, the checks that fired)."""
    found = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        result = json.loads(line)
        if not isinstance(result.get("index"), int):  # a store's probe, not a plan index
            continue
        subject = next((result[f] for f in SUBJECTS if f in result), None)
        fired = tuple(sorted({v.get("check") for v in result.get("violations", [])} - {None}))
        found[result["index"]] = (subject, result["verdict"], fired)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    first, second = (scenarios(Path(a)) for a in argv)
    both = sorted(first.keys() & second.keys())
    differ = [i for i in both if first[i] != second[i]]
    print(f"{len(both)} scenarios finished in both ({len(first)} in {argv[0]}, {len(second)} in {argv[1]}); "
          f"verdicts: {dict(Counter(first[i][1] for i in both))}")
    for index in differ:
        print(f"  index {index}: {first[index]} != {second[index]}")
    only = sorted(first.keys() ^ second.keys())
    if only:
        print(f"  finished in one only: {len(only)} (first {only[:10]})")
    print("same verdicts" if not differ else f"{len(differ)} scenarios differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
