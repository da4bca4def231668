"""The metadata suite's promises (KIP-868): pure functions of a recorded history and the model.

The history holds the controllers' events (``activated`` with the state after activation,
``committed``, ``done`` with the final state, ``fenced``), the readers' (``published`` images
with their log position, ``snapshot``, ``final``) and, last, the whole committed log (``log``).
Each check returns :class:`~eos_harness.verdict.Violation` s; :func:`check_all` runs them all.
"""

from __future__ import annotations

from collections.abc import Iterable

from eos_harness.models.metadata import Command, Entry, Replay, apply_commands, log_problems
from eos_harness.verdict import Violation

__all__ = ["CHECKS", "check_all", "images_at", "log_entries"]

CHECKS = {
    "no_partial_publish": "no reader ever publishes an image with part of a transaction, or any of an aborted one: "
                          "every published image is the model's visible image at the reader's position",
    "controller_state_matches_model": "a controller's state after activation (a partial transaction found and "
                                      "aborted) is the model's image of the log, and its final state the image "
                                      "of every command run once",
    "readers_converge": "every reader, once it read the whole log, holds the model's image of it",
    "snapshot_matches_replay": "a snapshot holds the committed image at its position, and a reader starting from "
                               "it ends with the image of a reader replaying the whole log",
    "one_open_transaction": "at most one transaction is open at a time; a new controller aborts its "
                            "predecessor's open transaction before it writes anything else",
    "no_interleaving": "while a transaction is open, every entry in the log belongs to it",
    "fenced_controller_never_writes": "a controller fenced by a newer epoch never writes again",
    "controller_finishes": "the controllers run every command to its end (no error, no hang)",
}
MAX_PER_CHECK = 5  # violations reported per check (a broken log breaks an invariant many times)


def log_entries(history: list[dict]) -> list[Entry]:
    """The committed log the driver read at the end of the run."""
    log = next((e for e in reversed(history) if e["type"] == "log"), None)
    if log is None:
        return []
    return [Entry.from_json(data, offset) for offset, data in log["entries"]]


def images_at(entries: list[Entry], positions: Iterable[int]) -> dict[int, dict]:
    """The model's visible image (JSON) at each position, in one pass over the log."""
    wanted = sorted(set(positions))
    images: dict[int, dict] = {}
    replay = Replay()
    index = 0
    for position in wanted:
        while index < len(entries) and entries[index].offset < position:
            replay.feed(entries[index])
            index += 1
        images[position] = replay.image.to_json()
    return images


def _diff(expected: dict | None, observed: dict | None) -> tuple[str | None, object, object]:
    """The first topic or config that differs, for a violation's key/expected/observed."""
    if expected is None or observed is None:
        return None, expected, observed
    for section in ("topics", "configs"):
        exp, obs = expected[section], observed[section]
        for key in sorted(set(exp) | set(obs)):
            if exp.get(key) != obs.get(key):
                what = "partitions" if section == "topics" else "config"
                return f"{key}", f"{what} {exp.get(key, 'absent')}", f"{what} {obs.get(key, 'absent')}"
    return None, expected.get("digest"), observed.get("digest")


def _same(a: dict | None, b: dict | None) -> bool:
    return a is not None and b is not None and a["digest"] == b["digest"]


def check_publishes(history: list[dict], images: dict[int, dict]) -> list[Violation]:
    out = []
    for e in history:
        if e["type"] == "published" and e["at"] != "snapshot" and e["image"] is not None:
            expected = images[e["position"]]
            if not _same(expected, e["image"]):
                key, exp, obs = _diff(expected, e["image"])
                out.append(Violation("no_partial_publish", key, exp, obs, e["seq"],
                                     detail=f"reader {e['reader']} published at position {e['position']} ({e['at']})"))
    return out[:MAX_PER_CHECK]


def check_controller_state(history: list[dict], images: dict[int, dict], end: int,
                           commands: list[Command]) -> list[Violation]:
    out = []
    for e in history:
        if e["type"] == "activated" and e["state"] is not None:
            expected = images[e["position"]]
            if not _same(expected, e["state"]):
                key, exp, obs = _diff(expected, e["state"])
                aborted = f", aborted {e['aborted']}" if e["aborted"] else ""
                out.append(Violation("controller_state_matches_model", key, exp, obs, e["seq"],
                                     detail=f"controller epoch {e['epoch']} after activation at position "
                                            f"{e['position']} (found open: {e['found_open']}{aborted})"))
        elif e["type"] == "done" and e["state"] is not None:
            for expected, what in ((images[end], "the model's image of the log"),
                                   (apply_commands(commands).to_json(), "every command run once")):
                if not _same(expected, e["state"]):
                    key, exp, obs = _diff(expected, e["state"])
                    out.append(Violation("controller_state_matches_model", key, exp, obs, e["seq"],
                                         detail=f"final state of controller epoch {e['epoch']} vs {what}"))
    return out[:MAX_PER_CHECK]


def check_readers(history: list[dict], images: dict[int, dict], end: int) -> list[Violation]:
    out = []
    finals = {e["reader"]: e for e in history if e["type"] == "final"}
    for name, e in finals.items():
        if not _same(images[end], e["image"]) or e["position"] < end:
            key, exp, obs = _diff(images[end], e["image"])
            out.append(Violation("readers_converge", key, exp, obs, e["seq"],
                                 detail=f"reader {name} at position {e['position']} (log end {end})"))
    for e in history:
        if e["type"] == "hang" and "reader" in e:
            out.append(Violation("readers_converge", e["reader"], "the reader reads to the end of the log",
                                 f"no answer within {e['seconds']} s", e["seq"]))
    return out[:MAX_PER_CHECK]


def check_snapshots(history: list[dict], images: dict[int, dict]) -> list[Violation]:
    out = []
    for e in history:
        if e["type"] == "snapshot" and not _same(images[e["position"]], e["image"]):
            key, exp, obs = _diff(images[e["position"]], e["image"])
            out.append(Violation("snapshot_matches_replay", key, exp, obs, e["seq"],
                                 detail=f"snapshot {e['file']} at position {e['position']} of reader {e['reader']}"))
    finals = {e["reader"]: e for e in history if e["type"] == "final"}
    if "from-snapshot" in finals and "replay" in finals:
        a, b = finals["replay"], finals["from-snapshot"]
        if not _same(a["image"], b["image"]):
            key, exp, obs = _diff(a["image"], b["image"])
            out.append(Violation("snapshot_matches_replay", key, exp, obs, b["seq"],
                                 detail="the reader started from the last snapshot vs the reader replaying the log"))
    return out[:MAX_PER_CHECK]


_INVARIANT_CHECKS = {"one_open_transaction": "one_open_transaction", "no_interleaving": "no_interleaving",
                     "fenced_never_writes": "fenced_controller_never_writes"}


def check_log(history: list[dict], entries: list[Entry]) -> list[Violation]:
    log_seq = next((e["seq"] for e in reversed(history) if e["type"] == "log"), None)
    out: dict[str, list[Violation]] = {}
    for problem in log_problems(entries):
        check = _INVARIANT_CHECKS[problem.invariant]
        out.setdefault(check, []).append(Violation(check, f"offset {problem.offset}", None, problem.detail, log_seq))
    for e in history:
        if e["type"] == "committed" and any(r["type"] == "resumed" and r["instance"] == e["instance"]
                                            and r["seq"] < e["seq"] for r in history):
            out.setdefault("fenced_controller_never_writes", []).append(Violation(
                "fenced_controller_never_writes", f"command {e['command']}", "the zombie controller is fenced",
                f"controller epoch {e['instance']} committed after a newer one took over", e["seq"]))
    return [v for vs in out.values() for v in vs[:MAX_PER_CHECK]]


def check_finishes(history: list[dict]) -> list[Violation]:
    ends = [e for e in history if e["type"] in ("done", "error", "hang") and "reader" not in e]
    if ends and ends[-1]["type"] == "done":
        return [Violation("controller_finishes", None, "done", e["type"], e["seq"], detail=e.get("error"))
                for e in history if e["type"] == "error"][:1]
    last = ends[-1] if ends else None
    return [Violation("controller_finishes", None, "the last controller runs every command",
                      last["type"] if last else "no controller finished", last["seq"] if last else None,
                      detail=(last or {}).get("error"))]


def check_all(history: list[dict], commands: list[Command]) -> list[Violation]:
    entries = log_entries(history)
    end = entries[-1].offset + 1 if entries else 0
    positions = [end] + [e["position"] for e in history if e["type"] in ("published", "snapshot", "activated")]
    images = images_at(entries, positions)
    return (check_publishes(history, images) + check_controller_state(history, images, end, commands)
            + check_readers(history, images, end) + check_snapshots(history, images) + check_log(history, entries)
            + check_finishes(history))
