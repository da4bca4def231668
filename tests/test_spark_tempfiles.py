"""A Spark run through the CLI leaves no file in /tmp, and a kill it never reaches makes it an error.

The driver JVM ignores ``TMPDIR``, so without its own ``java.io.tmpdir`` and ``spark.local.dir``
every run left ``spark-*``, ``blockmgr-*``, ``liblz4*`` and ``artifacts-*`` in /tmp (its JVM is
SIGKILLed at the run's end, so Spark's shutdown hooks never clean them). The command runs with
``TMPDIR`` pointing at a directory made for the test: its temp root goes there and must be gone at
the end, and the driver JVM itself must report its ``java.io.tmpdir`` and ``spark.local.dir`` inside
the run's own temp directory (asked of the JVM, not read from /tmp, which other processes on the
machine share). The run asks for a kill after ``commits/9`` of a
3-batch input: the whole query runs, and the verdict is ``error`` naming the kill (exit 3), never a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_a_spark_run_leaves_nothing_in_tmp_and_a_kill_it_never_reaches_is_an_error_naming_it(cli, tmp_path):
    # A TMPDIR longer than a Unix socket's path allows under it: a Spark run makes no such socket (no store
    # process), so it runs there (the commands that start store processes refuse it: test_user_code_isolation).
    temp = tmp_path / ("t" * 60)
    temp.mkdir()
    out, verdict = tmp_path / "run", tmp_path / "verdict.json"
    done = cli("run", "--suite", "spark", "--pipeline", "count", "--sink", "foreach", "--batches", "3", "--crash-at",
               "commit@9", "--seed", "1", "--out", out, "--json", verdict, "--no-report", timeout=900,
               env={"TMPDIR": str(temp)})
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(verdict.read_text())
    assert result["verdict"] == "error" and result["not_fired"] == ["commit@9"], result
    assert "scheduled fault commit@9 never fired" in " ".join(done.stdout.split())
    assert result["runs"] and result["runs"][0]["exit"] == 0  # the query ran to its end
    assert isinstance(result["started_at"], float)  # wall clock, as the lifecycle results record it
    assert list(temp.iterdir()) == [], "the command's temp root (and the run's temp directory in it) is gone"
    config = json.loads((out / "run-0.config.json").read_text())
    assert f"-Djava.io.tmpdir={config['local_dir']}" in config["java_options"]
    assert Path(config["local_dir"]).parent.parent == temp  # TMPDIR / the command's root / the run's own
    sessions = [json.loads(line) for line in Path(config["report"]).read_text().splitlines()
                if '"session"' in line]
    assert sessions and all(s["java_tmpdir"] == s["local_dir"] == config["local_dir"] for s in sessions), sessions
