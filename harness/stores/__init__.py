"""Built-in stores, mutants and unsafe runtime variants, and resolution of a user's store factory
(``module:function``).

A store factory is a callable taking no arguments that returns a new, unopened
:class:`eos_harness.store.StateStore`. The harness calls it once per (re)start. An unsafe runtime
variant (``rocksdb-legacy-nowipe``) is not a store of its own: it is a base store run by the task
runtime with a deliberately unsafe setting; ``base_store`` names the store it runs on.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.store import StateStore, StoreContext

__all__ = ["BUILTIN", "StoreFactoryError", "StoreSpec", "base_store", "builtin_spec", "builtin_specs", "check_store",
           "probe_store", "reached_points", "resolve", "StoreProbe", "StoreProbeFailed"]

KINDS = ("store", "mutant", "unsafe-runtime", "window-store", "window-mutant")  # in the order they are listed
WINDOW_KINDS = ("window-store", "window-mutant")  # window stores (eos_harness.window_store), not key-value ones


class StoreFactoryError(ValueError):
    """A store name or factory could not be turned into a store; the message says what to do."""


@dataclass(frozen=True)
class StoreSpec:
    name: str
    kind: str  # one of KINDS
    description: str
    factory: Callable[[], StateStore]
    # For mutants: the checks expected to catch it (any one suffices).
    caught_by: tuple[str, ...] = field(default=())
    # For unsafe runtime variants: the store it runs on, and the TaskConfig settings it changes.
    base: str | None = None
    runtime: dict[str, object] = field(default_factory=dict)
    # For a mutant whose mistake only one suite can see (``"offsets"``: run by ``eos-harness verify``):
    # left out of the lifecycle campaigns' default stores, which could never catch it.
    suite: str | None = None
    # For a mutant whose mistake lies in some store operations only (e.g. ``{"range"}``): a campaign
    # whose workloads use none of them could never catch it, so it is left out, with the reason.
    operations: frozenset[str] = field(default=frozenset())

    @property
    def expected_to_fail(self) -> bool:
        """A mutant or an unsafe variant: a campaign must catch it in at least one scenario."""
        return self.kind not in ("store", "window-store")

    @property
    def window(self) -> bool:
        """A window store (:mod:`eos_harness.window_store`), checked by the window suite."""
        return self.kind in WINDOW_KINDS


BUILTIN: dict[str, StoreSpec] = {}


def register(spec: StoreSpec) -> StoreSpec:
    if spec.kind not in KINDS:
        raise ValueError(f"store {spec.name!r}: kind must be one of {', '.join(KINDS)}, got {spec.kind!r}")
    if spec.kind == "unsafe-runtime" and spec.base not in BUILTIN:
        raise ValueError(f"unsafe variant {spec.name!r}: register its base store {spec.base!r} first")
    BUILTIN[spec.name] = spec
    return spec


def builtin_specs() -> list[StoreSpec]:
    """Every built-in store, mutant and unsafe runtime variant: stores first, then mutants, then
    unsafe variants, each by name."""
    _load_builtins()
    return sorted(BUILTIN.values(), key=lambda s: (KINDS.index(s.kind), s.name))


def builtin_spec(name: str) -> StoreSpec | None:
    """The built-in store, mutant or unsafe variant called ``name``; None for any other name."""
    _load_builtins()
    return BUILTIN.get(name)


def base_store(name: str) -> str:
    """The store ``name`` runs on: the base of an unsafe runtime variant, else ``name`` itself."""
    spec = builtin_spec(name)
    return spec.base if spec is not None and spec.base is not None else name


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
            "return an object implementing eos_harness.store.StateStore"
        )
    return obj  # type: ignore[return-value]


def resolve(spec: str) -> Callable[[], StateStore]:
    """A factory for a built-in store or mutant name, or for ``module:function``."""
    _load_builtins()
    builtin = BUILTIN.get(spec)
    if builtin is not None and builtin.kind == "unsafe-runtime":
        raise StoreFactoryError(
            f"{spec!r} is not a store but the task runtime run unsafely over {builtin.base!r}: check the store "
            f"itself with {builtin.base!r}, or run {spec!r} as a scenario (eos-harness run/chaos --store {spec})"
        )
    if builtin is not None:
        return builtin.factory
    if ":" not in spec:
        names = ", ".join(sorted(name for name, s in BUILTIN.items() if s.kind != "unsafe-runtime"))
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


@dataclass(frozen=True)
class StoreProbe:
    """What running a store once (open, write, commit, close, reopen, recover, close) showed.

    ``points``: the declared crash points it reached, in order; ``undeclared``: points it reached
    that no module declared (declared for the run by ``verify``, ``run`` and ``chaos``, with
    :meth:`undeclared_warning`); ``finding``: the store broke the
    protocol on the way (``check``, ``operation``, ``expected``, ``observed``, ``detail``), or None;
    ``error``: why the probe could not be run to its end (the harness's own trouble, or the store's
    process dying outside any crash point), or None.
    """

    points: list[str]
    undeclared: list[str] = field(default_factory=list)
    finding: dict | None = None
    error: str | None = None

    def undeclared_warning(self, store: str) -> str | None:
        """The warning when ``undeclared`` points are declared for the run (verify): names them and
        says how to declare them (None when every point is declared)."""
        if not self.undeclared:
            return None
        many = len(self.undeclared) > 1
        names = ", ".join(repr(p) for p in self.undeclared)
        return (f"store {store!r} reaches crash point{'s' if many else ''} {names}, never declared: declared for "
                f"this run only. Declare {'them' if many else 'it'} in the store's module, at import time: "
                f"`from eos_harness.faults.points import declare` and "
                f"`declare({self.undeclared[0]!r}, \"what has happened when the point is reached\")`")


class StoreProbeFailed(RuntimeError):
    """Probing a store found it broke the protocol (``finding``)."""

    def __init__(self, store: str, finding: dict) -> None:
        super().__init__(f"store {store!r}: {finding['check']}: {finding['observed']}")
        self.finding = finding


def probe_store(store: str, timeout: float | None = None) -> StoreProbe:
    """Run ``store`` once in a child of the store server, every call bounded by ``timeout`` seconds,
    tracing the crash points it reaches in put/commit/recover (in a temp dir, removed after)."""
    from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang, StoreServer
    from eos_harness.process.zygote import ZygoteError

    spec = builtin_spec(store)
    if spec is not None and spec.window:  # a window store: traced through the window protocol
        from eos_harness.stores.window_catalogue import reached_window_points

        return StoreProbe(reached_window_points(store))
    resolve(store)  # a clear usage error for a bad spec before any process starts
    tmp = Path(tempfile.mkdtemp(prefix="eos-points-"))
    tp = StoreContext(directory=tmp).changelog
    trace: list[tuple[str, bool]] = []
    try:
        with StoreServer(**({} if timeout is None else {"timeout": timeout})) as server:
            s = server.start(store, tmp / "store", trace=True)
            offers = s.call("capabilities")  # what the store declares it lacks is not called
            s.call("recover", None)
            for i in range(12):
                s.call("put", b"k%02d" % i, b"v")
            for key, value in [(b"a", b"1"), (b"b", None)] if not offers.put_all else []:
                s.call("put", key, value)
            if offers.put_all:
                s.call("put_all", [(b"a", b"1"), (b"b", None)])
            for method in ("persistent", "transactional", "manages_offsets"):
                s.call(method)
            for method, args in (("get", (b"k00",)), ("get", (b"b",)), ("delete", (b"k11",)), ("range", (b"a", b"k05")),
                                 ("all", ()), ("rc_get", (b"k00",)), ("rc_range", (b"a", b"k05")), ("rc_all", ())):
                if offers.range_scans or method not in ("range", "all", "rc_range", "rc_all"):
                    s.call(method, *args)  # every read once: a wrong return type shows here
            s.call("commit", {tp: 12})
            s.call("committed_offset", tp)
            trace += s.call("close")
            s = server.start(store, tmp / "store", trace=True)
            s.call("recover", 12)
            trace += s.call("close")
    except (StoreHang, StoreCallError) as exc:
        if isinstance(exc, StoreCallError) and exc.kind == "StoreFactoryError":
            raise StoreFactoryError(str(exc).partition(": ")[2].partition("\n")[0]) from None
        finding = exc.finding or {"check": "store_raised", "operation": "probe", "expected": "no exception",
                                  "observed": str(exc), "detail": None}
        return StoreProbe([p for p, known in _unique(trace) if known], finding=finding)
    except (ChildCrashed, ZygoteError, OSError) as exc:
        return StoreProbe([p for p, known in _unique(trace) if known],
                          error=f"the probe of store {store!r} could not be run to its end: {exc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    reached = _unique(trace)
    return StoreProbe([p for p, known in reached if known], [p for p, known in reached if not known])


def _unique(trace: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    seen: dict[str, bool] = {}
    for name, known in trace:
        if not name.startswith("task.") and name not in seen:
            seen[name] = known
    return list(seen.items())


def reached_points(store: str, timeout: float | None = None) -> list[str]:
    """The declared crash points a store reaches in put/commit/recover (found by running it in a
    child); raises StoreProbeFailed when the store broke the protocol on the way."""
    probe = probe_store(store, timeout)
    if probe.finding is not None:
        raise StoreProbeFailed(store, probe.finding)
    if probe.error is not None:
        raise RuntimeError(probe.error)
    return probe.points


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from eos_harness.stores import catalogue  # noqa: F401  (registers every built-in store, mutant, variant)
