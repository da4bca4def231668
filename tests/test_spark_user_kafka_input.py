"""A Kafka topic as a user's query's input (``--input kafka://HOST:PORT/TOPIC``): read by Spark's Kafka connector,
``maxOffsetsPerTrigger`` offsets a micro-batch, the crash-free run kept by the topic's content. On the session's
broker (``eos_kafka_cluster``, 127.0.0.1), topics written transactionally (commit markers, and one aborted
transaction whose records no run may read), the queries run through the CLI as a user runs them."""

from __future__ import annotations

import base64
import json
import shlex
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from eos_harness.suites.spark.kafka_input import (
    KafkaRecord,
    TopicSnapshot,
    default_limit,
    micro_batches,
    parse_input,
    snapshot,
)

FIXTURES = Path(__file__).parent / "fixtures"


def events(n: int) -> list[dict]:
    """Batch ``n``'s events ``(id, key, ts)`` as tests/test_spark_user_pipelines.py writes them to files: an id twice
    in its batch, the last id of the batch before delivered again."""
    rows = [{"id": n * 6 + i, "key": "abc"[i % 3], "ts": 1_000_000 + n * 10 + i} for i in range(6)]
    rows.append(dict(rows[0]))
    if n:
        rows.append({"id": n * 6 - 1, "key": "c", "ts": 1_000_000 + (n - 1) * 10 + 5})
    return rows


def produce(bootstrap: str, topic: str, transactions: list[list[dict]], aborted_after: int | None = None) -> None:
    """Each list of events in a transaction of its own (a commit marker after each), and one aborted transaction
    of three records after transaction ``aborted_after``."""
    from eos_harness.broker import kafka_client

    producer = kafka_client.producer(bootstrap, **{"transactional.id": f"eos-test-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for n, rows in enumerate(transactions):
        producer.begin_transaction()
        for row in rows:
            producer.produce(topic, key=row["key"].encode(), value=json.dumps(row).encode(), partition=0)
        producer.commit_transaction(30)
        if n == aborted_after:
            producer.begin_transaction()
            for i in range(3):
                producer.produce(topic, key=b"x", value=json.dumps({"id": -1 - i, "key": "x", "ts": 0}).encode(),
                                 partition=0)
            producer.flush(30)
            producer.abort_transaction(30)


def new_topic(bootstrap: str, name: str, transactions: list[list[dict]] | None = None, **kw) -> str:
    from eos_harness.broker import kafka_client

    topic = f"{name}-{uuid.uuid4().hex[:6]}"
    kafka_client.create_topics(kafka_client.admin_client(bootstrap), {topic: 1})
    if transactions:
        produce(bootstrap, topic, transactions, **kw)
    return topic


@pytest.fixture(scope="module")
def events_topic(eos_kafka_cluster) -> str:
    """kafka://…/TOPIC: 3 committed transactions of 7, 8 and 8 events, an aborted one after the second."""
    bootstrap = eos_kafka_cluster.bootstrap_servers
    return f"kafka://{bootstrap}/{new_topic(bootstrap, 'user-events', [events(n) for n in range(3)], aborted_after=1)}"


# -- without a broker ------------------------------------------------------------------------------------------


def test_a_kafka_input_url_names_a_broker_and_a_topic():
    assert parse_input("kafka://127.0.0.1:9092,h2:9093/my.events_1-x").bootstrap == "127.0.0.1:9092,h2:9093"
    for bad, says in {"kafka://127.0.0.1/t": "is not HOST:PORT", "kafka://h:1": "names no topic",
                      "kafka://h:1/": "names no topic", "kafka://h:1/a b": "not a Kafka topic name",
                      "kafka://h:1/t?acks=all": "takes no properties", "kafka://h:99999/t": "is not HOST:PORT"}.items():
        with pytest.raises(ValueError, match=says):
            parse_input(bad)


def test_the_micro_batches_are_cut_as_sparks_kafka_source_cuts_them():
    one = TopicSnapshot(((0, 0, 48),), 40, "d")  # 40 records, 8 markers
    assert default_limit(one) == 10 and [b[0] for b in micro_batches(one, 10)] == [10, 20, 30, 40, 48]
    # over partitions: the limit split by what each has left, floored, at least one offset each; none left: its end
    three = TopicSnapshot(((0, 0, 10), (1, 0, 3), (2, 5, 5)), 13, "d")
    assert micro_batches(three, 4) == [{0: 3, 1: 1, 2: 5}, {0: 6, 1: 2, 2: 5}, {0: 9, 1: 3, 2: 5}, {0: 10, 1: 3, 2: 5}]


def test_a_scenario_over_a_topic_names_it_its_limit_and_its_content():
    """Its replay names the topic and the limit, its cache key is the topic's content and the limit (not where the
    topic is), and --export-repro says why it exports nothing."""
    from dataclasses import replace

    from eos_harness.suites.spark.export import user_query
    from eos_harness.suites.spark.user import UserScenario, reference_key

    topic = TopicSnapshot(((0, 0, 30),), 23, "abc")
    scenario = UserScenario("jobs:build", "kafka://127.0.0.1:9092/events", schedule=("sink@4",), topic=topic,
                            max_offsets=6)
    scenario.validate()
    assert scenario.batch_count() == 5 and scenario.configuration["source"] == "kafka"
    assert "--input kafka://127.0.0.1:9092/events --max-offsets-per-trigger 6" in scenario.repro()
    assert scenario.header()["topic"] == {"offsets": [[0, 0, 30]], "records": 23, "digest": "abc",
                                          "max_offsets_per_trigger": 6}
    assert TopicSnapshot.from_json(scenario.header()["topic"]) == topic  # chaos --export-repro reads it back
    with pytest.raises(ValueError, match="has 5 micro-batches"):
        replace(scenario, schedule=("sink@5",)).validate()
    key = reference_key(scenario, None)
    assert reference_key(replace(scenario, input="kafka://10.0.0.1:9092/events"), None) == key
    assert reference_key(replace(scenario, topic=replace(topic, digest="abd")), None) != key
    assert reference_key(replace(scenario, max_offsets=10), None) != key
    assert "was not read by this command" in user_query(replace(scenario, topic=None))


def _record(partition: int, offset: int, value: bytes | None, key: bytes | None = b"k") -> KafkaRecord:
    return KafkaRecord("events", partition, offset, 1_700_000_000_123 + offset, 0, key, value)


_FAILED = {"verdict": "fail", "schedule": ["sink@1"], "sink": "parquet", "repro": "eos-harness run",
           "crash_windows": [], "violations": [{"check": "restart_liveness", "key": "run 1", "expected": "a restart",
                                                "observed": "java.lang.AssertionError: assertion failed: "
                                                            "CheckpointInfo length: 0"}]}


def _exported_topic(tmp_path: Path, name: str, batches, schema: str | None):
    """A query over a topic of ``batches`` exported; its folder and its script's module (loaded, not run)."""
    import importlib.util

    from eos_harness.suites.spark.export import Query, export_repro

    module = tmp_path / "jobs.py"
    module.write_text("def build(source):\n    return source.writeStream.format('parquet')\n")
    query = Query("jobs:build", "jobs", "build", (), schema, "rocksdb", False, 2, None, module_file=module,
                  topic="kafka://127.0.0.1:9092/events", max_offsets=4, topic_batches=batches)
    folder = export_repro(_FAILED, query, tmp_path / name)
    spec = importlib.util.spec_from_file_location(f"repro_{name}", folder / "repro.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # the script's own code, not run: its main() is behind __name__ == "__main__"
    return folder, script


def test_a_topics_micro_batches_are_exported_as_files_of_sparks_kafka_columns(tmp_path):
    """Without --schema the query got Spark's Kafka columns: each micro-batch the harness counted is a file of
    records (key and value in base64, any bytes, none), which the script maps back to those columns; the README
    and the script say the topic was replaced by files holding the same micro-batches."""
    from eos_harness.suites.spark.kafka_input import split_micro_batches

    records = [_record(0, 0, b'{"id": 0}', key=None), _record(0, 1, b"\xff\x00 not text"), _record(0, 2, b"a\nb"),
               _record(0, 4, None), _record(1, 0, b'{"id": 1}'), _record(1, 1, b"")]
    topic = TopicSnapshot(((0, 0, 5), (1, 0, 2)), 6, "d")  # offset 3 of partition 0: a commit marker
    batches = split_micro_batches(records[::-1], topic, 4)  # 4 offsets a batch: 2 of partition 0 and 1 of 1, then 3+1
    assert [[(r.partition, r.offset) for r in b] for b in batches] == [[(0, 0), (0, 1), (1, 0)],
                                                                       [(0, 2), (0, 4), (1, 1)]]
    folder, script = _exported_topic(tmp_path, "report", batches, None)
    files = sorted((folder / "input").iterdir())
    assert [p.name for p in files] == ["part-00000.json", "part-00001.json"]
    read = [[json.loads(line) for line in p.read_text().splitlines()] for p in files]
    assert read[0][0] == {"key": None, "value": base64.b64encode(b'{"id": 0}').decode(), "topic": "events",
                          "partition": 0, "offset": 0, "timestamp": 1_700_000_000_123, "timestampType": 0}
    back = [(r["partition"], r["offset"], *(None if r[c] is None else base64.b64decode(r[c]) for c in ("key", "value")))
            for f in read for r in f]
    assert back == [(r.partition, r.offset, r.key, r.value) for b in batches for r in b]
    assert back[-2][3] is None and back[-1][3] == b""  # a tombstone stays none, an empty value empty
    assert script.SCHEMA is None and script.TOPIC == "kafka://127.0.0.1:9092/events"
    assert script.RECORD == ("key string, value string, topic string, partition int, offset long, timestamp long, "
                             "timestampType int")
    text = (folder / "repro.py").read_text()
    assert "eos_harness" not in text and 'F.unbase64("value").alias("value")' in text
    assert 'F.timestamp_millis("timestamp").alias("timestamp")' in text
    readme = " ".join((folder / "README.md").read_text().split())
    assert "here the topic is replaced by files holding the same micro-batches (the same records, the same batch " \
           "boundaries)" in readme and "may not reproduce" in readme
    assert "`part-00001.json`: micro-batch 1, 3 records (partition 0 offsets 2..4, partition 1 offset 1)" in readme
    assert "`maxOffsetsPerTrigger` 4" in readme and "`key` and `value` in base64" in readme


def test_with_a_schema_the_exported_files_are_the_values_and_the_script_says_when_it_did_not_reproduce(tmp_path,
                                                                                                   capsys):
    """With --schema the query got the values' columns: the files hold the values, a line each (the script parses
    them with from_json as the harness did); a value that is no line (a line break) keeps the records' files, parsed
    the same way. A restart that ends well: NOT REPRODUCED, exit 0, the topic's replacement said again."""
    values = [[_record(0, 0, b'{"id": 1, "key": "a"}'), _record(0, 1, b'{"id": 2, "key": "b"}')], [],
              [_record(0, 5, b'{"id": 3}')]]
    folder, script = _exported_topic(tmp_path, "values", values, "id long, key string")
    assert [p.read_bytes() for p in sorted((folder / "input").iterdir())] == [
        b'{"id": 1, "key": "a"}\n{"id": 2, "key": "b"}\n', b"", b'{"id": 3}\n']  # an empty batch: an empty file
    text = (folder / "repro.py").read_text()
    assert script.SCHEMA == "id long, key string" and 'format("text")' in text and "RECORD" not in text
    assert "`part-00001.json`: micro-batch 1, 0 records - `part-00002.json`: micro-batch 2, 1 record (partition 0 offset 5)" in " ".join(
        (folder / "README.md").read_text().split())
    broken = [[_record(0, 0, b'{"id": 1,\n "key": "a"}')]]
    folder, script = _exported_topic(tmp_path, "records", broken, "id long, key string")
    assert json.loads((folder / "input" / "part-00000.json").read_text())["value"] == base64.b64encode(
        broken[0][0].value).decode()
    assert script.SCHEMA == "id long, key string" and "F.from_json(F.col(\"value\").cast(\"string\"), SCHEMA)" in \
        (folder / "repro.py").read_text()
    # the restart ended well (the driver's run stood in for: the slow test runs the real one)
    script.WORK, script.KILLS = tmp_path / "work", []
    script.run = lambda number, kill=None: (0, None, "the query ended")
    assert script.main() == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.startswith("The query read the Kafka topic kafka://127.0.0.1:9092/events; here the topic is "
                              "replaced by files"), printed
    assert "NOT REPRODUCED: the restart did not fail with 'assertion failed: CheckpointInfo length: 0'" in printed
    assert printed.endswith("a failure that depends on Spark's Kafka source itself may not reproduce."), printed


# -- on the session's broker -----------------------------------------------------------------------------------


@pytest.mark.kafka
def test_the_topic_is_read_whole_and_its_digest_is_its_content(eos_kafka_cluster, events_topic):
    bootstrap = eos_kafka_cluster.bootstrap_servers
    topic = snapshot(parse_input(events_topic))
    # 23 committed records, 3 commit markers, 3 aborted records and their marker: 30 offsets, 23 read
    assert topic.records == 23 and topic.offsets == ((0, 0, 30),) and topic.span == 30
    assert snapshot(parse_input(events_topic)) == topic  # read again: the same
    same = new_topic(bootstrap, "user-events", [events(n) for n in range(3)], aborted_after=1)
    assert snapshot(parse_input(f"kafka://{bootstrap}/{same}")).digest != topic.digest  # the topic's name is a column
    other = new_topic(bootstrap, "user-events", [events(n) for n in range(3)])
    produce(bootstrap, other, [[{"id": 99, "key": "a", "ts": 0}]])
    assert snapshot(parse_input(f"kafka://{bootstrap}/{other}")).records == 24


@pytest.mark.kafka
@pytest.mark.spark
def test_bad_kafka_input_is_a_usage_error_before_anything_runs(cli, tmp_path, eos_kafka_cluster, events_topic):
    from eos_harness.broker import kafka_client

    bootstrap = eos_kafka_cluster.bootstrap_servers
    empty = new_topic(bootstrap, "user-empty")
    aborted = new_topic(bootstrap, "user-aborted", [[]], aborted_after=0)  # an empty transaction, an aborted one
    missing = f"no-such-topic-{uuid.uuid4().hex[:6]}"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.jsonl").write_text('{"id": 1}\n')
    dedup = ("--pipeline", "spark_user_kafka_dedup:build")
    cases = {
        (*dedup, "--input", "kafka://127.0.0.1/events"): "is not HOST:PORT",
        (*dedup, "--input", "kafka://127.0.0.1:1/events"): "no Kafka broker answers at 127.0.0.1:1",
        (*dedup, "--input", f"kafka://{bootstrap}/{missing}"): f"the topic '{missing}' does not exist",
        (*dedup, "--input", f"kafka://{bootstrap}/{empty}"): "holds no record",
        (*dedup, "--input", f"kafka://{bootstrap}/{aborted}"): "holds no committed record (offsets 0: 0..4: aborted",
        (*dedup, "--input", events_topic, "--crash-at", "sink@5"): "5 micro-batches (0..4) with "
                                                                    "--max-offsets-per-trigger 6",
        (*dedup, "--input", events_topic, "--max-offsets-per-trigger", "0"): "0 is not in the range x>=1",
        (*dedup, "--input", tmp_path / "in", "--max-offsets-per-trigger", "3"): "only with a Kafka topic",
        ("--pipeline", "count", "--sink", "file", "--max-offsets-per-trigger", "3"): "only with your own query",
    }

    def run(args):
        return args, cli("run", "--suite", "spark", *args, "--seed", "1", cwd=tmp_path)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for args, done in pool.map(run, cases):
            assert done.returncode == 2, (args, done.stdout, done.stderr)
            assert cases[args] in " ".join(done.stderr.split()), (args, done.stderr)
            assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "runs").exists()  # nothing ran
    assert missing not in kafka_client.admin_client(bootstrap).list_topics(timeout=10).topics  # nor was it created
    chaos = cli("chaos", "--suite", "spark", *dedup, "--input", f"kafka://{bootstrap}/{empty}", "--seed", "1",
                cwd=tmp_path)
    assert chaos.returncode == 2 and "holds no record" in chaos.stderr, chaos.stderr
    assert not (tmp_path / "runs").exists()


def _run(cli, tmp_path: Path, name: str, *args):
    verdict = tmp_path / f"{name}.json"
    done = cli("run", "--suite", "spark", *args, "--out", tmp_path / name, "--json", verdict, "--no-report",
               cwd=tmp_path)
    return done, json.loads(verdict.read_text()) if verdict.exists() else None


APPENDER = ("--pipeline", "spark_user_jobs.appender:build", "--schema", "id long, key string, ts long",
            "--crash-at", "sink@1", "--seed", "3")


def _caught(done, result: dict, topic: str) -> list[str]:
    """The appending foreachBatch over ``topic``, killed after its sink in batch 1, failed naming the promise and
    the window; its printed replay command's words."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert result["sink"] == "foreachBatch" and result["sink_guarantee"] == "exactly-once"
    assert result["checks"]["exactly_once_output"] == "fail"
    assert result["duplicates"]["windows"] == ["after_sink"]
    # batch 1 is offsets 6..11: a record, the first commit marker, 4 records: its 5 rows appended twice
    assert result["duplicates"]["by_crash"][0]["batch"] == 1 and result["duplicates"]["count"] == 5
    assert "exactly_once_output" in done.stdout and "window after_sink of batch 1" in done.stdout
    printed = " ".join(done.stdout.split("replay: ", 1)[1].split("report:", 1)[0].split())
    assert printed == result["repro"]
    words = shlex.split(result["repro"])
    assert words[words.index("--input") + 1] == topic and words[words.index("--max-offsets-per-trigger") + 1] == "6"
    return words


@pytest.mark.kafka
@pytest.mark.spark
def test_a_query_over_a_topic_passes(cli, tmp_path, events_topic):
    """Spark's own columns deduplicated into Parquet over the topic: passes, its state compared, the micro-batches
    those the harness counted. (The naive appending foreachBatch over the same topic, failing with its window and a
    replay that fails the same way, is the opt-in test below; make test holds the same query, kill and replay over
    files, judged the same way: tests/test_spark_user_pipelines.py.)"""
    done, result = _run(cli, tmp_path, "good", "--pipeline", "spark_user_kafka_dedup:build", "--input", events_topic,
                        "--crash-at", "commit@2", "--seed", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["verdict"] == "pass" and result["configuration"]["source"] == "kafka"
    assert result["topic"]["records"] == 23 and result["topic"]["max_offsets_per_trigger"] == 6
    assert [c["window"] for c in result["crash_windows"]] == ["after_commit"]
    assert "--max-offsets-per-trigger 6" in result["repro"]
    rows = [json.loads(line) for line in Path(result["runs"][-1]["rows"]).read_text().splitlines()]
    # every committed event once (23 records, 5 of them delivered again), none of the aborted ones
    assert len(rows) == 18 and result["checks"]["output_rows_compared"] == 18
    assert {r["partition"] for r in rows} == {0} and all(r["timestamp"] > 1_700_000_000 for r in rows)
    assert not any(json.loads(r["value"])["id"] < 0 for r in rows)
    assert result["checks"]["state_matches_crash_free"] == "pass (batches 0..4)"
    # the micro-batches Spark planned are those the harness counted (offsets 0..30, 6 a batch)
    planned = _planned(Path(result["reference"]["folder"]) / "checkpoint", parse_input(events_topic).topic)
    assert planned == micro_batches(snapshot(parse_input(events_topic)), 6) == [{0: n} for n in (6, 12, 18, 24, 30)]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow  # opt-in with the other long Spark tests (make test-spark-full): see test_a_query_over_a_topic_passes
def test_a_non_idempotent_query_over_a_topic_fails_and_its_printed_replay_reproduces_it(cli, tmp_path, events_topic):
    done, result = _run(cli, tmp_path, "bad", "--input", events_topic, *APPENDER)
    words = _caught(done, result, events_topic)
    again = cli(*words[1:], "--json", tmp_path / "again.json", "--out", tmp_path / "again", "--no-report",
                cwd=tmp_path)
    replayed = json.loads((tmp_path / "again.json").read_text())
    _caught(again, replayed, events_topic)
    assert replayed["topic"] == result["topic"] and replayed["duplicates"] == result["duplicates"]


def _scenario(bootstrap: str, topic: str):
    from eos_harness.suites.spark.user import UserScenario

    return UserScenario("spark_user_kafka_dedup:build", f"kafka://{bootstrap}/{topic}", schedule=("commit@1",),
                        python_path=(str(FIXTURES),)).resolved()


@pytest.mark.kafka
def test_a_topic_written_after_the_command_read_it_is_an_error_verdict_before_spark_runs(tmp_path,
                                                                                        eos_kafka_cluster):
    from eos_harness.suites.spark.user import run_user_scenario

    bootstrap = eos_kafka_cluster.bootstrap_servers
    topic = new_topic(bootstrap, "user-changing", [events(n) for n in range(3)])
    scenario = _scenario(bootstrap, topic)
    produce(bootstrap, topic, [[{"id": 100, "key": "a", "ts": 0}]])
    result = run_user_scenario(scenario, tmp_path / "run")
    assert result["verdict"] == "error" and "changed before this scenario" in result["error"], result
    assert "23 records" in result["error"] and "24 records" in result["error"]
    assert not (tmp_path / "run" / "checkpoint").exists() and not list((tmp_path / "run").glob("reference-*"))


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow  # a crash-free run under a writer: opt-in with the other long Spark tests (make test-spark-full)
def test_a_topic_written_during_the_crash_free_run_is_an_error_verdict_and_that_run_is_not_kept(tmp_path,
                                                                                               eos_kafka_cluster):
    from eos_harness.suites.spark.user import run_user_scenario

    bootstrap = eos_kafka_cluster.bootstrap_servers
    topic = new_topic(bootstrap, "user-changing", [events(n) for n in range(3)])
    scenario = _scenario(bootstrap, topic)
    wrote = threading.Event()

    def write_once_it_runs() -> None:  # a record more once the crash-free run planned its first batch
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not wrote.is_set():
            if any((tmp_path / "run").glob("reference-*/checkpoint/offsets/0")):
                produce(bootstrap, topic, [[{"id": 101, "key": "b", "ts": 0}]])
                wrote.set()
            time.sleep(0.05)

    writer = threading.Thread(target=write_once_it_runs, daemon=True)
    writer.start()
    try:
        result = run_user_scenario(scenario, tmp_path / "run")
    finally:
        wrote.set()
        writer.join()
    assert result["verdict"] == "error", result
    assert "changed during the crash-free run" in result["error"] and "24 records" in result["error"], result
    assert not list((tmp_path / "run").glob("reference-*"))  # not kept for the next scenario


def build_records(source):
    """Spark's Kafka columns of each record, into Parquet (a module-level function: the fixture's ``build``)."""
    return (source.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
            .writeStream.outputMode("append").format("parquet"))


def _planned(checkpoint: Path, topic: str) -> list[dict[int, int]]:
    """The end offsets of each micro-batch Spark planned (``offsets/N``: its third line, the source's offsets)."""
    files = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [{int(k): v for k, v in json.loads(f.read_text().splitlines()[2])[topic].items()} for f in files]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow  # a Spark run over a topic of three partitions: opt-in (make test-spark-full)
def test_over_partitions_spark_plans_the_micro_batches_the_harness_counts(eos_spark_pipeline, eos_kafka_cluster):
    """Partitions of 10, 3 and no records, 4 offsets a micro-batch: Spark splits the limit by what each partition
    has left, as :func:`micro_batches` does, so the harness knows the batches a kill may target; the fixture's
    verify over the topic passes a kill after the sink of the second."""
    from eos_harness.broker import kafka_client

    bootstrap = eos_kafka_cluster.bootstrap_servers
    topic = f"user-parts-{uuid.uuid4().hex[:6]}"
    kafka_client.create_topics(kafka_client.admin_client(bootstrap), {topic: 3})
    producer = kafka_client.producer(bootstrap, **{"enable.idempotence": True})
    for partition, count in ((0, 10), (1, 3)):
        for i in range(count):
            producer.produce(topic, value=json.dumps({"p": partition, "i": i}).encode(), partition=partition)
    assert producer.flush(30) == 0
    url = f"kafka://{bootstrap}/{topic}"
    expected = micro_batches(snapshot(parse_input(url)), 4)
    assert expected == [{0: 3, 1: 1, 2: 0}, {0: 6, 1: 2, 2: 0}, {0: 9, 1: 3, 2: 0}, {0: 10, 1: 3, 2: 0}]
    found = eos_spark_pipeline.verify(build_records, batches=url, windows=("sink",), max_offsets_per_trigger=4)
    result = found.results[0]
    assert result["verdict"] == "pass" and result["checks"]["output_rows_compared"] == 13
    assert _planned(Path(result["reference"]["folder"]) / "checkpoint", topic) == expected


@pytest.mark.kafka
def test_a_stopped_campaign_over_a_topic_written_since_is_not_resumed(cli, tmp_path, eos_kafka_cluster):
    """The campaign keeps the topic's content when it starts (its records' digest and the micro-batch limit): a
    resume after a transaction was added to the topic is a usage error naming the topic, what it held then and
    what it holds now, before anything runs (its finished scenarios were judged on the other micro-batches)."""
    from tests.conftest import interrupt_once_kept

    bootstrap = eos_kafka_cluster.bootstrap_servers
    topic = new_topic(bootstrap, "resumed", [events(0), events(1)])
    url = f"kafka://{bootstrap}/{topic}"
    out = tmp_path / "campaign"
    proc = cli.start("chaos", "--suite", "spark", "--pipeline", "spark_user_kafka_dedup:build", "--input", url,
                     "--max-offsets-per-trigger", "5", "--scenarios", "3", "--seed", "1", "--out", out, "--no-report",
                     cwd=tmp_path)
    output = interrupt_once_kept(proc, out)  # stopped before its first scenario could finish
    assert proc.returncode == 130, output
    kept = json.loads((out / "campaign.json").read_text())["inputs"]["input"]
    assert kept["what"] == f"the input topic {url}" and kept["detail"].startswith("15 records")
    produce(bootstrap, topic, [events(2)])
    done = cli("chaos", "--suite", "spark", "--resume", out, cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the input topic {url} changed since it began (then: 15 records" in said, said
    assert "now: 23 records" in said and "the query's source files" not in said


_SAME_SOURCE = '''
import importlib.util, json, os, shutil, sys
from pathlib import Path
from pyspark.sql import SparkSession
from eos_harness.spark.user_app import kafka_source

exports, bootstrap, topic, limit, jars, temp = json.loads(sys.argv[1])
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").config("spark.jars", jars)
         .config("spark.local.dir", temp).config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={temp}")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
got = []
for n, (export, schema) in enumerate(exports):
    spec = importlib.util.spec_from_file_location(f"repro{n}", Path(export) / "repro.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # its code, not run: main() is behind __name__ == "__main__"
    script.WORK = Path(temp) / f"work{n}"  # input/ copied as the script's main copies it (its order: the files' times)
    (script.WORK / "input").mkdir(parents=True)
    for i, path in enumerate(sorted((Path(export) / "input").iterdir())):
        shutil.copyfile(path, script.WORK / "input" / path.name)
        os.utime(script.WORK / "input" / path.name, (1_700_000_000 + i, 1_700_000_000 + i))
    # what the harness's driver gave build(source) over the topic (eos_harness.spark.user_app), and the script's
    harness = kafka_source(spark, {"kafka": {"bootstrap": bootstrap, "topic": topic, "max_offsets": int(limit)},
                                   "schema": schema})
    sides = {}
    for name, frame in {"kafka": harness, "files": script.source(spark)}.items():
        batches = sides.setdefault(name, {"schema": frame.schema.jsonValue(), "batches": []})["batches"]
        query = (frame.writeStream.foreachBatch(lambda df, i, b=batches: b.append(sorted(map(repr, df.collect()))))
                 .option("checkpointLocation", f"{temp}/checkpoint-{n}-{name}").trigger(availableNow=True).start())
        query.awaitTermination()
    got.append(sides)
spark.stop()
print(json.dumps(got))
'''


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow  # Kafka, Spark and a plain-PySpark venv: opt-in with the other Spark findings (make test-spark-full)
def test_sparks_own_restart_failure_over_a_topic_is_exported_as_a_standalone_repro_that_fails_the_same_way(
        cli, tmp_path, eos_kafka_cluster, events_topic):
    """Checkpoint format 2, the file sink, the driver killed after the sink's metadata of batch 1: the restart fails
    in Spark itself. The export holds the topic's micro-batches as files, the script gives the query Spark's Kafka
    columns from them (the same schema and rows, batch by batch, as Spark's Kafka source gives) and fails the same
    way on plain PySpark, with no broker and nothing of the harness, saying the topic was replaced by files."""
    import subprocess
    import sys

    from eos_harness.suites.spark.kafka_input import kafka_jars

    from tests.test_spark_user_pipelines import _run_exported

    export = tmp_path / "report"
    done = cli("run", "--suite", "spark", "--pipeline", "spark_user_kafka_dedup:build", "--input", events_topic,
               "--checkpoint-format", "2", "--crash-at", "sink@1", "--seed", "9", "--out", tmp_path / "run",
               "--json", tmp_path / "run.json", "--export-repro", export, "--no-report", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"exported: {export}" in " ".join(done.stdout.split()), done.stdout
    assert sorted(p.name for p in export.iterdir()) == ["README.md", "input", "repro.py", "spark_user_kafka_dedup.py"]
    # the 5 micro-batches the harness counted (offsets 0..30, 6 a batch): 23 committed records, none aborted
    files = [[json.loads(line) for line in p.read_text().splitlines()] for p in sorted((export / "input").iterdir())]
    assert [len(f) for f in files] == [6, 5, 4, 3, 5]
    assert [[r["offset"] for r in f] for f in files][1] == [6, 8, 9, 10, 11]  # a commit marker at 7
    assert [json.loads(base64.b64decode(r["value"]))["id"] for r in files[0]] == [0, 1, 2, 3, 4, 5]
    readme = " ".join((export / "README.md").read_text().split())
    assert "CheckpointInfo length: 0" in readme and "replaced by files holding the same micro-batches" in readme
    assert "`part-00001.json`: micro-batch 1, 5 records (partition 0 offsets 6..11)" in readme, readme
    script = (export / "repro.py").read_text()
    assert "eos_harness" not in script and "checkpointFormatVersion': '2'" in script
    ran = _run_exported(tmp_path, export)  # no broker named, no harness importable
    assert "the topic is replaced by files holding the same micro-batches" in ran.stdout, ran.stdout
    assert "run 0: killed right after output/_spark_metadata/1 appeared" in ran.stdout, ran.stdout
    assert "sink/1 yes, commit/1 no" in ran.stdout
    assert "REPRODUCED: assertion failed: CheckpointInfo length: 0" in ran.stdout, ran.stdout + ran.stderr
    # the script's source over the files gives build(source) what the harness's driver gave it over the topic,
    # batch by batch: Spark's Kafka columns, and (the same topic exported with --schema) the parsed values' columns
    from eos_harness.suites.spark.export import export_repro, user_query
    from eos_harness.suites.spark.user import UserScenario

    ddl = "id long, key string, ts long"
    scenario = UserScenario("spark_user_kafka_dedup:build", events_topic, ddl, checkpoint_format=2,
                            schedule=("sink@1",), module_file=str(FIXTURES / "spark_user_kafka_dedup.py")).resolved()
    assert scenario.max_offsets == 6  # the topic's 30 offsets in 5 micro-batches, as the run cut them
    with_schema = export_repro(json.loads((tmp_path / "run.json").read_text()), user_query(scenario),
                               tmp_path / "with-schema")
    assert (with_schema / "input" / "part-00001.json").read_bytes().splitlines()[0] == json.dumps(events(0)[6]).encode()
    url = parse_input(events_topic)
    (tmp_path / "spark-tmp").mkdir()
    same = subprocess.run([sys.executable, "-c", _SAME_SOURCE, json.dumps([
        [[str(export), None], [str(with_schema), ddl]], url.bootstrap, url.topic, "6", ",".join(kafka_jars()),
        str(tmp_path / "spark-tmp")])], capture_output=True, text=True, timeout=600, start_new_session=True)
    assert same.returncode == 0, same.stderr[-3000:]
    columns, values = json.loads(same.stdout.splitlines()[-1])
    assert [f["name"] for f in columns["files"]["schema"]["fields"]] == ["key", "value", "topic", "partition",
                                                                         "offset", "timestamp", "timestampType"]
    assert [f["name"] for f in values["files"]["schema"]["fields"]] == ["id", "key", "ts"]
    for got in (columns, values):
        assert got["files"]["schema"] == got["kafka"]["schema"]
        assert [len(b) for b in got["kafka"]["batches"]] == [6, 5, 4, 3, 5]
        assert got["files"]["batches"] == got["kafka"]["batches"]
