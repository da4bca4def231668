"""The registry of stores: a built-in name or a user's factory ``module:function`` turned into a
factory, once, at the edge (the CLI, the pytest plugin); what kind of store it is (key-value or window).

A store factory is a callable taking no arguments that returns a new, unopened
:class:`eos_harness.store.StateStore` (a window store's factory takes the window arguments). The
harness calls it once per (re)start. An unsafe runtime variant (``rocksdb-legacy-nowipe``) is not a
store of its own: it is a base store run by the task runtime with a deliberately unsafe setting;
``base_store`` names the store it runs on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from eos_harness.store import StateStore
from eos_harness.stores import BUILTIN, KINDS, OPT_IN, PREFIXED, StoreFactoryError, StoreSpec, check_store
from eos_harness.window_store import WindowStore

__all__ = ["WINDOW_METHODS", "base_store", "builtin_spec", "builtin_specs", "opt_in_specs", "caught_alone_by", "is_window_store",
           "not_a_store", "resolve", "resolve_window", "task_store_factory"]


def builtin_specs() -> list[StoreSpec]:
    """Every built-in store, mutant and unsafe runtime variant: stores first, then mutants, then
    unsafe variants, each by name."""
    _load_builtins()
    return sorted(BUILTIN.values(), key=lambda s: (KINDS.index(s.kind), s.name))


def caught_alone_by(check: str, kind: str) -> list[str]:
    """The built-in mutants of ``kind`` (``mutant``, ``window-mutant``) that ``check`` alone catches in
    ``verify``: their mistake breaks that promise and no other (``alone``; tests/test_verify.py and
    tests/test_window_stores.py hold each to it)."""
    return [s.name for s in builtin_specs() if s.kind == kind and s.alone == check]


def opt_in_specs() -> list[StoreSpec]:
    """The stores run only when named (Kafka Streams' own), by name."""
    _load_builtins()
    return sorted(OPT_IN.values(), key=lambda s: s.name)


def builtin_spec(name: str) -> StoreSpec | None:
    """The built-in store, mutant or unsafe variant called ``name`` (or a store run only when named,
    :func:`opt_in_specs`); None for any other name."""
    _load_builtins()
    for prefix, spec_of in PREFIXED.items():  # e.g. a user's Java store, jvm:CLASS@PATH (a usage error when malformed)
        if name.startswith(prefix):
            return spec_of(name)
    return BUILTIN.get(name) or OPT_IN.get(name)


def base_store(name: str) -> str:
    """The store ``name`` runs on: the base of an unsafe runtime variant, else ``name`` itself."""
    spec = builtin_spec(name)
    return spec.base if spec is not None and spec.base is not None else name


def resolve(spec: str) -> Callable[[], StateStore]:
    """A factory for a built-in store or mutant name, or for ``module:function``."""
    builtin = builtin_spec(spec)
    if builtin is not None and builtin.kind == "unsafe-runtime":
        raise not_a_store(builtin)
    if builtin is not None:
        return builtin.factory
    if ":" not in spec:
        names = ", ".join(sorted([name for name, s in BUILTIN.items() if s.kind != "unsafe-runtime"] + list(OPT_IN)))
        raise StoreFactoryError(
            f"unknown store {spec!r}: use a built-in name ({names}) or a factory 'module:function'"
        )
    factory = _import_factory(spec)

    def checked() -> StateStore:
        return check_store(factory(), f"store factory {spec!r}")

    return checked


def not_a_store(builtin: StoreSpec) -> StoreFactoryError:
    """The usage error for checking an unsafe runtime variant as a store (``verify``)."""
    return StoreFactoryError(
        f"{builtin.name!r} is not a store but the task runtime run unsafely over {builtin.base!r}: check the store "
        f"itself with {builtin.base!r}, or run {builtin.name!r} as a scenario (eos-harness run/chaos --store {builtin.name})"
    )


WINDOW_METHODS = (
    "window_config", "init", "persistent", "transactional", "manages_offsets", "put", "restore", "fetch_window",
    "fetch", "fetch_range", "fetch_all", "all", "commit", "committed_offset", "recover", "read_committed",
    "flush", "close",
)


def is_window_store(spec: str) -> bool:
    """Whether ``spec`` names a window store: a built-in of a window kind, or a factory whose store
    has ``window_config`` (the factory is called once, the store not opened). It runs a user's code:
    for a store's own process (a task's); the harness's process asks the StoreRef
    (:func:`eos_harness.stores.child_probe.store_ref`)."""
    builtin = builtin_spec(spec)
    if builtin is not None:
        return builtin.window
    if ":" not in spec:
        return False
    return callable(getattr(_import_factory(spec)(), "window_config", None))


def _import_factory(spec: str) -> Callable[..., object]:
    """The callable a user's ``module:function`` names, or a StoreFactoryError saying what to fix."""
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


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from eos_harness.stores import catalogue  # noqa: F401  (registers every built-in store, mutant, variant)
