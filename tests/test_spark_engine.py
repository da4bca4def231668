"""``chaos --engine spark [--master URL]``: each scenario a Spark task, with the plan, the verdicts, the table, the
JSON and the exit code of ``--engine local`` on the same seed, the results as Parquet too, and nothing left
running. One campaign on ``local[2]`` runs in ``make test``; the campaigns on a real standalone cluster (a master
and two workers started here from the installed PySpark, on 127.0.0.1) are ``spark_cluster``: ``make
test-spark-cluster``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import session_processes

SMALL = ("--suite", "conformance", "--stores", "memory,mutant-read-committed-sees-overlay", "--scenarios", "2",
         "--examples", "2", "--steps", "8", "--seed", "11", "--no-report")
LIFECYCLE = ("--suite", "lifecycle", "--stores", "memory,mutant-recover-keeps-uncommitted", "--scenarios", "6",
             "--seed", "3", "--no-report")
_VOLATILE = {"seconds", "started_at", "log", "history", "commit-rate", "commit-latency-avg", "commit-latency-max"}


def _table(stdout: str) -> list[str]:
    """The campaign's tally table as printed (its title and rows)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "chaos campaign, seed" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return lines[start:end + 1]


def _judged(campaign: dict) -> dict:
    """What a campaign decided, without its clock and its run directory's paths."""
    def strip(value):
        if isinstance(value, dict):  # a scenario's own metrics: its task thread's name (a pid) and its rates
            return {k: strip(v) for k, v in value.items()
                    if k not in _VOLATILE and not (k == "metrics" and isinstance(v, list))}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip({k: v for k, v in campaign.items() if k not in ("seconds", "repro")})


def _run(cli, out: Path, *args: str) -> tuple[int, str, dict]:
    """``chaos ARGS --out OUT`` run to its end: its exit code, what it printed, its JSON; and nothing it started
    left running, in its session or outside it (a scenario's host runs in a session of its own)."""
    proc = cli.start("chaos", *args, "--out", out)
    output, _ = cli.finish(proc)
    assert _hosts_of(proc.pid) == [], "a scenario's host outlived its campaign"
    assert session_processes(proc.pid, wait=10) == [], f"eos-harness chaos {' '.join(args)} left processes behind"
    return proc.returncode, output, json.loads((out / "chaos.json").read_text())


def _hosts_of(pid: int, wait_s: float = 15) -> list[str]:
    """The scenario hosts (``python -m eos_harness.engine_host``) of the command ``pid`` still running after
    ``wait_s``: their task directory is under that command's temp root (``eos-harness-PID-…``)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error, TypeError):
                line = " ".join(proc.info["cmdline"] or [])
                if "eos_harness.engine_host" in line and f"eos-harness-{pid}-" in line:
                    left.append(line)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _same_campaign(local: tuple[int, str, dict], spark: tuple[int, str, dict]) -> None:
    assert spark[0] == local[0], spark[1]
    assert _table(spark[1]) == _table(local[1])
    assert _judged(spark[2]) == _judged(local[2])
    indices = [r["index"] for r in spark[2]["scenarios"]]
    assert indices == sorted(set(indices))  # each scenario once


def _parquet_rows(out: Path) -> list[dict]:
    from eos_harness.results_parquet import read_results

    return read_results(out)


@pytest.mark.spark
def test_a_campaign_on_spark_in_local_mode_gives_what_the_local_pool_gives(cli, tmp_path):
    local = _run(cli, tmp_path / "local", *SMALL)
    spark = _run(cli, tmp_path / "spark", *SMALL, "--engine", "spark", "--master", "local[2]")
    assert local[0] == 0, local[1]
    _same_campaign(local, spark)
    assert "engine: spark on local[2], 2 core(s)" in spark[1]
    out = tmp_path / "spark"
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert _parquet_rows(out) == lines  # the same results, as Parquet
    partitions = {p.relative_to(out / "parquet" / "results").parent.as_posix()
                  for p in (out / "parquet" / "results").rglob("*.parquet")}
    assert partitions == {"suite=conformance/subject=memory/verdict=pass",
                          "suite=conformance/subject=mutant-read-committed-sees-overlay/verdict=fail"}
    for result in lines:  # each scenario's directory as the local pool leaves it, its paths there
        assert result["log"] == str(out / f"scenario-{result['index']:05d}" / "store.log")
        assert Path(result["log"]).is_file()
    state = json.loads((out / "campaign.json").read_text())
    assert (state["engine"], state["master"]) == ("spark", "local[2]")


def test_an_engine_that_cannot_run_the_campaign_is_a_usage_error_before_anything_runs(cli, tmp_path):
    out = tmp_path / "run"
    cases = [
        (("--suite", "conformance", "--engine", "spark", "--master", "yarn"), "--master yarn"),
        (("--suite", "conformance", "--engine", "spark", "--master", "spark://127.0.0.1:notaport"), "HOST:PORT"),
        (("--suite", "conformance", "--engine", "spark", "--master", "spark://127.0.0.1:1"), "no master answers"),
        (("--suite", "conformance", "--master", "local[2]"), "add --engine spark"),
        (("--suite", "conformance", "--engine", "dask"), "dask"),
        (("--suite", "kafka-streams", "--engine", "spark"), "run only on this machine"),
        (("--suite", "metadata", "--engine", "spark", "--broker", "kafka-quorum"), "embedded broker only"),
    ]
    # A broker listening on this machine only, and executors elsewhere (said before the master is asked).
    cases += [(("--suite", "lifecycle", "--engine", "spark", "--master", "spark://192.0.2.1:7077", "--broker", broker),
               "listening on this machine only") for broker in ("kafka-local", "kafka://127.0.0.1:9092")]
    cases.append((("--suite", "kafka-log", "--engine", "spark", "--master", "spark://192.0.2.1:7077", "--broker",
                   "kafka-local"), "listening on this machine only"))
    for args, said in cases:
        done = cli.invoke("chaos", *args, "--scenarios", "1", "--out", out)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
        assert not out.exists()


# -- a real standalone cluster ------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.spark_cluster
def test_a_campaign_on_a_standalone_cluster_gives_what_the_local_pool_gives(cli, tmp_path, standalone):
    local = _run(cli, tmp_path / "local", *LIFECYCLE)
    assert local[0] == 0, local[1]
    spark = _run(cli, tmp_path / "spark", *LIFECYCLE, "--engine", "spark", "--master", standalone.url)
    _same_campaign(local, spark)
    assert f"engine: spark on {standalone.url}, 2 core(s)" in spark[1]
    workers = set(re.findall(r"Launching executor \S+ on worker (\S+)", standalone.log("master")))
    assert len(workers) == 2  # an executor on each worker
    out = tmp_path / "spark"
    histories = sorted(out.glob("scenario-*/history.jsonl"))
    assert len(histories) == 6 and not any("eos-task-" in h.read_text() for h in histories)  # paths of the run
    import pyarrow.dataset as ds

    events = ds.dataset(out / "parquet" / "histories", format="parquet", partitioning="hive").to_table()
    assert sorted(events.column("event").to_pylist()) == sorted(line for h in histories
                                                                 for line in h.read_text().splitlines())
    assert set(events.column("suite").to_pylist()) == {"lifecycle"}


@pytest.mark.spark
@pytest.mark.spark_cluster
def test_a_worker_killed_mid_campaign_loses_no_result_and_counts_none_twice(cli, tmp_path, standalone):
    args = (*LIFECYCLE[:-5], "--scenarios", "8", "--seed", "3", "--no-report")
    local = _run(cli, tmp_path / "local", *args)
    out = tmp_path / "spark"
    proc = cli.start("chaos", *args, "--engine", "spark", "--master", standalone.url, "--out", out)
    try:
        victim = _worker_running_a_scenario(standalone, proc)
        os.kill(victim, signal.SIGKILL)  # the worker's JVM; its executor follows it
        output, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _hosts_of(proc.pid) == [] and session_processes(proc.pid, wait=10) == []
    _same_campaign(local, (proc.returncode, output, json.loads((out / "chaos.json").read_text())))
    lines = [json.loads(line)["index"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(lines) == list(range(8))  # none lost, none twice
    log = (out / "spark.log").read_text()
    assert "Lost executor" in log and re.search(r"eos-harness: scenario \d+ ran again \(task attempt 1\)", log), log
    standalone.processes = [p for p in standalone.processes if p.pid != victim]


@pytest.mark.spark
@pytest.mark.spark_cluster
@pytest.mark.kafka
def test_a_lifecycle_campaign_on_kafka_on_a_standalone_cluster_gives_what_the_local_pool_gives(cli, tmp_path,
                                                                                             standalone):
    """On a Kafka broker this command starts (on 127.0.0.1, which the workers here reach), each scenario is a Spark
    task, a Kafka client of that broker; one whose fault kills or stops a broker runs in the driver, which holds the
    cluster. The plan gives each broker fault a scenario early: the eight scenarios hold all four."""
    args = ("--suite", "lifecycle", "--stores", "memory,mutant-recover-keeps-uncommitted", "--broker", "kafka-local",
            "--scenarios", "8", "--seed", "3", "--no-report")
    local = _run(cli, tmp_path / "local", *args)
    spark = _run(cli, tmp_path / "spark", *args, "--engine", "spark", "--master", standalone.url)
    assert local[0] == 0, local[1]  # every promise of memory held, the mutant caught

    def on_kafka(campaign: dict) -> dict:
        """Without what two runs on Kafka never share: the started broker's port, and a changelog's end offset
        (Kafka's transaction markers take offsets, as many as the commits and aborts that timing decided)."""
        def strip(value):
            if isinstance(value, dict):
                return {k: strip(v) for k, v in value.items() if k != "changelog_length"}
            if isinstance(value, list):
                return [strip(v) for v in value]
            return re.sub(r"kafka://127\.0\.0\.1:\d+", "kafka://127.0.0.1:PORT", value) if isinstance(value, str) \
                else value
        return strip(campaign)

    _same_campaign((local[0], local[1], on_kafka(local[2])), (spark[0], spark[1], on_kafka(spark[2])))
    faults = [f.split("@")[0] for r in spark[2]["scenarios"] for f in r["schedule"]]
    assert {"broker-kill", "broker-pause", "coordinator-kill", "txn-timeout"} <= set(faults)
    assert all(r["kafka_version"] for r in spark[2]["scenarios"])
    log = (tmp_path / "spark" / "spark.log").read_text()
    in_driver = re.findall(r"eos-harness: scenario (\d+) runs in the driver", log)
    assert sorted(in_driver) == sorted(str(r["index"]) for r in spark[2]["scenarios"]
                                       if {"broker-kill", "broker-pause", "coordinator-kill"} & {f.split("@")[0] for f in r["schedule"]})
    assert len(in_driver) == 3  # the other five ran on the workers


def _worker_running_a_scenario(cluster, campaign) -> int:
    """The pid of the worker JVM under which a scenario's host runs, once one does."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert campaign.poll() is None, "the campaign ended before a scenario ran on a worker"
        for proc in psutil.process_iter(["cmdline", "environ"]):
            try:
                if "eos_harness.engine_host" not in " ".join(proc.info["cmdline"] or []):
                    continue
                found = re.search(r"/(worker-\d+)", (proc.info["environ"] or {}).get("TMPDIR", ""))
            except (psutil.Error, TypeError):
                continue
            if found and str(cluster.temp) in proc.info["environ"]["TMPDIR"]:
                number = int(found.group(1).split("-")[1])
                return cluster.processes[1 + number].pid
        time.sleep(0.5)
    raise AssertionError("no scenario ran on a worker within 300 s")


def test_a_scenario_whose_task_dies_leaves_no_process_and_no_directory(tmp_path):
    """The Spark task's Python worker SIGKILLed while its scenario runs (a task killed, an executor lost): the
    scenario's host kills everything under it and removes the scenario's directory (no Spark needed)."""
    temp = Path(tempfile.mkdtemp(prefix="eos-h-"))  # short: the scenario's zygote makes a Unix socket under it
    script = ("import pickle\nfrom eos_harness.engine_host import HostedScenario, run_task\n"
              "from eos_harness.suites.store_subjects import StoreRun\n"
              "run_task(pickle.dumps(HostedScenario('conformance', 0, StoreRun('memory', 1, 500, 50, 10.0))))\n")
    worker = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(temp)},
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        under: list[psutil.Process] = []
        while len(under) < 3:  # the host, the scenario's process, and what that started (the store's zygote, …)
            assert worker.poll() is None and time.monotonic() < deadline, "the scenario never started its processes"
            hosts = [p for p in psutil.Process(worker.pid).children() if "eos_harness.engine_host" in " ".join(p.cmdline())]
            under = [*hosts, *(c for h in hosts for c in h.children(recursive=True))]
            time.sleep(0.2)
        assert any(temp.glob("eos-task-00000-*/scenario-00000"))
        worker.kill()
        worker.wait()
        _, alive = psutil.wait_procs(under, timeout=20)
        assert alive == [], f"left running after its task died: {[p.cmdline() for p in alive]}"
        assert not any(temp.glob("eos-task-*")), "the scenario's directory outlived its task"
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize("filters", [True, False], ids=["tarfile-filters", "python-3.11.2-no-filters"])
def test_a_scenarios_files_come_back_whole_and_nothing_outside_its_directory(tmp_path, monkeypatch, filters):
    """On Python 3.11.0-3.11.3 (Debian bookworm's 3.11.2, the nightly runner's) tarfile has no ``filter``: the
    scenario's files still come back, and a member leaving the directory is still refused."""
    import io
    import tarfile

    from eos_harness.spark.engine import _extract

    if not filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def archive(*members: tuple[str, bytes]) -> tarfile.TarFile:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            for name, content in members:
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        data.seek(0)
        return tarfile.open(fileobj=data, mode="r:gz")

    with archive(("./verdict.json", b"{}"), ("./sub/history.jsonl", b"1\n")) as tar:
        _extract(tar, tmp_path / "scenario")
    assert (tmp_path / "scenario" / "sub" / "history.jsonl").read_bytes() == b"1\n"
    with archive(("../escaped", b"x")) as tar, pytest.raises(tarfile.TarError):
        _extract(tar, tmp_path / "other")
    assert not (tmp_path / "escaped").exists()
