"""The window store server: a window store under test in a child process forked from the preloaded
zygote, like :mod:`eos_harness.process.server` for key-value stores, plus iterators that stay open
in the child across calls (so that expiry can happen while one is open).

Calls: any window store method by name (fetch results come back as lists); ``rc_<method>`` on
``read_committed()``; ``iter_open(method, *args)`` returns an iterator id, ``iter_next(id, n)`` the
next ``n`` items, ``iter_close(id)``; ``arm``/``disarm`` crash points.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from eos_harness.faults import points
from eos_harness.process.server import StoreProcess, StoreServer, _raised, answer_calls

__all__ = ["WindowStoreServer"]

_LISTING = {"fetch", "fetch_range", "fetch_all", "all", "backward_fetch", "backward_fetch_range",
            "backward_fetch_all", "backward_all"}


def _call(store, method: str, args: tuple, iterators: dict, counter: list[int]):
    if method == "arm":
        points.arm(*args)
        return None
    if method == "disarm":
        points.disarm_all()
        return None
    if method == "iter_open":
        name, *rest = args
        counter[0] += 1
        iterators[counter[0]] = iter(getattr(store, name)(*rest))
        return counter[0]
    if method == "iter_next":
        number, n = args
        it, out = iterators[number], []
        for item in it:
            out.append(item)
            if len(out) == n:
                break
        return out
    if method == "iter_close":
        it = iterators.pop(args[0], None)
        close = getattr(it, "close", None)
        if close is not None:
            close()
        return None
    if method.startswith("rc_"):
        result = getattr(store.read_committed(), method[3:])(*args)
        return list(result) if method[3:] in _LISTING else result
    result = getattr(store, method)(*args)
    return list(result) if method in _LISTING else result


def _serve_window(spec: str, directory: str, sys_path: list[str], arms: list[tuple[str, int]], conn,
                  lent_in=None, lent_out=None) -> None:
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    from eos_harness.store import StoreContext
    from eos_harness.stores.registry import builtin_spec, resolve_window

    if lent_in is not None:  # what the server lent the store's kind (its Lending: a JVM for Kafka Streams' stores)
        builtin_spec(spec).lending.receive(os.dup(lent_in.fileno()), os.dup(lent_out.fileno()))
        lent_in.close()
        lent_out.close()

    points.set_notifier(lambda name: conn.send(("crash", name)))
    try:
        store = resolve_window(spec)()
        store.init(StoreContext(directory=Path(directory)))
        for point, hit in arms:
            points.arm(point, hit)
        conn.send(("ok", None))
    except BaseException as exc:  # noqa: BLE001 - report, then die
        conn.send(("raise", _raised(exc, with_traceback=True)))
        os._exit(1)
    iterators: dict[int, object] = {}
    counter = [0]
    answer_calls(conn, lambda method, args: _call(store, method, args, iterators, counter))


class WindowStoreServer(StoreServer):
    """Starts window store children; none outlives the ``with`` block."""

    def start(self, spec: str, directory: Path, arms: list[tuple[str, int]] | None = None,
              trace: bool = False) -> StoreProcess:
        return self._launch(_serve_window, spec, (str(directory), list(sys.path), arms or []), ())
