"""The kafka-streams suite's plan and command line, without Kafka: what a scenario kills is a function of its
seed, its replay line gives it back, only steps the application reaches are drawn, and bad input is a usage
error (exit 2) before any broker or JVM starts."""

from __future__ import annotations

import json
import shlex

import pytest
from eos_harness.faces.kafka_streams import kafka_streams_command
from eos_harness.kafka_streams.app_points import APP_MUTANTS, POINTS_BY_NAME, RANDOM_KILL
from eos_harness.suites.kafka_streams.checks import check_output, expected_outputs, workload
from eos_harness.suites.kafka_streams.plan import known_subjects, parse_broker_faults, scenario, settings_of


@pytest.mark.parametrize("app", known_subjects())
def test_the_replay_line_of_a_scenario_plans_the_same_kills(app):
    for seed in range(6):
        planned = scenario(app, seed, 3, records=40, memtable_kb=0, liveness_s=20, threads=2)
        words = shlex.split(planned.repro())
        assert words[:4] == ["eos-harness", "run", "--suite", "kafka-streams"]
        params = kafka_streams_command.make_context("run", words[4:]).params
        again = scenario(params["app"], params["seed"], params["kills"], params["point"], records=params["records"],
                         memtable_kb=params["memtable_kb"], liveness_s=params["liveness"], threads=params["threads"])
        assert again == planned


def test_only_steps_the_application_reaches_are_drawn_and_a_restart_s_steps_never_first():
    for app in known_subjects():
        s = settings_of(app)
        for seed in range(40):
            kills = scenario(app, seed, 3).kills
            for number, (point, hit) in enumerate(kills):
                if point == RANDOM_KILL:
                    assert 50 <= hit <= 1500
                    continue
                step = POINTS_BY_NAME[point]
                assert step.applies(s.guarantee, s.store, s.transactional, s.upgrade_from), (app, point)
                assert number > 0 or step.phase in ("commit", "close"), (app, kills)
                if s.mutant and APP_MUTANTS[s.mutant].points:
                    assert point in APP_MUTANTS[s.mutant].points
    # Under exactly_once_v2 without transactional stores, Streams skips the stores' commit after a transaction.
    assert not POINTS_BY_NAME["streams.commit.after_stores_commit"].applies("exactly_once_v2", "rocksdb", False)
    assert POINTS_BY_NAME["streams.commit.after_stores_commit"].applies("at_least_once", "rocksdb", False)


def test_kills_inside_a_clean_close_are_drawn_listed_with_their_java_method_and_leave_the_other_kills_as_drawn(cli):
    from eos_harness.suites.kafka_streams import plan

    close = {p.name for p in POINTS_BY_NAME.values() if p.phase == "close"}
    assert close == {"streams.close.before_checkpoint", "streams.close.before_suspend",
                     "streams.close.before_stores_close", "streams.close.before_unlock",
                     "streams.checkpoint.before_rename"}
    drawn = [k for app in ("rocksdb-tx", "rocksdb", "memory") for seed in range(60) for k in scenario(app, seed, 3).kills]
    # every one reached in every configuration, but the .checkpoint file's write: 4.4.0 writes it only with
    # upgrade.from 4.2 or older (KIP-1035's downgrade file)
    assert close - {"streams.checkpoint.before_rename"} == {point for point, _ in drawn if point in close}
    upgrading = {p for seed in range(60) for p, _ in scenario("upgrade-rocksdb-tx", seed, 3).kills}
    assert close <= upgrading
    assert {hit for point, hit in drawn if point in close} == {1, 2}
    assert 0.1 < sum(point in close for point, _ in drawn) / len(drawn) < 0.4
    # Where a seed draws no close kill, its kills are those drawn before the close points existed.
    share, plan.CLOSE_SHARE = plan.CLOSE_SHARE, 0.0
    try:
        assert scenario("rocksdb", 5, 2).kills == (("streams.commit.before_producer_commit", 3),
                                                   ("streams.rebalance.after_assignment", 1))
    finally:
        plan.CLOSE_SHARE = share
    # --point: every kill in the close (the first instance's too); with two instances at the close's first task.
    assert {p for p, _ in scenario("memory", 1, 3, "streams.close.before_unlock").kills} == {"streams.close.before_unlock"}
    assert {h for p, h in scenario("rocksdb-tx", 4, 3, "streams.close.before_suspend", instances=2).kills} == {1}
    listed = cli.invoke("points")
    assert listed.returncode == 0
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip().startswith(("streams.close.", "streams.checkpoint."))}
    assert "StreamTask.postCommit (at entry)" in lines["streams.close.before_checkpoint"]
    assert "StateManagerUtil.closeStateManager (at invoke" in lines["streams.close.before_unlock"]
    assert "ProcessorStateManager.close (at entry)" in lines["streams.close.before_stores_close"]
    assert "OffsetCheckpoint.write (at invoke" in lines["streams.checkpoint.before_rename"]


def test_the_output_check_names_a_repeated_a_lost_and_a_wrong_output():
    records = [r for batch in workload(1, 2, 10, 3, 2) for r in batch]
    want = expected_outputs(records)
    outputs = [(key, seq, total) for seq, (key, total) in want.items()]
    assert check_output(records, outputs, complete=True) == []
    repeated, lost, wrong = outputs[0], outputs[1], outputs[2]
    changed = [o for o in outputs if o not in (lost, wrong)] + [repeated, (wrong[0], wrong[1], wrong[2] + 1)]
    found = {(v.check, v.observed) for v in check_output(records, changed, complete=True)}
    assert ("exactly_once_output", "read 2 times") in found
    assert ("exactly_once_output", "1 never read though the application processed its input") in found
    assert ("output_values", f"sum {wrong[2] + 1}") in found
    # Before the application processed its input, a missing output is liveness's, not a loss.
    assert all(v.check != "exactly_once_output" for v in check_output(records, outputs[:5], complete=False))


@pytest.mark.parametrize(("arguments", "says"), [
    (["--app", "nope"], "'nope' is not one of"),
    (["--point", "streams.restore.after_batch", "--kills", "1"], "give --kills 2"),
    (["--app", "memory", "--point", "streams.store.before_write_batch"], "never reached by the application memory"),
    (["--json", "/nonexistent-dir/x.json"], "does not exist"),
    (["--app", "join-rocksdb-tx", "--records", "3"], "give --records 5 or more"),
    (["--app", "zombie", "--instances", "2"], "runs its own two instances"),
    (["--instances", "3"], "3 is not in the range"),
    (["--app", "rocksdb-tx", "--point", "streams.checkpoint.before_rename"],
     "never reached by the application rocksdb-tx"),
    (["--crash-at", "coordinator-kill@2"], "schedules the broker faults broker-kill@N, broker-pause@N"),
    (["--crash-at", "broker-kill@0"], "N a positive number"),
    (["--crash-at", "broker-pause@3", "--broker", "kafka://127.0.0.1:9"], "needs a cluster the harness starts"),
])
def test_bad_input_is_a_usage_error_before_anything_starts(cli, arguments, says):
    result = cli.invoke("run", "--suite", "kafka-streams", "--seed", "1", *arguments)
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr and "starting a local Kafka" not in result.stdout


def test_the_windowed_model_sums_per_window_and_compares_only_windows_the_store_still_keeps():
    from eos_harness.suites.kafka_streams.checks import SEGMENT_MS, check_state, model_state

    records = [r for batch in workload(2, 1, 400, 4, 2, base_ms=60_000 * 1000) for r in batch]  # 160 s of input
    want = model_state(records, 10_000)
    assert sum(want.values()) == sum(r.delta for r in records) and all("@" in k for k in want)
    assert check_state(records, want, 1, 10_000, 120_000) == []
    # The first segments are past the retention: gone from the store, not a violation; a later window wrong is.
    old = {k: v for k, v in want.items() if int(k.partition("@")[2]) >= 60_000 * 1000 + SEGMENT_MS}
    assert check_state(records, old, 1, 10_000, 120_000) == []
    last = max(want, key=lambda k: int(k.partition("@")[2]))
    assert [v.check for v in check_state(records, {**old, last: want[last] + 1}, 1, 10_000, 120_000)] == ["state"]


def test_the_join_model_multiplies_each_delta_by_its_key_s_rate_at_its_time_and_checks_the_table():
    from eos_harness.suites.kafka_streams.checks import check_state, joined, model_state

    plain = [r for batch in workload(3, 2, 20, 4, 2) for r in batch]
    records = [r for batch in workload(3, 2, 20, 4, 2, table=True) for r in batch]
    # The stream records are the workload's own; every 5th carries a table update.
    assert [(r.seq, r.key, r.delta) for r in records] == [(r.seq, r.key, r.delta) for r in plain]
    assert [r.seq for r in records if r.update] == list(range(0, 40, 5))
    products, rates = joined(records)
    current: dict[str, int] = {}
    for r, p in zip(records, products, strict=True):
        if r.update:
            current[r.update[0]] = r.update[1]
        assert p.delta == r.delta * current.get(r.key, 1)
    assert any(p.delta != r.delta for r, p in zip(records, products, strict=True))  # the table changed some outputs
    assert rates == current
    store = {**model_state(products), **{f"rate:{k}": v for k, v in rates.items()}}
    assert check_state(records, store, 1, join=True) == []
    # The sums without the join, or a table that lost its last update, are wrong state.
    assert check_state(records, {**model_state(records), **{f"rate:{k}": v for k, v in rates.items()}}, 1,
                       join=True)
    last = next(r.update for r in reversed(records) if r.update)
    stale = {**store, f"rate:{last[0]}": last[1] + 1}
    assert [v.check for v in check_state(records, stale, 1, join=True)] == ["state"]
    # An output of the unjoined delta is a wrong value.
    want = expected_outputs(products)
    outputs = [(key, seq, total) for seq, (key, total) in want.items()]
    assert check_output(records, outputs, complete=True, join=True) == []
    assert any(v.check == "output_values" for v in check_output(records, outputs, complete=True))


def test_a_join_output_of_a_table_update_applied_out_of_timestamp_order_is_named_as_such():
    from dataclasses import replace

    from eos_harness.suites.kafka_streams.checks import joined

    records = [r for batch in workload(3, 2, 20, 4, 2, table=True) for r in batch]
    products = joined(records)[0]
    # A table update that changed its key's rate, the key's first stream record after it and its last before it
    rate, late = {}, None
    for r in records:
        if r.update is not None:
            key, before = r.update[0], rate.get(r.update[0], 1)
            rate[key] = r.update[1]
            after = next((x for x in records if x.seq >= r.seq and x.key == key), None)
            earlier = next((x for x in reversed(records) if x.seq < r.seq and x.key == key), None)
            if late is None and after is not None and earlier is not None and before != r.update[1]:
                late = (r, after, earlier, before)
    assert late is not None
    update, after, earlier, before = late

    def outputs_joined(seq, rate):
        processed = [replace(p, delta=r.delta * rate) if p.seq == seq else p
                     for r, p in zip(records, products, strict=True)]
        return [(key, s, total) for s, (key, total) in expected_outputs(processed).items()]

    tail = " (max.task.idle.ms=0: records already on the broker are processed in timestamp order)"
    # Streams joined the record after the update with the rate before it (the table record processed after it)
    found = check_output(records, outputs_joined(after.seq, before), complete=True, join=True)
    assert found and all(v.check == "output_values" for v in found)
    assert found[0].key == f"input {after.seq} ({after.key})"
    assert found[0].observed.endswith(
        f": input {after.seq} was joined with rate {before}, from before the table update of input {update.seq} "
        f"({after.key} -> {update.update[1]}, timestamp {update.ts - 1}), which the broker had acknowledged before "
        f"input {after.seq} was sent" + tail)
    # each later output of its key, right about its own record, names the record whose join it carries
    assert all(v.observed.endswith(f" (input {after.seq}'s join carried)") for v in found[1:])
    # ... and the record before the update with its rate (the table record processed before it)
    found = check_output(records, outputs_joined(earlier.seq, update.update[1]), complete=True, join=True)
    assert found[0].key == f"input {earlier.seq} ({earlier.key})"
    assert found[0].observed.endswith(
        f": input {earlier.seq} was joined with rate {update.update[1]} of the table update of input {update.seq} "
        f"(timestamp {update.ts - 1}, after input {earlier.seq}'s {earlier.ts}), sent after the broker had "
        f"acknowledged input {earlier.seq}" + tail)
    # A wrong output no rate of its key's table explains is said as before
    wrong = [(key, seq, total + 1000 if seq == after.seq else total) for key, seq, total in outputs_joined(-1, 1)]
    assert [v.observed for v in check_output(records, wrong, complete=True, join=True)] == [
        f"sum {expected_outputs(products)[after.seq][1] + 1000}"]


def test_the_global_table_s_updates_come_before_their_batch_and_apply_to_all_of_it():
    from eos_harness.suites.kafka_streams.checks import check_state, joined, model_state

    batches = workload(4, 3, 10, 8, 2, global_table=True)
    records = [r for batch in batches for r in batch]
    assert [r.seq for r in records if r.global_updates] == [0, 10, 20]
    assert all(r.update is None for r in records)
    products, rates = joined(records)
    for batch in batches:  # every record of a batch joins with the table as its first record's updates left it
        at_start = joined([r for r in records if r.seq <= batch[0].seq])[1]
        for r in batch:
            assert next(p for p in products if p.seq == r.seq).delta == r.delta * at_start.get(r.key, 1)
    assert len(rates) >= 3
    store = {**model_state(products), **{f"rate:{k}": v for k, v in rates.items()}}
    assert check_state(records, store, 1, join=True) == []
    missing = dict(store)
    missing.pop(next(k for k in store if k.startswith("rate:")))
    assert [v.check for v in check_state(records, missing, 1, join=True)] == ["state"]


def test_broker_faults_are_in_the_replay_line():
    planned = scenario("memory-tx", 5, 1, broker_faults=parse_broker_faults("broker-kill@40,broker-pause@90"))
    assert planned.broker_faults == (("broker-kill", 40), ("broker-pause", 90))
    words = shlex.split(planned.repro())
    assert words[words.index("--crash-at") + 1] == "broker-kill@40,broker-pause@90"
    params = kafka_streams_command.make_context("run", words[4:]).params
    assert scenario(params["app"], params["seed"], params["kills"], params["point"], records=params["records"],
                    memtable_kb=params["memtable_kb"], liveness_s=params["liveness"],
                    broker_faults=parse_broker_faults(",".join(params["crash_at"]))) == planned


def test_a_campaign_draws_its_broker_faults_apart_from_its_kills_and_needs_a_cluster_it_starts(cli):
    from eos_harness.suites.kafka_streams.plan import campaign

    options = {"systems": ["rocksdb-tx", "memory", "zombie"], "kills": 2, "broker": "kafka-local", "records": 60,
               "memtable_kb": 64, "liveness": 60.0}
    plain = [next(iter(campaign(seed, options))) for seed in range(8)]
    faulted = [next(iter(campaign(seed, {**options, "broker_faults": 2}))) for seed in range(8)]
    assert all(p.broker_faults == () for p in plain)
    for without, with_faults in zip(plain, faulted, strict=True):
        assert with_faults.kills == without.kills  # the kills stay as drawn
        assert len(with_faults.broker_faults) == 2 and {f for f, _ in with_faults.broker_faults} <= {
            "broker-kill", "broker-pause"}
        limit = 60 * (2 if with_faults.system == "zombie" else 3)  # within the input the scenario sends
        assert all(1 <= n <= limit for _, n in with_faults.broker_faults)
        assert "--crash-at " in with_faults.repro()
    assert len({f for s in faulted for f, _ in s.broker_faults}) == 2
    result = cli.invoke("chaos", "--suite", "kafka-streams", "--broker-faults", "1", "--broker", "kafka://127.0.0.1:9",
                        "--scenarios", "1", "--seed", "1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs a cluster the harness starts" in result.stderr and "starting a local Kafka" not in result.stdout


def test_two_instances_are_in_the_replay_line():
    planned = scenario("rocksdb-tx", 5, 2, instances=2)
    words = shlex.split(planned.repro())
    assert words[words.index("--instances") + 1] == "2"
    params = kafka_streams_command.make_context("run", words[4:]).params
    assert scenario(params["app"], params["seed"], params["kills"], params["point"], records=params["records"],
                    memtable_kb=params["memtable_kb"], liveness_s=params["liveness"],
                    instances=params["instances"]) == planned


def test_only_a_table_file_of_the_store_s_offsets_is_a_commit_on_disk(tmp_path):
    # What a KIP-892 RocksDB store leaves on disk: table files of its data ("default" column family) and of
    # its committed offsets ("offsets", the changelog partition's name as key, uncompressed). A flush of the
    # data with no commit since the last flush writes the first alone: no committed offset, restored from 0.
    from eos_harness.suites.kafka_streams.runner import _durable

    app = "ks-1-abc"
    data = b"\x00rocksdb.column.family.namedefault\x00alpha\x00" + bytes(range(256)) * 8
    offsets = b"\x00rocksdb.column.family.nameoffsets\x00position\x00" + f"{app}-sums-changelog-".encode()
    stores = {0: {"000018.sst": data},
              1: {"000018.sst": data, "000019.sst": offsets + b"1\x00\x00\x00\x00\x00\x00\x00\x22"},
              2: {"sums.1700000000000/000011.sst": offsets + b"2\x00\x00\x00\x00\x00\x00\x00\x05"},  # a window segment
              3: {}}
    for p, files in stores.items():
        for name, content in files.items():
            path = tmp_path / app / f"0_{p}" / "rocksdb" / "sums" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    (tmp_path / app / "0_3" / "rocksdb" / "rates").mkdir(parents=True)  # another store's offsets are not sums'
    (tmp_path / app / "0_3" / "rocksdb" / "rates" / "000007.sst").write_bytes(
        offsets.replace(b"-sums-", b"-rates-") + b"3")
    assert _durable(tmp_path, app, 4) == {0: False, 1: True, 2: True, 3: False}


def _canned(index: int, system: str, verdict: str, restored: list, ms: list) -> dict:
    """A kafka-streams scenario's result as the runner writes it (the fields the comparison and report read)."""
    from eos_harness.suites.kafka_streams.plan import expected, settings_of

    return {"suite": "kafka-streams", "index": index, "system": system, "seed": index, "verdict": verdict,
            "expected": "fail" if expected(system)[0] else "pass", "violations": [], "kills": [],
            "configuration": settings_of(system).to_json(), "restored_per_crash": restored, "restore_ms": ms,
            "repro": f"eos-harness run --suite kafka-streams --app {system} --seed {index}", "history": None,
            "seconds": 30.0}


def test_a_campaign_shows_transactional_stores_on_and_off_side_by_side_in_its_json_terminal_and_report(tmp_path):
    from eos_harness.faces.kafka_streams import show_campaign
    from eos_harness.faces.toolkit import console
    from eos_harness.report.render import write_report
    from eos_harness.suites.kafka_streams.runner import campaign_fields

    results = [_canned(0, "rocksdb-tx", "pass", [15, 3, None], [200, 100, -1]),
               _canned(1, "rocksdb", "pass", [160, 170], [130, 150]),
               _canned(2, "rocksdb-tx", "pass", [40], [300]),
               _canned(3, "rocksdb", "fail", [320, 100], [900, 80]),
               _canned(4, "window-rocksdb-tx", "pass", [7], [50]),
               _canned(5, "restore-from-zero", "fail", [500], [999]),  # a mutant: not a configuration
               _canned(6, "zombie", "pass", [], [])]
    rows = campaign_fields({"scenarios": results})["transactional_stores"]
    assert [r["configuration"] for r in rows] == ["rocksdb", "window-rocksdb"]
    on, off = rows[0]["on"], rows[0]["off"]
    assert (on["system"], on["scenarios"], on["verdicts"], on["restorations"]) == ("rocksdb-tx", 2, {"pass": 2}, 3)
    assert (on["restored_median"], on["restored_max"], on["restore_ms_median"], on["restore_ms_max"]) == (15, 40, 200, 300)
    assert (off["system"], off["scenarios"], off["verdicts"]) == ("rocksdb", 2, {"pass": 1, "fail": 1})
    assert (off["restored_median"], off["restored_max"], off["restore_ms_max"]) == (165, 320, 900)
    # a configuration run with only one side: the other says it did not run, with nothing to compare
    assert rows[1]["off"] == {"system": None, "scenarios": 0, "verdicts": {}, "restorations": 0,
                              "restored_median": None, "restored_max": None, "restore_ms_median": None,
                              "restore_ms_max": None}

    campaign = {"suite": "kafka-streams", "seed": 9, "subject": "system", "scenarios": results,
                "transactional_stores": rows, "seconds": 210.0}
    with console.capture() as captured:
        show_campaign(campaign)
    shown = [" ".join(line.replace("│", " ").split()) for line in captured.get().splitlines()]
    assert any(line.startswith("rocksdb on rocksdb-tx 2 2 pass 15 / 40 (3) 200 / 300") for line in shown), shown
    assert any(line.startswith("off rocksdb 2 1 pass, 1 fail 165 / 320 (4) 140 / 900") for line in shown), shown
    assert any(line.startswith("off — not run — — —") for line in shown), shown

    (tmp_path / "chaos.json").write_text(json.dumps(campaign))
    report, _ = write_report(tmp_path)
    html = report.read_text()
    table = html[html.index('<table id="transactional-stores">'):]
    table = table[:table.index("</table>")]
    row = table[table.index('data-configuration="rocksdb"'):table.index('data-configuration="window-rocksdb"')]
    cells = [" ".join(c.split("</td>")[0].split()) for c in row.split("<td")[1:]]
    assert [c.partition(">")[2] for c in cells] == ["rocksdb", "2", "2 pass", "15 / 40 (3)", "200 / 300",
                                                   "2", "1 pass, 1 fail", "165 / 320 (4)", "140 / 900"]


def test_the_changelog_is_read_as_the_store_s_last_value_per_key_and_a_difference_names_its_source():
    from eos_harness.suites.kafka_streams.checks import changelog_state, check_changelog, joined, model_state

    records = [r for batch in workload(4, 2, 12, 3, 2) for r in batch]
    model = model_state(records)
    # the changelog's last value per key (a sum padded as the application stores it); a tombstone deletes
    last = {k.encode(): f"{v};xxxx".encode() for k, v in model.items()} | {b"gone": None}
    assert changelog_state(last) == model
    assert check_changelog(records, changelog_state(last), model) == []
    # a window store's key: the key, its window's start (8 bytes, big-endian), a sequence number (4 bytes)
    windowed = {b"k1" + (60_000).to_bytes(8, "big") + (0).to_bytes(4, "big"): b"7;pad"}
    assert changelog_state(windowed, window=True) == {"k1@60000": 7}
    assert changelog_state({b"k1": b"3"}, prefix="rate:") == {"rate:k1": 3}

    # the changelog behind (a write dropped) while the store answered right: the key and the source named
    key = sorted(model)[0]
    behind = {**model, key: model[key] - 1}
    [found] = check_changelog(records, behind, model)
    assert (found.check, found.key, found.expected) == ("state", f"changelog {key}", f"model {model[key]}")
    assert found.observed == (f"changelog {model[key] - 1}; interactive query {model[key]} (agrees with the model: "
                              "the changelog alone differs)")
    # both behind: both named as differing; a key the changelog never got: no record
    [both] = check_changelog(records, behind, behind)
    assert both.observed.endswith("(differs too)")
    missing = {k: v for k, v in model.items() if k != key}
    [lost] = check_changelog(records, missing, None)
    assert lost.observed == "changelog no record; the store gave no answer to compare"
    # the join: the table's store compared too (as rate:KEY), unless it is a GlobalKTable's (no changelog)
    joined_records = [r for batch in workload(4, 2, 12, 3, 2, table=True) for r in batch]
    sums_only = {k: v for k, v in model_state(joined(joined_records)[0]).items()}
    assert [v.key for v in check_changelog(joined_records, sums_only, None, join=True)][:1] == ["changelog rate:k0"]
    assert check_changelog(joined_records, sums_only, None, join=True, table_changelog=False) == []


def test_the_history_puts_each_event_on_its_instance_s_or_thread_s_lane_and_marks_violations_on_their_event():
    from eos_harness.kafka_streams.app import AppEvent
    from eos_harness.report.load import timeline_events
    from eos_harness.suites.kafka_streams.history import HARNESS, history_rows, jvm_rows, link_violations

    prefix = "ks-3-ab12cd-5f0e3b8e-2a41-4c1e-9a8b-0c7d1e2f3a4b-"

    def said(at: float, line: str) -> AppEvent:
        words = tuple(line.split())
        return AppEvent(at, words[0], words[1:], line)

    first = [said(4.0, "STATE CREATED REBALANCING"), said(7.5, f"TASK_START 0_0 {prefix}StreamThread-1"),
             said(7.6, f"TASK_START 0_1 {prefix}StreamThread-2"),
             said(9.0, f"POINT streams.commit.enter 2 {prefix}StreamThread-2")]
    second = [said(5.0, f"RESTORE_START sums 1 0 40 {prefix}StateUpdater-1"),
              said(5.2, f"RESTORE_END sums 1 40 150 {prefix}StateUpdater-1"), said(8.0, 'STORE [0, 1] {"k1":3}')]
    rows = history_rows([*jvm_rows(first, 0.5, "instance 0", 0), *jvm_rows(second, 12.0, "instance 1", 1),
                         {"type": "kill", "at": 9.6, "lane": "instance 0", "instance": 0, "line": "SIGKILL"},
                         {"type": "changelog", "at": 21.0, "lane": HARNESS, "line": "8 keys read"}])
    assert [(r["seq"], r["type"], r["lane"]) for r in rows] == [
        (0, "state_change", "instance 0"), (1, "task_start", "instance 0 StreamThread-1"),
        (2, "task_start", "instance 0 StreamThread-2"), (3, "point", "instance 0 StreamThread-2"),
        (4, "kill", "instance 0"), (5, "restore_start", "instance 1 StateUpdater-1"),
        (6, "restore_end", "instance 1 StateUpdater-1"), (7, "query", "instance 1"), (8, "changelog", HARNESS)]
    assert rows[5]["at"] == 17.0 and (rows[5]["store"], rows[5]["partition"]) == ("sums", 1)
    violations = [{"check": "state", "key": "instance 1"}, {"check": "no_wipe", "key": "instance 1 store sums partition 1"},
                  {"check": "state", "key": "changelog k1"}, {"check": "exactly_once_output", "key": "input 3 (k1)"}]
    link_violations(violations, rows)
    assert [v.get("event") for v in violations] == [7, 5, 8, None]
    # the report draws a lane per instance and per thread, on the scenario's clock
    events, timed = timeline_events(rows, "kafka-streams")
    assert timed and {e.lane for e in events} == {"instance 0", "instance 0 StreamThread-1", "instance 0 StreamThread-2",
                                                  "instance 1", "instance 1 StateUpdater-1", HARNESS}
    assert [e.category for e in events][3:5] == ["fault", "crash"]


def test_no_wipe_judges_a_restoration_from_the_changelog_s_start_only_where_the_store_had_a_commit_on_disk():
    from eos_harness.suites.kafka_streams.checks import Restore, check_no_wipe

    restores = [Restore(1, 0, 40, 60, 20, 100, durable=True), Restore(1, 1, 0, 57, 57, 90, durable=True),
                Restore(2, 0, 0, 30, 30, 80, durable=False),  # no commit on disk: restored from 0, rightly
                Restore(2, 1, 0, 0, 0, 150, durable=True, store="rates"),  # an empty changelog: nothing to wipe
                Restore(2, 0, 0, 12, 12, 70, durable=True, store="rates")]
    found, met = check_no_wipe(restores, applies=True)
    assert met == 3
    assert [(v.check, v.key) for v in found] == [("no_wipe", "instance 1 store sums partition 1"),
                                                 ("no_wipe", "instance 2 store rates partition 0")]
    assert check_no_wipe(restores, applies=False) == ([], 0)  # without transactional RocksDB stores: not judged
