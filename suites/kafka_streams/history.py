"""A kafka-streams scenario's history (``history.jsonl`` in its directory), for the report's timeline: what each
instance of the application said (its state changes, restorations, tasks started and closed, the crash point
it reached, its answers to queries), each on the lane of its instance or of the thread that said it (a stream
thread, the state updater), and what the harness did (an instance started, its input given, SIGKILL, a clean
stop, the changelogs read), on one clock: seconds since the scenario started. Pure functions of the events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["HARNESS", "history_rows", "jvm_rows", "link_violations", "short_thread", "write_history"]

HARNESS = "harness"  # the lane of what the harness did that belongs to no instance (input produced, changelogs read)
_THREAD = re.compile(r"(GlobalStreamThread|StreamThread-\d+|StateUpdater-\d+)$")
# The application's line -> the history event's type (its category in the report's timeline)
_TYPES = {"STATE": "state_change", "RESTORE_START": "restore_start", "RESTORE_END": "restore_end", "POINT": "point",
          "TASK_START": "task_start", "TASK_CLOSE": "task_close", "STORE": "query", "STORE_ERROR": "query_error",
          "UNCAUGHT": "uncaught", "CLOSED": "closed", "ZOMBIE_COMMITTED": "zombie_committed",
          "ZOMBIE_FENCED": "fenced", "ARMED": "armed", "RELEASED": "resumed"}
_THREAD_WORD = {"POINT": 2, "RESTORE_START": 4, "RESTORE_END": 4, "TASK_START": 1, "TASK_CLOSE": 1}
LINE_CHARS = 240  # of an application's line kept in its event (a query's answer is the whole store)


def short_thread(name: str) -> str:
    """``ks-7-ab12cd-<process id>-StreamThread-1`` -> ``StreamThread-1`` (the client's prefix is the lane's)."""
    found = _THREAD.search(name)
    return found.group(1) if found else name


def jvm_rows(events: Iterable, offset_s: float, lane: str, instance: int | None = None) -> list[dict]:
    """An instance's events (:class:`~eos_harness.kafka_streams.app.AppEvent`: ``at`` seconds after its JVM
    started, which was ``offset_s`` after the scenario's start) as history rows without ``seq``; an event a
    thread said (a crash point, a restoration, a task) on the lane ``LANE THREAD``."""
    rows = []
    for e in events:
        kind = _TYPES.get(e.kind)
        if kind is None:
            continue
        word = _THREAD_WORD.get(e.kind)
        thread = short_thread(e.words[word]) if word is not None and len(e.words) > word else None
        row = {"type": kind, "at": round(offset_s + e.at, 3), "lane": f"{lane} {thread}" if thread else lane,
               **({"instance": instance} if instance is not None else {}), **({"thread": thread} if thread else {}),
               "line": e.text[:LINE_CHARS] + ("…" if len(e.text) > LINE_CHARS else "")}
        if e.kind in ("RESTORE_START", "RESTORE_END") and len(e.words) > 1 and e.words[1].isdigit():
            row.update(store=e.words[0], partition=int(e.words[1]))
        if e.kind == "POINT" and e.words:
            row["point"] = e.words[0]
        rows.append(row)
    return rows


def history_rows(rows: Iterable[Mapping]) -> list[dict]:
    """Rows in time order (an instance's events in the order it said them), each with its ``seq``."""
    ordered = sorted(enumerate(rows), key=lambda pair: (pair[1]["at"], pair[0]))
    return [{"seq": seq, **row} for seq, (_, row) in enumerate(ordered)]


_INSTANCE = re.compile(r"^instance (\d+)(?: store (\w+) partition (\d+))?$")


def link_violations(violations: list[dict], rows: list[dict]) -> None:
    """Each violation marked (``event``) on the event where it shows: a state violation on its instance's last
    answer to a query, a changelog's on the reading of the changelogs, no_wipe's on the restoration it judged,
    liveness's on its instance's last event."""
    for v in violations:
        key = str(v.get("key", ""))
        found = None
        if key.startswith("changelog"):
            found = [r for r in rows if r["type"] == "changelog"]
        elif (match := _INSTANCE.match(key)) is not None:
            life = int(match.group(1))
            mine = [r for r in rows if r.get("instance") == life]
            if v.get("check") == "state":
                found = [r for r in mine if r["type"] == "query"]
            elif v.get("check") == "no_wipe" and match.group(2):
                found = [r for r in mine if r["type"] == "restore_start" and r.get("store") == match.group(2)
                         and r.get("partition") == int(match.group(3))]
            elif v.get("check") == "liveness":
                found = mine
        if found:
            v["event"] = found[-1]["seq"]


def write_history(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
