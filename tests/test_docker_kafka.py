"""The Kafka suite on Docker (``-m docker``, opt-in): ``DockerKafka`` through testcontainers with
host networking, everything on 127.0.0.1, on the image built offline here (``docker/``).

The module starts Debian's ``dockerd`` when no Docker engine runs (and stops it at the end, also
when a test fails), builds ``eos-harness/kafka:<KAFKA_VERSION>`` (``python -m eos_harness.cluster.docker
build``: a debootstrapped Debian rootfs with Java 17, cached in ``.cache/docker``, and the pinned
jars), then runs the broker contract and EOS lifecycle scenarios with faults against one container.
When Docker cannot work here the tests fail with the reason and what to do; they never skip.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import psutil
import pytest
from eos_harness.broker import connect
from eos_harness.cluster import cluster_for
from eos_harness.cluster.docker import (
    BUILD_COMMAND,
    KAFKA_VERSION,
    LOCAL_IMAGE,
    DockerError,
    DockerKafka,
    build_image,
    ensure_dockerd,
)
from eos_harness.runtime import P_AFTER_EOS, P_MID_BATCH
from eos_harness.suites.broker.contract import *  # noqa: F403 - the broker contract, on the container
from eos_harness.suites.lifecycle.runner import Scenario, run_scenario
from eos_harness.suites.lifecycle.schedule import Fault, parse_schedule

pytestmark = pytest.mark.docker

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def docker_engine():
    """A Docker engine: the running one, or Debian's dockerd started (and stopped) here."""
    began = time.perf_counter()
    with ensure_dockerd() as started:
        TIMINGS["dockerd start" if started else "engine already running"] = time.perf_counter() - began
        yield started


@pytest.fixture(scope="module")
def kafka_image(docker_engine) -> str:
    started = time.perf_counter()
    report = build_image(LOCAL_IMAGE)
    TIMINGS["image build"] = time.perf_counter() - started
    TIMINGS.update({f"  {phase}": seconds for phase, seconds in report.seconds.items()})
    return report.image


@pytest.fixture(scope="module")
def docker_kafka(kafka_image, pytestconfig):
    started = time.perf_counter()
    with DockerKafka(brokers=1, image=kafka_image) as cluster:
        TIMINGS["cluster start"] = time.perf_counter() - started
        yield cluster
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\ndocker timings: " + ", ".join(f"{k.strip()} {v:.1f} s" for k, v in TIMINGS.items()), flush=True)


@pytest.fixture
def broker(docker_kafka):
    with connect(docker_kafka.spec) as b:
        yield b


def history(result: dict) -> list[dict]:
    return [json.loads(line) for line in Path(result["history"]).read_text().splitlines()]


def test_the_broker_runs_in_a_container_on_the_host_network_bound_to_127_0_0_1_only(docker_kafka):
    assert docker_kafka.bootstrap_servers.startswith("127.0.0.1:")
    assert docker_kafka.spec == f"kafka://{docker_kafka.bootstrap_servers}"
    node = docker_kafka.node(1)
    container = node.wrapped
    container.reload()
    assert container.status == "running"
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    assert container.image.tags == [LOCAL_IMAGE]
    # The JVM is a host process inside the container's cgroup, listening on 127.0.0.1 only.
    pid = docker_kafka.pid(1)
    assert container.id in Path(f"/proc/{pid}/cgroup").read_text()
    listening = {c.laddr for c in psutil.Process(pid).net_connections("inet") if c.status == psutil.CONN_LISTEN}
    assert {addr.port for addr in listening} >= {node.port, node.controller_port}
    assert {addr.ip for addr in listening} == {"127.0.0.1"}, listening
    # The single-broker transaction settings reached server.properties through KAFKA_* variables.
    code, out = container.exec_run(["cat", "/opt/kafka/config/server.properties"])
    assert code == 0
    properties = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
    assert properties["transaction.state.log.replication.factor"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    assert properties["offsets.topic.replication.factor"] == "1"
    assert properties["listeners"] == f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
    # The driver's broker faults find it, as they find a LocalKafka.
    assert cluster_for(docker_kafka.spec) is docker_kafka


@pytest.mark.parametrize("point", [P_MID_BATCH, P_AFTER_EOS])
def test_a_transactional_store_keeps_eos_on_the_container_through_a_crash(docker_kafka, point, tmp_path):
    result = run_scenario(Scenario("rocksdb-indexed", "counter", 3, (Fault(point, 2),), broker=docker_kafka.spec),
                          tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == [point]
    assert result["broker"].startswith("kafka://127.0.0.1:")
    assert result["kafka_version"] == KAFKA_VERSION  # the image's
    events = history(result)
    assert any(e["type"] == "crash" for e in events) and any(e["type"] == "done" for e in events)


def test_the_legacy_store_without_the_wipe_is_caught_on_the_container(docker_kafka, tmp_path):
    result = run_scenario(Scenario("rocksdb-legacy-nowipe", "many-keys", 2, (Fault(P_MID_BATCH, 15),),
                                   broker=docker_kafka.spec), tmp_path)
    assert result["verdict"] == "fail"
    assert "no_uncommitted_survives" in {v["check"] for v in result["violations"]}


def test_the_container_killed_and_restarted_under_a_running_task_keeps_eos(docker_kafka, tmp_path):
    before, container = docker_kafka.pid(1), docker_kafka.node(1).wrapped.id
    result = run_scenario(Scenario("rocksdb-indexed", "counter", 3, parse_schedule("broker-kill@5"),
                                   broker=docker_kafka.spec), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    fault = next(e for e in history(result) if e["type"] == "broker_fault")
    assert "error" not in fault and fault["node"] == 1
    # The same container, a new JVM on the same storage.
    assert docker_kafka.pid(1) not in (None, before)
    assert docker_kafka.node(1).wrapped.id == container


def test_the_container_paused_under_a_running_task_keeps_eos(docker_kafka, tmp_path):
    before = docker_kafka.pid(1)
    result = run_scenario(Scenario("rocksdb-secondary", "counter", 3, parse_schedule("broker-pause@5"),
                                   broker=docker_kafka.spec), tmp_path)
    assert result["verdict"] == "pass", result["violations"]
    assert result["crash_points"] == ["broker-pause"]
    assert docker_kafka.pid(1) == before  # frozen and thawed, not restarted


def test_a_missing_image_is_a_clear_error_naming_the_build_command(docker_engine):
    with pytest.raises(DockerError) as caught, DockerKafka(image="eos-harness/kafka:no-such-tag"):
        pass
    assert "eos-harness/kafka:no-such-tag" in str(caught.value)
    assert BUILD_COMMAND in str(caught.value)


def test_no_engine_is_a_clear_error_naming_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(DockerError, match="no Docker engine answers.*apt-get install docker.io"), DockerKafka():
        pass
