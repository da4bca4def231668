"""What the benchmarks share: their command line, a scratch directory removed afterwards, and the raw
RocksDB write batch the stores are measured against. (Not a benchmark itself: ``python -m benchmarks``
runs only the ``bench_*`` modules.)"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from rocksdict import WriteBatch, WriteOptions

__all__ = ["parse_options", "raw_batch", "scratch_directory", "synced"]


def parse_options(doc: str, *options: tuple[str, object, str]) -> argparse.Namespace:
    """The benchmark's command line: each option ``(flag, default, help)``, of the type of its
    default; the module docstring is the help text."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default, what in options:
        parser.add_argument(flag, type=type(default), default=default, help=what)
    return parser.parse_args()


@contextlib.contextmanager
def scratch_directory(name: str) -> Iterator[Path]:
    """A new directory ``eos-bench-NAME-…`` in the temporary directory, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=f"eos-bench-{name}-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def synced() -> WriteOptions:
    """Write options that sync the write-ahead log (what a commit does)."""
    options = WriteOptions()
    options.sync = True
    return options


def raw_batch(entries: Iterable[tuple[bytes, bytes]]) -> WriteBatch:
    """A raw-bytes RocksDB write batch holding a put of each entry."""
    batch = WriteBatch(raw_mode=True)
    for key, value in entries:
        batch.put(key, value)
    return batch
