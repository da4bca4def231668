"""Built-in stores and mutants, and resolution of a user's store factory (``module:function``).

A store factory is a callable taking no arguments that returns a new, unopened
:class:`harness.store.StateStore`. The harness calls it once per (re)start.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.faults import points
from eos_harness.store import StateStore, StoreContext, TopicPartition

__all__ = ["BUILTIN", "StoreFactoryError", "StoreSpec", "builtin_specs", "check_store", "reached_points", "resolve"]


class StoreFactoryError(ValueError):
    """A store name or factory could not be turned into a store; the message says what to do."""


@dataclass(frozen=True)
class StoreSpec:
    name: str
    kind: str  # "store" | "mutant"
    description: str
    factory: Callable[[], StateStore]
    # For mutants: the checks expected to catch it (any one suffices).
    caught_by: tuple[str, ...] = field(default=())


BUILTIN: dict[str, StoreSpec] = {}


def register(spec: StoreSpec) -> StoreSpec:
    BUILTIN[spec.name] = spec
    return spec


def builtin_specs() -> list[StoreSpec]:
    _load_builtins()
    return sorted(BUILTIN.values(), key=lambda s: (s.kind != "store", s.name))


_REQUIRED = (
    "init", "persistent", "transactional", "manages_offsets", "get", "put", "put_all", "delete",
    "range", "all", "commit", "committed_offset", "recover", "read_committed", "flush", "close",
)


def check_store(obj: object, where: str) -> StateStore:
    """Raise StoreFactoryError unless ``obj`` has every method of the store protocol."""
    missing = [m for m in _REQUIRED if not callable(getattr(obj, m, None))]
    if missing or not isinstance(getattr(obj, "name", None), str):
        what = f"missing {', '.join(missing)}" if missing else "no str attribute 'name'"
        raise StoreFactoryError(
            f"{where} returned {type(obj).__name__}, which is not a state store ({what}); "
            "return an object implementing harness.store.StateStore"
        )
    return obj  # type: ignore[return-value]


def resolve(spec: str) -> Callable[[], StateStore]:
    """A factory for a built-in store or mutant name, or for ``module:function``."""
    _load_builtins()
    if spec in BUILTIN:
        return BUILTIN[spec].factory
    if ":" not in spec:
        names = ", ".join(sorted(BUILTIN))
        raise StoreFactoryError(
            f"unknown store {spec!r}: use a built-in name ({names}) or a factory 'module:function'"
        )
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StoreFactoryError(
            f"store factory {spec!r} not found: cannot import module {module_name!r} ({exc}); "
            "check the module is on PYTHONPATH (or run from its directory)"
        ) from exc
    factory = getattr(module, attr, None)
    if factory is None:
        raise StoreFactoryError(
            f"store factory {spec!r} not found: module {module_name!r} has no attribute {attr!r}"
        )
    if not callable(factory):
        raise StoreFactoryError(f"store factory {spec!r} is not callable; point at a function returning a store")

    def checked() -> StateStore:
        return check_store(factory(), f"store factory {spec!r}")

    return checked


def reached_points(store: str) -> list[str]:
    """The crash points a store reaches in put/commit/recover (found by tracing it in a temp dir)."""
    factory = resolve(store)
    tmp = Path(tempfile.mkdtemp(prefix="eos-points-"))
    trace = points.start_tracing()
    try:
        tp = TopicPartition("points-changelog", 0)
        s = factory()
        s.init(StoreContext(directory=tmp / "store", changelog=tp))
        s.recover(None)
        for i in range(12):
            s.put(b"k%02d" % i, b"v")
        s.put_all([(b"a", b"1"), (b"b", None)])
        s.commit({tp: 12})
        s.close()
        s = factory()
        s.init(StoreContext(directory=tmp / "store", changelog=tp))
        s.recover(12)
        s.close()
    finally:
        points.stop_tracing()
        shutil.rmtree(tmp, ignore_errors=True)
    seen: list[str] = []
    for name in trace:
        if not name.startswith("task.") and name not in seen:
            seen.append(name)
    return seen


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from eos_harness.stores import catalogue  # noqa: F401  (registers every built-in store and mutant)
