"""The nightly profile on Docker (``-m docker``, opt-in; ``make test-docker``): ``docker/nightly`` starts a Spark
master and two workers and three Kafka brokers in containers, runs its campaigns, and removes every container it
started. Its Spark campaigns give the verdicts, the table and the exit code of ``--engine local`` run here on the
same seed. Starts Debian's ``dockerd`` when no engine runs (stopped at the end) and builds the images offline
when missing; when Docker cannot work here the test fails with the reason, it never skips. Its usage errors
need no Docker (in ``make test``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from eos_harness.cluster.docker import ensure_dockerd
from eos_harness.cluster.docker.engine import docker_client
from eos_harness.cluster.docker.nightly import NIGHTLY_LABEL

from tests.test_spark_engine import _judged, _table

NIGHTLY = Path(__file__).resolve().parents[1] / "docker" / "nightly"
SEED, SCENARIOS = 5, 4
SPARK_SUITES = ("conformance", "lifecycle")


@pytest.fixture(scope="module")
def engine():
    """The running Docker engine, or Debian's dockerd started (and stopped) here: it outlives the nightly run,
    so that what the run left on it can be seen."""
    with ensure_dockerd():
        client = docker_client()
        try:
            yield client
        finally:
            client.close()


def _container_ids(client) -> set[str]:
    return {c.id for c in client.containers.list(all=True)}


@pytest.mark.docker
def test_a_nightly_run_gives_the_verdicts_of_the_local_engine_and_leaves_no_container(engine, cli, tmp_path):
    before = _container_ids(engine)
    out = tmp_path / "nightly"
    proc = subprocess.Popen([str(NIGHTLY), "--out", str(out), "--suites", ",".join(SPARK_SUITES), "--kafka-suites",
                             "lifecycle", "--scenarios", str(SCENARIOS), "--seed", str(SEED)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _container_ids(engine) == before, "the nightly run left containers behind"
    assert not engine.containers.list(all=True, filters={"label": NIGHTLY_LABEL})
    summary = json.loads((out / "nightly.json").read_text())
    assert summary["master"].startswith("spark://127.0.0.1:")
    assert len(summary["kafka"].split(",")) == 3 and all(a.startswith("127.0.0.1:") for a in summary["kafka"].split(","))
    assert len(summary["containers"]) == 3 + 3 + len(SPARK_SUITES) + 1  # brokers, master + 2 workers, drivers

    for suite in SPARK_SUITES:
        spark = json.loads((out / suite / "chaos.json").read_text())
        log = (out / f"{suite}.log").read_text()
        assert f"engine: spark on {summary['master']}" in log
        local_out = tmp_path / f"local-{suite}"
        # The scenarios' temp directory on a disk, as the containers' /tmp is (the tests' is tmpfs, /dev/shm): on
        # tmpfs a conformance scenario of rocksdb-indexed crashes at store.commit.before_write 6 times, not 10,
        # on the same seed (the same verdict).
        disk = Path(tempfile.mkdtemp(prefix="eos-nightly-local-", dir="/var/tmp"))
        try:
            local = cli("chaos", "--suite", suite, "--scenarios", str(SCENARIOS), "--seed", str(SEED), "--out",
                        local_out, env={"TMPDIR": str(disk)})
        finally:
            shutil.rmtree(disk, ignore_errors=True)
        assert summary["exit_codes"][suite] == local.returncode, log
        assert _table(log) == _table(local.stdout)
        judged_spark, judged_local = _judged(spark), _judged(json.loads((local_out / "chaos.json").read_text()))
        differing = [(result["index"], key, result.get(key), other.get(key))
                     for result, other in zip(judged_spark["scenarios"], judged_local["scenarios"], strict=True)
                     for key in sorted(set(result) | set(other)) if result.get(key) != other.get(key)]
        assert differing == [], differing
        assert judged_spark == judged_local
        assert len(spark["scenarios"]) == SCENARIOS
        # the results are on the host, under the run directory, at the paths they name
        for result in spark["scenarios"]:  # a conformance scenario's store log, a lifecycle scenario's history
            written = Path(result.get("log") or result["history"])
            assert written.is_file() and written.is_relative_to(out / suite), result

    kafka = json.loads((out / "kafka-lifecycle" / "chaos.json").read_text())
    assert len(kafka["scenarios"]) == SCENARIOS
    assert {r["broker"] for r in kafka["scenarios"]} == {f"kafka://{summary['kafka']}"}
    assert all(r["verdict"] in ("pass", "fail") for r in kafka["scenarios"])  # judged, none an error
    # on the Spark cluster too: its executors in the worker containers are the brokers' clients
    assert f"engine: spark on {summary['master']}" in (out / "kafka-lifecycle.log").read_text()
    assert all(Path(r["history"]).is_file() and Path(r["history"]).is_relative_to(out / "kafka-lifecycle")
               for r in kafka["scenarios"])


@pytest.mark.docker
def test_an_interrupted_nightly_run_removes_every_container_it_started(engine, tmp_path):
    before = _container_ids(engine)
    out = tmp_path / "nightly"
    proc = subprocess.Popen([str(NIGHTLY), "--out", str(out), "--suites", "lifecycle", "--kafka-suites", "none",
                             "--scenarios", "200", "--seed", str(SEED)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not (out / "lifecycle" / "campaign.json").exists():  # the campaign has started on the cluster
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.5)
        assert {c.id for c in engine.containers.list(filters={"label": NIGHTLY_LABEL})}  # its containers run
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, output
    assert _container_ids(engine) == before, output


def test_the_nightly_commands_usage_errors_come_before_anything_runs(tmp_path):
    from click.testing import CliRunner
    from eos_harness.cluster.docker.__main__ import main

    full = tmp_path / "full"
    full.mkdir()
    (full / "kept.txt").write_text("a user's file")
    cases = [
        (["--suites", "spark"], "--suites"),
        (["--kafka-suites", "kafka-log"], "--kafka-suites"),
        (["--suites", "none", "--kafka-suites", "none"], "nothing to run"),
        (["--out", str(full)], "not an empty directory"),
        (["--scenarios", "0"], "--scenarios"),
    ]
    for args, said in cases:
        out = [] if "--out" in args else ["--out", str(tmp_path / "new")]
        result = CliRunner().invoke(main, ["nightly", *args, *out])
        assert result.exit_code == 2, (args, result.output)
        assert said in result.output, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "new").exists()
    assert (full / "kept.txt").read_text() == "a user's file"
