"""The campaign engine every suite's campaign runs on: a plan's scenarios, N at a time.

A suite keeps its planning (``suites/<suite>/plan.py``); :mod:`eos_harness.suite_campaign` runs its
campaign on this engine. Scenarios start while ``more`` allows; one that must ``run_alone`` (a fault that kills a
broker shared by every scenario) waits for the running ones and runs by itself. Each finished
scenario is handed to ``on_result`` and appended to ``results.jsonl`` as it arrives, so nothing
finished is lost whatever happens after.

It stops early, keeping what finished, when:

- the command is interrupted (Ctrl-C or SIGTERM): no scenario starts, every process the run
  started is killed, the scenarios cut short are dropped (they have no verdict);
- ``stop_after`` says so of a finished result (``--until-failure``: the first failure it was
  looking for): no scenario starts, the running ones are cut short as on an interrupt;
- the environment is broken: :data:`GIVE_UP_AFTER` scenarios in a row end in ``error`` for the
  same kind of environmental cause (no space left, too many open files, a broker that stopped
  answering), or ``results.jsonl`` cannot be written. Running thousands of error scenarios on a
  full disk tells nothing.

A stopped campaign can be resumed (``--resume RUN_DIR``): its options are kept in the run
directory (:data:`STATE_FILE`, written when it starts), :func:`finished_results` reads what
finished from ``results.jsonl``, and ``run_plan(skip=…)`` draws the same plan again, running only
the scenarios whose plan index has no result yet.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import hashlib
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eos_harness.commands import command_line
from eos_harness.session import STOPPING, kill_started_processes, signal_name
from eos_harness.verdict import FAIL

__all__ = ["GIVE_UP_AFTER", "RESULTS_FILE", "STATE_FILE", "UNTIL_FAILURE", "CampaignRun", "KeptCampaign", "ResumeError",
           "Resumed", "budget", "cut_torn_tail", "environment_cause", "error_lines", "finished_results", "load_state",
           "open_for_resume", "plan_digest", "points_hit", "read_results", "run_plan", "save_state",
           "until_failure_rule"]

GIVE_UP_AFTER = 3  # environmental errors in a row before the campaign gives up
STOP_WAIT_S = 5.0  # how long an interrupted campaign waits for its cut-short scenarios to unwind
STATE_FILE = "campaign.json"  # in the run directory: the campaign's options, what a resume needs
UNTIL_FAILURE = "until-failure"  # the ``why`` of a campaign stopped by ``stop_after``

_ERRNOS = {
    errno.ENOSPC: "no space left on device (ENOSPC)",
    errno.EDQUOT: "disk quota exceeded (EDQUOT)",
    errno.EMFILE: "too many open files (EMFILE)",
    errno.ENFILE: "too many open files in the system (ENFILE)",
    errno.EROFS: "read-only file system (EROFS)",
}
_MESSAGES = {  # the same causes as they read in messages from other layers (SQLite, RocksDB, a child)
    "no space left on device": errno.ENOSPC,
    "database or disk is full": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "too many open files": errno.EMFILE,
    "read-only file system": errno.EROFS,
}


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def environment_cause(error: BaseException | str | None) -> str | None:
    """The environmental cause of a scenario's error (``no space left on device (ENOSPC)``, …), or
    None when the error is not about the environment."""
    if error is None:
        return None
    if isinstance(error, str):
        text = error.lower()
        return next((_ERRNOS[code] for phrase, code in _MESSAGES.items() if phrase in text), None)
    for exc in _chain(error):
        if isinstance(exc, OSError) and exc.errno in _ERRNOS:
            return _ERRNOS[exc.errno]
        if isinstance(exc, sqlite3.OperationalError | OSError):
            cause = environment_cause(str(exc))
            if cause:
                return cause
        if _broker_gone(exc):
            return f"the broker stopped answering ({type(exc).__name__}: {str(exc)[:200]})"
    return environment_cause(str(error))


def _broker_gone(exc: BaseException) -> bool:
    try:
        from eos_harness.broker import BrokerError, ProducerFenced, TransactionAborted
        from eos_harness.cluster import ClusterError
    except ImportError:  # pragma: no cover - the broker port is part of the package
        return False
    if isinstance(exc, ProducerFenced | TransactionAborted):
        return False  # what a scenario's faults provoke, not a broken broker
    return isinstance(exc, BrokerError | ClusterError)


@dataclass
class CampaignRun:
    """What a campaign ran: the finished results in plan order and, when it stopped early, why."""

    results: list[dict] = field(default_factory=list)
    stopped: str | None = None  # None: ran to its end; else the message saying why it stopped
    interrupted: BaseException | None = None  # the KeyboardInterrupt (or SIGTERM's) that stopped it
    environment: str | None = None  # the environmental cause it gave up on
    until: dict | None = None  # the result ``stop_after`` stopped the campaign at

    @property
    def stop_json(self) -> dict | None:
        """The campaign JSON's ``stopped`` field."""
        if self.stopped is None:
            return None
        if self.until is not None:
            return {"why": UNTIL_FAILURE, "message": self.stopped}
        why = signal_name(self.interrupted) if self.interrupted is not None else "environment"
        return {"why": why, "message": self.stopped}


def _parse_one_at_a_time() -> None:
    """Make ``ast.parse`` take a process-wide lock (once). CPython 3.11 keeps the AST constructor's
    recursion depth in state shared by every thread: a thread switch inside one parse (a garbage
    collection running a finaliser) to a parse in another thread fails either with ``SystemError: AST
    constructor recursion depth mismatch`` (python/cpython#106905). A campaign runs its scenarios in
    threads, and Hypothesis parses the source of the lambdas it describes: a store judged by a store
    suite got "error" from the interpreter, not from the store, once in a CI run."""
    if getattr(ast.parse, "one_at_a_time", False):
        return
    parse, lock = ast.parse, threading.RLock()

    def locked_parse(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    locked_parse.one_at_a_time = True  # type: ignore[attr-defined]
    locked_parse.__wrapped__ = parse  # type: ignore[attr-defined]
    ast.parse = locked_parse


def run_plan(
    scenarios: Iterable[Any],
    run_one: Callable[[int, Any], dict],
    *,
    workers: int,
    more: Callable[[int], bool],
    error_result: Callable[[Any, BaseException], dict],
    on_result: Callable[[dict], None] = lambda result: None,
    run_alone: Callable[[Any], bool] = lambda scenario: False,
    results_file: Path | None = None,
    fatal: tuple[type[BaseException], ...] = (),
    skip: Collection[int] = (),
    stop_after: Callable[[dict], str | None] = lambda result: None,
    cut_short: Callable[[], None] = lambda: None,
) -> CampaignRun:
    """Run ``scenarios`` (``run_one(index, scenario)`` → a verdict object) while ``more(index)``
    (``index``: the plan index of the next scenario).

    A scenario that raises becomes ``error_result(scenario, exc)`` (with ``"error"``), except for
    ``fatal`` exceptions (the campaign's own input is wrong), which stop the campaign and propagate.
    ``skip``: plan indices that already have a result (a resumed campaign): drawn, not run.
    ``stop_after(result)``: a message when the campaign must stop at this result, else None.
    ``cut_short()``: stop the scenarios still running elsewhere (an engine's tasks), when it stops early.
    """
    source = iter(scenarios)
    done: queue.Queue = queue.Queue()
    running: dict[int, Any] = {}
    results: dict[int, dict] = {}
    run = CampaignRun()
    pending: Any = None
    started = 0
    in_a_row: list[str] = []
    exhausted = False
    jsonl = None

    def work(index: int, scenario: Any) -> None:
        try:
            done.put((index, scenario, run_one(index, scenario), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which decides
            done.put((index, scenario, None, exc))

    if workers > 1:
        _parse_one_at_a_time()
    try:
        if results_file is not None:
            jsonl = open(results_file, "a")  # noqa: SIM115 - closed in the finally below
        while True:
            while (run.stopped is None and not exhausted and len(running) < workers and more(started)
                   and not any(run_alone(s) for s in running.values())):
                scenario = pending if pending is not None else next(source, None)
                if scenario is None:
                    exhausted = True
                    break
                if started in skip:  # finished before the campaign was resumed
                    started += 1
                    continue
                if run_alone(scenario) and running:
                    pending = scenario
                    break
                pending = None
                running[started] = scenario
                threading.Thread(target=work, args=(started, scenario), daemon=True,
                                 name=f"scenario-{started}").start()
                started += 1
            if not running:
                break
            try:
                index, scenario, result, exc = done.get(timeout=0.5)
            except queue.Empty:
                continue
            del running[index]
            cause = None
            if exc is not None:
                if isinstance(exc, fatal):
                    raise exc
                result = error_result(scenario, exc)
                cause = environment_cause(exc)
            elif result.get("verdict") == "error":
                cause = environment_cause(result.get("error"))
            result["index"] = index
            results[index] = result
            if jsonl is not None:
                try:
                    jsonl.write(json.dumps(result) + "\n")
                    jsonl.flush()
                except OSError as write_error:
                    run.environment = environment_cause(write_error) or str(write_error)
                    run.stopped = (f"stopped: {run.environment}: cannot write the results to {results_file} "
                                   f"({write_error}); fix it and run again")
            on_result(result)
            reason = stop_after(result) if run.stopped is None else None
            if reason is not None:
                run.until, run.stopped = result, reason
                if running:
                    _cut_short(done, running, cut_short)
                break
            in_a_row = in_a_row + [cause] if cause else []
            if run.stopped is None and len(in_a_row) >= GIVE_UP_AFTER and len(set(in_a_row[-GIVE_UP_AFTER:])) == 1:
                run.environment = cause
                run.stopped = (f"stopped: {cause}: the last {GIVE_UP_AFTER} scenarios could not run; fix it and "
                               f"run again (last error: {str(result.get('error'))[:300]})")
    except KeyboardInterrupt as interrupt:
        run.interrupted = interrupt
        run.stopped = (f"interrupted ({signal_name(interrupt)}): {len(results)} finished scenario(s) kept, "
                       f"{len(running)} cut short and dropped")
        _cut_short(done, running, cut_short)
    finally:
        if jsonl is not None:
            with contextlib.suppress(OSError):
                jsonl.close()
    run.results = [results[i] for i in sorted(results)]
    return run


def _cut_short(done: queue.Queue, running: dict[int, Any], elsewhere: Callable[[], None]) -> None:
    """Stop the running scenarios: no process starts any more, every one started is killed (``elsewhere``:
    those an engine runs outside this process), and the scenarios unwind (their results are dropped: they
    have no verdict)."""
    STOPPING.set()
    elsewhere()
    kill_started_processes()
    _drain(done, running)
    kill_started_processes()  # anything a cut-short scenario started while it unwound


def _drain(done: queue.Queue, running: dict[int, Any]) -> None:
    """Let the cut-short scenarios unwind (their processes are dead), for at most STOP_WAIT_S."""
    deadline = time.monotonic() + STOP_WAIT_S
    while running and time.monotonic() < deadline:
        try:
            index, *_ = done.get(timeout=0.1)
        except queue.Empty:
            continue
        running.pop(index, None)


class ResumeError(ValueError):
    """A campaign cannot be resumed from this directory (a usage error: nothing was run)."""


RESULTS_FILE = "results.jsonl"  # in the run directory: one finished scenario's result per line
# Kept options that do not decide the plan: a resume may give them anew (or they are the campaign's clock).
NOT_THE_PLAN = frozenset({"workers", "store_timeout", "until_failure", "json", "junit", "spent_seconds", "finished",
                          "digest", "engine", "master"})


def _digest_of(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def plan_digest(state: dict) -> dict:
    """The digest of everything in ``state`` that decides the plan (every option but :data:`NOT_THE_PLAN`):
    one over all of them and one per option, so that a changed one can be named."""
    plan = {name: value for name, value in state.items() if name not in NOT_THE_PLAN}
    return {"sha256": _digest_of(plan), "options": {name: _digest_of(value)[:16] for name, value in sorted(plan.items())}}


def save_state(run_dir: Path, state: dict) -> None:
    """Write the campaign's options (and how long it has run) to ``run_dir``/:data:`STATE_FILE`, with the
    digest of its plan (:func:`plan_digest`), which ``--resume`` checks."""
    from eos_harness.rundir import write_text

    write_text(Path(run_dir) / STATE_FILE, json.dumps({**state, "digest": plan_digest(state)}, indent=2))


def load_state(run_dir: str | Path, suite: str, required: Iterable[str] = ()) -> dict:
    """The options of the campaign of ``suite`` that ran in ``run_dir``, or :class:`ResumeError` saying
    why it cannot be resumed: no campaign there, ``campaign.json`` unreadable, a ``required`` option
    missing or of the wrong type, or an option that decides the plan changed since the campaign
    started (its digest, :func:`plan_digest`)."""
    from eos_harness.records import option_problems

    path = Path(run_dir) / STATE_FILE
    if not Path(run_dir).is_dir():
        raise ResumeError(f"--resume {run_dir}: no such directory; give the run directory of a stopped campaign")
    try:
        text = path.read_bytes().decode("utf-8")
        state = json.loads(text)
    except FileNotFoundError:
        raise ResumeError(f"--resume {run_dir}: holds no campaign ({STATE_FILE} is missing); give the run "
                          "directory a chaos campaign printed when it stopped") from None
    except OSError as exc:
        raise ResumeError(f"--resume {run_dir}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResumeError(f"--resume {run_dir}: {path} is damaged: it holds bytes that are not text (UTF-8) at "
                          f"byte {exc.start}; the campaign cannot be resumed: start a new one") from None
    except ValueError as exc:
        raise ResumeError(f"--resume {run_dir}: {path} is not valid JSON (truncated or corrupt: "
                          f"{getattr(exc, 'msg', exc)}); the campaign cannot be resumed: start a new one") from None
    if not isinstance(state, dict) or "seed" not in state:
        raise ResumeError(f"--resume {run_dir}: {path} is not a campaign's options (no seed)")
    if state.get("suite") != suite:
        if not isinstance(state.get("suite"), str):
            raise ResumeError(f"--resume {run_dir}: {path}: 'suite' is missing or not a string; the campaign "
                              "cannot be resumed: start a new one")
        raise ResumeError(f"--resume {run_dir}: a campaign of the {state.get('suite')!r} suite; resume it with "
                          f"{command_line('chaos', '--suite', state.get('suite'), '--resume', run_dir)}")
    problems = option_problems(state, ("seed", *required))
    if problems:
        raise ResumeError(f"--resume {run_dir}: {path}: {'; '.join(problems)}; the campaign cannot be resumed "
                          "as it started: start a new one")
    _check_digest(state, path, run_dir)
    return state


def _check_digest(state: dict, path: Path, run_dir: str | Path) -> None:
    kept = state.get("digest")
    if not isinstance(kept, dict) or not isinstance(kept.get("sha256"), str):
        raise ResumeError(f"--resume {run_dir}: {path} carries no digest of its plan (written by an older "
                          "eos-harness, or edited), so it cannot tell that its results come from the plan it "
                          "names; start a new campaign")
    now = plan_digest(state)
    if now["sha256"] == kept["sha256"]:
        return
    options = kept.get("options") if isinstance(kept.get("options"), dict) else {}
    changed = sorted(name for name in set(options) | set(now["options"])
                     if options.get(name) != now["options"].get(name))
    what = (f"{', '.join(repr(name) for name in changed)} changed" if changed and options
            else "its options do not match the digest written when it started")
    raise ResumeError(f"--resume {run_dir}: {path} was edited after the campaign started ({what}); its results "
                      "came from the plan it started with, and a resume joins only results of one plan: put it "
                      "back, or start a new campaign with the options you want")


@dataclass
class Resumed:
    """A stopped campaign taken up by ``--resume``: its options, and what was found damaged in its run
    directory and how it was dealt with (each note names the file)."""

    state: dict
    notes: list[str]


def open_for_resume(run_dir: str | Path, suite: str, required: Iterable[str] = ()) -> Resumed:
    """Take up the stopped campaign in ``run_dir``: hold the directory for this command (a second command
    on it is refused, naming the holder), read its options (:func:`load_state`), cut away a cut last line
    of ``results.jsonl`` (before anything is appended to it) and name every line that cannot be read
    (their scenarios run again). Raises :class:`ResumeError` (a usage error: nothing was run)."""
    from eos_harness.rundir import RunDirError, hold

    path = Path(run_dir)
    if not path.is_dir():
        raise ResumeError(f"--resume {run_dir}: no such directory; give the run directory of a stopped campaign")
    if not os.path.lexists(path / STATE_FILE):
        raise ResumeError(f"--resume {run_dir}: holds no campaign ({STATE_FILE} is missing); give the run "
                          "directory a chaos campaign printed when it stopped")
    try:
        hold(path, "--resume")
    except RunDirError as exc:
        raise ResumeError(str(exc)) from None
    state = load_state(path, suite, required)
    results = path / RESULTS_FILE
    notes = []
    try:
        cut = cut_torn_tail(results)
        if os.path.lexists(results) and not os.access(results, os.R_OK | os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise ResumeError(f"--resume {run_dir}: {results} cannot be read and appended to: "
                          f"{exc.strerror or exc}; the campaign cannot be resumed") from None
    if cut:
        notes.append(cut)
    _, problems = read_results(results, state)
    return Resumed(state, notes + problems)


def until_failure_rule(names: Iterable[str], expected_to_fail: Callable[[str], bool],
                       subject: str = "store", judge: Callable[[dict], str] = lambda result: result["verdict"],
                       ) -> Callable[[dict], str | None]:
    """What ``--until-failure`` stops at (``run_plan``'s ``stop_after``): the first failure of one of
    ``names`` expected to pass (a bug found; ``subject``: the result's field naming it); a mutant's
    failure is what the campaign expects, so it goes on. Only when every one of ``names`` is expected to
    fail (``--stores mutant-x``) does the first failure of any stop it: the mutant was caught, there is
    nothing else to find. ``judge``: a result's verdict (Spark's judges its at-least-once duplicates)."""
    names = list(names)
    hunted = {n for n in names if not expected_to_fail(n)} or set(names)

    def stop(result: dict) -> str | None:
        if judge(result) != FAIL or result[subject] not in hunted:
            return None
        checks = ", ".join(sorted({v["check"] for v in result["violations"]}))
        where = "the probe" if result.get("probe") else f"scenario {result['index']}"
        return (f"stopped at the first failure (--until-failure): {where} ({result[subject]}) "
                f"broke {checks}; replay: {result['repro']}")

    return stop


@dataclass
class KeptCampaign:
    """A campaign's options kept in its run directory while it runs (what ``--resume`` reads), and what a
    resumed one takes over: the results that finished before and the seconds it had run."""

    out_dir: Path
    state: dict
    earlier: list[dict]
    spent: float
    started: float

    @classmethod
    def start(cls, out_dir: Path, state: dict, resume: bool) -> KeptCampaign:
        """Keep ``state`` (the options; ``state["suite"]`` names the suite) in ``out_dir``; ``resume``: the
        stopped campaign of ``out_dir`` goes on (else ``out_dir`` is claimed for a new one)."""
        from eos_harness.rundir import claim, hold

        earlier: list[dict] = []
        spent = 0.0
        hold(out_dir)  # held by this command already (its face took it first): then nothing to do
        if resume:
            spent = load_state(out_dir, state["suite"]).get("spent_seconds", 0.0)
            cut_torn_tail(out_dir / RESULTS_FILE)
            earlier = finished_results(out_dir / RESULTS_FILE, state)
        else:
            claim(out_dir)
        kept = cls(out_dir, {**state, "spent_seconds": spent, "finished": False}, earlier, spent, time.monotonic())
        save_state(out_dir, kept.state)
        return kept

    @property
    def seconds(self) -> float:
        """How long the campaign has run, over every start."""
        return self.spent + time.monotonic() - self.started

    @property
    def skip(self) -> set[int]:
        """The plan indices that finished before (:func:`run_plan`'s ``skip``)."""
        return {r["index"] for r in self.earlier}

    def recorded(self, on_result: Callable[[dict], None]) -> Callable[[dict], None]:
        """``on_result`` that first keeps how long the campaign has run (a --minutes campaign resumed gets
        the time it had left)."""

        def record(result: dict) -> None:
            self.state["spent_seconds"] = round(self.seconds, 3)
            # Best effort: a full disk is the engine's to report (results.jsonl), never a traceback here.
            with contextlib.suppress(OSError):
                save_state(self.out_dir, self.state)
            on_result(result)

        return record

    def end(self, stopped: bool) -> None:
        """Keep the campaign's end: ``stopped`` early (it can be resumed) or ran to its end."""
        self.state.update(spent_seconds=round(self.seconds, 3), finished=not stopped)
        with contextlib.suppress(OSError):  # a full disk: the results on the terminal still stand
            save_state(self.out_dir, self.state)

    def results(self, run: CampaignRun) -> list[dict]:
        """Every result of the campaign, before and now, in plan order."""
        return sorted(self.earlier + run.results, key=lambda r: r["index"])


def finished_results(results_file: Path, state: dict | None = None) -> list[dict]:
    """The results a campaign's ``results.jsonl`` holds (:func:`read_results`)."""
    return read_results(results_file, state)[0]


def read_results(results_file: Path, state: dict | None = None) -> tuple[list[dict], list[str]]:
    """The results a campaign's ``results.jsonl`` holds, one per plan index (the last line of an index
    wins), in plan order, and a note for each line left out because it cannot be read (cut, not text,
    not JSON, a field of the wrong type, a store or system that is not one of the campaign's ``state``).
    A scenario whose error was environmental (no space left, …: it could not run) is left out too,
    silently. What is left out runs again on a resume."""
    from eos_harness.records import json_lines, result_problems

    by_index: dict[int, dict] = {}
    notes: list[str] = []
    try:
        data = Path(results_file).read_bytes()
    except FileNotFoundError:
        data = _parquet_lines(Path(results_file).parent)
        if data is None:
            return [], []
        results_file = Path(results_file).parent / "parquet" / "results"
    except OSError as exc:
        return [], [f"{results_file}: cannot be read ({exc.strerror or exc}); every scenario runs again"]
    for number, result, problem in json_lines(data):
        if problem is None:
            problems = result_problems(result)
            if isinstance(result, dict) and not isinstance(result.get("index"), int):
                if result.get("index") == "probe":
                    continue  # a store's probe: run again at every start, never a scenario of the plan
                problems.insert(0, "'index' is missing or not an integer")
            problem = "; ".join(problems) or _not_of(result, state)
        if problem is not None:
            notes.append(f"{results_file}: line {number} {problem}: left out (its scenario runs again)")
            continue
        if result.get("verdict") == "error" and environment_cause(result.get("error")):
            by_index.pop(result["index"], None)
            continue
        by_index[result["index"]] = result
    return [by_index[i] for i in sorted(by_index)], notes


def _parquet_lines(out_dir: Path) -> bytes | None:
    """Without ``results.jsonl``: the results of the campaign's Parquet dataset (``parquet/results``, written
    at its end on ``--engine spark``), as the JSON lines they were; None when it has none (or no pyarrow)."""
    from eos_harness.results_parquet import PARQUET_DIR, RESULTS_DATASET

    if not (out_dir / PARQUET_DIR / RESULTS_DATASET).is_dir():
        return None
    try:
        from eos_harness.results_parquet import read_results as read_parquet

        return b"".join(json.dumps(result).encode() + b"\n" for result in read_parquet(out_dir))
    except (ImportError, OSError, ValueError):  # no pyarrow, a damaged file: nothing finished to take over
        return None


def _not_of(result: dict, state: dict | None) -> str | None:
    """Why ``result`` is not one of the campaign of ``state`` (its store or system is not the campaign's)."""
    for field_name, kept in (("store", "stores"), ("system", "systems")):
        names = (state or {}).get(kept)
        if isinstance(names, list) and field_name in result and result[field_name] not in names:
            return f"names the {field_name} {result[field_name]!r}, not one of this campaign's"
    return None


def cut_torn_tail(results_file: Path) -> str | None:
    """Cut away the last line of ``results_file`` when it was cut short (the campaign was killed while
    writing it: no newline at its end, and not JSON), so that what is appended next starts on a line of
    its own. Returns what was done (None: nothing to do). A whole last line that only lacks its newline
    gets it (and that is said too: what followed it may be lost)."""
    path = Path(results_file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data or data.endswith(b"\n"):
        return None
    start = data.rfind(b"\n") + 1
    tail = data[start:]
    try:
        json.loads(tail.decode("utf-8"))
    except ValueError:
        os.truncate(path, start)
        return (f"{path}: its last line was cut short ({len(tail)} bytes: the campaign was stopped while writing "
                "it); cut away before anything is appended (that scenario runs again)")
    with open(path, "ab") as out:
        out.write(b"\n")
    return (f"{path}: its last line ended without a newline (the file was cut short after it?); the newline "
            "was added before anything is appended")


def budget(scenarios: int | None, deadline: float | None) -> Callable[[int], bool]:
    """The ``more`` of :func:`run_plan` for ``--scenarios K`` and a ``deadline`` (``time.monotonic()``;
    None: none): whether another scenario may start once ``started`` have. The first always starts (a
    campaign runs at least one scenario, however short its time); then while fewer than K started and
    the deadline is not past."""

    def more(started: int) -> bool:
        if not started:
            return True
        if scenarios is not None and started >= scenarios:
            return False
        return deadline is None or time.monotonic() < deadline

    return more


def points_hit(results: Iterable[dict]) -> list[str]:
    """Every crash point (or fault) the results' scenarios hit, sorted: a summary's ``points_hit``."""
    return sorted({point for result in results for point in result.get("crash_points", ())})


def error_lines(results: Iterable[dict], subject: str) -> list[str]:
    """A line for each result that could not be run to its end (verdict ``error``): its index, its
    ``subject`` (the result's field naming what it ran: ``store``, ``system``), the reason and the replay."""
    return [f"scenario {r.get('index', '?')} ({r[subject]}): {r['error']}; replay: {r['repro']}"
            for r in results if r["verdict"] == "error"]
