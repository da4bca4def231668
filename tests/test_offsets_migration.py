"""KIP-1035 upgrade and downgrade (issue 15 items 2 and 3): the built-in stores import the legacy
``.checkpoint``/``.position`` and hand them back with ``upgrade_from``; a crash at every step keeps
every offset and key; malformed files are clear errors; the real path under the task runtime; the
migration mutants are each caught by the check naming their mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
from eos_harness.store import IncompatibleStoreDirectory, StoreContext, StoreError, TopicPartition
from eos_harness.stores.legacy import LegacyRocksStore
from eos_harness.stores.migration import OffsetsFileError, read_offsets_file, write_offsets_file
from eos_harness.stores.registry import resolve
from eos_harness.suites.offsets.migration import MALFORMED, SCENARIOS
from eos_harness.suites.offsets.upgrade_path import round_trip, untrusted_legacy

CHANGELOG = TopicPartition("app-store-changelog", 0)
OTHER = TopicPartition("app-other-changelog", 0)
SOURCE = TopicPartition("app-input", 0)
SCENARIO = {s.name: s for s in SCENARIOS}


def context(tmp_path: Path, **fields) -> StoreContext:
    return StoreContext(tmp_path / "state" / "app" / "0_0" / "rocksdb" / "store", **fields)


def legacy_directory(ctx: StoreContext) -> None:
    """What a store before offset management leaves: keys in RocksDB, offsets in the legacy files."""
    store = LegacyRocksStore()
    store.init(ctx)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.commit({})
    store.close()
    write_offsets_file(ctx.checkpoint_path, {CHANGELOG: 70, OTHER: 9})
    write_offsets_file(ctx.position_path, {SOURCE: 41})


@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-secondary"])
def test_an_upgraded_store_imports_its_offsets_and_leaves_the_other_stores_checkpoint(store, tmp_path):
    ctx = context(tmp_path)
    legacy_directory(ctx)
    s = resolve(store)()
    s.init(ctx)
    assert (s.committed_offset(CHANGELOG), s.committed_offset(SOURCE), s.committed_offset(OTHER)) == (70, 41, None)
    assert dict(s.all()) == {b"a": b"1", b"b": b"2"}
    s.close()
    assert read_offsets_file(ctx.checkpoint_path) == {OTHER: 9}
    assert not ctx.position_path.exists()


@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-secondary"])
def test_an_upgrade_with_a_checkpoint_and_no_position_file_imports_the_changelog_offsets(store, tmp_path):
    ctx = context(tmp_path)
    legacy_directory(ctx)
    ctx.position_path.unlink()  # a store that never served interactive queries: no .position
    s = resolve(store)()
    s.init(ctx)
    assert (s.committed_offset(CHANGELOG), s.committed_offset(SOURCE)) == (70, None)
    assert dict(s.all()) == {b"a": b"1", b"b": b"2"}
    s.close()
    assert read_offsets_file(ctx.checkpoint_path) == {OTHER: 9} and not ctx.position_path.exists()
    s = resolve(store)()  # reopened: the imported offset is the store's own now
    s.init(ctx)
    assert s.committed_offset(CHANGELOG) == 70
    s.close()


def test_a_downgrade_hands_the_offsets_back_and_the_legacy_store_opens_the_directory(tmp_path):
    ctx = context(tmp_path)
    legacy_directory(ctx)
    s = resolve("rocksdb-indexed")()
    s.init(ctx)
    s.put(b"c", b"3")
    s.commit({CHANGELOG: 80, SOURCE: 45})
    s.close()
    with pytest.raises(IncompatibleStoreDirectory, match="column families"):
        LegacyRocksStore().init(ctx)  # without upgrade_from: the older store cannot open it
    s = resolve("rocksdb-indexed")()
    s.init(context(tmp_path, upgrade_from="4.2"))
    s.close()
    assert read_offsets_file(ctx.checkpoint_path) == {CHANGELOG: 80, OTHER: 9}
    assert read_offsets_file(ctx.position_path) == {SOURCE: 45}
    legacy = LegacyRocksStore()
    legacy.init(ctx)
    assert dict(legacy.all()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    legacy.close()


def test_upgrade_from_must_be_a_version(tmp_path):
    with pytest.raises(ValueError, match="not a Kafka version"):
        resolve("rocksdb-indexed")().init(context(tmp_path, upgrade_from="yesterday"))


@pytest.mark.parametrize("which,text,line", MALFORMED)
def test_a_malformed_legacy_file_names_the_file_and_the_line_and_changes_nothing(which, text, line, tmp_path):
    ctx = context(tmp_path)
    legacy_directory(ctx)
    path = ctx.checkpoint_path if which == "checkpoint" else ctx.position_path
    path.write_text(text)
    with pytest.raises(OffsetsFileError) as raised:
        resolve("rocksdb-indexed")().init(ctx)
    assert isinstance(raised.value, StoreError)
    assert str(path) in str(raised.value) and f"line {line}:" in str(raised.value)
    assert path.read_text() == text
    legacy = LegacyRocksStore()  # the database was not even opened: no offsets column family was created
    legacy.init(ctx)
    assert dict(legacy.all()) == {b"a": b"1", b"b": b"2"}
    legacy.close()


# The migration scenarios passing the stores that manage offsets: suites/offsets (every built-in store,
# every scenario that applies to it) under `make test`.


@pytest.mark.parametrize("mutant,scenario,check", [
    ("mutant-offsets-migration-deletes-early", "upgrade_from_legacy_files", "migration_keeps_offsets"),
    ("mutant-offsets-migration-imports-lower", "upgrade_from_legacy_files", "migration_offset_exact"),
    ("mutant-offsets-downgrade-keeps-offsets", "downgrade_with_upgrade_from", "downgrade_hands_back_offsets"),
    ("mutant-offsets-migration-trusts-legacy", "upgrade_without_checkpoint", "migration_refuses_unchecked_legacy"),
])
def test_each_migration_mutant_is_caught_by_the_check_naming_its_mistake(mutant, scenario, check, tmp_path):
    from eos_harness.stores.registry import builtin_spec

    assert check in builtin_spec(mutant).caught_by
    fired = {v.check for v in SCENARIO[scenario].run(mutant, tmp_path, 1, 60)}
    assert fired == {check}


@pytest.mark.parametrize("store,cases,crashes", [
    # 5 upgrade, 5 downgrade, 1 without upgrade_from (wiped and restored), 1 legacy killed mid-batch
    ("rocksdb-indexed", 12, 8),
    # and the secondary store's adoption of db/ as main/ on upgrade, its hand-back on downgrade (2 steps each)
    ("rocksdb-secondary", 16, 12),
])
def test_the_real_path_legacy_to_upgraded_and_back_keeps_every_offset_and_key_through_a_crash_at_each_step(
        store, cases, crashes, tmp_path):
    result = round_trip(tmp_path, seed=3, upgraded=store)
    assert result["violations"] == []
    assert len(result["cases"]) == cases
    assert result["crashes"] == crashes  # one per migration step and one per downgrade step


def test_the_real_path_catches_a_migration_that_deletes_the_checkpoint_first(tmp_path):
    result = round_trip(tmp_path, seed=3, upgraded="mutant-offsets-migration-deletes-early")
    lost = [v for v in result["violations"] if v.check == "migration_keeps_offsets"]
    assert lost and all("store.migrate.after_checkpoint" in v.case or "store.migrate.after_position" in v.case
                        for v in lost)


@pytest.mark.parametrize("store", ["rocksdb-indexed", "rocksdb-secondary"])
def test_a_legacy_task_killed_mid_batch_is_wiped_and_restored_by_the_upgraded_store(store, tmp_path):
    # rocksdb-legacy wrote uncommitted writes of fresh keys and died with no .checkpoint (EOS): the
    # upgraded store refuses the database, the runtime wipes it (a wipe event) and restores it.
    assert untrusted_legacy(tmp_path, seed=3, upgraded=store) == []


def test_a_migration_that_trusts_a_legacy_database_without_offsets_lets_an_uncommitted_write_survive(tmp_path):
    violations = untrusted_legacy(tmp_path, seed=3, upgraded="mutant-offsets-migration-trusts-legacy")
    # the lifecycle's check of the recovered state names the uncommitted writes that survived; the
    # migration's check, the wipe that did not happen and the keys the changelog does not have
    survived = sorted(v.key for v in violations if v.check == "no_uncommitted_survives")
    assert survived == ["fresh00", "fresh01", "fresh02"]
    assert {v.check for v in violations} == {"no_uncommitted_survives", "migration_refuses_unchecked_legacy"}


def test_the_offsets_cache_skips_a_legacy_store_it_cannot_trust_and_leaves_it_as_it_is(tmp_path):
    from eos_harness.runtime.closing import OffsetsCache
    from rocksdict import Rdict

    ctx = context(tmp_path)  # task 0_0 of app "app": a legacy task that crashed (keys, no .checkpoint)
    legacy = LegacyRocksStore()
    legacy.init(ctx)
    legacy.put(b"a", b"1")
    legacy.close()

    def open_store(c: StoreContext):
        store = resolve("rocksdb-indexed")()
        store.init(c)
        return store

    cache = OffsetsCache.build(tmp_path / "state" / "app", "app", open_store, lambda task, store: (CHANGELOG,))
    assert cache.offset_sums() == {"0_0": 0} and cache.opened == []
    assert Rdict.list_cf(str(ctx.directory / "db")) == ["default"]  # not converted: the task wipes it when it runs
