"""``eos-harness verify STORE``: the store suites a store gets, chosen by what kind of store it is.

A window store (of a window kind, or a factory whose store has ``window_config``) gets the window
store suite (KIP-428); any other store the conformance suite (KIP-844/KIP-892) with the offsets suite
(KIP-892/KIP-1035) joined to its verdict. The verdict names its ``suite`` and how long it took.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.stores import StoreRef

__all__ = ["verify_store"]


def verify_store(store: str | StoreRef, seed: int, *, examples: int = 40, steps: int = 25, shrink: bool = True,
                 store_timeout: float = STORE_TIMEOUT_S, log: str | Path, allow: Iterable[str] = (),
                 max_findings: int | None = None, offsets_scenarios: Iterable[str] = ()) -> dict:
    """The verdict of the suite ``store`` gets (see the module), with ``suite`` and ``seconds``. A
    store given by its spec is resolved here (:func:`~eos_harness.stores.child_probe.store_ref`: its
    module imported in a child, its output going to ``log``, as everything the store prints)."""
    from eos_harness.process.server import children_output
    from eos_harness.stores.child_probe import store_ref

    started = time.monotonic()
    with children_output(log):
        ref = store_ref(store, store_timeout)
    window = ref.window
    if window:
        from eos_harness.suites.windows.runner import verify

        result = verify(ref, seed, examples=examples, steps=steps, shrink=shrink, store_timeout=store_timeout)
    else:
        from eos_harness.suites.conformance.runner import verify

        result = verify(ref, seed, examples=examples, steps=steps, shrink=shrink, store_timeout=store_timeout,
                        log=log, allow=allow, offsets_scenarios=offsets_scenarios,
                        **({} if max_findings is None else {"max_findings": max_findings}))
    return {"suite": "windows" if window else "conformance", **result,
            "seconds": round(time.monotonic() - started, 3)}
