"""The ``spark`` engine (``chaos --engine spark [--master URL]``): each scenario of a campaign a Spark task.

One Spark application per campaign (its driver in this process, its JVM's output in ``RUN_DIR/spark.log``).
Each scenario the campaign engine starts (:func:`eos_harness.campaign.run_plan`, which keeps the order, the
budget, ``--until-failure`` and ``--resume`` for every engine) is one Spark job of one task, run in the
campaign's job group: the task runs the scenario in processes of its own that end with it, whatever ends it
(:mod:`eos_harness.engine_host`). Spark runs a task again when its executor is lost (a worker's JVM killed);
the driver takes one outcome per scenario (a second one for a plan index is dropped), unpacks the scenario's
directory into ``RUN_DIR/scenario-NNNNN`` and writes its paths there, so the result is the one the local pool
gives. Stopping the campaign (Ctrl-C, ``--until-failure``) cancels the job group: the tasks are killed, and
with them their scenarios' processes.

On ``local[…]`` or a master on a loopback address, the driver listens on 127.0.0.1 only; the Spark UI is off.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import re
import shlex
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eos_harness.engine import EngineUnavailable
from eos_harness.engine import on_this_machine as _loopback
from eos_harness.engine_host import TRAVELS, HostedScenario, TaskOutcome, run_task

__all__ = ["REGISTER_S", "SPARK_LOG", "ScenarioHostError", "SparkEngine"]

SPARK_LOG = "spark.log"  # in the run directory: the driver JVM's output (and, in local mode, its executors')
REGISTER_S = 90.0  # how long a cluster's executors have to register before the campaign gives up
SETTLE_S = 3.0  # once one executor registered, how long the count must hold still before the campaign starts


class ScenarioHostError(RuntimeError):
    """A scenario's process on the executor ended without a result (the scenario is an ``error``)."""


@dataclass(frozen=True)
class SparkEngine:
    """Spark on ``master`` (``local[*]``, ``local[N]``, ``spark://HOST:PORT``)."""

    master: str
    name: str = "spark"
    parquet: bool = True  # its campaigns' results as Parquet too (RUN_DIR/parquet/results)

    @contextlib.contextmanager
    def start(self, suite, out_dir: Path, log: Path | None, say: Callable[[str], object]) -> Iterator[_SparkRun]:
        from eos_harness.spark.jvm import driver_environment, launcher_options, session_options
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway

        conf = (SparkConf().setMaster(self.master).setAppName(f"eos-harness chaos --suite {suite.name}")
                .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
                .set("spark.pyspark.python", sys.executable).set("spark.pyspark.driver.python", sys.executable)
                .set("spark.scheduler.mode", "FAIR"))  # every scenario's job gets a core as soon as one frees
        # The driver JVM's temp files (it ignores TMPDIR) in the command's temp root, removed at its end; on a local
        # master its executors' too.
        # It starts from the pipeline drivers' class archive when there is one (eos_harness.spark.jvm.session_options).
        conf.set("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={shlex.quote(tempfile.gettempdir())} "
                 f"{session_options().options}".rstrip())
        if self.master.startswith("local"):
            conf.set("spark.local.dir", tempfile.gettempdir())
        loopback = _loopback(self.master)
        if loopback:
            conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
        with open(out_dir / SPARK_LOG, "ab") as spark_log, _environment(
                SPARK_LOCAL_IP="127.0.0.1" if loopback else None, **driver_environment(launcher_options(make=False))):
            gateway = launch_gateway(conf, popen_kwargs={"stdout": spark_log, "stderr": spark_log})
        context = None
        try:
            # The Python of this command runs the tasks (PySpark takes it from the environment, not its conf).
            with _environment(PYSPARK_PYTHON=sys.executable):
                context = SparkContext(conf=conf, gateway=gateway)
            context.setLogLevel("WARN")
            run = _SparkRun(context, suite, out_dir, log, f"eos-harness-{uuid.uuid4().hex[:12]}",
                            here=suite.hook("plan", "needs_this_process", _anywhere))
            run.workers = _cores(context, self.master)
            say(f"engine: spark on {self.master}, {run.workers} core(s) (its log: {out_dir / SPARK_LOG})")
            if not self.master.startswith("local"):
                threading.Thread(target=run.watch, daemon=True, name="spark-executors").start()
            yield run
        finally:
            if context is not None:
                run.stopped.set()
            _stop(context, gateway)


def _anywhere(scenario: Any) -> bool:
    return False


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    """Within the block, these environment variables set (None: left as they are)."""
    saved = {name: os.environ.get(name) for name, value in values.items() if value is not None}
    os.environ.update({name: value for name, value in values.items() if value is not None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cores(context, master: str) -> int:
    """The cores the application has: a local master's at once; a cluster's once its executors registered
    (at least one within :data:`REGISTER_S`, then a count that held for :data:`SETTLE_S`)."""
    if master.startswith("local"):
        return max(1, context.defaultParallelism)
    deadline, last, since = time.monotonic() + REGISTER_S, -1, time.monotonic()
    while True:
        executors = context._jsc.sc().statusTracker().getExecutorInfos()
        count = len(executors) - 1  # the driver is listed too
        if count != last:
            last, since = count, time.monotonic()
        if count > 0 and time.monotonic() - since >= SETTLE_S:
            return max(1, context.defaultParallelism)
        if time.monotonic() > deadline:
            raise EngineUnavailable(f"no executor registered with {master} within {REGISTER_S:.0f} s: are its "
                                    "workers running, with a free core and enough memory for an executor?")
        time.sleep(0.25)


def _stop(context, gateway) -> None:
    """Stop the application and its driver JVM (a later campaign of this process starts a new one)."""
    from pyspark import SparkContext

    if context is not None:
        with contextlib.suppress(Exception):
            context.cancelAllJobs()
        with contextlib.suppress(Exception):
            context.stop()
    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()  # the JVM ends when its stdin closes
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a JVM that does not end is killed
            proc.kill()
            proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None


@dataclass
class _SparkRun:
    context: Any
    suite: Any
    out_dir: Path
    log: Path | None
    group: str
    workers: int | None = None
    delivered: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    lost: str | None = None  # why the application has nowhere left to run (every executor gone)
    stopped: threading.Event = field(default_factory=threading.Event)
    here: Callable[[Any], bool] = lambda scenario: False  # a scenario that runs in this process (see run)

    def watch(self) -> None:
        """While the campaign runs: when the application has had no executor for :data:`REGISTER_S` (every
        worker gone), cancel its scenarios and say so (the campaign stops: exit 3, resumable)."""
        since = None
        while not self.stopped.wait(1.0):
            try:
                count = len(self.context._jsc.sc().statusTracker().getExecutorInfos()) - 1
            except Exception:  # noqa: BLE001 - the application is stopping
                return
            since = None if count > 0 else since or time.monotonic()
            if since is not None and time.monotonic() - since > REGISTER_S:
                self.lost = (f"the Spark application has had no executor for {REGISTER_S:.0f} s (every worker of "
                             "the cluster gone?); resume the campaign once the cluster runs again")
                self.cut_short()
                return

    def run(self, index: int, scenario: Any, directory: Path) -> dict:
        """The scenario as a Spark task; one the suite's plan says ``needs_this_process`` (a fault that kills a
        broker this command started, which only its process holds) here, as the local pool runs it."""
        from eos_harness.faults import points

        if self.here(scenario):
            with open(self.out_dir / SPARK_LOG, "a") as log:
                log.write(f"eos-harness: scenario {index} runs in the driver (its fault kills or stops a broker this "
                          "command started)\n")
            return self.suite.run_one(scenario, directory)
        hosted = HostedScenario(self.suite.name, index, scenario, tuple(sys.path),
                                tuple(p.name for p in points.declared() if points.declared_for_run(p.name)),
                                str(self.log) if self.log is not None else None,
                                tuple((name, os.environ[name]) for name in TRAVELS if name in os.environ))
        if self.lost:
            raise EngineUnavailable(self.lost)
        self.context.setJobGroup(self.group, f"{self.suite.name} scenario {index}", interruptOnCancel=True)
        try:
            outcomes = self.context.parallelize([pickle.dumps(hosted)], 1).map(_task).collect()
        except Exception as exc:  # a task Spark gave up on, a cancelled job: a short reason, not the JVM's stack
            if self.lost:
                raise EngineUnavailable(self.lost) from None
            raise ScenarioHostError(f"Spark could not run the scenario's task: {_first_lines(exc)}; the driver's "
                                    f"log: {self.out_dir / SPARK_LOG}") from None
        with self.lock:  # one outcome per scenario, whatever Spark ran again
            if index in self.delivered:
                raise ScenarioHostError(f"scenario {index} was delivered twice; the second is dropped")
            self.delivered.add(index)
        return self._kept(outcomes[0], directory)

    def _kept(self, outcome: TaskOutcome, directory: Path) -> dict:
        """The outcome as the local pool leaves it: the scenario's files in ``directory``, its processes'
        output appended to the campaign's log (else to ``spark.log``), its paths rewritten to ``directory``."""
        if outcome.attempt:  # Spark ran its task again (its executor lost): said in the driver's log
            with open(self.out_dir / SPARK_LOG, "a") as log:
                log.write(f"eos-harness: scenario {outcome.index} ran again (task attempt {outcome.attempt}); its "
                          "result is this attempt's, once\n")
        if outcome.files:
            directory.mkdir(exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(outcome.files), mode="r:gz") as tar:
                _extract(tar, directory)
            _move_paths_in_files(directory, outcome.directory)
        if outcome.output:
            with open(self.log or self.out_dir / SPARK_LOG, "ab") as log:
                log.write(outcome.output)
        if outcome.raised is not None:
            raise pickle.loads(outcome.raised)
        if outcome.result is None:
            raise ScenarioHostError(f"{outcome.died} (executor {outcome.executor.get('host')}); its output is in "
                                    f"{self.log or self.out_dir / SPARK_LOG}")
        import json

        return _moved(json.loads(outcome.result), outcome.directory, str(directory))

    def cut_short(self) -> None:
        with contextlib.suppress(Exception):
            self.context.cancelJobGroup(self.group)


def _task(payload: bytes) -> TaskOutcome:
    """The Spark task of one scenario (on an executor): :func:`eos_harness.engine_host.run_task`, with its
    attempt number (a task run again after its executor was lost is attempt 1 or more)."""
    from pyspark import TaskContext

    outcome = run_task(payload)
    context = TaskContext.get()
    outcome.attempt = context.attemptNumber() if context is not None else 0
    return outcome


def _first_lines(exc: BaseException) -> str:
    """What a Py4J error says first (the JVM's message, the Python worker's last line), without stacks."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith(("\tat ", "at "))]
    python = [line for line in lines if re.match(r"^\w+(Error|Exception)\b", line)]
    return " ".join(dict.fromkeys(lines[:2] + python[-1:]))[:600]


def _move_paths_in_files(directory: Path, there: str) -> None:
    """In the scenario's history and verdict files, every path under ``there`` (its directory on the executor)
    under ``directory``, as the local pool writes them."""
    old, new = there.encode(), str(directory).encode()
    for path in [*directory.glob("*.jsonl"), *directory.glob("*.json")]:
        with contextlib.suppress(OSError):
            data = path.read_bytes()
            if old in data:
                path.write_bytes(data.replace(old, new))


def _moved(value, there: str, here: str):
    """``value`` with every path under ``there`` (the scenario's directory on the executor) under ``here``."""
    if isinstance(value, str):
        return value.replace(there, here)
    if isinstance(value, list):
        return [_moved(item, there, here) for item in value]
    if isinstance(value, dict):
        return {key: _moved(item, there, here) for key, item in value.items()}
    return value


def _extract(tar: tarfile.TarFile, directory: Path) -> None:
    """Extract a scenario's files into ``directory`` with tarfile's ``data`` filter (nothing outside it, no device,
    no absolute link). Python 3.11.0 to 3.11.3 (Debian bookworm's 3.11.2) have no filters: there the same rule is
    checked here, and a member that breaks it is an error."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(directory, filter="data")
        return
    root = directory.resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        link = ((target.parent / member.linkname).resolve() if member.issym()
                else (root / member.linkname).resolve() if member.islnk() else root)
        if (not (member.isfile() or member.isdir() or member.issym() or member.islnk())
                or not target.is_relative_to(root) or not link.is_relative_to(root)):
            raise tarfile.TarError(f"{member.name}: outside the scenario's directory, or not a file")
    tar.extractall(directory)  # noqa: S202 - every member checked above
