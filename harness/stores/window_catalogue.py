"""Registers the built-in window stores and window mutants (kinds ``window-store`` and ``window-mutant``),
and resolves a window store name or a user's ``module:function`` window store factory."""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from eos_harness.faults import points
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores import BUILTIN, StoreFactoryError, StoreSpec, builtin_spec, register
from eos_harness.stores.window_memory import memory_window, memory_window_kip428, memory_window_txn
from eos_harness.stores.window_rocksdb import rocksdb_window, rocksdb_window_txn
from eos_harness.window_store import WindowStore

__all__ = ["WINDOW_METHODS", "is_window_store", "reached_window_points", "resolve_window"]

register(StoreSpec("memory-window", "window-store",
                   "KIP-428 in-memory window store as Kafka shipped it: a segment per ms, retention only, "
                   "stream time rebuilt on restore", memory_window))
register(StoreSpec("memory-window-kip428", "window-store",
                   "KIP-428 in-memory window store as first proposed: the store drops late writes (grace)",
                   memory_window_kip428))
register(StoreSpec("memory-window-txn", "window-store",
                   "transactional in-memory window store (kip428-proposal semantics): staged writes, read-committed view",
                   memory_window_txn))
register(StoreSpec("rocksdb-window", "window-store",
                   "persistent RocksDB window store, segments of half the retention dropped whole, not transactional",
                   rocksdb_window))
register(StoreSpec("rocksdb-window-txn", "window-store",
                   "transactional RocksDB window store: data, stream time and offsets in one batch (KIP-892)",
                   rocksdb_window_txn))

WINDOW_METHODS = (
    "window_config", "init", "persistent", "transactional", "manages_offsets", "put", "restore", "fetch_window",
    "fetch", "fetch_range", "fetch_all", "all", "commit", "committed_offset", "recover", "read_committed",
    "flush", "close",
)


def is_window_store(spec: str) -> bool:
    """Whether ``spec`` names a window store: a built-in of a window kind, or a factory whose store
    has ``window_config`` (the factory is called once, the store not opened)."""
    builtin = builtin_spec(spec)
    if builtin is not None:
        return builtin.window
    if ":" not in spec:
        return False
    return callable(getattr(_import_factory(spec)(), "window_config", None))


def _import_factory(spec: str) -> Callable[..., object]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StoreFactoryError(f"store factory {spec!r} not found: cannot import module {module_name!r} ({exc}); "
                                "check the module is on PYTHONPATH (or run from its directory)") from exc
    factory = getattr(module, attr, None)
    if factory is None:
        raise StoreFactoryError(f"store factory {spec!r} not found: module {module_name!r} has no attribute {attr!r}")
    if not callable(factory):
        raise StoreFactoryError(f"store factory {spec!r} is not callable; point at a function returning a store")
    return factory


def resolve_window(spec: str) -> Callable[..., WindowStore]:
    """The factory of a built-in window store or mutant, or of ``module:function`` (checked: the
    store it returns must have every method of :class:`eos_harness.window_store.WindowStore`)."""
    builtin = BUILTIN.get(spec) or builtin_spec(spec)
    if builtin is not None:
        if not builtin.window:
            raise StoreFactoryError(f"{spec!r} is a key-value store, not a window store")
        return builtin.factory
    if ":" not in spec:
        names = ", ".join(s.name for s in BUILTIN.values() if s.window)
        raise StoreFactoryError(f"unknown window store {spec!r}: use a built-in name ({names}) or a factory 'module:function'")
    factory = _import_factory(spec)

    def checked(**kwargs) -> WindowStore:
        store = factory(**kwargs)
        missing = [m for m in WINDOW_METHODS if not callable(getattr(store, m, None))]
        if missing:
            raise StoreFactoryError(f"store factory {spec!r} returned {type(store).__name__}, which is not a window "
                                    f"store (missing {', '.join(missing)}); implement eos_harness.window_store.WindowStore")
        return store  # type: ignore[return-value]

    return checked


def reached_window_points(store: str) -> list[str]:
    """The crash points a window store reaches in put/commit/recover (traced in a temp dir)."""
    factory = resolve_window(store)
    tmp = Path(tempfile.mkdtemp(prefix="eos-points-"))
    trace = points.start_tracing()
    try:
        tp = TopicPartition("points-changelog", 0)
        s = factory()
        s.init(StoreContext(directory=tmp / "store", changelog=tp))
        s.recover(None)
        for i in range(12):
            s.put(b"k%02d" % i, b"v", 10 * i)
        s.put(b"k00", None, 110)
        s.commit({tp: 13})
        s.put(b"k01", b"w", 400)
        s.commit({tp: 14})
        s.close()
        s = factory()
        s.init(StoreContext(directory=tmp / "store", changelog=tp))
        s.recover(14)
        s.close()
    finally:
        points.stop_tracing()
        shutil.rmtree(tmp, ignore_errors=True)
    seen: list[str] = []
    for name in trace:
        if not name.startswith("task.") and name not in seen:
            seen.append(name)
    return seen



# -- window stores under the EOS task runtime ---------------------------------------------------------

# Window mutants whose mistake only the window suite can see: no task ever creates a store with
# invalid arguments, so a chaos campaign leaves them out.
SUITE_ONLY = ("mutant-window-validation-grace",)


def task_store_factory(spec: str, workload) -> Callable[[], object]:
    """The factory the task runtime opens for a windowed workload: the window store ``spec`` created
    with the workload's arguments, seen as a key-value store over windowed keys."""
    from eos_harness.window_store import WindowedKeyValueStore

    if not workload.windowed:
        raise StoreFactoryError(f"{spec!r} is a window store; run it with a windowed workload "
                                "(tumbling-count, hopping-count)")
    if not is_window_store(spec):
        raise StoreFactoryError(f"workload {workload.name!r} needs a window store; {spec!r} is a key-value store "
                                "(try --store memory-window)")
    factory = resolve_window(spec)
    return lambda: WindowedKeyValueStore(factory(**workload.window_store))


def declared_semantics(spec: str) -> str | None:
    """The semantics a window store declares (``kip428-proposal``/``retention-only``); None for a key-value store."""
    if not is_window_store(spec):
        return None
    return resolve_window(spec)().window_config().semantics


from eos_harness.stores import window_mutants  # noqa: E402,F401  (registers the window mutants)
