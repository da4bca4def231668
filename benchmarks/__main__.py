"""``python -m benchmarks`` (``make bench``): run every benchmark module's ``main()`` in turn.

Each benchmark measures its baseline in the same run and prints ratios against it."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    only = set(sys.argv[1:])
    sys.argv = sys.argv[:1]
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if not info.name.startswith("bench_") or (only and info.name not in only):
            continue
        print(f"== {info.name} ==", flush=True)
        importlib.import_module(f"benchmarks.{info.name}").main()
        print()


if __name__ == "__main__":
    main()
