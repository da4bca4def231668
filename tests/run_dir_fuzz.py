"""The run-directory fuzz of ``tests/test_damaged_runs.py``: every file (and scenario folder) of real run
directories cut, flipped (bytes that are not text), retyped (a JSON value of the wrong type) and
unpermitted (mode 000), one damage at a time; for each, the report's loader (``load_run``) and the
resume's (``open_for_resume``) are called in this process, and the real CLI (``eos-harness report``,
``eos-harness chaos --resume``) as a subprocess for a sample.

What must hold for every variant: no exception but the usage errors (``NoRun``, ``ResumeError``), each
naming a file or folder of the run; the CLI never prints a traceback and exits 2 or 3 (0 only where the
damage is one the command does not read). Where the damage is one the command reads and an independent
check (plain ``json`` parsing; for a retyped value, the field's declared type) sees it, the damaged file
must be named (exit 2 or 3).

Run as a script (by the test, with the capabilities that let root read a mode-000 file dropped):
``python tests/run_dir_fuzz.py SPEC.json`` prints a JSON summary.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

EOS = str(Path(sys.executable).with_name("eos-harness"))

# The files each command reads and checks (a damage elsewhere must only not crash it).
REPORT_READS = ("chaos.json", "results.jsonl", "campaign.json", "verdict.json", "history.jsonl")
RESUME_READS = ("campaign.json", "results.jsonl")
WRONG_VALUES = (12345, "x", [1], {"a": 1}, True, None, 1.5, -3)


@dataclass
class Variant:
    run: Path  # the run directory
    path: Path  # the damaged file or folder
    kind: str  # cut | flip | retype | unpermit
    detail: str
    must_report: bool  # the report must name it
    must_resume: bool  # the resume must name it
    apply: object  # () -> None
    restore: object  # () -> None


def _valid_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data.decode("utf-8")), dict)
    except ValueError:
        return False


def _valid_json_lines(data: bytes, empty_ok: bool) -> bool:
    if not data.strip():
        return empty_ok
    if not data.endswith(b"\n"):
        return False
    return all(_valid_json_object(line) for line in data.split(b"\n") if line.strip())


def _still_valid(path: Path, data: bytes) -> bool:
    """An independent look at the damaged bytes: do they still parse as the file's format?"""
    if path.suffix == ".json":
        return _valid_json_object(data)
    if path.suffix == ".jsonl":
        return _valid_json_lines(data, empty_ok=path.name != "history.jsonl")
    return True


def _schema_for(path: Path, where: tuple) -> dict:
    """The declared types of the object at ``where`` in ``path`` (empty: none declared there)."""
    from eos_harness.records import (
        CAMPAIGN_TYPES,
        HISTORY_TYPES,
        OPTION_TYPES,
        RESULT_TYPES,
        SUMMARY_TYPES,
    )

    if path.name == "history.jsonl" and len(where) == 1:
        return HISTORY_TYPES
    if path.name in ("results.jsonl", "verdict.json") and len(where) <= 1:
        return RESULT_TYPES
    if path.name == "campaign.json" and not where:
        return OPTION_TYPES
    if path.name == "chaos.json":
        if not where:
            return CAMPAIGN_TYPES
        if where == ("summary",):
            return SUMMARY_TYPES
        if len(where) == 2 and where[0] == "scenarios":
            return RESULT_TYPES
    return {}


def _retyped(path: Path, data: bytes, rng: random.Random) -> tuple[bytes, str, bool] | None:
    """``data`` with one JSON value replaced by one of another type: (bytes, what, a declared field?)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.splitlines() if path.suffix == ".jsonl" else [text]
    candidates = [i for i, line in enumerate(lines) if line.strip()]
    if not candidates:
        return None
    number = rng.choice(candidates)
    try:
        document = json.loads(lines[number])
    except ValueError:
        return None
    where: tuple = (number,) if path.suffix == ".jsonl" else ()
    node = document
    # Walk down a few levels at random (a scenario entry, the summary, a violation, …).
    trail: list = []
    while isinstance(node, dict | list) and node and rng.random() < (0.7 if not trail else 0.35):
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        if not isinstance(node[key], dict | list) or not node[key]:
            break
        trail.append(key)
        node = node[key]
    if not isinstance(node, dict) or not node:
        return None
    name = rng.choice(list(node))
    schema = _schema_for(path, where + tuple(trail))
    check = schema.get(name, (None, None))[1]
    choices = [v for v in WRONG_VALUES if type(v) is not type(node[name])]
    if check is not None:
        choices = [v for v in choices if not check(v)]
    if not choices:
        return None
    node[name] = rng.choice(choices)
    lines[number] = json.dumps(document, indent=None if path.suffix == ".jsonl" else 2)
    out = "\n".join(lines) + ("\n" if text.endswith("\n") or path.suffix == ".jsonl" else "")
    shown = "/".join(str(k) for k in (*where, *trail, name))
    return out.encode(), f"{shown} := {json.dumps(node[name])}", check is not None


def _file_variants(run: Path, path: Path, rng: random.Random) -> list[Variant]:
    original = path.read_bytes()
    mode = path.stat().st_mode
    reads_report = path.name in REPORT_READS
    reads_resume = path.name in RESUME_READS and path.parent == run and (run / "campaign.json").exists()

    def writer(data: bytes):
        return lambda: path.write_bytes(data)

    def restore() -> None:
        os.chmod(path, mode)
        path.write_bytes(original)

    out: list[Variant] = []

    def add(kind: str, detail: str, damaged: bytes, declared: bool = False) -> None:
        broken = declared or not _still_valid(path, damaged)
        out.append(Variant(run, path, kind, detail, reads_report and broken, reads_resume and broken,
                           writer(damaged), restore))

    size = len(original)
    cuts = {0} | ({rng.randrange(1, size) for _ in range(3)} if size > 1 else set())
    for at in sorted(cuts):
        if path.suffix == ".jsonl" and at and original[at - 1:at] == b"\n":
            at = max(1, at - 1)  # mid-line: a cut at a line's end leaves a valid, shorter file
        add("cut", f"cut to {at} of {size} bytes", original[:at])
    for _ in range(4):
        damaged = bytearray(original or b" ")
        spots = sorted(rng.sample(range(len(damaged)), min(len(damaged), rng.randint(1, 3))))
        for spot in spots:
            damaged[spot] = rng.randrange(0x80, 0x100)
        add("flip", f"bytes {spots} not text", bytes(damaged))
    if path.suffix in (".json", ".jsonl"):
        for _ in range(5):
            retyped = _retyped(path, original, rng)
            if retyped is not None:
                damaged, what, declared = retyped
                add("retype", what, damaged, declared)
    out.append(Variant(run, path, "unpermit", "mode 000", reads_report, reads_resume,
                       lambda: os.chmod(path, 0), restore))
    return out


def _folder_variant(run: Path, folder: Path) -> Variant:
    mode = folder.stat().st_mode
    checked = folder != run and any((folder / name).exists() for name in ("history.jsonl", "verdict.json"))
    return Variant(run, folder, "unpermit", "folder mode 000", checked or folder == run, folder == run,
                   lambda: os.chmod(folder, 0), lambda: os.chmod(folder, mode))


def variants(runs: list[Path], rng: random.Random) -> list[Variant]:
    out: list[Variant] = []
    for run in runs:
        for folder, dirs, files in os.walk(run):
            here = Path(folder)
            out.append(_folder_variant(run, here))
            for name in sorted(files):
                out += _file_variants(run, here / name, rng)
            dirs.sort()
    return out


def _named(text: str, variant: Variant) -> bool:
    return str(variant.path) in text or (variant.path.is_dir() and str(variant.path) + os.sep in text)


def _report(variant: Variant, render: bool) -> str | None:
    """The report's loader on the damaged run: None when it holds, else what went wrong."""
    from eos_harness.report import NoRun, load_run, render_html

    try:
        view = load_run(variant.run)
    except NoRun as exc:
        named = _named(str(exc), variant) or str(variant.run) in str(exc)
        return None if named else f"NoRun names no file of the run: {exc}"
    except Exception:  # noqa: BLE001 - the point of the test
        return "TRACEBACK load_run\n" + traceback.format_exc()
    problems = " ".join(f"{p.file}: {p.what}" for p in view.problems)
    if variant.must_report and not _named(problems, variant):
        return f"not named by the report (problems: {problems[:500] or 'none'})"
    if render:
        try:
            render_html(view)
        except Exception:  # noqa: BLE001
            return "TRACEBACK render_html\n" + traceback.format_exc()
    return None


def _resume(variant: Variant, suite: str) -> str | None:
    from eos_harness.campaign import ResumeError, open_for_resume
    from eos_harness.rundir import release_all

    try:
        resumed = open_for_resume(variant.run, suite)
    except ResumeError as exc:
        return None if _named(str(exc), variant) or str(variant.run) in str(exc) else \
            f"ResumeError names no file of the run: {exc}"
    except Exception:  # noqa: BLE001
        return "TRACEBACK open_for_resume\n" + traceback.format_exc()
    finally:
        release_all()
    if variant.must_resume and not _named(" ".join(resumed.notes), variant):
        return f"not named by the resume (notes: {resumed.notes or 'none'})"
    return None


def _cli(args: list[str], variant: Variant, must: bool, env: dict, allowed_ok: bool) -> str | None:
    done = subprocess.run([EOS, *args], capture_output=True, text=True, env=env, timeout=300,
                          cwd=env["TMPDIR"])
    output = done.stdout + done.stderr
    if "Traceback" in output:
        return f"TRACEBACK eos-harness {' '.join(args)}\n{output[-3000:]}"
    codes = (0, 1, 2, 3) if allowed_ok or not must else (2, 3)
    if done.returncode not in codes:
        return f"eos-harness {' '.join(args)} exited {done.returncode}\n{output[-2000:]}"
    if must and done.returncode in (2, 3) and not _named(" ".join(output.split()), variant) \
            and not _named(output.replace("\n", ""), variant):
        return f"eos-harness {' '.join(args)} (exit {done.returncode}) names no damaged file\n{output[-2000:]}"
    return None


def fuzz(spec: dict) -> dict:
    rng = random.Random(spec["seed"])
    runs = [Path(p) for p in spec["runs"]]
    resumable = {Path(p): suite for p, suite in spec.get("resumable", {}).items()}
    every = variants(runs, rng)
    chosen = every if spec.get("limit") is None or spec["limit"] >= len(every) else rng.sample(every, spec["limit"])
    cli_sample = set(rng.sample(range(len(chosen)), min(len(chosen), spec.get("cli", 0))))
    resume_cli = spec.get("resume_cli", 0)
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-cli-", dir="/tmp"))  # short: the forkserver's socket is in it
    env = {**os.environ, "TMPDIR": str(scratch), "COLUMNS": "300"}
    failures: list[dict] = []
    counts: dict[str, int] = {}
    tracebacks = cli_runs = 0
    started = time.monotonic()
    try:
        for number, variant in enumerate(chosen):
            counts[variant.kind] = counts.get(variant.kind, 0) + 1
            resume_here = (number in cli_sample and variant.run in resumable and resume_cli > 0
                           and (variant.must_resume or variant.kind == "retype"))
            if resume_here:  # a resume runs scenarios and rewrites the directory: keep it as it was
                backup = scratch / "backup"
                shutil.copytree(variant.run, backup, symlinks=True)
            variant.apply()
            try:
                found = [_report(variant, render=number % 25 == 0)]
                if variant.run in resumable:
                    found.append(_resume(variant, resumable[variant.run]))
                    variant.restore()  # the resume may have cut a line away: damage it again for the CLI
                    variant.apply()
                if number in cli_sample:
                    cli_runs += 1
                    found.append(_cli(["report", str(variant.run), "--out", str(scratch / "r.html")], variant,
                                      variant.must_report, env, allowed_ok=False))
                    if resume_here:
                        resume_cli -= 1
                        cli_runs += 1
                        found.append(_cli(["chaos", "--resume", str(variant.run), "--no-report"], variant,
                                          variant.must_resume, env, allowed_ok=True))
            finally:
                variant.restore()
                if resume_here:
                    shutil.rmtree(variant.run)
                    shutil.move(backup, variant.run)
            for problem in filter(None, found):
                tracebacks += problem.startswith("TRACEBACK")
                failures.append({"file": str(variant.path), "kind": variant.kind, "detail": variant.detail,
                                 "problem": problem})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"variants": len(chosen), "of": len(every), "kinds": counts, "cli_runs": cli_runs,
            "tracebacks": tracebacks, "failures": failures, "seconds": round(time.monotonic() - started, 1)}


if __name__ == "__main__":
    print(json.dumps(fuzz(json.loads(Path(sys.argv[1]).read_text()))))
