"""A runner that dies without stopping its Kafka (SIGKILL: no atexit) leaves no broker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from eos_harness.cluster.watchdog import marked


@pytest.mark.kafka
def test_the_brokers_of_a_killed_runner_are_killed_by_the_watchdog(tmp_path):
    directory = tmp_path / "kafka"
    script = textwrap.dedent(f"""
        import time
        from eos_harness.cluster import LocalKafka
        with LocalKafka(brokers=1, directory={str(directory)!r}) as kafka:
            print(kafka.bootstrap_servers, flush=True)
            time.sleep(300)
    """)
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=os.getcwd(), start_new_session=True)
    try:
        assert runner.stdout.readline().startswith("127.0.0.1:")
        assert marked(str(directory)), "the broker should be running and marked"
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        deadline = time.monotonic() + 20
        while marked(str(directory)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marked(str(directory)) == [], "a broker outlived its killed runner"
    finally:
        for proc in marked(str(directory)):
            proc.kill()
        if runner.poll() is None:
            runner.kill()


def test_cluster_ids_never_start_with_a_dash_the_storage_tool_would_take_for_an_option():
    from eos_harness.cluster.local import new_cluster_id

    ids = [new_cluster_id() for _ in range(5000)]  # ~1 in 64 raw ids starts with '-'
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
