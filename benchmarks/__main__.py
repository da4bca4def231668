"""``python -m benchmarks`` (``make bench``): run every benchmark module's ``main()`` in turn.

Each benchmark measures its baseline in the same run and prints ratios against it."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    """In a session of the harness's own (:func:`eos_harness.session.session`): everything the benchmarks put in the
    temp directory is under one root, removed at the end, also on Ctrl-C or SIGTERM (turned into a
    KeyboardInterrupt that unwinds each benchmark's own clean-up), with every process they started stopped."""
    from eos_harness.session import exit_code_of, session, signal_name

    only = set(sys.argv[1:])
    sys.argv = sys.argv[:1]
    try:
        with session():
            for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
                if not info.name.startswith("bench_") or (only and info.name not in only):
                    continue
                print(f"== {info.name} ==", flush=True)
                importlib.import_module(f"benchmarks.{info.name}").main()
                print()
    except KeyboardInterrupt as exc:
        print(f"interrupted ({signal_name(exc)}): the temp directory and the processes the benchmarks started are "
              "removed", file=sys.stderr)
        sys.exit(exit_code_of(exc))


if __name__ == "__main__":
    main()
