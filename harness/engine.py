"""Where a campaign's scenarios run (``chaos --engine``): ``local``, threads of this process each running one
scenario (today's pool), or ``spark``, each scenario a Spark task on any cluster (``--master``:
``local[*]`` by default, ``local[N]``, ``spark://HOST:PORT``; :mod:`eos_harness.spark.engine`).

The plan, the verdicts, the tallies and the exit code do not depend on the engine: an engine only runs
``run_one(index, scenario)`` of the suite contract (:mod:`eos_harness.suite`) and hands back the result
with the scenario's directory (``RUN_DIR/scenario-NNNNN``) as the local pool leaves it. A suite whose
scenarios run on any machine says so (:attr:`eos_harness.suite.Suite.anywhere`); its plan's
``engine_problem(options, master)`` refuses the options whose scenarios do not run on that master's executors (a
broker its executors do not reach), and its ``needs_this_process(scenario)`` names the scenarios the driver runs
itself (a fault on a broker process it started).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["DEFAULT_MASTER", "ENGINES", "LOCAL", "EngineRun", "EngineUnavailable", "LocalEngine", "check_master",
           "embedded_only", "kafka_reached", "on_this_machine"]

ENGINES = ("local", "spark")
DEFAULT_MASTER = "local[*]"
MASTER_ANSWER_S = 3.0  # how long a spark:// master has to accept a connection before anything runs

_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_HOST_PORT = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


class EngineUnavailable(RuntimeError):
    """The engine could not be started or lost every place to run (no executor registered): the campaign
    cannot be run (exit 3), nothing of it was judged."""


class EngineRun(Protocol):
    """An engine started for one campaign: ``workers``, the scenarios it runs at once when ``--workers`` is
    not given; ``run(index, scenario, directory)``, the suite's ``run_one`` of the scenario, its directory
    left as the local pool leaves it; ``cut_short()``, stop every scenario still running (their results are
    dropped)."""

    workers: int | None

    def run(self, index: int, scenario: Any, directory: Path) -> dict: ...

    def cut_short(self) -> None: ...


@dataclass
class _LocalRun:
    run_one: Callable[[Any, Path], dict]
    workers: int | None = None

    def run(self, index: int, scenario: Any, directory: Path) -> dict:
        return self.run_one(scenario, directory)

    def cut_short(self) -> None:  # the campaign engine kills every process this command started
        pass


@dataclass(frozen=True)
class LocalEngine:
    """Threads of this process, each running one scenario (its processes are this command's children)."""

    name: str = "local"
    master: str | None = None
    parquet: bool = False  # its campaigns' results as Parquet too (pyarrow's import costs seconds)

    @contextlib.contextmanager
    def start(self, suite, out_dir: Path, log: Path | None, say: Callable[[str], object]) -> Iterator[EngineRun]:
        yield _LocalRun(suite.run_one)


LOCAL = LocalEngine()


def check_master(master: str) -> str:
    """``--master``, checked before anything runs: ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (F
    attempts of a task), or ``spark://HOST:PORT[,HOST:PORT…]`` (a standalone master, which must accept a
    connection within :data:`MASTER_ANSWER_S`). A ValueError (a usage error) says what is allowed."""
    text = master.strip()
    if _LOCAL.fullmatch(text):
        return text
    if text.startswith("spark://"):
        hosts = text[len("spark://"):].split(",")
        for host_port in hosts:
            found = _HOST_PORT.fullmatch(host_port)
            if not found or not 0 < int(found.group(2)) < 65536:
                raise ValueError(f"--master {master}: {host_port!r} is not HOST:PORT; a standalone master is "
                                 "spark://HOST:PORT (its port, 7077 by default)")
        problems = [problem for problem in map(_answers, hosts) if problem]
        if len(problems) == len(hosts):
            raise ValueError(f"--master {master}: no master answers ({'; '.join(problems)}); start it "
                             "(spark-class org.apache.spark.deploy.master.Master) or give the URL it printed")
        return text
    raise ValueError(f"--master {master}: not a Spark master this engine runs on; give local[*] (every core of "
                     "this machine, the default), local[N], or spark://HOST:PORT (a standalone cluster)")


def _answers(host_port: str) -> str | None:
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=MASTER_ANSWER_S):
            return None
    except OSError as exc:
        return f"{host_port}: {exc.strerror or exc}"


def embedded_only(suite: str, broker: str | None) -> str | None:
    """A plan's ``engine_problem`` for a suite of the broker port: why its scenarios on ``broker`` (``--broker``)
    cannot run elsewhere, or None on the embedded broker, where each scenario has its own log (a SQLite file in
    its directory). A Kafka cluster this command starts listens on this machine only."""
    from eos_harness.broker.spec import EMBEDDED, parse

    broker = broker or EMBEDDED
    if parse(broker, internal=True).kind == "embedded":
        return None
    return (f"the {suite} suite runs on Spark on the embedded broker only (--broker {broker} is a Kafka cluster "
            "started or reached from this machine); drop --broker, or drop --engine spark")


def on_this_machine(master: str) -> bool:
    """Whether every executor of ``master`` runs on this machine: ``local[…]``, or a standalone master whose every
    host is a loopback address (its workers then reach what listens on 127.0.0.1 here)."""
    if master.startswith("local"):
        return True
    return all(_loopback_host(host_port.rpartition(":")[0].strip("[]"), every=True)
               for host_port in master[len("spark://"):].split(","))


def kafka_reached(suite: str, broker: str | None, master: str) -> str | None:
    """A plan's ``engine_problem`` for a suite whose scenarios are Kafka clients (a task on an executor reaches the
    broker): why the executors of ``master`` cannot reach ``broker``, or None. A broker this command starts
    (``kafka-local``, ``kafka-quorum``) or one on a loopback address listens on this machine only: its scenarios run
    on Spark when every executor runs here too (``local[…]``, or a master on 127.0.0.1)."""
    from eos_harness.broker.spec import EMBEDDED, STARTED_HERE, parse

    spec = parse(broker or EMBEDDED, internal=True)
    if spec.kind == "embedded" or on_this_machine(master):
        return None
    hosts = [server.rpartition(":")[0].strip("[]") for server in spec.servers]
    if spec.kind not in STARTED_HERE and not any(_loopback_host(host) for host in hosts):
        return None
    return (f"the {suite} suite's scenarios on --broker {spec.cli_text} are clients of a broker listening on this "
            f"machine only, and the executors of --master {master} run elsewhere; give --broker "
            "kafka://HOST:PORT (a cluster the workers reach), or a master on this machine (local[*], spark://127.0.0.1:PORT)")


def _loopback_host(host: str, every: bool = False) -> bool:
    """Whether ``host`` resolves to a loopback address (``every``: to loopback addresses only); False when it
    does not resolve."""
    try:
        loopback = [ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None)]
    except (OSError, ValueError):
        return False
    return all(loopback) if every else any(loopback)
