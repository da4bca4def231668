"""The lifecycle checkers on hand-made histories: each check passes the right history and fails
the history that breaks its promise, naming the promise."""

from __future__ import annotations

import random

import pytest
from eos_harness.models.kv import KVModel
from eos_harness.models.lifecycle import LifecycleModel, WindowedState
from eos_harness.models.workloads import WORKLOADS, workload
from eos_harness.suites.lifecycle.checks import check_all

COUNTER = workload("counter")
RECORDS = [(b"a", b"1"), (b"b", b"1"), (b"a", b"1"), (b"c", b"1"), (b"a", b"1"), (b"b", b"1")]
MODEL = LifecycleModel(COUNTER, RECORDS)


def enc(data: dict[bytes, bytes]) -> list[list[str]]:
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in sorted(data.items())]


def history(*events: dict) -> list[dict]:
    out = []
    for i, e in enumerate(events):
        out.append({"seq": i, "instance": e.pop("instance", 1), **e})
    return out


def recover(position: int, contents: dict, replayed: int = 0, wiped: bool = False, instance: int = 1, **kw) -> dict:
    return {"type": "recover", "instance": instance, "input_position": position, "contents": enc(contents),
            "replayed_records": replayed, "wiped": wiped, "changelog_length": 0, "seconds": 0.0,
            "transactional": kw.get("transactional", True), "persistent": True, "manages_offsets": True}


def output(position: int, records: list[tuple[bytes, bytes]]) -> dict:
    return {"type": "output", "instance": 0, "committed_position": position,
            "records": [[k.decode(), v.decode()] for k, v in records]}


def good_run() -> list[dict]:
    """Crash after the EOS commit of 4 records, before the store commit: roll forward 4 writes."""
    return history(
        recover(0, {}),
        {"type": "store_commit_begin", "input_position": 0},
        {"type": "store_commit", "input_position": 0},
        {"type": "commit", "input_position": 4},
        {"type": "crash", "point": "task.commit.after_eos"},
        recover(4, MODEL.state_at(4), replayed=4, instance=2),
        {"type": "store_commit", "input_position": 4, "instance": 2},
        {"type": "commit", "input_position": 6, "instance": 2},
        {"type": "store_commit", "input_position": 6, "instance": 2},
        {"type": "done", "instance": 2},
        recover(6, MODEL.state_at(6), replayed=0, instance=3),
        output(6, MODEL.expected_output(6)),
    )


def checks(events: list[dict]) -> set[str]:
    return {v.check for v in check_all(events, MODEL)}


def test_a_correct_history_passes():
    assert check_all(good_run(), MODEL) == []


def test_uncommitted_write_that_survives_is_caught():
    events = good_run()
    events[5]["contents"] = enc(MODEL.state_at(5))  # record 4 was never committed
    assert "no_uncommitted_survives" in checks(events)


def test_committed_write_not_rolled_forward_is_caught():
    events = good_run()
    events[5]["contents"] = enc(MODEL.state_at(2))
    assert "committed_rolls_forward" in checks(events)


def test_replaying_more_than_the_tail_is_a_wipe():
    events = good_run()
    events[5]["replayed_records"] = 7
    found = check_all(events, MODEL)
    assert [v.check for v in found] == ["no_wipe"]
    assert "4 records" in found[0].expected


def test_duplicate_and_lost_outputs_are_caught():
    events = good_run()
    outputs = MODEL.expected_output(6)
    events[-1] = {**output(6, outputs + outputs[-1:]), "seq": 11}
    found = check_all(events, MODEL)
    assert [v.check for v in found] == ["exactly_once_output"]
    assert "duplicate" in found[0].observed
    events[-1] = {**output(6, outputs[1:]), "seq": 11}
    assert "lost" in check_all(events, MODEL)[0].observed


def test_dirty_read_committed_is_caught_and_own_reads_checked():
    read = {"type": "read", "index": 2, "key": "a", "own": "2", "committed": None, "store_committed_position": 0}
    events = good_run()
    events.insert(3, {"seq": 99, "instance": 1, **read})
    assert check_all(events, MODEL) == []
    events[3] = {**events[3], "committed": "2"}
    assert checks(events) == {"read_committed_isolation"}
    events[3] = {**events[3], "committed": None, "own": "1"}
    assert checks(events) == {"read_your_own_writes"}


def test_crash_during_recovery_then_wrong_state_is_recovery_idempotent():
    events = history(
        recover(0, {}),
        {"type": "commit", "input_position": 4},
        {"type": "crash", "point": "task.commit.after_eos"},
        {"type": "crash", "point": "task.restore.mid_replay", "instance": 2},
        recover(4, MODEL.state_at(2), replayed=4, instance=3),
    )
    assert "recovery_idempotent" in checks(events)


def test_a_task_that_errors_does_not_finish():
    events = history(recover(0, {}), {"type": "error", "error": "Traceback...\nValueError: boom\n"})
    found = check_all(events, MODEL)
    assert found[0].check == "task_finishes" and "boom" in found[0].observed


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_is_deterministic_and_consistent_with_its_changelog(name):
    wl = workload(name)
    records = wl.generate(random.Random(3), 40)
    assert records == wl.generate(random.Random(3), 40)
    model = LifecycleModel(wl, records)
    # Replaying the changelog into an empty store gives the committed state at every position (a
    # windowed workload's changelog into an empty window store: stream time rebuilt, drops again).
    for position in (0, 17, 40):
        if wl.windowed:
            store = WindowedState(model.window_config)
            for key, value in model.changelog(position):
                store.write(key, value)
            assert store.snapshot() == model.state_at(position)
            continue
        kv = KVModel(transactional=False)
        kv.put_all(model.changelog(position))
        assert dict(kv.all()) == model.state_at(position)


def audited(event: dict, offset: int | None, pre_replay: dict) -> dict:
    return {**event, "recovered_offset": offset, "pre_replay_contents": enc(pre_replay)}


def test_data_committed_without_its_offsets_breaks_atomic_commit():
    # Store commit of position 4 wrote the data but the crash came before its offsets: the store
    # says "changelog offset 0" while holding the state of position 4. Replay hides it; the audit must not.
    events = history(
        {"type": "store_commit_begin", "input_position": 0, "changelog_position": 0},
        {"type": "store_commit", "input_position": 0, "changelog_position": 0},
        {"type": "commit", "input_position": 4},
        {"type": "store_commit_begin", "input_position": 4, "changelog_position": 4},
        {"type": "crash", "point": "store.commit.between_data_and_offsets"},
        audited(recover(4, MODEL.state_at(4), replayed=4, instance=2), 0, MODEL.state_at(4)),
    )
    found = [v for v in check_all(events, MODEL) if v.check == "atomic_commit"]
    assert found and found[0].key == "a"
    # The same store holding the state its offset names passes.
    events[-1] = audited(events[-1], 0, {})
    assert "atomic_commit" not in checks(events)
    # A completed commit (data and offset 4 together) passes too.
    events[-1] = audited({**events[-1], "replayed_records": 0}, 4, MODEL.state_at(4))
    assert "atomic_commit" not in checks(events)


def _ended_by(error_event: dict, recovered: dict | None = None) -> list[dict]:
    """A run whose second instance died with ``error_event`` after the first instance's commit of 4
    (the second instance recovered ``recovered``, by default the state committed)."""
    return history(
        recover(0, {}),
        {"type": "store_commit_begin", "input_position": 0},
        {"type": "store_commit", "input_position": 0},
        {"type": "commit", "input_position": 4},
        {"type": "store_commit", "input_position": 4},
        {"type": "crash", "point": "task.commit.after_store"},
        recover(4, MODEL.state_at(4) if recovered is None else recovered, replayed=0, instance=2),
        {"instance": 2, **error_event},
        output(4, MODEL.expected_output(4)),
    )


def test_a_task_the_broker_failed_is_an_error_of_the_environment_not_a_finding_about_the_store():
    from eos_harness.suites.lifecycle.checks import broker_failure
    from eos_harness.suites.lifecycle.plan import plan  # noqa: F401 - the runner's imports, as a run has them
    from eos_harness.suites.lifecycle.runner import Scenario, verdict

    broker = {"type": "error", "error": "Traceback …\nBrokerError: commit_transaction of 'app-0_0' failed: "
              "_TRANSPORT", "broker": "BrokerError: commit_transaction of 'app-0_0' failed: _TRANSPORT"}
    events = _ended_by(broker)
    assert checks(events) == set()  # what the task did before the broker failed it is all right
    reason = broker_failure(events)
    assert reason and "the broker failed instance 2" in reason and "_TRANSPORT" in reason
    result = verdict(Scenario("rocksdb-indexed", "counter", 1, ()), events, check_all(events, MODEL), [],
                     error=reason)
    assert result["verdict"] == "error" and "_TRANSPORT" in result["error"]
    # Any other error in the task is still the task not finishing: a finding.
    other = _ended_by({"type": "error", "error": "Traceback …\nValueError: bad value"})
    assert checks(other) == {"task_finishes"} and broker_failure(other) is None
    # And a broken promise found before the broker failed the task still fails the scenario.
    lost = _ended_by(broker, recovered={})
    failed = verdict(Scenario("rocksdb-indexed", "counter", 1, ()), lost, check_all(lost, MODEL), [],
                     error=broker_failure(lost))
    assert failed["verdict"] == "fail", failed
    assert "task_finishes" not in {v["check"] for v in failed["violations"]}


def _replay_from_an_earlier_commit(durable: bool) -> list[dict]:
    """Store commits at 0 and 2, the EOS commit of 4, a crash; the store comes back at its commit of 0 and
    replays 4 records (its commit of 2 was in memory only: Kafka's RocksDB store, write-ahead log off)."""
    flag = {} if durable else {"commit_durable": False}
    return history(
        {**recover(0, {}), **flag},
        {"type": "store_commit_begin", "input_position": 0},
        {"type": "store_commit", "input_position": 0},
        {"type": "commit", "input_position": 2},
        {"type": "store_commit_begin", "input_position": 2},
        {"type": "store_commit", "input_position": 2},
        {"type": "commit", "input_position": 4},
        {"type": "crash", "point": "task.commit.after_eos"},
        {**recover(4, MODEL.state_at(4), replayed=4, instance=2), **flag},
        {"type": "store_commit", "input_position": 4, "instance": 2},
        {"type": "done", "instance": 2},
        {**recover(4, MODEL.state_at(4), replayed=0, instance=3), **flag},
    )


def test_a_store_durable_only_once_flushed_may_replay_from_any_commit_since_its_last_clean_close():
    found = check_all(_replay_from_an_earlier_commit(durable=True), MODEL)
    assert [v.check for v in found] == ["no_wipe"] and "2 records" in found[0].expected  # the tail after 2
    assert check_all(_replay_from_an_earlier_commit(durable=False), MODEL) == []  # Capabilities(commit_durable=False)
    flushed = _replay_from_an_earlier_commit(durable=False)
    flushed[-1]["replayed_records"] = 4  # after a clean close the last commit is on disk: nothing to replay
    assert [v.check for v in check_all(flushed, MODEL)] == ["no_wipe"]
