"""The faults every store-under-test suite puts a store through, written once: a commit, a crash at a
commit point, a SIGKILL, a clean close and reopen, each followed by the checks of what must have
survived. The key-value conformance suite (:mod:`.conformance.plan`) and the window store suite
(:mod:`.windows.runner`) both use them, in their state machines and in their crash matrices.

A store under test here is the suite's driver object (``sut``): it has ``commit``,
``crash_in_commit(point, hit)``, ``kill``, ``close_and_reopen`` and ``check_read_committed``. What
"the contents" are is the suite's own: the machine says it in ``check_contents``, a matrix case
passes it to :func:`crash_then_check`. Every case, a matrix case or a machine's example, ends in
:func:`finish_case`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

__all__ = ["crash_then_check", "finish_case", "store_fault_rules"]


def store_fault_rules(crash_points: list[str]) -> type[RuleBasedStateMachine]:
    """A state machine base class with the fault rules (``commit``, ``crash_in_commit`` at one of
    ``crash_points``, ``kill``, ``close_and_reopen``); a suite's machine subclasses it, adds its own
    operations, sets ``self.sut`` and says what its contents check is (``check_contents``).

    Hypothesis orders a machine's rules by name, wherever they are defined, so a machine built on
    this base draws the same steps for a seed as one that defines these rules itself."""

    class StoreFaultRules(RuleBasedStateMachine):
        sut: Any

        def check_contents(self) -> None:
            """Everything the store holds, compared with the model (the suite's own reads)."""
            raise NotImplementedError

        def check_after_fault(self) -> None:
            self.check_contents()
            self.sut.check_read_committed()

        @rule()
        def commit(self):
            self.sut.commit()
            self.sut.check_read_committed()

        @precondition(lambda self: bool(crash_points))
        @rule(point=st.sampled_from(crash_points or ["none"]), hit=st.integers(1, 2))
        def crash_in_commit(self, point, hit):
            self.sut.crash_in_commit(point, hit)
            self.check_after_fault()

        @rule()
        def kill(self):
            self.sut.kill()
            self.check_after_fault()

        @rule()
        def close_and_reopen(self):
            self.sut.close_and_reopen()

    return StoreFaultRules


def crash_then_check(sut: Any, point: str | None, check_contents: Callable[[], None]) -> None:
    """A matrix case's fault: a crash at ``point`` inside commit (its first hit), or a SIGKILL before
    the commit when ``point`` is None; then the contents and the read-committed view are checked."""
    if point is None:
        sut.kill()
    else:
        sut.crash_in_commit(point, 1)
    check_contents()
    sut.check_read_committed()


def finish_case(sut: Any, exercised: Counter | None) -> None:
    """The end of a case (a matrix case, or an example of a state machine), passed or not: the checks
    whose condition it met (``sut.exercised``) counted in ``exercised`` (None: not counted), then the
    store under test disposed of."""
    if exercised is not None:
        exercised.update(sut.exercised)
    sut.dispose()
