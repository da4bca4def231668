"""A campaign's results as Parquet, beside its JSON and ``results.jsonl``: ``RUN_DIR/parquet/results/``, a
dataset partitioned by ``suite``, ``subject`` and ``verdict`` (hive style: ``suite=…/subject=…/verdict=…/``),
one row per scenario, whichever engine ran it; Spark reads it as it is
(``spark.read.parquet("RUN_DIR/parquet/results")``).

Its columns: ``index`` (the plan index; a store's probe: -1), ``suite``, ``subject``, ``verdict`` (as the
scenario recorded it), ``expected``, ``seed``, ``seconds``, ``repro``, ``error``, ``checks`` (the checks that
fired, in their order) and ``result`` (the whole result, as its line of ``results.jsonl``). Written with
pyarrow (the ``spark`` extra); without it, nothing is written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PARQUET_DIR", "RESULTS_DATASET", "read_results", "write_results"]

PARQUET_DIR = "parquet"
RESULTS_DATASET = "results"
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


def read_results(out_dir: Path) -> list[dict]:
    """The results of the dataset under ``out_dir`` (its ``result`` column), in plan order."""
    import pyarrow.dataset as ds

    table = ds.dataset(Path(out_dir) / PARQUET_DIR / RESULTS_DATASET, format="parquet",
                       partitioning="hive").to_table(columns=["index", "result"])
    rows = sorted(zip(table.column("index").to_pylist(), table.column("result").to_pylist(), strict=True),
                  key=lambda row: row[0])
    return [json.loads(text) for _, text in rows]
