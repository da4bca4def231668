"""``eos-harness new-store NAME``: a ready-to-fill store adapter module and a pytest file that runs
the conformance suite on it.

The adapter's methods carry the protocol's contracts (the docstrings of
:class:`eos_harness.store.StateStore`, read from it, so they never drift) and each body is one
``raise NotImplementedError("fill in NAME.method")`` line to replace. Reusable pieces live in
:mod:`eos_harness.store_kit`, not in the generated code.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import inspect
import keyword
import os
import sys
import textwrap
from pathlib import Path

from eos_harness.store import KeyValueView, StateStore

__all__ = ["ScaffoldError", "adapter_source", "test_source", "write_scaffold"]

# The store's methods, in the order a reader meets them, with their signatures as the adapter spells them.
METHODS = (
    ("init", "self, context: StoreContext", "None"),
    ("persistent", "self", "bool"),
    ("transactional", "self", "bool"),
    ("manages_offsets", "self", "bool"),
    ("get", "self, key: bytes", "bytes | None"),
    ("put", "self, key: bytes, value: bytes | None", "None"),
    ("put_all", "self, entries: Iterable[tuple[bytes, bytes | None]]", "None"),
    ("delete", "self, key: bytes", "bytes | None"),
    ("range", "self, lo: bytes, hi: bytes", "Iterator[tuple[bytes, bytes]]"),
    ("all", "self", "Iterator[tuple[bytes, bytes]]"),
    ("commit", "self, changelog_offsets: Mapping[TopicPartition, int]", "None"),
    ("committed_offset", "self, tp: TopicPartition", "int | None"),
    ("recover", "self, changelog_offset: int | None", "bool"),
    ("read_committed", "self", "CommittedView"),
    ("flush", "self", "None"),
    ("close", "self", "None"),
)
VIEW_METHODS = (
    ("get", "self, key: bytes", "bytes | None"),
    ("range", "self, lo: bytes, hi: bytes", "Iterator[tuple[bytes, bytes]]"),
    ("all", "self", "Iterator[tuple[bytes, bytes]]"),
)


class ScaffoldError(ValueError):
    """The scaffold cannot be written as asked (a usage error: nothing was written)."""


def placeholder(name: str, owner: str, method: str) -> str:
    """The one line each generated method body is, to be replaced by the implementation."""
    return f'raise NotImplementedError("fill in {name}.{owner}.{method}")'


def _method(name: str, owner: str, method: str, params: str, returns: str, doc: str | None) -> str:
    doc = inspect.cleandoc(doc or "")
    body = f'"""{doc}\n"""\n' if "\n" in doc else f'"""{doc}"""\n'
    body += placeholder(name, owner, method) + "\n"
    return f"def {method}({params}) -> {returns}:\n" + textwrap.indent(body, "    ")


def _class_name(name: str) -> str:
    """``demo_store`` → ``DemoStore``, ``rocks`` → ``RocksStore``."""
    words = "".join(part.capitalize() for part in name.split("_") if part) or "My"
    return words if words.endswith("Store") else f"{words}Store"


def adapter_source(name: str) -> str:
    """The text of ``NAME.py``: a store class and its committed view, every method a placeholder."""
    store_class = _class_name(name)
    view = "\n".join(_method(name, "CommittedView", m, p, r, getattr(KeyValueView, m).__doc__)
                     for m, p, r in VIEW_METHODS)
    store = "\n".join(_method(name, store_class, m, p, r, getattr(StateStore, m).__doc__) for m, p, r in METHODS)
    return f'''"""{name}: an adapter of your store to eos-harness's store protocol (``eos_harness.store``).

Fill in every method (each is one ``raise NotImplementedError`` line now); the docstrings are the
protocol's contracts. Then check it:

    eos-harness verify {name}:make_store --json {name}.json    # the conformance suite, with a verdict
    pytest test_{name}.py                                      # the same, as a test

Helpers: ``merged_range`` (an open transaction's writes over committed data, for ``range``/``all``),
``with_crash_points`` (crash points before and after a method of the library's object: declare
them below, then wrap, e.g. in ``init``: ``with_crash_points(self.db, "write_batch", BEFORE_WRITE,
AFTER_WRITE)``). ``eos-harness points --store {name}:make_store`` lists the points your store has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from eos_harness.faults.points import declare
from eos_harness.store import Capabilities, StoreContext, TopicPartition
from eos_harness.store_kit import merged_range, with_crash_points  # noqa: F401 - helpers to use

# Crash points of your own: a step boundary inside a commit, with what has happened when it is reached.
BEFORE_WRITE = declare("{name}.commit.before_write", "{name}: commit started, nothing written yet")
AFTER_WRITE = declare("{name}.commit.after_write", "{name}: commit written, not yet returned")


class CommittedView:
    """What ``read_committed()`` returns: committed data only (a transactional store never shows its
    open transaction's writes here; a non-transactional one shows the latest writes)."""

    def __init__(self, store: {store_class}) -> None:
        self.store = store

{textwrap.indent(view, "    ")}

class {store_class}:
    """Your store, as the harness drives it (one instance per process; ``init`` opens it)."""

    name = "{name}"

    def capabilities(self) -> Capabilities:
        """What your store LACKS (everything else is checked; the verdict lists what is not). A store
        written with offset management from the start has no legacy .checkpoint/.position offsets to
        import and no older format to go back to with ``upgrade_from``; drop these if yours does (an
        adapter of Kafka's RocksDB store). A task's store, fed by its own changelog partition only
        (never a global store, whose commits name several partitions), adds
        several_changelog_partitions=False: every commit then names that one partition.
        Others: range_scans, put_all, empty_commit_records_offset."""
        return Capabilities(legacy_offsets_import=False, legacy_downgrade=False)

{textwrap.indent(store, "    ")}

def make_store() -> {store_class}:
    """The factory the harness calls (``{name}:make_store``): an unopened store."""
    return {store_class}()
'''


def test_source(name: str) -> str:
    """The text of ``test_NAME.py``: the conformance suite on ``NAME:make_store`` as a pytest test."""
    return f'''"""The conformance suite of eos-harness on {name} (``pytest test_{name}.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

from eos_harness.suites.conformance.runner import verify

sys.path.insert(0, str(Path(__file__).parent))  # {name}.py sits beside this file


def test_{name}_keeps_the_store_protocols_promises(tmp_path):
    result = verify("{name}:make_store", seed=1, examples=20, log=tmp_path / "{name}.log")
    details = "\\n".join(f"{{v['check']}}: {{v['key']}}: expected {{v['expected']}}, observed {{v['observed']}}"
                        f"\\n  case: {{v['case']}}" for v in result["violations"])
    assert result["verdict"] == "pass", f"{{details or result.get('error')}}\\nreplay: {{result['repro']}}"
'''


def write_scaffold(name: str, directory: Path) -> list[Path]:
    """Write ``NAME.py`` and ``test_NAME.py`` into ``directory``; never overwrites a file (raises
    :class:`ScaffoldError`, writing nothing). Returns the files written."""
    if not name.isidentifier() or keyword.iskeyword(name):
        suggestion = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
        suggestion = suggestion if suggestion.isidentifier() and not keyword.iskeyword(suggestion) else "my_store"
        raise ScaffoldError(f"{name!r} is not a Python identifier, and the store's module is imported by that "
                            f"name: use letters, digits and underscores, not starting with a digit "
                            f"(e.g. {suggestion})")
    shadowed = shadowed_module(name, directory)
    if shadowed is not None:
        raise ScaffoldError(f"{name!r} is the name of {shadowed}: a store module named so would shadow it "
                            f"(or never be the one imported), and the harness imports your store by that name; "
                            f"choose another NAME (e.g. {name}_store)")
    files = {directory / f"{name}.py": adapter_source(name), directory / f"test_{name}.py": test_source(name)}
    existing = [str(path) for path in files if path.exists()]
    if existing:
        raise ScaffoldError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: new-store never "
                            "overwrites a file; choose another NAME or move the file away")
    if not os.access(directory, os.W_OK):
        raise ScaffoldError(f"cannot write in {directory}: the directory is not writable; give a writable --dir")
    written: list[Path] = []
    try:
        for path, text in files.items():
            with open(path, "x", encoding="utf-8") as out:  # never replaces a file, even one made just now
                written.append(path)
                out.write(text)
    except OSError as exc:
        for path in written:  # nothing half-written is left
            with contextlib.suppress(OSError):
                path.unlink()
        raise ScaffoldError(f"cannot write {exc.filename or directory}: {exc.strerror or exc}; "
                            "nothing was written (give a writable --dir)") from None
    return list(files)


def shadowed_module(name: str, directory: Path) -> str | None:
    """What a module called ``name`` written in ``directory`` would clash with: eos-harness itself,
    a module of the standard library, or one importable here (an installed package, a module or
    package in ``directory``); None when the name is free. Nothing is imported to find out."""
    if name == "eos_harness" or name.startswith("eos_harness."):
        return "eos-harness's own package"
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return f"the standard library's module {name!r}"
    with contextlib.suppress(ImportError, ValueError):
        found = importlib.machinery.PathFinder.find_spec(name, [str(directory), *sys.path])
        if found is not None:
            where = found.origin if found.origin not in (None, "namespace") else ", ".join(
                found.submodule_search_locations or [])
            return f"a module importable here ({where})"
    return None
