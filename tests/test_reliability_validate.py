"""The harness under bad input: every bad option value is a usage error (exit 2) saying what is
allowed, before anything runs or is written; a campaign judges only the stores that ran; a missing
extra is named with its pip command before anything starts; a corrupt jar in the cache is found by
Maven Central's SHA-1 and fetched again, or named with the command that clears it."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from eos_harness.suite import SUITES
from eos_harness.suite_campaign import summarize

# --- bad values: exit 2, a message saying what is allowed, nothing run or written -----------------

BAD_VALUES = [
    # (arguments, words the message must hold)
    (["run", "--store", "memory", "--crash-at", "task.commit.after_eos@0"], ["task.commit.after_eos@0", "at least 1"]),
    (["run", "--store", "memory", "--crash-at", "kill@0"], ["kill@0", "at least 1"]),
    (["run", "--store", "memory", "--crash-at", "kill@3,store.commit.after_data@0"], ["@0", "at least 1"]),
    (["run", "--store", "memory", "--records", "-5"], ["--records", "-5", "x>=1"]),
    (["run", "--store", "memory", "--commit-interval", "0"], ["--commit-interval", "x>=1"]),
    (["chaos", "--scenarios", "0"], ["--scenarios", "x>=1"]),
    (["chaos", "--minutes", "-1"], ["--minutes", "x>0"]),
    (["chaos", "--minutes", "0"], ["--minutes", "x>0"]),
    (["chaos", "--workers", "0"], ["--workers", "x>=1"]),
    (["chaos", "--stores", "nope"], ["--stores", "unknown store 'nope'", "memory", "rocksdb-legacy-nowipe",
                                     "module:function"]),
    (["chaos", "--stores", ","], ["--stores", "at least one store"]),
    (["chaos", "--stores", "no_such_module_here:make"], ["--stores", "cannot import module"]),
    (["chaos", "--workloads", "counter,bogus"], ["--workloads", "unknown workload 'bogus'", "tombstones"]),
    (["demo", "--minutes", "0"], ["--minutes", "x>0"]),
    (["verify", "memory", "--examples", "0"], ["--examples", "x>=1"]),
    (["verify", "memory", "--steps", "0"], ["--steps", "x>=1"]),
    (["run", "--suite", "spark", "--pipeline", "count", "--sink", "file", "--batches", "2"], ["--batches", "x>=3"]),
    (["chaos", "--suite", "spark", "--scenarios", "0"], ["--scenarios", "x>=1"]),
    (["chaos", "--suite", "spark", "--minutes", "-1"], ["--minutes", "x>0"]),
    (["chaos", "--suite", "spark", "--workers", "0"], ["--workers", "x>=1"]),
    (["run", "--suite", "metadata", "--crash-at", "nope@1"], ["unknown crash point 'nope'", "eos-harness points"]),
    (["verify", "nope"], ["unknown store 'nope'", "module:function"]),
]


@pytest.mark.parametrize("args,words", BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_value_is_a_usage_error_that_says_what_is_allowed(cli, args, words, tmp_path):
    out = tmp_path / "run"
    result = cli.invoke(*args, "--out", str(out)) if args[0] != "verify" else cli.invoke(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Error:" in result.stdout + result.stderr and "Traceback" not in result.stdout + result.stderr
    assert "seed:" not in result.stdout, "nothing ran: no seed to replay"  # the usage error is all it prints
    for word in words:
        assert word in result.stdout + result.stderr, (word, result.stdout + result.stderr)
    assert not out.exists(), "a usage error must not create the run directory"


def test_the_good_values_next_to_the_bad_ones_still_run(cli, tmp_path):
    """The bounds are not off by one: @1, --records 1 and --commit-interval 1 run and pass."""
    result = cli.invoke("run", "--store", "memory", "--crash-at", "kill@1", "--records", "1", "--commit-interval", "1",
                 "--seed", "3", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: pass" in result.stdout + result.stderr


# --- "unexpected" only over the stores that ran ----------------------------------------------------

def _result(store: str, verdict: str) -> dict:
    return {"store": store, "verdict": verdict, "crash_points": [],
            "violations": [{"check": "atomic_commit"}] if verdict == "fail" else []}


def test_a_store_that_got_no_scenario_is_not_run_not_unexpected():
    summary = summarize(SUITES["lifecycle"], [_result("memory", "pass"), _result("mutant-offsets-in-memory", "pass")],
                        ["memory", "mutant-offsets-in-memory", "mutant-split-offsets-write"])
    assert summary["not_run"] == ["mutant-split-offsets-write"]
    assert summary["stores"]["mutant-split-offsets-write"]["status"] == "not run"
    # A mutant that ran and was not caught stays unexpected.
    assert summary["unexpected"] == ["mutant-offsets-in-memory"]


def test_a_short_campaign_exits_0_and_lists_the_stores_it_did_not_reach_as_not_run(cli, tmp_path):
    out = tmp_path / "chaos"
    proc = cli("chaos", "--scenarios", "10", "--seed", "5", "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "chaos.json").read_text())["summary"]
    ran = {s for s, t in summary["stores"].items() if t["scenarios"]}
    assert summary["unexpected"] == []
    assert summary["not_run"] and not set(summary["not_run"]) & ran
    assert "unexpected results" not in proc.stdout
    assert "not run" in proc.stdout and summary["not_run"][0] in proc.stdout


def test_a_store_asked_for_but_not_reached_is_a_warning_not_a_failure(cli, tmp_path):
    result = cli.invoke("chaos", "--stores", "memory,mutant-offsets-in-memory", "--scenarios", "1", "--workers", "1",
                 "--seed", "2", "--out", str(tmp_path / "chaos"))
    campaign = json.loads((tmp_path / "chaos" / "chaos.json").read_text())
    ran = [s for s, t in campaign["summary"]["stores"].items() if t["scenarios"]]
    assert len(ran) == 1 and campaign["summary"]["not_run"] == [s for s in ("memory", "mutant-offsets-in-memory")
                                                                 if s not in ran]
    assert "asked for with --stores" in result.stdout + result.stderr
    assert result.returncode == (1 if campaign["summary"]["unexpected"] else 0), result.stdout + result.stderr


# --- missing extras: named with the pip command, before anything starts ----------------------------

BLOCKER = textwrap.dedent("""
    import sys
    BLOCKED = set(sys.argv[1].split(","))

    class Uninstalled:  # the import system as if these distributions were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Uninstalled())
    sys.argv = ["eos-harness", *sys.argv[2:]]
    from eos_harness.faces.cli import main
    main()
""")

MISSING = [
    ("confluent_kafka", ["run", "--store", "memory", "--broker", "kafka-local"], "--broker kafka-local", "kafka"),
    ("confluent_kafka", ["chaos", "--broker", "kafka-local:3", "--scenarios", "1"], "--broker kafka-local:3", "kafka"),
    ("confluent_kafka", ["chaos", "--broker", "kafka://127.0.0.1:9", "--scenarios", "1"], "--broker kafka://", "kafka"),
    ("confluent_kafka", ["kafka-log"], "kafka-log", "kafka"),
    ("inotify_simple", ["run", "--suite", "spark", "--pipeline", "count", "--sink", "file"], "--suite spark", "spark"),
    ("pyspark", ["chaos", "--suite", "spark", "--scenarios", "1"], "--suite spark", "spark"),
    ("confluent_kafka", ["run", "--suite", "spark", "--pipeline", "count", "--sink", "kafka"], "--sink kafka", "kafka"),
]


@pytest.mark.parametrize("blocked,args,needed_by,extra", MISSING, ids=[" ".join(m[1]) for m in MISSING])
def test_a_missing_extra_is_named_with_its_install_command_before_anything_starts(blocked, args, needed_by, extra,
                                                                                    tmp_path):
    wrapper = tmp_path / "uninstalled.py"
    wrapper.write_text(BLOCKER)
    out = tmp_path / "run"
    env = {**os.environ, "EOS_HARNESS_CACHE": str(tmp_path / "cache")}  # nothing fetched, nothing shared touched
    where = [] if args[0] == "kafka-log" else ["--out", str(out)]
    proc = subprocess.run([sys.executable, str(wrapper), blocked, *args, *where], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert f"{needed_by}" in output and f"needs the {extra} extra" in output, output
    assert f"pip install 'eos-harness[{extra}]'" in output
    assert "Traceback" not in output and "starting a local Kafka" not in output
    assert not out.exists() and not (tmp_path / "cache").exists()


def test_the_all_extra_holds_kafka_spark_and_docker():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert extras["all"] == ["eos-harness[kafka,spark,docker]"]
    assert "'.[all,dev]'" in (Path(__file__).parents[1] / "Makefile").read_text()


# --- a corrupt jar cache -----------------------------------------------------------------------------

TINY = textwrap.dedent("""
    import sys
    from eos_harness.jars import Bundle, JarFetchError, ensure, register

    register(Bundle("tiny", "1", ("org.slf4j:slf4j-reload4j:1.7.36",), exclude_groups=("ch.qos.reload4j",),
                    exclude_artifacts=("slf4j-api",)))
    try:
        print(ensure("tiny")[0])
    except JarFetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
""")
SLF4J_RELOAD4J_SHA1 = "db708f7d959dee1857ac524636e85ecf2e1781c1"  # Maven Central's .sha1 of 1.7.36


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_truncated_jar_is_found_and_fetched_again_or_named_with_the_command_that_clears_it(tmp_path):
    """One small jar (slf4j-reload4j 1.7.36, 10 kB) in a cache of the test's own; Maven Central is reached."""
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "https_proxy", "http_proxy")}
    env["EOS_HARNESS_CACHE"] = str(tmp_path / "cache")

    def fetch(**extra_env):
        return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                              env={**env, **extra_env})

    first = fetch()
    assert first.returncode == 0, first.stderr
    jar = Path(first.stdout.strip())
    folder = jar.parent
    assert jar.is_relative_to(tmp_path / "cache")
    checksums = json.loads((folder / "checksums.json").read_text())
    assert checksums[jar.name]["sha1"] == SLF4J_RELOAD4J_SHA1
    assert checksums[jar.name]["url"].startswith("https://repo1.maven.org/maven2/org/slf4j/slf4j-reload4j/1.7.36/")
    good = jar.read_bytes()

    jar.write_bytes(good[: len(good) // 3])  # truncated
    again = fetch()
    assert again.returncode == 0, again.stderr
    assert "did not match Maven Central's SHA-1; fetched it again" in again.stderr
    assert hashlib.sha1(jar.read_bytes()).hexdigest() == SLF4J_RELOAD4J_SHA1

    jar.write_bytes(good[:100])  # truncated, and Maven Central cannot be reached
    unreachable = f"http://127.0.0.1:{_closed_port()}"
    failed = fetch(https_proxy=unreachable, HTTPS_PROXY=unreachable)
    assert failed.returncode == 1
    assert str(jar) in failed.stderr and "corrupt" in failed.stderr
    assert f"rm -rf {folder} && python -m eos_harness.jars tiny" in failed.stderr
    assert "Traceback" not in failed.stderr
