"""The records a run directory keeps, and the types of their fields: what ``report`` and ``--resume``
check before they use a record, so that a damaged one is named (file, line, field, what is wrong),
never a traceback and never shown as if it were whole.

- a scenario's result (a line of ``results.jsonl``, an entry of ``chaos.json``'s ``scenarios``, a
  ``verdict.json``): :func:`result_problems`;
- a campaign's kept options (``campaign.json``): :func:`option_problems`;
- a campaign's JSON (``chaos.json``) and its summary: :func:`campaign_problems`;
- a history event (a line of ``history.jsonl``): :func:`history_problems`;
- reading a JSON-lines file whatever its bytes: :func:`json_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from eos_harness.metadata.reader import PUBLISHED_AT
from eos_harness.verdict import VERDICTS

__all__ = ["CAMPAIGN_TYPES", "HISTORY_TYPES", "OPTION_TYPES", "RESULT_TYPES", "campaign_problems", "history_problems",
           "json_lines", "option_problems", "result_problems", "type_name"]

Check = tuple[str, Callable[[Any], bool]]  # (what it must be, whether a value is that)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_violation(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("check"), str)


INT: Check = ("an integer", _is_int)
NUMBER: Check = ("a number", _is_number)
TEXT: Check = ("a string", _is_str)
FLAG: Check = ("true or false", lambda value: isinstance(value, bool))
OBJECT: Check = ("an object", _is_object)
TEXTS: Check = ("a list of strings", _list_of(_is_str))
OBJECTS: Check = ("a list of objects", _list_of(_is_object))

# The fields of a scenario's result that the harness reads back (report, resume, the campaign summary).
RESULT_TYPES: dict[str, Check] = {
    "index": ("an integer (or \"probe\")", lambda value: _is_int(value) or value == "probe"),
    "verdict": (f"one of {', '.join(VERDICTS)}", lambda value: value in VERDICTS),
    "violations": ("a list of violations (objects with a \"check\")", _list_of(_is_violation)),
    "repro": TEXT,
    "store": TEXT, "system": TEXT, "pipeline": TEXT, "sink": TEXT,
    "workload": ("a string or null", _or_none(_is_str)),
    "seed": ("an integer or null", _or_none(_is_int)),
    "schedule": ("a list", lambda value: isinstance(value, list)),
    "crash_points": TEXTS, "fault_errors": TEXTS, "warnings": TEXTS,
    "error": ("a string or null", _or_none(_is_str)),
    "seconds": ("a number or null", _or_none(_is_number)),
    "started_at": ("a number or null", _or_none(_is_number)),
    "recovery": OBJECTS, "runs": OBJECTS,
    "configuration": OBJECT,
    "history": ("a string or null", _or_none(_is_str)),
    "strict": FLAG, "probe": FLAG,
    "expected": TEXT,
}
RESULT_REQUIRED = ("verdict", "violations")

# A campaign's kept options (campaign.json).
OPTION_TYPES: dict[str, Check] = {
    "suite": TEXT,
    "seed": INT,
    "stores": TEXTS, "workloads": TEXTS, "systems": TEXTS, "sinks": TEXTS, "allow": TEXTS,
    "minutes": ("a positive number or null", _or_none(lambda value: _is_number(value) and value > 0)),
    "scenarios": ("a positive integer or null", _or_none(lambda value: _is_int(value) and value > 0)),
    "broker": ("a string or null", _or_none(_is_str)),
    "source": TEXT,
    "strict": FLAG, "until_failure": FLAG, "finished": FLAG,
    "workers": ("a positive integer", lambda value: _is_int(value) and value > 0),
    "store_timeout": ("a positive number", lambda value: _is_number(value) and value > 0),
    "json": ("a path or null", _or_none(_is_str)), "junit": ("a path or null", _or_none(_is_str)),
    "spent_seconds": ("a number", lambda value: _is_number(value) and value >= 0),
}


def type_name(value: Any) -> str:
    """How a JSON value reads in a message: ``a string ("7")``, ``null``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    kind = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__)
    if isinstance(value, str | int | float):
        shown = json.dumps(value)
        return f"{kind} ({shown[:40]}{'…' if len(shown) > 40 else ''})"
    return kind


def _problems(record: dict, types: dict[str, Check], required: tuple[str, ...]) -> list[str]:
    problems = [f"{name!r} is missing" for name in required if name not in record]
    for name, (what, check) in types.items():
        if name in record and not check(record[name]):
            problems.append(f"{name!r} is {type_name(record[name])}, not {what}")
    return problems


def result_problems(result: Any) -> list[str]:
    """What is wrong with a scenario's result (empty: nothing the harness reads back is damaged)."""
    if not isinstance(result, dict):
        return [f"is {type_name(result)}, not an object"]
    problems = _problems(result, RESULT_TYPES, RESULT_REQUIRED)
    if not any(name in result for name in ("store", "system", "pipeline")):
        problems.append("names no store, system or pipeline")
    return problems


def option_problems(state: Any, required: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with a campaign's kept options: a ``required`` key missing, a value of the wrong type."""
    if not isinstance(state, dict):
        return [f"is {type_name(state)}, not an object"]
    return _problems(state, OPTION_TYPES, required)


def json_lines(data: bytes) -> Iterator[tuple[int, Any, str | None]]:
    """Each line of a JSON-lines file: (line number, its value or None, what is wrong with it or None).
    Invalid UTF-8 and invalid JSON are problems of their line, never an exception; blank lines are skipped."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, None, f"holds bytes that are not text (UTF-8) at column {exc.start + 1}"
            continue
        try:
            yield number, json.loads(text), None
        except ValueError as exc:
            yield number, None, f"is not valid JSON ({getattr(exc, 'msg', exc)})"


# The fields of a history event the report draws (a timeline's lane, time and order).
# "at" is when a Spark event happened (seconds since the scenario started) or, on a metadata reader's
# "published" event, where in the log it published; the other suites' events have none.
HISTORY_TYPES: dict[str, Check] = {
    "seq": INT, "type": TEXT, "instance": INT, "run": INT, "lane": TEXT,
    "at": (f"a number, null or where a metadata reader published ({', '.join(map(json.dumps, PUBLISHED_AT))})",
           lambda value: value is None or _is_number(value) or value in PUBLISHED_AT), "seconds": ("a number or null", _or_none(_is_number)),
}

# The fields of a campaign's JSON (chaos.json) the report reads, and of its summary.
CAMPAIGN_TYPES: dict[str, Check] = {
    "suite": TEXT, "seed": ("an integer or null", _or_none(_is_int)),
    "seconds": ("a number or null", _or_none(_is_number)), "minutes": ("a number or null", _or_none(_is_number)),
    "broker": ("a string or null", _or_none(_is_str)), "source": TEXT, "sinks": TEXTS,
    "scenarios": ("a list", lambda value: isinstance(value, list)),
    "summary": ("an object or null", _or_none(_is_object)),
    "stopped": ("an object with a \"message\", or null",
                _or_none(lambda value: isinstance(value, dict) and isinstance(value.get("message"), str))),
}
_TALLY: dict[str, Check] = {
    "expected": TEXT, "scenarios": INT, "failed": INT, "errors": INT, "status": TEXT,
    "checks": ("an object of counts", lambda value: isinstance(value, dict) and all(map(_is_int, value.values()))),
}
SUMMARY_TYPES: dict[str, Check] = {
    "total": INT, "failed": INT, "unexpected": TEXTS, "not_run": TEXTS,
    "stores": ("an object of tallies", lambda value: isinstance(value, dict) and all(
        isinstance(t, dict) and not _problems(t, _TALLY, ()) for t in value.values())),
    "systems": ("an object of tallies", lambda value: isinstance(value, dict) and all(
        isinstance(t, dict) and not _problems(t, _TALLY, ()) for t in value.values())),
}


def history_problems(event: Any) -> list[str]:
    """What is wrong with a history event (empty: the report can draw it)."""
    if not isinstance(event, dict):
        return [f"is {type_name(event)}, not an object"]
    return _problems(event, HISTORY_TYPES, ())


def campaign_problems(campaign: Any) -> list[str]:
    """What is wrong with a campaign's JSON, its summary included (empty: the report can use it)."""
    if not isinstance(campaign, dict):
        return [f"is {type_name(campaign)}, not an object"]
    problems = _problems(campaign, CAMPAIGN_TYPES, ("scenarios",))
    if isinstance(campaign.get("summary"), dict):
        problems += [f"summary: {p}" for p in _problems(campaign["summary"], SUMMARY_TYPES, ())]
    return problems
