"""The pytest fixture ``eos_spark_pipeline``: a team's own Structured Streaming query verified in its CI.

``result = eos_spark_pipeline.verify(build, batches=[[{...}, ...], ...], windows=("sink", "commit"))`` writes the
batches as the query's input (one JSON-lines file per micro-batch), runs the query crash-free once, then once
per window with the driver killed right after that step of a batch and restarted
(:mod:`eos_harness.suites.spark.user`), and fails the test with the violations and each replay command when a
verdict is not ``pass``. ``build`` is a module-level function (``build(source)`` returns a DataStreamWriter, not
started), or its ``module:function``; its module is imported only in the children that run Spark.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from eos_harness.suites.spark.kafka_input import is_kafka_input
from eos_harness.suites.spark.user import (
    WINDOWS,
    UserScenario,
    probe,
    python_path,
    reference,
    run_user_scenario,
)
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE, PASS

__all__ = ["PipelineVerification", "SparkPipelineFixture"]


@dataclass
class PipelineVerification:
    """What ``verify`` found: a result per window (the ``run --suite spark`` verdict object), worst first."""

    ref: str
    results: list[dict] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = [r["verdict"] for r in self.results]
        for worst in (FAIL, ERROR, PASS):
            if worst in verdicts:
                return worst
        return NOT_APPLICABLE

    def table(self) -> str:
        """A line per window: the kill, the window on disk, the configuration, the verdict, the duplicates."""
        lines = []
        for r in self.results:
            conf = r["configuration"]
            state = conf["state_provider"] + ("+changelog" if conf["changelog_checkpointing"] else "")
            windows = ", ".join(f"{c['window']}({c['batch']})" for c in r.get("crash_windows", [])) or "-"
            dups = r.get("duplicates", {}).get("count", 0)
            lines.append(f"{','.join(r['schedule']):<14} {windows:<18} {state}/fmt{conf['checkpoint_format']:<4} "
                         f"{r['verdict']}" + (f" ({dups} duplicates)" if dups else ""))
        return "\n".join(lines)

    def explain(self) -> str:
        """The table, then each result that did not pass: its violations (the first five) and its replay."""
        parts = [f"{self.ref}: {self.verdict}", self.table()]
        for r in self.results:
            if r["verdict"] == PASS:
                continue
            if r["verdict"] == NOT_APPLICABLE:  # e.g. a configuration Spark refuses for the query: say so
                parts.append(f"{','.join(r['schedule'])}: not applicable: {r.get('reason', '')}")
                continue
            parts.append(f"{','.join(r['schedule'])}: {r['verdict']}" + (f": {r['error']}" if r.get("error") else ""))
            parts += [f"  {v['check']}: {v['key']} expected {v['expected']} observed {v['observed']}"
                      for v in r["violations"][:5]]
            parts.append(f"  replay: {r['repro']}")
        return "\n".join(parts)


def _ref(build: Callable | str) -> str:
    if isinstance(build, str):
        return build
    qualname = getattr(build, "__qualname__", "")
    if "<locals>" in qualname or not getattr(build, "__module__", None):
        raise ValueError(f"{qualname or build!r}: define build at module level (its driver imports it by name)")
    return f"{build.__module__}:{qualname}"


class SparkPipelineFixture:
    """``eos_spark_pipeline``: see the module. ``directory``: where the fixture keeps its runs and the crash-free
    runs (reused by every ``verify`` of the same query, input and configuration in the session)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._count = itertools.count()

    def verify(self, build: Callable | str, batches: Sequence[Sequence[dict]] | str | Path,
               windows: Iterable[str] = WINDOWS, *, batch: int | None = None, schema: str | None = None,
               key: Sequence[str] = (), sink_guarantee: str | None = None, state_provider: str = "rocksdb",
               checkpoint_format: int = 1, changelog: bool = False, seed: int = 0,
               read_output: Callable | str | None = None, workers: int = 2,
               fail: bool = True, max_offsets_per_trigger: int | None = None) -> PipelineVerification:
        """Verify ``build`` over ``batches`` (rows as dicts, a micro-batch each; a directory of JSON-lines
        files; or a Kafka topic, ``kafka://HOST:PORT/TOPIC``, ``max_offsets_per_trigger`` offsets a micro-batch) with a kill in each of ``windows`` (``offsets``, ``state``, ``sink``, ``commit``, at ``batch``,
        by default the second; or whole crash points, ``sink@2``); ``read_output(spark, output_dir)`` reads a
        ``foreachBatch`` sink's output back (default: ``read_output`` in build's module); ``workers``: windows run
        at a time once the crash-free run is done (each its own driver). ``fail``: fail the test unless every window
        passes (a ``state`` window of a query that keeps no state is not applicable)."""
        import pytest

        number = next(self._count)
        ref = _ref(build)
        kafka = isinstance(batches, str) and is_kafka_input(batches)
        if isinstance(batches, (str, Path)):
            folder = Path(batches)
        else:
            folder = self.directory / f"input-{number}"
            folder.mkdir(parents=True)
            for n, rows in enumerate(batches):
                (folder / f"batch-{n:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        template = UserScenario(ref, str(batches) if kafka else str(folder), schema, tuple(key), sink_guarantee,
                                state_provider, checkpoint_format, changelog, (), seed, tuple(python_path()),
                                reader=None if read_output is None else _ref(read_output),
                                max_offsets=max_offsets_per_trigger)
        try:
            if kafka:  # the topic read whole (unreachable, missing, empty: the test's mistake)
                template.validate()
                template = template.resolved()
            count = template.batch_count() if kafka else len(list(folder.iterdir())) if folder.is_dir() else 0
            at = batch if batch is not None else min(1, max((count or 0) - 1, 0))
            schedule = [w if "@" in w else f"{w}@{at}" for w in windows]
            for target in schedule:
                replace(template, schedule=(target,)).validate()
            module_file = probe(ref, list(template.python_path)).get("file")
            if template.reader:
                probe(template.reader, list(template.python_path))
        except ValueError as exc:  # the test's own mistake: it errors, saying what (nothing ran)
            raise ValueError(f"eos_spark_pipeline.verify: {exc}") from None
        scenarios = [replace(template, schedule=(target,), module_file=module_file) for target in schedule]
        reference(scenarios[0], self.directory, module_file)  # once, before the windows share it

        def one(index: int) -> dict:
            return run_user_scenario(scenarios[index], self.directory / f"verify-{number}-{index}",
                                     reference_root=self.directory)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            found = PipelineVerification(ref, list(pool.map(one, range(len(scenarios)))))
        if fail and found.verdict != PASS:
            pytest.fail(found.explain(), pytrace=False)
        return found
