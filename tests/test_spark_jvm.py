"""The driver JVM's start-up options: the first run that exits normally leaves a class archive for
the next runs; a killed run leaves nothing half-written; spark-submit's launcher JVM gets an archive of its
own; RocksDB's library is taken out of its jar once; ``EOS_HARNESS_SPARK_JVM=plain`` turns it all off."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pyspark
from eos_harness.spark.jvm import (
    driver_environment,
    driver_options,
    launcher_options,
    native_library,
    session_options,
)


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
    launcher = launcher_options(tmp_path)
    assert launcher.options == "" and driver_environment(launcher, tmp_path) == {}
    assert list(tmp_path.iterdir()) == []


def test_the_launcher_gets_an_archive_of_its_own_made_by_a_run_whose_driver_started(tmp_path):
    """spark-submit's launcher JVM (SPARK_LAUNCHER_OPTS): the client compiler and a class archive of its own, made
    by the first run that got as far as its Spark session (the launcher had exited then); its logging never on
    stdout, which spark-class reads as the driver's command line."""
    first = launcher_options(tmp_path)
    assert first.arguments[0] == "-XX:TieredStopAtLevel=1" and "-Xlog:all=warning:stderr" in first.arguments
    assert driver_environment(first, tmp_path)["SPARK_LAUNCHER_OPTS"] == first.options
    pending = first.options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
    Path(pending).write_bytes(b"half")
    first.finish(None)  # the run ended before its session: the launcher may have been killed writing it
    assert sorted(p.name for p in (tmp_path / "spark-cds").iterdir()) == []
    second = launcher_options(tmp_path)
    Path(second.options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]).write_bytes(b"archive")
    second.finish(0)
    later = launcher_options(tmp_path)
    assert Path(later.options.split("-XX:SharedArchiveFile=")[1].split()[0]).read_bytes() == b"archive"


def test_the_driver_loads_rocksdbs_library_from_the_cache_and_starts_processes_with_one_exec(tmp_path):
    """RocksDB's native library taken out of pyspark's rocksdbjni jar once, first on the driver's java.library.path
    (the JVM's own path after it), and its loader told the C library; on this Java (17) vfork for the processes
    Hadoop's local file system starts."""
    options = driver_options(tmp_path, make=False)
    native = native_library(tmp_path)
    assert native is not None and native.parent == tmp_path / "spark-native"
    library = next(native.iterdir())
    with zipfile.ZipFile(next((Path(pyspark.__file__).parent / "jars").glob("rocksdbjni-*.jar"))) as jar:
        assert library.stat().st_size == jar.getinfo(library.name).file_size
    path = options.options.split("-Djava.library.path=")[1].split()[0].split(os.pathsep)
    assert path[0] == str(native) and len(path) > 1  # the JVM's own folders after it
    assert "-Djdk.lang.Process.launchMechanism=VFORK" in options.arguments
    assert driver_environment(launcher_options(tmp_path), tmp_path)["ROCKSDB_MUSL_LIBC"] == "false"
    assert native_library(tmp_path) == native and sorted(p.name for p in (tmp_path / "spark-native").iterdir()) == [
        native.name]  # taken out once, nothing else left there


def test_one_run_at_a_time_makes_the_archive_and_a_dead_makers_lock_is_taken_over(tmp_path):
    killed = driver_options(tmp_path, make=False)  # a run to be killed
    assert killed.arguments[0] == "-XX:TieredStopAtLevel=1" and "Archive" not in killed.options
    maker = driver_options(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in maker.options
    beside = driver_options(tmp_path)  # started while the first is still running: it makes none
    assert beside.arguments == killed.arguments
    maker.finish(-9)  # killed: the next run makes it
    again = driver_options(tmp_path)
    assert "-XX:ArchiveClassesAtExit=" in again.options
    lock = next((tmp_path / "spark-cds").glob("*.lock"))
    lock.write_text("999999999")  # what a maker killed before it could finish leaves (no such process)
    assert "-XX:ArchiveClassesAtExit=" in driver_options(tmp_path).options


def test_a_driver_in_the_harnesss_own_process_maps_the_pipeline_drivers_archive_and_never_makes_one(tmp_path,
                                                                                                   monkeypatch):
    """check --engine spark's session and chaos --engine spark's driver: the archive when it is there, nothing made
    (their JVM never exits on its own), the compiler left to the caller."""
    assert "Archive" not in session_options(tmp_path).options and not (tmp_path / "spark-cds").exists()
    maker = driver_options(tmp_path)
    Path(maker.options.split("-XX:ArchiveClassesAtExit=")[1].split()[0]).write_bytes(b"archive")
    maker.finish(0)
    options = session_options(tmp_path).arguments
    assert Path(options[0].split("=", 1)[1]).read_bytes() == b"archive" and "-XX:TieredStopAtLevel=1" not in options
    assert launcher_options(tmp_path, make=False).arguments == ["-XX:TieredStopAtLevel=1"]  # none made here
    monkeypatch.setenv("EOS_HARNESS_SPARK_JVM", "plain")
    assert session_options(tmp_path).options == ""
