"""``python -m benchmarks`` (``make bench``): run every benchmark module's ``main()`` in turn.

Each benchmark measures its baseline in the same run and prints ratios against it."""

from __future__ import annotations

import importlib
import pkgutil
import signal
import sys
from pathlib import Path


def _stop(signum, frame) -> None:
    """SIGTERM (and SIGINT, also when started with it ignored): the main thread unwinds as on Ctrl-C, each
    benchmark's own clean-up runs (its pools stop their workers, its scratch folders are removed); whatever process
    is left is killed after."""
    from eos_harness.session import Terminated

    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def main() -> None:
    """Every benchmark in turn; stopped by SIGTERM or Ctrl-C, what they wrote in the temp directory (their scratch
    folders) is removed and no process they started is left (exit 143 or 130). Not a harness session of its own:
    the commands the benchmarks run make theirs under TMPDIR, where a session's root would nest a level too deep for
    the Unix sockets of a Spark task's store processes (``TempDirTooLong``)."""
    from eos_harness.session import exit_code_of, signal_name

    only = set(sys.argv[1:])
    sys.argv = sys.argv[:1]
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
            if not info.name.startswith("bench_") or (only and info.name not in only):
                continue
            print(f"== {info.name} ==", flush=True)
            importlib.import_module(f"benchmarks.{info.name}").main()
            print()
    except KeyboardInterrupt as exc:
        from eos_harness.session import kill_started_processes

        kill_started_processes()
        print(f"interrupted ({signal_name(exc)}): the temp directory and the processes the benchmarks started are "
              "removed", file=sys.stderr)
        sys.exit(exit_code_of(exc))


if __name__ == "__main__":
    main()
