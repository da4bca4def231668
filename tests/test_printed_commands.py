"""Every command the harness prints for a user to paste (a scenario's replay in every suite, the JSON's
``repro``, a campaign's ``to resume`` line, the command a run directory's marker names) is shell-quoted (``eos_harness.commands.command_line``): pasted into a
shell from a directory whose path holds a space and a non-ASCII letter, it runs and gives the same
verdict."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from eos_harness.campaign_summary import campaign_repro
from eos_harness.suites.conformance.runner import verify_repro
from eos_harness.suites.kafka_metadata.runner import Plan as KafkaMetadataPlan
from eos_harness.suites.offsets.runner import replay_command
from eos_harness.suites.spark.plan import SparkScenario

from tests.conftest import EOS_BIN

MUTANT = "mutant-recover-keeps-uncommitted"  # caught within a few scenarios


def shell(line: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``line`` as a user pastes it into bash (``eos-harness`` on the PATH), in ``cwd``, with ``env`` added."""
    env = {**os.environ, "PATH": f"{Path(EOS_BIN).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "400",
           **(env or {})}
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def printed(prefix: str, output: str) -> str:
    [line] = [line for line in output.splitlines() if line.startswith(prefix)]
    return line[len(prefix):]


def test_printed_commands_paste_into_a_shell_from_paths_with_spaces_and_accents(tmp_path):
    here = tmp_path / "dir with space" / "é"
    here.mkdir(parents=True)
    out = here / "campaign ü"
    stopped = shell(f"eos-harness chaos --stores {MUTANT} --scenarios 20 --seed 1 --until-failure --no-report "
                    f"--out '{out}'", here)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr  # a mutant caught: what the campaign expects
    resume = printed("to resume: ", stopped.stdout)
    assert f"'{out}'" in resume, resume  # the directory's path, quoted
    first = json.loads((out / "chaos.json").read_text())
    [caught] = [r for r in first["scenarios"] if r["verdict"] == "fail"]

    # The failing scenario's replay, pasted: the same verdict (a promise broken, exit 1).
    replayed = shell(caught["repro"], here)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "verdict: fail" in replayed.stdout

    # The resume line, pasted: the campaign goes on in the same directory.
    resumed = shell(resume, here)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(json.loads((out / "chaos.json").read_text())["scenarios"]) > len(first["scenarios"])

    # The run directory's marker names the command that made it, quoted: split as a shell would, its
    # --out word is the directory's own path (the report's "run it again" line is built from it).
    marker = (out / ".eos-harness-run").read_text().splitlines()[0].partition("): ")[2]
    words = shlex.split(marker)
    assert words[:2] == ["eos-harness", "chaos"] and words[words.index("--out") + 1] == str(out), marker


def test_every_suites_replay_pastes_from_a_path_with_spaces_and_accents(tmp_path):
    here = tmp_path / "dir with space" / "é"
    modules = here / "modules ü"
    modules.mkdir(parents=True)
    # A user's store module whose name holds a non-ASCII letter (a word the shell line must quote).
    (modules / "magasin_é.py").write_text(
        "from eos_harness.stores.registry import resolve\n\n\ndef make():\n"
        "    return resolve('mutant-offsets-in-memory')()\n", encoding="utf-8")
    env = {"PYTHONPATH": str(modules)}

    # The offsets suite's replay of one scenario: pasted, the same verdict, and it prints itself again.
    line = replay_command("magasin_é:make", 1, scenario="closing_checkpoint")
    assert "'magasin_é:make'" in line, line
    replayed = shell(line, here, env)
    assert replayed.returncode == 1 and "verdict: fail" in replayed.stdout, replayed.stdout + replayed.stderr
    assert printed("verdict: fail  replay: ", replayed.stdout) == line

    # The metadata suite's replay of a run made in that directory: pasted, the same verdict.
    made = shell("eos-harness run --suite metadata --system controller-skips-abort --seed 1 --no-report "
                 "--crash-at metadata.controller.after_begin --out 'm ü' --json 'm ü.json'", here)
    assert made.returncode == 1, made.stdout + made.stderr
    repro = json.loads((here / "m ü.json").read_text())["repro"]
    again = shell(repro, here)
    assert again.returncode == 1 and "verdict: fail" in again.stdout, again.stdout + again.stderr

    # Every other suite's replay line, split as a shell splits it, gives back the words it was built of.
    assert shlex.split(verify_repro("magasin_é:make", 3, 5, 10, allow=["flush_is_noop"])) == [
        "eos-harness", "verify", "magasin_é:make", "--seed", "3", "--examples", "5", "--steps", "10",
        "--allow", "flush_is_noop"]
    spark = SparkScenario("count", "file", schedule=("random@700",), seed=4)
    assert shlex.split(spark.repro()) == [
        "eos-harness", "run", "--suite", "spark", "--pipeline", "count", "--sink", "file", "--state-provider",
        "rocksdb", "--checkpoint-format", "1", "--crash-at", "random@700", "--seed", "4"]
    assert shlex.split(KafkaMetadataPlan(seed=2, heap="1 g").repro())[-2:] == ["--heap", "1 g"]
    assert shlex.split(campaign_repro({"suite": "lifecycle", "stores": ["magasin_é:make", "memory"], "seed": 5},
                                      ("stores", "seed"))) == [
        "eos-harness", "chaos", "--suite", "lifecycle", "--stores", "magasin_é:make,memory", "--seed", "5"]


def test_a_mutant_whose_own_check_was_allowed_but_others_caught_is_not_said_to_be_uncatchable():
    """``--allow`` of the check naming a mutant's mistake: the mutant is not judged (not exercised); when other
    checks still failed its scenarios, its why says so instead of claiming no scenario could catch it."""
    from eos_harness.campaign_summary import summarize

    def summary(violations):
        result = {"store": "m", "verdict": "fail" if violations else "pass", "violations": violations}
        return summarize([result], ["m"], "store", "stores", lambda s: True,
                         lambda s: "read_committed_isolation", allowed=["read_committed_isolation"])

    quiet = summary([])["stores"]["m"]
    assert quiet["status"] == "not exercised"
    assert quiet["not_exercised_why"].endswith("so no scenario of this campaign could catch it (not judged)")
    caught = summary([{"check": "flush_is_noop"}])
    tally = caught["stores"]["m"]
    assert tally["status"] == "not exercised" and caught["unexpected"] == []
    assert tally["not_exercised_why"] == ("its check read_committed_isolation was allowed (--allow), so it is not "
                                          "judged by its own; it failed 1 scenario(s) on other checks "
                                          "(flush_is_noop×1)")
