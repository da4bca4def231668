"""A Spark standalone cluster on this machine, from the installed PySpark: a master and N workers
(``bin/spark-class org.apache.spark.deploy.master.Master`` and ``…deploy.worker.Worker``), every one on
127.0.0.1, behind one context manager that stops them, also on failure::

    with StandaloneCluster(base, workers=2) as cluster:
        eos-harness chaos --engine spark --master {cluster.url} …

Each JVM runs in a session of its own (``pids``: master first, then the workers, to kill one); ``base``
holds their logs and the workers' directories; ``temp`` (a short path under the temp directory, removed at the
end) is the temp directory of everything they start. Stopping
kills each JVM's process group (a worker's executors and their Python workers are in it) and waits.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

__all__ = ["StandaloneCluster", "StandaloneError", "spark_home"]

START_S = 120.0  # how long the master and its workers have to start and register


class StandaloneError(RuntimeError):
    """The cluster could not be started (its logs say why)."""


def spark_home() -> Path:
    """The installed PySpark's own Spark (its ``bin/spark-class``)."""
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, on 127.0.0.1 (see the module)."""

    def __init__(self, base: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 worker_timeout_s: int = 60) -> None:
        self.base, self.workers, self.cores, self.memory = Path(base), workers, cores, memory
        self.worker_timeout_s = worker_timeout_s
        self.port = 0
        self.processes: list[subprocess.Popen] = []
        # Their temp directory: a short path of its own (the Unix sockets of the scenarios' processes live under
        # it, and a socket's path holds at most 107 bytes), removed at the end.
        self.temp = Path(tempfile.mkdtemp(prefix="eos-spark-"))

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def _env(self, name: str) -> dict[str, str]:
        temp = self.temp / name
        temp.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
                "SPARK_HOME": str(spark_home()), "TMPDIR": str(temp), "SPARK_LOCAL_DIRS": str(temp),
                "SPARK_LOG_DIR": str(self.base / "logs"), "SPARK_WORKER_DIR": str(self.base / "work" / name),
                "SPARK_NO_DAEMONIZE": "1",
                # every JVM of the cluster (the executors a worker starts too) puts its temp files here, not /tmp
                "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={temp}",
                # the master forgets a worker that stopped answering after this long (Spark's default is 60 s)
                "SPARK_MASTER_OPTS": f"-Dspark.worker.timeout={self.worker_timeout_s}"}

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = self.base / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdin=subprocess.DEVNULL,
                                       stdout=out, stderr=subprocess.STDOUT, env=self._env(name),
                                       start_new_session=True)
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        with contextlib.suppress(OSError):
            return (self.base / "logs" / f"{name}.log").read_text(errors="replace")
        return ""

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.port = _free_port()
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(_free_port()))
        self._wait("master", lambda: "Starting Spark master at" in self.log("master")
                   and "I have been elected leader" in self.log("master"))
        for number in range(self.workers):
            self._start(f"worker-{number}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(_free_port()),
                        self.url)
        self._wait("workers", lambda: len(re.findall(r"Registering worker", self.log("master"))) >= self.workers)

    def _wait(self, what: str, ready) -> None:
        deadline = time.monotonic() + START_S
        while not ready():
            dead = [p for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"exited with {dead[0].returncode}" if dead else f"not ready after {START_S:.0f} s"
                raise StandaloneError(f"the Spark standalone {what} {why}; logs under {self.base / 'logs'}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill every JVM of the cluster with all it started (its process group), and wait for them."""
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(Exception):
                process.wait(timeout=30)
        # what a killed executor's Python daemon left (it is in the worker's group, already gone, or reparented)
        for proc in psutil.process_iter(["environ"]):
            with contextlib.suppress(psutil.Error, TypeError):
                if str(self.temp) in (proc.info["environ"] or {}).get("TMPDIR", ""):
                    proc.kill()
        self.processes = []
        shutil.rmtree(self.temp, ignore_errors=True)
