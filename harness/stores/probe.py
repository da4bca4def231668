"""The store probe: a store run once (open, write, commit, close, reopen, recover, close) in a child of
the store server, to see the crash points it reaches and whether it keeps the protocol on the way."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.faults import points
from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.store import StoreContext, TopicPartition
from eos_harness.stores import StoreFactoryError, StoreRef
from eos_harness.stores.child_probe import ChildFailed, run_in_child, store_ref
from eos_harness.stores.registry import resolve_window

__all__ = ["StoreProbe", "StoreProbeFailed", "probe_store", "reached_points", "reached_window_points"]


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


def probe_store(store: str | StoreRef, timeout: float | None = None) -> StoreProbe:
    """Run ``store`` once in a child of the store server, every call bounded by ``timeout`` seconds,
    tracing the crash points it reaches in put/commit/recover (in a temp dir, removed after). A store
    whose factory broke the protocol when it was resolved (:attr:`StoreRef.finding`) is not run again."""
    from eos_harness.process.server import ChildCrashed, StoreCallError, StoreHang, StoreServer
    from eos_harness.process.zygote import ZygoteError

    ref = store_ref(store, **({} if timeout is None else {"timeout": timeout}))  # a usage error for a bad spec
    if ref.finding is not None:  # its factory broke the protocol: nothing more to run
        return StoreProbe([], finding=ref.finding)
    store = ref.spec
    if ref.window:  # a window store: traced through the window protocol (in a child)
        try:
            return StoreProbe(reached_window_points(store, **({} if timeout is None else {"timeout": timeout})))
        except ChildFailed as exc:
            return StoreProbe([], finding=exc.finding)
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
            try:
                s = server.start(store, tmp / "store", trace=True)
            except StoreCallError as exc:
                if exc.kind != "IncompatibleStoreDirectory":
                    raise
                # its own cleanly closed directory refused: the runtime wipes it, every committed key gone
                return StoreProbe([p for p, known in _unique(trace) if known], finding={
                    "check": "clean_close_durable", "operation": "init",
                    "expected": "the store reopens the directory it closed cleanly, its 12 committed keys there",
                    "observed": str(exc).partition("\n")[0],
                    "detail": "the probe wrote, committed and closed the store cleanly; reopened, init refused the "
                              "directory (IncompatibleStoreDirectory): the runtime wipes it and restores it from the "
                              "changelog, so nothing committed was kept"})
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


def reached_points(store: str | StoreRef, timeout: float | None = None) -> list[str]:
    """The declared crash points a store reaches in put/commit/recover (found by running it in a
    child); raises StoreProbeFailed when the store broke the protocol on the way."""
    probe = probe_store(store, timeout)
    if probe.finding is not None:
        raise StoreProbeFailed(str(store), probe.finding)
    if probe.error is not None:
        raise RuntimeError(probe.error)
    return probe.points


def reached_window_points(store: str | StoreRef, timeout: float = STORE_TIMEOUT_S) -> list[str]:
    """The crash points a window store reaches in put/commit/recover (traced in a temp dir, in a child
    under ``timeout``); raises :class:`~eos_harness.stores.child_probe.ChildFailed` with the finding
    when the store raised, its process died or it hung on the way."""
    return run_in_child(_trace_window_points, (str(store),), timeout, "probe")


def _trace_window_points(store: str) -> list[str]:
    """In a child: :func:`reached_window_points`."""
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



