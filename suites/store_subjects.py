"""A store suite's campaign (conformance, offsets, windows): the stores it runs on (its ``--stores``: the
built-in ones of the kinds it checks, a user's factory ``module:function``), what each is expected to do
(a mutant must be caught by one of the checks that name its mistake,
:attr:`eos_harness.stores.StoreSpec.caught_by`), and its plan: the stores in turn, each run with a seed
drawn from the campaign seed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from eos_harness.stores import StoreSpec
from eos_harness.stores.registry import builtin_spec, builtin_specs

from .rotation import in_turn

__all__ = ["StoreRun", "StoreSubjects", "store_runs"]


@dataclass(frozen=True)
class StoreSubjects:
    """``kinds``: the store kinds the suite checks; ``default``: which of them a campaign runs when none
    are named; ``elsewhere``: what to say of a built-in store of another kind (the suite that checks it)."""

    kinds: tuple[str, ...]
    default: Callable[[StoreSpec], bool]
    elsewhere: str

    def known(self) -> list[str]:
        return [s.name for s in builtin_specs() if s.kind in self.kinds]

    def subjects(self, given: Iterable[str] | None) -> list[str]:
        """The stores given (each of a kind the suite checks, or a factory), or the default ones."""
        if given is None:
            return [s.name for s in builtin_specs() if s.kind in self.kinds and self.default(s)]
        for name in given:
            spec = builtin_spec(name)
            if spec is not None and spec.kind not in self.kinds:
                raise ValueError(f"--stores: {name!r} is a {spec.kind}; {self.elsewhere}")
        return list(given)

    @staticmethod
    def expected(store: str) -> tuple[bool, tuple[str, ...]]:
        spec = builtin_spec(store)
        return (False, ()) if spec is None else (spec.expected_to_fail, spec.caught_by)


@dataclass(frozen=True)
class StoreRun:
    """One scenario of a store suite's campaign: the suite run once on ``store`` from ``seed`` (``examples``
    and ``steps``: its state machine's; ``name``: the one scenario of the suite it runs, if it has several;
    ``allow``: the checks it waives)."""

    store: str
    seed: int
    examples: int = 0
    steps: int = 0
    store_timeout: float | None = None
    name: str = ""
    allow: tuple[str, ...] = ()  # the checks waived (``chaos --allow``), as ``verify --allow`` waives them


def store_runs(seed: int, options: Mapping, names: Sequence[str] = ("",)) -> Iterator[StoreRun]:
    """The plan of a store suite's campaign: the stores in turn (``options["stores"]``), each with a seed drawn
    from ``seed`` (and the next of ``names`` on each pass), with the options that decide each run."""
    for store, name, drawn in in_turn(seed, options["stores"], names):
        yield StoreRun(store, drawn, options.get("examples", 0), options.get("steps", 0),
                       options.get("store_timeout"), name, tuple(options.get("allow") or ()))
