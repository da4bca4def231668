"""The KIP-868 model (models/metadata.py): what a reader may see of a metadata log, the invariants
a log must keep, commands, snapshots."""

from __future__ import annotations

import pytest
from eos_harness.models.metadata import (
    ABORT,
    BEGIN,
    END,
    RECORD,
    Command,
    Entry,
    Image,
    apply_commands,
    image_at,
    image_from_snapshot,
    log_problems,
    open_transaction,
    records_of,
    snapshot_batches,
    visible_image,
)


def log(*specs) -> list[Entry]:
    """Entries with offsets 0..n-1 from (kind, record, txn, epoch) tuples."""
    out = []
    for offset, (kind, record, txn, epoch) in enumerate(specs):
        out.append(Entry(kind, record, txn, 0, epoch, offset=offset))
    return out


def topic(name, partitions, txn=None, epoch=1):
    return [(RECORD, ("topic", name), txn, epoch)] + [(RECORD, ("partition", name, i), txn, epoch)
                                                      for i in range(partitions)]


def created(entries) -> dict:
    return visible_image(entries).to_json()["topics"]


def test_records_outside_a_transaction_are_visible_at_once():
    assert created(log(*topic("a", 3))) == {"a": 3}


def test_a_transaction_is_visible_only_whole_at_its_end():
    entries = log((BEGIN, None, "x", 1), *topic("big", 4, "x"), (END, None, "x", 1))
    assert created(entries) == {"big": 4}
    for position in range(len(entries)):  # before its End: nothing of it
        assert image_at(entries, position).to_json()["topics"] == {}


def test_a_partial_transaction_at_the_end_of_the_log_is_invisible():
    entries = log(*topic("a", 1), (BEGIN, None, "x", 1), *topic("big", 4, "x"))
    assert created(entries) == {"a": 1}
    assert open_transaction(entries) == ("x", 2)


def test_abort_discards_the_transaction_and_what_follows_applies():
    entries = log((BEGIN, None, "x", 1), *topic("big", 4, "x"), (ABORT, None, "x", 2), *topic("b", 2, epoch=2))
    assert created(entries) == {"b": 2}
    assert open_transaction(entries) is None


def test_a_well_formed_log_breaks_no_invariant():
    entries = log(*topic("a", 1), (BEGIN, None, "x", 1), *topic("big", 3, "x"), (END, None, "x", 1),
                  (BEGIN, None, "y", 1), *topic("c", 2, "y"), (ABORT, None, "y", 2), *topic("d", 1, epoch=2))
    assert log_problems(entries) == []


def test_a_begin_while_a_transaction_is_open_breaks_one_open_transaction():
    entries = log((BEGIN, None, "x", 1), (RECORD, ("topic", "a"), "x", 1), (BEGIN, None, "y", 1))
    assert {p.invariant for p in log_problems(entries)} >= {"one_open_transaction"}


def test_a_record_outside_the_open_transaction_is_interleaving():
    entries = log((BEGIN, None, "x", 1), (RECORD, ("topic", "a"), "x", 1), (RECORD, ("config", "c", "k", "v"), None, 1),
                  (END, None, "x", 1))
    problems = log_problems(entries)
    assert [p.invariant for p in problems] == ["no_interleaving"]
    assert problems[0].offset == 2


def test_a_new_controller_that_writes_before_aborting_its_predecessors_transaction():
    entries = log((BEGIN, None, "x", 1), (RECORD, ("topic", "a"), "x", 1), (BEGIN, None, "y", 2))
    assert [p.invariant for p in log_problems(entries)] == ["one_open_transaction"]


def test_a_write_of_an_older_epoch_after_a_newer_one_is_a_fenced_controller_writing():
    entries = log(*topic("a", 1, epoch=2), *topic("b", 1, epoch=1))
    assert {p.invariant for p in log_problems(entries)} == {"fenced_never_writes"}


@pytest.mark.parametrize("batch_records", [1, 2, 7, 1000])
def test_a_snapshot_at_any_batch_size_rebuilds_the_image(batch_records):
    image = apply_commands([Command("create_topic", topic="a", partitions=5),
                            Command("set_config", resource="topic:a", key="retention.ms", value="9"),
                            Command("create_topic", topic="b", partitions=2)])
    batches = snapshot_batches(image, batch_records)
    assert all(len(b) <= batch_records for b in batches)
    assert image_from_snapshot(batches) == image


def test_commands_are_refused_against_the_image_as_the_controller_refuses_them():
    image = Image()
    create = Command("create_topic", topic="a", partitions=2)
    assert len(records_of(create, image)) == 3
    image = apply_commands([create])
    assert records_of(create, image) == []  # the topic exists
    assert records_of(Command("delete_topic", topic="zzz"), image) == []
    final = apply_commands([create, Command("set_config", resource="topic:a", key="k", value="v"),
                            Command("delete_topic", topic="a")])
    assert final.to_json()["topics"] == {} and final.to_json()["configs"] == {}


def test_entries_survive_encoding():
    entry = Entry(RECORD, ("partition", "t", 3), "1.2", 2, 1, "0001000002")
    assert Entry.decode(entry.encode(), 17) == Entry(RECORD, ("partition", "t", 3), "1.2", 2, 1, "0001000002", 17)


def test_image_json_shows_partitions_that_are_not_zero_to_n():
    image = Image()
    image.apply(("topic", "t"))
    image.apply(("partition", "t", 0))
    image.apply(("partition", "t", 2))
    assert image.to_json()["topics"] == {"t": [0, 2]}
