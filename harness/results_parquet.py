"""A campaign's results as Parquet, beside its JSON and ``results.jsonl``: ``RUN_DIR/parquet/results/``, a
dataset partitioned by ``suite``, ``subject`` and ``verdict`` (hive style: ``suite=…/subject=…/verdict=…/``),
one row per scenario, whichever engine ran it; Spark reads it as it is
(``spark.read.parquet("RUN_DIR/parquet/results")``).

Its columns: ``index`` (the plan index; a store's probe: -1), ``suite``, ``subject``, ``verdict`` (as the
scenario recorded it), ``expected``, ``seed``, ``seconds``, ``repro``, ``error``, ``checks`` (the checks that
fired, in their order) and ``result`` (the whole result, as its line of ``results.jsonl``). The scenarios'
histories (a suite that records them: lifecycle, metadata) as ``RUN_DIR/parquet/histories/``, one row per
event, partitioned the same way. Written with pyarrow (the ``spark`` extra); without it, nothing is written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["HISTORIES_DATASET", "PARQUET_DIR", "RESULTS_DATASET", "events_by_scenario", "read_results", "run_results",
           "write_histories", "write_results"]

PARQUET_DIR = "parquet"
RESULTS_DATASET = "results"
HISTORIES_DATASET = "histories"
PARTITIONS = ("suite", "subject", "verdict")


def _rows(results: Iterable[dict], subject: str) -> dict[str, list]:
    columns: dict[str, list] = {name: [] for name in ("index", "suite", "subject", "verdict", "expected", "seed",
                                                      "seconds", "repro", "error", "checks", "result")}
    for result in results:
        index = result.get("index")
        columns["index"].append(index if isinstance(index, int) else -1)
        columns["suite"].append(result.get("suite"))
        columns["subject"].append(str(result.get(subject)))
        columns["verdict"].append(result.get("verdict"))
        columns["expected"].append(result.get("expected"))
        seed = result.get("seed")
        columns["seed"].append(seed if isinstance(seed, int) and not isinstance(seed, bool) else None)
        seconds = result.get("seconds")
        columns["seconds"].append(float(seconds) if isinstance(seconds, int | float) else None)
        columns["repro"].append(result.get("repro"))
        columns["error"].append(result.get("error"))
        columns["checks"].append(list(dict.fromkeys(v.get("check") for v in result.get("violations") or ())))
        columns["result"].append(json.dumps(result))
    return columns


def write_results(out_dir: Path, results: list[dict], subject: str) -> Path | None:
    """Write ``results`` (a campaign's, ``subject`` the field naming what each ran) as the dataset
    ``out_dir/parquet/results`` (replacing the one an earlier start of the campaign wrote); returns its path,
    or None without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.dataset as ds
    except ImportError:
        return None
    schema = pa.schema([("index", pa.int64()), ("suite", pa.string()), ("subject", pa.string()),
                        ("verdict", pa.string()), ("expected", pa.string()), ("seed", pa.int64()),
                        ("seconds", pa.float64()), ("repro", pa.string()), ("error", pa.string()),
                        ("checks", pa.list_(pa.string())), ("result", pa.string())])
    target = Path(out_dir) / PARQUET_DIR / RESULTS_DATASET
    shutil.rmtree(target, ignore_errors=True)  # the run directory's own: a resumed campaign writes all again
    table = pa.table(_rows(results, subject), schema=schema)
    ds.write_dataset(table, target, format="parquet", partitioning=list(PARTITIONS), partitioning_flavor="hive",
                     existing_data_behavior="overwrite_or_ignore", basename_template="part-{i}.parquet")
    return target


def write_histories(out_dir: Path, results: list[dict], subject: str) -> Path | None:
    """Write the histories of ``results`` (each result's ``history``, a JSON-lines file, when it is there) as the
    dataset ``out_dir/parquet/histories``, partitioned as the results are: one row per event, with its scenario's
    ``index``, the event's ``seq``, ``instance`` and ``type``, and ``event`` (the whole event, JSON). Returns its
    path, or None without pyarrow or without any history."""
    try:
        import pyarrow as pa
        import pyarrow.dataset as ds
    except ImportError:
        return None
    columns: dict[str, list] = {name: [] for name in ("index", "seq", "instance", "type", "event", *PARTITIONS)}
    for result in results:
        path = result.get("history")
        if not isinstance(path, str) or not Path(path).is_file():
            continue
        for line in Path(path).read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short: the report names it
            if not isinstance(event, dict):
                continue
            columns["index"].append(result.get("index") if isinstance(result.get("index"), int) else -1)
            columns["seq"].append(event.get("seq") if isinstance(event.get("seq"), int) else None)
            columns["instance"].append(event.get("instance") if isinstance(event.get("instance"), int) else None)
            columns["type"].append(str(event.get("type")))
            columns["event"].append(line)
            columns["suite"].append(result.get("suite"))
            columns["subject"].append(str(result.get(subject)))
            columns["verdict"].append(result.get("verdict"))
    target = Path(out_dir) / PARQUET_DIR / HISTORIES_DATASET
    shutil.rmtree(target, ignore_errors=True)
    if not columns["index"]:
        return None
    schema = pa.schema([("index", pa.int64()), ("seq", pa.int64()), ("instance", pa.int64()), ("type", pa.string()),
                        ("event", pa.string()), *((name, pa.string()) for name in PARTITIONS)])
    ds.write_dataset(pa.table(columns, schema=schema), target, format="parquet", partitioning=list(PARTITIONS),
                     partitioning_flavor="hive", existing_data_behavior="overwrite_or_ignore",
                     basename_template="part-{i}.parquet")
    return target


def events_by_scenario(path: Path, suite: str) -> Iterator[tuple[int, str, list[dict]]]:
    """The histories of ``suite`` in the dataset at ``path`` (as :func:`write_histories` writes it), read back one
    scenario at a time in plan order: (index, subject, its events in ``seq`` order)."""
    import pyarrow.dataset as ds

    table = ds.dataset(path, format="parquet", partitioning="hive").to_table(
        columns=["index", "seq", "event", "subject"], filter=ds.field("suite") == suite)
    scenarios: dict[int, tuple[str, list[tuple[int, str]]]] = {}
    for index, seq, event, subject in zip(*(table.column(c).to_pylist() for c in ("index", "seq", "event", "subject")),
                                          strict=True):
        scenarios.setdefault(index, (subject, []))[1].append((seq, event))
    for index in sorted(scenarios):
        subject, events = scenarios[index]
        yield index, subject, [json.loads(text) for _, text in sorted(events, key=lambda e: e[0])]


def read_results(out_dir: Path) -> list[dict]:
    """The results of the dataset under ``out_dir`` (its ``result`` column), in plan order."""
    import pyarrow.dataset as ds

    table = ds.dataset(Path(out_dir) / PARQUET_DIR / RESULTS_DATASET, format="parquet",
                       partitioning="hive").to_table(columns=["index", "result"])
    rows = sorted(zip(table.column("index").to_pylist(), table.column("result").to_pylist(), strict=True),
                  key=lambda row: row[0])
    return [json.loads(text) for _, text in rows]


def run_results(out_dir: Path) -> list[dict]:
    """A campaign's results: its ``results.jsonl`` (written as each scenario ends), else its Parquet results."""
    lines = Path(out_dir) / "results.jsonl"
    if lines.is_file():
        found = []
        for line in lines.read_text(errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue  # a line cut short
        return [r for r in found if isinstance(r, dict)]
    return read_results(out_dir)
