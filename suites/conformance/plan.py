"""What the conformance suite does to a store: a Hypothesis state machine whose rules are the
store's operations and faults, and the explicit crash matrix (every crash point the store reaches ×
a few fixed workloads).

The rules follow the store's declared capabilities (``harness/store.py``): a store that declares no
range scans gets no range-scan steps, one with its own ``restore`` gets restore steps. The promises
asked after each step are :mod:`.checks`, through the driver (:mod:`.driver`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from eos_harness.process.server import StoreServer
from eos_harness.store import Capabilities
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ..store_faults import finish_case, store_fault_rules
from ..store_subjects import StoreRun, StoreSubjects, store_runs
from .driver import KEYS, VALUES, StoreUnderTest

__all__ = ["WORKLOADS", "expected", "campaign", "known_subjects", "machine_for", "matrix_cases", "subjects"]


def machine_for(spec: str, server: StoreServer, crash_points: list[str], allowed: frozenset[str] = frozenset(),
                waived: Counter | None = None, offers: Capabilities | None = None,
                has_restore: bool = False, exercised: Counter | None = None) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one store spec; ``allowed`` checks are waived (counted in
    ``waived``). Its rules follow what the store offers (:func:`.driver.features_of`): no range-scan
    rule for a store that declares none, a restore rule for a store with its own ``restore``; a
    store that offers everything and has no ``restore`` gets the same rules, so the same steps for a
    seed, as before either existed. ``exercised`` counts, per check, the examples that met its condition."""
    offers = offers or Capabilities()
    keys, values = st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(VALUES))

    def __init__(self) -> None:
        RuleBasedStateMachine.__init__(self)
        self.sut = StoreUnderTest(server, spec, "hypothesis", allowed, waived)

    def teardown(self) -> None:
        finish_case(self.sut, exercised)

    @rule(key=keys, value=values)
    def put(self, key, value):
        self.sut.put(key, value)
        self.sut.check_reads()

    @rule(key=keys)
    def delete(self, key):
        self.sut.delete(key)

    @rule(entries=st.lists(st.tuples(keys, values), min_size=1, max_size=4))
    def put_all(self, entries):
        self.sut.put_all(entries)
        self.sut.check_reads()

    @rule(bounds=st.tuples(keys, keys).map(sorted))
    def range_scan(self, bounds):
        self.sut.check_range(*bounds)

    @rule()
    def read_committed(self):
        self.sut.check_read_committed()

    def check_contents(self) -> None:  # what the fault rules (suites/store_faults.py) check after a fault
        self.sut.check_reads()

    # The runtime restores only a store without uncommitted writes (right after recover).
    @precondition(lambda self: self.sut.writes == 0)
    @rule(entries=st.lists(st.tuples(keys, values), max_size=4))
    def restore(self, entries):
        self.sut.restore(entries)
        self.sut.check_reads()
        self.sut.check_read_committed()

    namespace = {"__init__": __init__, "teardown": teardown, "check_contents": check_contents, "put": put,
                 "delete": delete, "put_all": put_all, "read_committed": read_committed}
    if offers.range_scans:
        namespace["range_scan"] = range_scan
    if has_restore:
        namespace["restore"] = restore
    return type(f"Conformance[{spec}]", (store_fault_rules(crash_points),), namespace)


WORKLOADS = {
    "overwrite": [("put", b"a", b"v2"), ("put", b"d", b"v1"), ("put", b"e", b"v3")],
    "tombstones": [("delete", b"a"), ("put", b"b", None), ("put", b"e", b"v1")],
    "put_all": [("put_all", [(b"c", b"xx"), (b"d", b"v2"), (b"a", None), (b"e", b"v1"), (b"b", b"v3")])],
}


def matrix_cases(crash_points: list[str]) -> list[tuple[str, str | None]]:
    """(workload, crash point or None for a SIGKILL before commit) for every point and workload."""
    cases: list[tuple[str, str | None]] = []
    for workload in WORKLOADS:
        cases.append((workload, None))
        cases.extend((workload, point) for point in crash_points)
    return cases


# -- a campaign (``eos-harness chaos --suite conformance``) ---------------------------------------------

STORES = StoreSubjects(("store", "mutant"), lambda spec: spec.suite is None,
                       "check a window store with --suite windows, an unsafe runtime variant with the lifecycle suite")
known_subjects, subjects, expected = STORES.known, STORES.subjects, STORES.expected


def campaign(seed: int, options: Mapping) -> Iterator[StoreRun]:
    """The stores in turn, each verified with a seed drawn from ``seed``."""
    return store_runs(seed, options)
