"""The harness installed beside a user's own stream library (opt-in, network: ``make test-beside``).

pyproject.toml states ranges, not pins, so ``pip install 'eos-harness[kafka]' quixstreams==3.28.1``
resolves (quixstreams 3.28.1 needs ``confluent-kafka>=2.8.2,<2.13`` and ``rocksdict>=0.3,<0.4``) and both
work in the one environment. The lowest supported versions are tested by ``make test-lowest``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
QUIXSTREAMS = "quixstreams==3.28.1"

pytestmark = pytest.mark.install


def _kafka_range() -> Requirement:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (kafka,) = extras["kafka"]
    return Requirement(kafka)


def test_the_kafka_extra_installs_beside_quixstreams_and_both_work(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = wheels.glob("eos_harness-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT")}
    # What a user types, with this checkout's wheel standing for eos-harness on PyPI.
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", f"{wheel}[kafka]", QUIXSTREAMS],
                             capture_output=True, text=True, timeout=1800, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "ResolutionImpossible" not in install.stderr
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, timeout=300, env=env)
    assert check.returncode == 0, check.stdout + check.stderr

    listed = json.loads(subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True,
                                       text=True, timeout=300, check=True, env=env).stdout)
    versions = {row["name"].lower(): row["version"] for row in listed}
    assert versions["quixstreams"] == "3.28.1"
    kafka = _kafka_range()
    assert kafka.specifier.contains(versions["confluent-kafka"]), (kafka, versions["confluent-kafka"])
    assert Requirement("confluent-kafka>=2.8.2,<2.13").specifier.contains(versions["confluent-kafka"])

    both = subprocess.run([python, "-c", "import quixstreams, eos_harness.broker.kafka; print(quixstreams.__version__)"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert both.returncode == 0, both.stderr
    assert both.stdout.split() == ["3.28.1"]
    # The harness runs in that environment: a lifecycle run on RocksDB (quixstreams' rocksdict).
    run = subprocess.run([str(venv / "bin" / "eos-harness"), "run", "--store", "rocksdb-indexed", "--seed", "1",
                          "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verdict: pass" in run.stdout
