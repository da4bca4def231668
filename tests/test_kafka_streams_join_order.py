"""Why the stream-table join's outputs are now and then joined out of timestamp order (README, the join's
applications): Streams 4.4.0 decides whether to wait for an empty input partition from its main consumer's
``currentLag`` (``PartitionGroup.readyToProcess``: no buffered record and a lag of 0 is given up on at once with
``max.task.idle.ms`` 0), and the consumer updates a partition's end offset only when a poll takes that
partition's fetched response (``FetchCollector.collectFetch`` initialises a completed fetch only while the poll
has room under ``max.poll.records``). Shown here on a plain 4.4.0 consumer (``max.poll.records`` 25, read
committed, as the suite's application): one record acknowledged on one partition, then 30 on the other; when
the 30 come first in the fetch (the broker's order, either), a poll returns 25 of them, not the one, and says
the one's partition has a lag of 0. Should Kafka change it, the first half fails and the README's explanation must change with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).parent / "fixtures" / "kafka_streams_app" / "StaleLag.java"
ROUNDS = 5


@pytest.mark.jvm
@pytest.mark.kafka
@pytest.mark.slow  # a broker and two short JVMs
def test_a_poll_cut_at_max_poll_records_leaves_a_fetched_partition_s_lag_at_0(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic
    from eos_harness.cluster import LocalKafka
    from eos_harness.jars import ensure
    from eos_harness.kafka_streams.bundles import streams_bundle

    jars = ":".join(str(p) for p in ensure(streams_bundle("4.4.0")))
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", jars, str(SOURCE)], check=True, capture_output=True,
                   timeout=120)
    with LocalKafka(brokers=1, directory=tmp_path / "kafka", heap="384m") as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        for future in admin.create_topics([NewTopic(f"t{bulk}", 2, 1) for bulk in (0, 1)]).values():
            future.result(30)
        said = {}
        for bulk in (0, 1):
            run = subprocess.run(["java", "-Xmx128m", "-cp", f"{jars}:{classes}", "StaleLag", kafka.bootstrap_servers,
                                  f"t{bulk}", str(bulk), str(ROUNDS)], capture_output=True, text=True, timeout=180)
            assert run.returncode == 0, run.stderr[-2000:]
            said[bulk] = run.stdout
        del admin  # its connections closed before the broker stops
    # Whichever partition comes first in the fetch (the broker's order): with the 30 first, every round a poll of
    # 25 of them leaves the one record (on the broker, acknowledged before them) unreturned, its partition's lag
    # 0, so Streams would process the 25 first; with the one first, it comes with the first poll.
    stale = [bulk for bulk in (0, 1) if f"STALE {ROUNDS} of {ROUNDS}" in said[bulk]]
    assert len(stale) == 1, said
    assert "poll(big 25, one 0, lag(one) 0)" in said[stale[0]]
    other = said[1 - stale[0]]
    assert "STALE 0 of" in other and "poll(big 24, one 1, lag(one) 0)" in other, other
