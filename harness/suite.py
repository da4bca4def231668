"""The suite contract, and the one registry of suites (after Jepsen's test map: a suite is a value).

A :class:`Suite` says what the suite is called (``--suite NAME``), what it runs on (a store, a window
store, a metadata system, a Spark pipeline, a Kafka cluster), its checks with their meanings (read from
``suites/<package>/checks.py``), the field of a result that names its subject and, for a suite with
campaigns, the key of its campaign's tallies (``summary[tallies]``). Its commands are named, not
imported: ``run`` (one scenario, or the suite's one command) and ``chaos`` (a campaign), as
``module:attribute`` of a click command, so that this module imports no suite and no face.

The CLI takes its ``run``/``chaos`` dispatch and ``eos-harness suites`` from :data:`SUITES`: a new
suite is one more entry here and its package (``checks.py``, ``plan.py``, ``runner.py``, its pytest
entry), and no command code.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SUITES", "Suite", "suite"]


@dataclass(frozen=True)
class Suite:
    name: str  # ``--suite NAME``, and the ``suite`` field of its JSON
    title: str
    runs_on: str  # what a user points it at
    package: str  # eos_harness.suites.<package>
    checks_name: str = "CHECKS"  # the checks' table in its checks module (name -> meaning)
    run: str | None = None  # "module:attribute" of the click command that runs one scenario (or the suite)
    chaos: str | None = None  # … that runs a campaign; None: the suite has none
    subject: str | None = None  # the field of a result naming what it ran (``store``, ``system``, ``sink``)
    tallies: str | None = None  # the key of its campaign summary's tallies (``stores``, ``systems``, ``sinks``)
    pytest_entry: bool = False  # ``pytest --pyargs eos_harness.suites.<package>`` runs it

    def checks(self) -> Mapping[str, str]:
        """Each check the suite reports (a violation's ``check``), with the promise it tests."""
        module = importlib.import_module(f"eos_harness.suites.{self.package}.checks")
        return dict(getattr(module, self.checks_name))

    def command(self, which: str):
        """The suite's ``run`` or ``chaos`` click command; None when it has none."""
        target = self.run if which == "run" else self.chaos
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "runs_on": self.runs_on,
                "package": f"eos_harness.suites.{self.package}", "subject": self.subject,
                "commands": {"run": self.run is not None, "chaos": self.chaos is not None},
                "pytest_entry": self.pytest_entry, "checks": self.checks()}


_FACES = "eos_harness.faces"
SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("lifecycle", "EOS task lifecycle", "a store (key-value, or window with a windowed workload) under the "
          "EOS task runtime, its task killed between commit steps", "lifecycle",
          run=f"{_FACES}.lifecycle:run_command", chaos=f"{_FACES}.lifecycle:chaos_command",
          subject="store", tallies="stores", pytest_entry=True),
    Suite("conformance", "store conformance (KIP-844/KIP-892)", "a key-value store (a built-in name or "
          "module:function)", "conformance", run=f"{_FACES}.cli:verify_command", subject="store", pytest_entry=True),
    Suite("offsets", "offsets in the store (KIP-892/KIP-1035)", "a key-value store that manages its offsets (run "
          "by verify beside conformance)", "offsets", checks_name="PROMISES", run=f"{_FACES}.cli:verify_command",
          subject="store", pytest_entry=True),
    Suite("windows", "window store (KIP-428)", "a window store (a built-in window store or module:function)",
          "windows", run=f"{_FACES}.cli:verify_command", subject="store", pytest_entry=True),
    Suite("metadata", "metadata transactions (KIP-868)", "a metadata system: the controller and its readers over "
          "a metadata log (embedded or Kafka), or a mutant", "metadata",
          run=f"{_FACES}.metadata:metadata_run_command", chaos=f"{_FACES}.metadata:metadata_chaos_command",
          subject="system", tallies="systems", pytest_entry=True),
    Suite("spark", "Spark Structured Streaming", "a Spark pipeline (pipeline x sink x state store x checkpoint "
          "format), its driver killed in each crash window", "spark",
          run=f"{_FACES}.spark:spark_run_command", chaos=f"{_FACES}.spark:spark_chaos_command",
          subject="sink", tallies="sinks", pytest_entry=True),
    Suite("kafka-log", "Kafka's transactional log", "a Kafka cluster (kafka-local, kafka-quorum or kafka://)",
          "kafka_log", checks_name="ANOMALIES", run=f"{_FACES}.kafka_log:kafka_log_command", pytest_entry=True),
    Suite("kafka-metadata", "KIP-868 on a real KRaft quorum", "a KRaft quorum started here, its active controller "
          "killed while topics are created", "kafka_metadata", run=f"{_FACES}.kafka_metadata:kafka_metadata_command"),
)}


def suite(name: str) -> Suite:
    """The suite called ``name``; a ValueError naming the suites for any other name."""
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"no suite {name!r}; one of: {', '.join(SUITES)}") from None
