"""Start one pipeline run (``python -m eos_harness.spark.app``) as its own OS process group, wait for it,
and always leave no process behind (the whole group is SIGKILLed on the way out) and no temp file:
the JVM ignores ``TMPDIR``, so the run's driver gets its own temp directory (under the command's temp
root) as ``java.io.tmpdir`` and ``spark.local.dir`` before its JVM starts (Spark's
``spark-*``, ``blockmgr-*``, ``artifacts-*`` and lz4's ``liblz4*`` go there, not to /tmp, and a killed
driver cannot leave them behind), removed when the run ends. The driver starts with the options of
:mod:`eos_harness.spark.jvm`: its JVM's, and in the environment of ``spark-submit`` its launcher JVM's and
RocksDB's loader's."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["RUN_ENV", "PipelineProcess", "processes_of"]

RUN_ENV = "EOS_HARNESS_SPARK_RUN"


def processes_of(root: Path) -> list[int]:
    """Live processes started for runs under ``root`` (the driver, its JVM, Python workers)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            run = p.environ().get(RUN_ENV)
        except (psutil.Error, OSError):
            continue
        if run and Path(run).is_relative_to(root):
            found.append(p.pid)
    return found


def _end_the_rest(run_dir: Path, timeout: float = 10.0) -> None:
    """SIGKILL what is left of the runs under ``run_dir`` and wait until it is gone (at most ``timeout``): PySpark's
    daemon leaves the driver's process group (``os.setpgid(0, 0)`` in ``pyspark/daemon.py``), so the group's kill
    does not reach it nor the Python workers it forks; they would end on their own, a while after the JVM."""
    deadline = time.monotonic() + timeout
    while (left := processes_of(run_dir)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


class PipelineProcess:
    """``with PipelineProcess(config, run_dir, name) as p: p.wait(timeout)``; ``p.pgid`` is the group to kill.
    ``to_the_end``: the run is not meant to be killed, so it may make the class archive
    (:mod:`eos_harness.spark.jvm`; a killed run could not)."""

    def __init__(self, config: dict, directory: Path, name: str, to_the_end: bool = True) -> None:
        from eos_harness.spark.jvm import driver_environment, driver_options, launcher_options

        self.jvm = driver_options(make=to_the_end)
        self.launcher = launcher_options()  # spark-submit's first JVM (it builds the driver's command line)
        self.environment = driver_environment(self.launcher)
        # in the command's temp root (TMPDIR), removed at the run's end (__exit__)
        self.temp = Path(tempfile.mkdtemp(prefix=f"eos-spark-{name}-"))
        java_options = f"{self.jvm.options} -Djava.io.tmpdir={shlex.quote(str(self.temp))}".strip()
        config = {**config, "java_options": java_options, "local_dir": str(self.temp)}
        self.config_path = directory / f"{name}.config.json"
        self.log_path = directory / f"{name}.log"
        self.report_path = Path(config["report"])
        self.config_path.write_text(json.dumps(config, indent=2))
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        # a user's query: its module's folders, for the driver and for the Python workers (its UDFs)
        self.python_path = list(config.get("user", {}).get("python_path", []))

    def __enter__(self) -> PipelineProcess:
        from eos_harness.session import stop_starting

        stop_starting()  # an interrupted command starts no new Spark run
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1",
               # inherited by the JVM and the Python workers: finds whatever a run left behind
               RUN_ENV: str(self.config_path.parent),
               "TMPDIR": str(self.temp),  # the driver's and the Python workers' own temp files
               **self.environment}
        if self.python_path:
            env["PYTHONPATH"] = os.pathsep.join([*self.python_path, *filter(None, [os.environ.get("PYTHONPATH")])])
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env.pop("SPARK_LOCAL_DIRS", None)  # it would win over the run's spark.local.dir
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed in __exit__)
        self._log = log
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "eos_harness.spark.app", str(self.config_path)],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        return self

    @property
    def pgid(self) -> int:
        assert self.proc is not None
        return self.proc.pid  # start_new_session: the child leads its own group

    def wait(self, timeout: float) -> int | None:
        """The exit code (negative: killed by that signal), or None when ``timeout`` ran out."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.kill()  # the JVM shares the group; kill it even if the driver exited
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            _end_the_rest(self.config_path.parent)
        self.jvm.finish(self.proc.returncode if self.proc is not None else None)
        # the launcher had exited (its archive written) before the driver's JVM started, which was up once the run
        # reported its Spark session
        report = self.report_path.read_text(errors="replace") if self.report_path.exists() else ""
        self.launcher.finish(0 if '"event": "session"' in report else None)
        self._log.close()
        shutil.rmtree(self.temp, ignore_errors=True)  # the group is dead: nothing writes there any more

    def reports(self) -> list[dict]:
        if not self.report_path.exists():
            return []
        return [json.loads(line) for line in self.report_path.read_text().splitlines() if line.strip()]

    def causes(self, limit: int = 3) -> str:
        """Spark's root causes from the run's log: lines naming a Spark error class (``[STATE_STORE_…]``),
        else ``Caused by:`` lines, else ``ERROR`` lines; the first ``limit``, without repeats."""
        import re

        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        lines = [line.strip() for line in text.splitlines()]
        error_class = re.compile(r"\[(?!STREAM_FAILED)[A-Z][A-Z_]{5,}(\.[A-Z_]+)?\]")
        for keep in (lambda x: error_class.search(x) and not x.startswith("at "),
                     lambda x: x.startswith("Caused by:"), lambda x: " ERROR " in x):
            found: list[str] = []
            for line in lines:
                if keep(line):
                    short = line[:400]
                    if short not in found:
                        found.append(short)
            if found:
                return "\n".join(found[:limit])
        return ""

    def log_tail(self, lines: int = 25) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        keep = [line for line in text.splitlines() if "Exception" in line or "Error" in line or "Caused by" in line]
        return "\n".join((keep or text.splitlines())[-lines:])
