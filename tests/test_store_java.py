"""Which java Kafka Streams' store JVMs run on (no JVM started: JDK homes made here, their ``java`` a script):
``$EOS_HARNESS_STORE_JAVA`` when set; else a Java 25 or later (its AOT cache) from PATH, ``$JAVA_HOME`` or the
JDKs installed under /usr/lib/jvm; else the ``java`` on PATH. The AOT cache's command line is tested with the
real JVMs (tests/test_kafka_streams_stores.py)."""

from __future__ import annotations

import pytest
from eos_harness.kafka_streams import build
from eos_harness.kafka_streams.build import JAVA_ENV, BuildError, store_java


def _jdk(root, name: str, version: str):
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_RUNTIME_VERSION="{version}"\nJAVA_VERSION="{version.split("+")[0]}"\n')
    return home


@pytest.fixture
def jdks(tmp_path, monkeypatch):
    """A JDK 17 on PATH, none in JAVA_HOME, and an empty folder of installed JDKs."""
    installed = tmp_path / "jvm"
    installed.mkdir()
    monkeypatch.setattr(build, "JVM_HOMES", str(installed))
    old = _jdk(tmp_path, "jdk-17", "17.0.15+6")
    monkeypatch.setenv("PATH", str(old / "bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv(JAVA_ENV, raising=False)
    build._java.clear()
    yield tmp_path, installed, old
    build._java.clear()


def test_store_jvms_run_on_the_java_on_path_when_no_java_25_is_installed(jdks):
    _, _, old = jdks
    java = store_java()
    assert java.path == str((old / "bin" / "java").resolve())
    assert java.feature == 17 and not java.aot


def test_an_installed_java_25_is_found_and_maps_an_aot_cache(jdks):
    _, installed, _ = jdks
    new = _jdk(installed, "temurin-25", "25.0.3+9-LTS")
    java = store_java()
    assert java.path == str((new / "bin" / "java").resolve()) and java.feature == 25 and java.aot


def test_java_home_s_java_25_is_found(jdks, monkeypatch):
    root, _, _ = jdks
    home = _jdk(root, "elsewhere-25", "25.0.1+8")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert store_java().path == str((home / "bin" / "java").resolve())


def test_eos_harness_store_java_picks_the_java_a_jdk_home_or_a_binary(jdks, monkeypatch):
    root, installed, old = jdks
    _jdk(installed, "temurin-25", "25.0.3+9-LTS")
    monkeypatch.setenv(JAVA_ENV, str(old))  # a JDK's home: its java, 17, though a 25 is installed
    assert store_java().path == str((old / "bin" / "java").resolve()) and not store_java().aot
    monkeypatch.setenv(JAVA_ENV, "java")  # the java on PATH
    assert store_java().feature == 17
    monkeypatch.setenv(JAVA_ENV, str(root / "no-such-jdk"))
    with pytest.raises(BuildError, match=JAVA_ENV):
        store_java()
