"""The driver JVM's start-up options: the first run that exits normally leaves a class archive for
the next runs; a killed run leaves nothing half-written; ``EOS_HARNESS_SPARK_JVM=plain`` turns it off."""

from __future__ import annotations

from pathlib import Path

from eos_harness.spark.jvm import driver_options


def test_the_first_clean_run_leaves_a_class_archive_that_later_runs_use(tmp_path):
    first = driver_options(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in first.options and "SharedArchiveFile" not in first.options
    pending = first.options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
    with open(pending, "wb") as f:  # what the JVM writes on a normal exit
        f.write(b"archive")
    first.finish(0)
    later = driver_options(tmp_path)
    archive = later.options.split("-XX:SharedArchiveFile=")[1].split()[0]
    assert Path(archive).read_bytes() == b"archive"
    assert "ArchiveClassesAtExit" not in later.options
    assert [p.name for p in (tmp_path / "spark-cds").iterdir()] == [archive.rsplit("/", 1)[1]]


def test_a_killed_run_leaves_no_archive_and_the_next_run_makes_one(tmp_path):
    killed = driver_options(tmp_path)
    pending = killed.options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
    with open(pending, "wb") as f:  # cut short by SIGKILL
        f.write(b"half")
    killed.finish(-9)
    assert list((tmp_path / "spark-cds").iterdir()) == []
    assert "-XX:ArchiveClassesAtExit=" in driver_options(tmp_path).options


def test_plain_turns_the_options_off(tmp_path, monkeypatch):
    monkeypatch.setenv("EOS_HARNESS_SPARK_JVM", "plain")
    assert driver_options(tmp_path).options == ""
    assert not (tmp_path / "spark-cds").exists()


def test_one_run_at_a_time_makes_the_archive_and_a_dead_makers_lock_is_taken_over(tmp_path):
    assert driver_options(tmp_path, make=False).options == "-XX:TieredStopAtLevel=1"  # a run to be killed
    maker = driver_options(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in maker.options
    beside = driver_options(tmp_path)  # started while the first is still running: it makes none
    assert beside.options == "-XX:TieredStopAtLevel=1"
    maker.finish(-9)  # killed: the next run makes it
    again = driver_options(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in again.options
    lock = next((tmp_path / "spark-cds").glob("*.lock"))
    lock.write_text("999999999")  # what a maker killed before it could finish leaves (no such process)
    assert "-XX:ArchiveClassesAtExit=" in driver_options(tmp_path).options
