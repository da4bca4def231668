"""What a store is to the harness: its spec (name, kind, factory, what a mutant is caught by) and the
errors of naming one. The built-in stores register here (:mod:`.catalogue`); :mod:`.registry` turns a
name or a user's ``module:function`` into a factory, and :mod:`.probe` runs a store once to see the crash
points it reaches. This module imports none of them (no import cycle: they import it).

A store factory is a callable taking no arguments that returns a new, unopened
:class:`eos_harness.store.StateStore`. The harness calls it once per (re)start. An unsafe runtime
variant (``rocksdb-legacy-nowipe``) is not a store of its own: it is a base store run by the task
runtime with a deliberately unsafe setting; ``base_store`` names the store it runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from eos_harness.store import StateStore

__all__ = ["BUILTIN", "KEY_VALUE", "KINDS", "PREFIXED", "WINDOW", "WINDOW_KINDS", "LendError", "Lending",
           "StoreFactoryError", "StoreRef", "StoreSpec", "check_store", "register", "register_prefix"]

KINDS = ("store", "mutant", "unsafe-runtime", "window-store", "window-mutant")  # in the order they are listed
WINDOW_KINDS = ("window-store", "window-mutant")  # window stores (eos_harness.window_store), not key-value ones


class StoreFactoryError(ValueError):
    """A store name or factory could not be turned into a store; the message says what to do."""


class LendError(RuntimeError):
    """What a store's process borrows could not be made (its program failed to build or to start); the
    message says why."""


@dataclass(frozen=True)
class Lending:
    """A resource the store server lends to the process of a store of some kind, kept apart from that
    process so that it outlives a clean close and serves the next open (Kafka Streams' stores: a JVM of
    their Kafka version, :mod:`eos_harness.kafka_streams.pool`). The store server knows stores only by this.

    ``family``: the server keeps one pool per family; ``key``: what to take from it (a version …);
    ``pool(output)``: the pool the server lends from and whether the server owns it (shuts it down at its
    end; a pool shared across servers outlives them), ``output`` a callable giving where the resources
    write; ``receive(to, from)``: in the store's process, before its store is made, the file descriptors
    of the resource's pipes. A pool has ``take(key)`` (a resource, with ``pipes()``: duplicates of its
    two pipes; raises :class:`LendError`), ``give_back(resource)`` (its store closed cleanly),
    ``kill(resource)`` (the store's process died: the resource dies too) and ``shutdown()``."""

    family: str
    key: str
    pool: Callable[[Callable[[], object]], tuple[object, bool]]
    receive: Callable[[int, int], None]


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
    # For a mutant whose mistake only one suite can see (``"offsets"``: run by ``eos-harness verify``), or
    # that ``verify`` alone is to catch (``"conformance"``, ``"windows"``: a mistake in the protocol
    # itself): left out of the lifecycle campaigns' default stores.
    suite: str | None = None
    # For a mutant whose mistake lies in some store operations only (e.g. ``{"range"}``): a campaign
    # whose workloads use none of them could never catch it, so it is left out, with the reason.
    operations: frozenset[str] = field(default=frozenset())
    # For a mutant ``verify`` catches by one check alone (no other fires; one of ``caught_by``): that
    # check, and ``verify --list-checks`` names the mutant as the one it alone catches (tested).
    alone: str | None = None
    # For a store whose process borrows a resource from the store server (Kafka Streams' stores: a JVM).
    lending: Lending | None = None

    @property
    def expected_to_fail(self) -> bool:
        """A mutant or an unsafe variant: a campaign must catch it in at least one scenario."""
        return self.kind not in ("store", "window-store")

    @property
    def window(self) -> bool:
        """A window store (:mod:`eos_harness.window_store`), checked by the window suite."""
        return self.kind in WINDOW_KINDS


KEY_VALUE = "key-value"  # a StoreRef's kind: a key-value store (eos_harness.store.StateStore)
WINDOW = "window"  # a window store (eos_harness.window_store.WindowStore)


@dataclass(frozen=True)
class StoreRef:
    """A store resolved once, at the edge (the CLI, the pytest plugin), by
    :func:`eos_harness.stores.child_probe.store_ref`, and passed down as a value: nothing after the
    edge parses the spec again or imports the store's module in the harness's own process.

    ``spec``: the name or ``module:function`` as given; ``kind``: :data:`KEY_VALUE` or :data:`WINDOW`;
    ``builtin``: the built-in's :class:`StoreSpec` (its factory, description, and for a mutant the
    checks that must catch it), None for a user's store; ``capabilities``: what the store declares it
    offers (:class:`~eos_harness.store.Capabilities`, a window store's
    :class:`~eos_harness.window_store.WindowCapabilities` or None); ``semantics``: a window store's
    declared window semantics, else None; ``points``: the crash points its module declares (name,
    meaning); ``import_threads``: threads its module's import left running; ``finding``: the store
    broke the protocol while the probe asked what it is (a ``store_*`` finding), else None."""

    spec: str
    kind: str = KEY_VALUE
    builtin: StoreSpec | None = None
    capabilities: object = None
    semantics: str | None = None
    points: tuple[tuple[str, str], ...] = ()
    import_threads: int = 0
    finding: dict | None = None

    def __str__(self) -> str:
        return self.spec

    @property
    def name(self) -> str:
        return self.spec

    @property
    def window(self) -> bool:
        return self.kind == WINDOW

    @property
    def user(self) -> bool:
        """A user's factory ``module:function`` (its code runs only in children)."""
        return self.builtin is None

    @property
    def module(self) -> str | None:
        """The module of a user's factory; None for a built-in."""
        return self.spec.partition(":")[0] if self.builtin is None else None

    @property
    def base(self) -> str:
        """The store it runs on: the base of an unsafe runtime variant, else ``spec``."""
        return self.builtin.base if self.builtin is not None and self.builtin.base is not None else self.spec

    @property
    def expected_to_fail(self) -> bool:
        """A built-in mutant or unsafe variant: some check must catch it."""
        return self.builtin is not None and self.builtin.expected_to_fail

    @property
    def caught_by(self) -> tuple[str, ...]:
        """For a mutant: the checks expected to catch it (any one suffices)."""
        return self.builtin.caught_by if self.builtin is not None else ()


BUILTIN: dict[str, StoreSpec] = {}
# Stores run only when named (Kafka Streams' own, each in a JVM): known to every command that takes a store
# name, never in a campaign's default stores nor in the lists of built-in stores the suites go through.
OPT_IN: dict[str, StoreSpec] = {}
# Store references by prefix (``jvm:CLASS@PATH``, a user's Java store): prefix -> the spec of a reference
# (raising StoreFactoryError when it is malformed).
PREFIXED: dict[str, Callable[[str], StoreSpec]] = {}


def register(spec: StoreSpec) -> StoreSpec:
    if spec.kind not in KINDS:
        raise ValueError(f"store {spec.name!r}: kind must be one of {', '.join(KINDS)}, got {spec.kind!r}")
    if spec.kind == "unsafe-runtime" and spec.base not in BUILTIN:
        raise ValueError(f"unsafe variant {spec.name!r}: register its base store {spec.base!r} first")
    BUILTIN[spec.name] = spec
    return spec


def register_opt_in(spec: StoreSpec) -> StoreSpec:
    """Register a store (or a mutant of one) run only when named (:data:`OPT_IN`)."""
    if spec.kind not in ("store", "mutant", "window-store", "window-mutant"):
        raise ValueError(f"opt-in store {spec.name!r}: kind must be 'store', 'mutant', 'window-store' or "
                         f"'window-mutant', got {spec.kind!r}")
    OPT_IN[spec.name] = spec
    return spec


def register_prefix(prefix: str, spec_of: Callable[[str], StoreSpec]) -> None:
    """Store references starting with ``prefix`` name the store ``spec_of(reference)`` (:data:`PREFIXED`)."""
    PREFIXED[prefix] = spec_of


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
