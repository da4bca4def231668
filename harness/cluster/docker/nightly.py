"""The nightly profile on Docker (``docker/nightly``, ``python -m eos_harness.cluster.docker nightly``): a Spark
standalone master and workers and three Kafka brokers in containers, then ``eos-harness chaos --engine spark
--master spark://127.0.0.1:PORT`` over the suites whose scenarios run on any machine, driven from a runner
container, every result written into a run directory on the host; every container it started is stopped and
removed at the end, also when it fails, is interrupted (Ctrl-C) or gets SIGTERM.

Every container runs on the host's network, every listener on 127.0.0.1. The Spark containers and the driver's
run the runner image (:data:`~eos_harness.cluster.docker.image.RUNNER_IMAGE`), the brokers the Kafka image
(:class:`~eos_harness.cluster.docker.kafka.DockerKafka`); both are built offline when missing. The run
directory is mounted at its own path in the driver's container, so the paths in its results are the host's.

Each container carries the labels :data:`NIGHTLY_LABEL` (the run's id) and ``eos-harness.owner`` (this process):
only those with this run's id are removed, and ``python -m eos_harness.cluster.docker cleanup`` removes those
of a run whose process was SIGKILLed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eos_harness.cluster.docker.containers import OWNER_LABEL, owner
from eos_harness.cluster.docker.engine import DockerError, docker_client, ensure_dockerd
from eos_harness.cluster.docker.image import (
    LOCAL_IMAGE,
    RUNNER_IMAGE,
    build_image,
    build_runner_image,
    image_present,
    runner_current,
)
from eos_harness.cluster.local import VERSION_ENV, free_port

__all__ = ["KAFKA_BROKERS", "KAFKA_SUITES", "NIGHTLY_LABEL", "NIGHTLY_SUITES", "Nightly", "NightlyReport", "Stopped",
           "run_nightly"]

NIGHTLY_LABEL = "eos-harness.nightly"
# The suites `chaos --engine spark` runs (eos_harness.suite.Suite.anywhere), each a campaign of its own.
NIGHTLY_SUITES = ("conformance", "offsets", "windows", "lifecycle", "metadata")
# The suites run on the three brokers, against kafka://127.0.0.1:P1,P2,P3, with `--engine spark` on the same Spark
# cluster: the workers' executors reach the brokers (every container is on the host's network, every listener on
# 127.0.0.1 and the master too: eos_harness.engine.kafka_reached).
KAFKA_SUITES = ("lifecycle",)
KAFKA_BROKERS = 3
START_S = 120.0


@dataclass
class NightlyReport:
    out: Path
    seed: int
    master: str = ""
    bootstrap_servers: str = ""
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    exit_codes: dict[str, int] = field(default_factory=dict)  # campaign -> chaos's exit code
    containers: list[str] = field(default_factory=list)  # the names of every container it started

    @property
    def exit_code(self) -> int:
        """The worst campaign's: 0 when every campaign passed, else the largest exit code."""
        return max(self.exit_codes.values(), default=0)


class Stopped(BaseException):
    """SIGTERM: stop as Ctrl-C does."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    def handler(signum, frame):
        raise Stopped()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave it be
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Nightly:
    """The containers of one nightly run: ``spark_master()``, ``spark_worker()``, ``campaign()`` and ``stop()``
    (removes every container of this run, whatever state it is in)."""

    def __init__(self, client, out: Path, log: Callable[[str], None]) -> None:
        self.client, self.out, self.log = client, out, log
        self.run_id = f"eos-nightly-{uuid.uuid4().hex[:8]}"
        self.labels = {NIGHTLY_LABEL: self.run_id, OWNER_LABEL: owner()}
        self.started: list[str] = []
        self.port = 0

    def _run(self, name: str, command: list[str], **kwargs):
        full = f"{self.run_id}-{name}"
        self.started.append(full)
        env = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
               **kwargs.pop("environment", {})}
        return self.client.containers.run(RUNNER_IMAGE, command, name=full, detach=True, network_mode="host",
                                          labels=self.labels, environment=env, init=True, **kwargs)

    def spark_master(self) -> str:
        self.port = free_port()
        master = self._run("spark-master", ["spark-class", "org.apache.spark.deploy.master.Master", "--host",
                                            "127.0.0.1", "--port", str(self.port), "--webui-port",
                                            str(free_port())])
        self._wait(master, lambda text: "I have been elected leader" in text, "the Spark master")
        return f"spark://127.0.0.1:{self.port}"

    def spark_workers(self, workers: int, cores: int, memory: str) -> None:
        url = f"spark://127.0.0.1:{self.port}"
        for number in range(1, workers + 1):
            self._run(f"spark-worker-{number}", ["spark-class", "org.apache.spark.deploy.worker.Worker", "--host",
                                                 "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                                 "--webui-port", str(free_port()), url])
        master = self.client.containers.get(f"{self.run_id}-spark-master")
        self._wait(master, lambda text: len(re.findall("Registering worker", text)) >= workers,
                   f"{workers} Spark worker(s) to register")

    def _wait(self, container, ready: Callable[[str], bool], what: str) -> None:
        deadline = time.monotonic() + START_S
        while True:
            container.reload()
            text = container.logs().decode(errors="replace")
            if ready(text):
                return
            if container.status not in ("created", "running") or time.monotonic() > deadline:
                raise DockerError(f"{what} did not come up (container {container.name} {container.status}); its log "
                                  f"ends:\n{text[-3000:]}")
            time.sleep(0.3)

    def campaign(self, name: str, args: Sequence[str], echo: Callable[[str], None]) -> int:
        """``eos-harness ARGS`` in a runner container (the run directory mounted at its own path): its exit code,
        its output echoed line by line and kept in ``OUT/NAME.log``."""
        container = self._run(f"driver-{name}", ["eos-harness", *args], working_dir=str(self.out),
                              volumes={str(self.out): {"bind": str(self.out), "mode": "rw"}},
                              environment={k: os.environ[k] for k in ("COLUMNS", VERSION_ENV) if k in os.environ})
        with (self.out / f"{name}.log").open("w") as log:
            buffer = b""
            for chunk in container.logs(stream=True, follow=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace")
                    log.write(text + "\n")
                    echo(text)
            if buffer:
                log.write(buffer.decode(errors="replace") + "\n")
                echo(buffer.decode(errors="replace"))
        return int(container.wait(timeout=60)["StatusCode"])

    def stop(self) -> None:
        """Remove every container of this run (SIGKILL, then removal with its volumes)."""
        for container in self.client.containers.list(all=True, filters={"label": f"{NIGHTLY_LABEL}={self.run_id}"}):
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)


def _suite_args(suite: str, seed: int, scenarios: int, extra: Sequence[str]) -> list[str]:
    return ["chaos", "--suite", suite, "--scenarios", str(scenarios), "--seed", str(seed), *extra]


def run_nightly(out: Path, suites: Sequence[str] = NIGHTLY_SUITES, scenarios: int = 20, seed: int = 1,
                workers: int = 2, cores: int = 1, memory: str = "1g", kafka_suites: Sequence[str] = KAFKA_SUITES,
                rebuild: bool = False,
                extra: Sequence[str] = (), log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
                echo: Callable[[str], None] = print) -> NightlyReport:
    """The nightly run (see the module) into ``out`` (made here; it must not hold anything yet)."""
    from eos_harness.cluster.docker.kafka import DockerKafka

    report = NightlyReport(out, seed)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    with _sigterm_stops(), ensure_dockerd() as started_engine:
        if started_engine is not None:
            report.seconds["dockerd start"] = time.perf_counter() - began
        client = docker_client(timeout=600)
        try:
            # the Kafka image when missing; the runner's when missing or built from another harness than this
            # checkout's (its source_fingerprint label)
            if rebuild or not image_present(client, LOCAL_IMAGE):
                report.seconds[f"build {LOCAL_IMAGE}"] = build_image(log=log).total
            if rebuild or not runner_current(client):
                report.seconds[f"build {RUNNER_IMAGE}"] = build_runner_image(log=log).total
            nightly = Nightly(client, out, log)
            try:
                with contextlib.ExitStack() as stack:
                    phase = time.perf_counter()
                    if kafka_suites:
                        cluster = stack.enter_context(DockerKafka(brokers=KAFKA_BROKERS, image=LOCAL_IMAGE))
                        report.bootstrap_servers = cluster.bootstrap_servers
                        report.containers += [f"{cluster.name}-node-{n.node_id}" for n in cluster.nodes]
                        log(f"{KAFKA_BROKERS} Kafka brokers ({LOCAL_IMAGE}) at {cluster.bootstrap_servers}")
                    report.master = nightly.spark_master()
                    nightly.spark_workers(workers, cores, memory)
                    report.seconds["cluster start"] = time.perf_counter() - phase
                    log(f"Spark master {report.master}, {workers} worker(s) of {cores} core(s) ({RUNNER_IMAGE})")
                    for suite in suites:
                        phase = time.perf_counter()
                        args = [*_suite_args(suite, seed, scenarios, extra), "--engine", "spark", "--master",
                                report.master, "--out", str(out / suite)]
                        report.exit_codes[suite] = nightly.campaign(suite, args, echo)
                        report.seconds[f"campaign {suite}"] = time.perf_counter() - phase
                    for suite in kafka_suites:
                        phase = time.perf_counter()
                        name = f"kafka-{suite}"
                        args = [*_suite_args(suite, seed, scenarios, extra), "--broker",
                                f"kafka://{report.bootstrap_servers}", "--engine", "spark", "--master", report.master,
                                "--out", str(out / name)]
                        report.exit_codes[name] = nightly.campaign(name, args, echo)
                        report.seconds[f"campaign {name}"] = time.perf_counter() - phase
            finally:
                report.containers += nightly.started
                nightly.stop()
        finally:
            client.close()
    report.seconds["total"] = time.perf_counter() - began
    (out / "nightly.json").write_text(json.dumps({
        "seed": report.seed, "suites": list(suites), "kafka_suites": list(kafka_suites), "scenarios": scenarios, "master": report.master,
        "kafka": report.bootstrap_servers or None, "exit_codes": report.exit_codes,
        "seconds": {k: round(v, 1) for k, v in report.seconds.items()}, "containers": report.containers,
        "pid": os.getpid(),
    }, indent=2) + "\n")
    return report
