"""The one verdict vocabulary of every suite: a :class:`Violation`, a verdict, an exit code.

- ``pass``: every promise checked held.
- ``fail``: a promise was broken; each :class:`Violation` names the check (the promise) it broke.
- ``error``: the harness could not run the check to its end (a store that raised where the
  protocol does not let it be judged, an undeclared crash point, a broker that stopped answering);
  the verdict carries the reason.
- ``not_applicable``: the configuration is one the system under test refuses (Spark), never started.

Tables, summaries and exit codes are computed from these fields, never from message text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

__all__ = [
    "ERROR",
    "EXIT_FAIL",
    "EXIT_INCOMPLETE",
    "EXIT_PASS",
    "EXIT_USAGE",
    "FAIL",
    "NOT_APPLICABLE",
    "PASS",
    "VERDICTS",
    "Violation",
    "check_coverage",
    "error_reason",
    "error_result",
    "exit_code",
    "finding_violation",
    "hang_finding",
    "unfired_is_error",
    "verdict_of",
]

PASS, FAIL, ERROR, NOT_APPLICABLE = "pass", "fail", "error", "not_applicable"
VERDICTS = (PASS, FAIL, ERROR, NOT_APPLICABLE)

EXIT_PASS = 0  # every promise held
EXIT_FAIL = 1  # a promise was broken (or a campaign's result was unexpected)
EXIT_USAGE = 2  # bad usage: nothing was run (click's own code for usage errors)
EXIT_INCOMPLETE = 3  # the run could not be completed: an ``error`` verdict and no ``fail``


@dataclass(frozen=True)
class Violation:
    """One broken promise.

    ``check``: the promise's public name (``atomic_commit``, ``exactly_once_output`` …);
    ``key``, ``expected``, ``observed``: what differs; ``event``: the ``seq`` of the history event
    where it shows (None where the finding is about a case, not a history); ``case``: the steps
    of a conformance case (shrunk), when there is one; ``strict_only``: a documented weaker
    guarantee (at-least-once duplicates of the Kafka sink) that fails the verdict only under
    ``--strict``; ``detail``: what happened just before, in the system's own words.
    """

    check: str
    key: str | None
    expected: object
    observed: object
    event: int | None = None
    case: str | None = None
    strict_only: bool = False
    detail: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Violation:
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})

    def counts(self, strict: bool) -> bool:
        """Whether this violation fails the verdict (``strict_only`` ones only under ``--strict``)."""
        return strict or not self.strict_only


def verdict_of(violations: Iterable[Violation], strict: bool = False, error: str | None = None) -> str:
    """``fail`` if any violation counts, else ``error`` if the check could not finish, else ``pass``."""
    if any(v.counts(strict) for v in violations):
        return FAIL
    return ERROR if error else PASS


def exit_code(verdicts: Iterable[str], unexpected: bool | None = None, incomplete: bool = False) -> int:
    """The exit code of a run of these verdicts: 1 if a promise was broken (for a campaign, pass
    ``unexpected``: whether any result was not the expected one), else 3 if any could not be
    completed (an ``error`` verdict, or ``incomplete``: the run did not test what it planned, e.g. a
    scheduled fault that could not be injected), else 0."""
    verdicts = list(verdicts)
    broken = unexpected if unexpected is not None else FAIL in verdicts
    if broken:
        return EXIT_FAIL
    if ERROR in verdicts or incomplete:
        return EXIT_INCOMPLETE
    return EXIT_PASS


def error_result(subject: dict, seed: int | None, repro: str, exc: BaseException) -> dict:
    """The result of a scenario an exception cut short: ``subject`` (the field naming what it ran, e.g.
    ``{"store": name}``), its seed and replay, verdict ``error`` with the reason, no violation."""
    return {**subject, "seed": seed, "verdict": ERROR, "error": error_reason(exc), "violations": [], "repro": repro}


def check_coverage(checks: Iterable[str], conditions: Mapping[str, str], exercised: Mapping[str, int],
                   not_applicable: Mapping[str, str] | None = None) -> dict:
    """How far a run exercised its checks (the verdict JSON's ``coverage``): ``exercised``, per check, the
    cases that met its condition (``conditions``: the condition of each, in words); ``not_exercised``,
    each check no case met, with its condition: it is reported so, never as passed; ``not_applicable``,
    each check that cannot fire on this store (what it declares or is), with why."""
    not_applicable = dict(not_applicable or {})
    applying = [c for c in checks if c not in not_applicable]
    return {"exercised": {c: int(exercised.get(c, 0)) for c in applying},
            "not_exercised": {c: conditions[c] for c in applying if not exercised.get(c)},
            "not_applicable": not_applicable}


def error_reason(exc: BaseException) -> str:
    """The ``error`` field of a verdict whose run an exception cut short: its type and message."""
    return f"{type(exc).__name__}: {exc}"


def finding_violation(finding: dict, case: str | None = None, event: int | None = None) -> Violation:
    """A finding (:meth:`eos_harness.process.guard.StoreFinding.to_json`, :func:`hang_finding`) as the violation verdicts carry."""
    return Violation(finding["check"], finding["operation"], finding["expected"], finding["observed"], event,
                     case=case, detail=finding["detail"])


def hang_finding(operation: str, timeout: float, stack: str) -> dict:
    """The ``store_hang`` finding (as :meth:`eos_harness.process.guard.StoreFinding.to_json` gives the others)."""
    return {"check": "store_hang", "operation": operation,
            "expected": f"{operation} returns within {timeout:g} s (--store-timeout)",
            "observed": f"{operation} had not returned after {timeout:g} s; the store's process was killed",
            "detail": stack or "(the process wrote no stack before it was killed)"}


def unfired_is_error(result: dict) -> dict:
    """A verdict whose scheduled faults did not all fire (``not_fired``): ``error`` (exit 3), saying
    which, unless a promise was broken anyway (``fail`` stands). What was asked for was not run."""
    not_fired = result.get("not_fired") or []
    if not not_fired or result.get("verdict") != PASS:
        return result
    many = len(not_fired) > 1
    reason = (f"scheduled fault{'s' if many else ''} {', '.join(not_fired)} never fired: the run never reached "
              f"{'them' if many else 'it'} (a point the run does not reach, or a hit count or a time past the run's "
              "end), so the scenario asked for was not run")
    return {**result, "verdict": ERROR, "error": reason}
