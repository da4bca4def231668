"""Broker specs as values: every ``--broker`` form parses into a BrokerSpec that knows its runtime
text, its CLI text, its address and client properties; a bad one is refused before anything runs,
with a message naming the accepted forms."""

from __future__ import annotations

import pytest
from eos_harness.broker import connect
from eos_harness.broker.embedded import EmbeddedBroker
from eos_harness.broker.opening import open_broker
from eos_harness.broker.spec import EMBEDDED, BrokerSpec, parse
from eos_harness.suites.lifecycle.plan import kafka_faults, plan
from eos_harness.suites.lifecycle.runner import Scenario, broker_spec


def test_every_form_parses_into_its_parts():
    assert parse("embedded") == EMBEDDED and EMBEDDED.kind == "embedded" and not EMBEDDED.is_kafka
    assert parse("kafka-local") == BrokerSpec("kafka-local", brokers=1)
    assert parse("kafka-local:3").brokers == 3 and parse("kafka-local:3").is_kafka
    assert parse("kafka-quorum") == BrokerSpec("kafka-quorum", brokers=1) and parse("kafka-quorum").is_kafka
    assert parse("kafka-quorum:3").brokers == 3 and parse("kafka-quorum:3").kind == "kafka-quorum"
    remote = parse("kafka://k1:9092,k2:9093?transaction.timeout.ms=5000&client.id=me")
    assert remote.kind == "kafka"
    assert remote.bootstrap_servers == "k1:9092,k2:9093"
    assert remote.client_properties == {"transaction.timeout.ms": "5000", "client.id": "me"}
    assert parse("embedded:/tmp/x.sqlite", internal=True).path == "/tmp/x.sqlite"


@pytest.mark.parametrize("text", [
    "embedded", "kafka-local", "kafka-local:2", "kafka-local:5", "kafka-quorum", "kafka-quorum:3", "kafka-quorum:5",
    "kafka://127.0.0.1:9092",
    "kafka://a:1,b:2", "kafka://127.0.0.1:9092?transaction.timeout.ms=5000&client.id=x",
])
def test_the_cli_text_round_trips(text):
    spec = parse(text)
    assert spec.cli_text == spec.text == str(spec) == text
    assert parse(spec.cli_text) == spec


def test_odd_spellings_read_back_as_the_same_value():
    assert parse("kafka-local:1") == parse("kafka-local") and parse("kafka-local:1").cli_text == "kafka-local"
    assert parse("kafka-quorum:1") == parse("kafka-quorum") and parse("kafka-quorum:1").cli_text == "kafka-quorum"
    assert parse("kafka-quorum:2") != parse("kafka-local:2")
    spaced = parse("kafka://h:1?sasl.jaas.config=a%20b%3Dc")
    assert spaced.client_properties == {"sasl.jaas.config": "a b=c"}
    assert parse(spaced.text) == spaced


@pytest.mark.parametrize(("text", "message"), [
    ("nonsense", "use embedded"),
    ("kafka", "kafka-local:N"),
    ("kafka-local:9", "must be 1 to 5"),
    ("kafka-local:0", "must be 1 to 5"),
    ("kafka-local:x", "kafka-local:3"),
    ("kafka-quorum:0", "after 'kafka-quorum:' must be 1 to 5"),
    ("kafka-quorum:6", "after 'kafka-quorum:' must be 1 to 5"),
    ("kafka-quorum:", "kafka-quorum:3"),
    ("kafka-quorums", "kafka-quorum or kafka-quorum:N"),
    ("embedded:GARBAGE", "takes no file on the command line"),
    ("kafka://", "is not HOST:PORT"),
    ("kafka://127.0.0.1", "is not HOST:PORT"),
    ("kafka://h:99999", "is not HOST:PORT"),
    ("kafka://h:1,", "is not HOST:PORT"),
    ("kafka://h:1?novalue", "key=value"),
])
def test_a_bad_spec_is_refused_with_what_to_write_instead(text, message):
    with pytest.raises(ValueError, match=message) as raised:
        parse(text)
    assert repr(text) in str(raised.value)


def test_embedded_path_is_the_harness_own_form():
    with pytest.raises(ValueError, match="needs a file path"):
        parse("embedded:", internal=True)
    spec = EMBEDDED.at_file("/tmp/run/broker.sqlite")
    assert spec.text == "embedded:/tmp/run/broker.sqlite" and spec.cli_text == "embedded"


def test_with_properties_adds_and_replaces_without_touching_the_original():
    base = parse("kafka://h:1?client.id=me&transaction.timeout.ms=60000")
    timed = base.with_properties({"transaction.timeout.ms": 5000, "linger.ms": 2})
    assert timed.client_properties == {"client.id": "me", "transaction.timeout.ms": "5000", "linger.ms": "2"}
    assert timed.text == "kafka://h:1?client.id=me&transaction.timeout.ms=5000&linger.ms=2"
    assert base.client_properties["transaction.timeout.ms"] == "60000"
    assert parse(timed.text) == timed
    with pytest.raises(ValueError, match="kafka://"):
        EMBEDDED.with_properties({"x": 1})


def test_a_started_kafka_local_runs_at_its_address_and_replays_as_kafka_local():
    started = parse("kafka-local:3").started_at("127.0.0.1:4001,127.0.0.1:4002,127.0.0.1:4003")
    assert started.kind == "kafka" and started.bootstrap_servers == "127.0.0.1:4001,127.0.0.1:4002,127.0.0.1:4003"
    assert started.text == "kafka://127.0.0.1:4001,127.0.0.1:4002,127.0.0.1:4003"
    assert started.cli_text == "kafka-local:3"
    with_timeout = started.with_properties({"transaction.timeout.ms": 5000})
    assert with_timeout.cli_text == "kafka-local:3" and "transaction.timeout.ms=5000" in with_timeout.text
    with pytest.raises(ValueError, match="open it first"):
        _ = parse("kafka-local").bootstrap_servers


def test_a_started_kafka_quorum_runs_at_its_brokers_and_replays_as_kafka_quorum():
    started = parse("kafka-quorum:2").started_at("127.0.0.1:4001,127.0.0.1:4002")
    assert started.kind == "kafka" and started.bootstrap_servers == "127.0.0.1:4001,127.0.0.1:4002"
    assert started.cli_text == "kafka-quorum:2" and parse(started.cli_text) == parse("kafka-quorum:2")
    scenario = Scenario("memory", "counter", 3, broker=started)
    assert "--broker kafka-quorum:2 " in scenario.repro() and "127.0.0.1" not in scenario.repro()
    with pytest.raises(ValueError, match="open it first"):
        _ = parse("kafka-quorum").bootstrap_servers
    with pytest.raises(ValueError, match="open_broker"):
        connect("kafka-quorum")


def test_a_quorum_broker_offers_faults_its_brokers_only(tmp_path):
    """The faults' lookups (node ids, coordinator fallback) never name a controller; the quorum's
    brokers keep the settings kafka-local's faults rely on."""
    from eos_harness.cluster.quorum import BROKER_ID_BASE, suite_quorum

    quorum = suite_quorum(3)
    quorum.nodes = quorum._new_nodes()
    try:
        assert [n.node_id for n in quorum.controller_nodes()] == [1, 2, 3]
        assert quorum.node_ids() == [BROKER_ID_BASE + 1, BROKER_ID_BASE + 2, BROKER_ID_BASE + 3]
        broker = quorum._properties(quorum.node(BROKER_ID_BASE + 1))
        assert "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000\n" in broker  # txn-timeout's sweep
        assert "default.replication.factor=3\n" in broker and "min.insync.replicas=2\n" in broker
        assert "process.roles=controller\n" in quorum._properties(quorum.node(1))
    finally:
        quorum.stop()  # nothing started: removes its directory


def test_a_scenario_carries_one_broker_value(tmp_path):
    started = parse("kafka-local").started_at("127.0.0.1:4001")
    scenario = Scenario("memory", "counter", 3, broker=started)
    assert "--broker kafka-local " in scenario.repro() and "127.0.0.1" not in scenario.repro()
    assert broker_spec(scenario, tmp_path) == started
    on_text = Scenario("memory", "counter", 3, broker="kafka://127.0.0.1:4001")
    assert on_text.broker == parse("kafka://127.0.0.1:4001") and "--broker kafka://127.0.0.1:4001" in on_text.repro()
    embedded = Scenario("memory", "counter", 3)
    assert "--broker" not in embedded.repro()
    assert broker_spec(embedded, tmp_path).text == f"embedded:{tmp_path / 'broker.sqlite'}"
    # Off Kafka there are no Kafka faults; on a Kafka this process did not start only txn-timeout.
    assert kafka_faults(EMBEDDED) == [] and kafka_faults(started) == ["txn-timeout"]
    first = next(plan(7, ["memory"], ["counter"], broker=started, broker_faults=["txn-timeout"]))
    assert first.broker == started


def test_connect_opens_the_runtime_forms_and_explains_the_others(tmp_path):
    with connect(EMBEDDED.at_file(tmp_path / "b.sqlite")) as broker:
        assert isinstance(broker, EmbeddedBroker) and broker.spec == f"embedded:{tmp_path / 'b.sqlite'}"
    with pytest.raises(ValueError, match="open_broker"):
        connect("kafka-local")
    with pytest.raises(ValueError, match="open_broker"):
        connect("embedded")


def test_opening_the_embedded_broker_needs_nothing():
    with open_broker("embedded") as opened:
        assert opened.spec == EMBEDDED and opened.cluster is None and opened.bootstrap_servers is None


def test_opening_a_kafka_address_where_nothing_answers_fails_naming_it():
    from eos_harness.cluster import ClusterError
    from eos_harness.cluster.local import free_port

    port = free_port()
    with pytest.raises(ClusterError, match=f"no Kafka broker answers at 127.0.0.1:{port}.*kafka-local"), \
            open_broker(f"kafka://127.0.0.1:{port}"):
        pass


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--store", "memory", "--broker", "embedded:GARBAGE"], "takes no file on the command line"),
    (["run", "--store", "memory", "--broker", "kafka-local:9"], "must be 1 to 5"),
    (["chaos", "--scenarios", "1", "--broker", "nonsense"], "use embedded"),
    (["chaos", "--scenarios", "1", "--broker", "kafka://nohost"], "is not HOST:PORT"),
    (["kafka-log", "--broker", "nonsense"], "use embedded"),
    (["kafka-log", "--broker", "embedded"], "needs Kafka"),
    (["run", "--suite", "spark", "--pipeline", "count", "--sink", "file", "--broker", "kafka-local:9"],
     "must be 1 to 5"),
    (["chaos", "--suite", "spark", "--broker", "embedded"], "needs Kafka"),
    (["run", "--suite", "metadata", "--broker", "embedded:GARBAGE"], "takes no file on the command line"),
    (["chaos", "--suite", "metadata", "--broker", "kafka-local:3"], "the metadata suite runs on"),
    (["chaos", "--suite", "metadata", "--broker", "kafka-quorum:9"], "after 'kafka-quorum:' must be 1 to 5"),
    (["chaos", "--broker", "kafka-quorum:0"], "must be 1 to 5"),
    (["kafka-log", "--broker", "embedded"], "kafka-quorum"),
])
def test_a_bad_broker_option_is_a_usage_error_before_anything_runs(cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    proc = cli.invoke(*args)  # in this process: a usage error starts nothing
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--broker" in proc.stderr and message in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing ran
