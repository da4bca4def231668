"""Benchmark of the campaign engines (``chaos --engine``): scenarios per second of one campaign, the same seed
and count, on the local pool, on Spark in local mode (``local[*]``) and on Spark standalone clusters of one and
of two one-core workers started here (:class:`eos_harness.spark.standalone.StandaloneCluster`); the verdicts must be
the same on all three. Each rate is the campaign's own (its ``seconds``: the driver's start, the Spark
application's start and its executors' registration included; the cluster's own start is not).

``python -m benchmarks.bench_engines [--suite lifecycle] [--scenarios 40] [--seed 7] [--engines local,spark,cluster1,cluster]``
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common import parse_options, scratch_directory

EOS = str(Path(sys.executable).with_name("eos-harness"))
STORES = {"lifecycle": "memory,rocksdb-indexed,mutant-recover-keeps-uncommitted",
          "conformance": "memory,mutant-read-committed-sees-overlay"}


def _campaign(out: Path, suite: str, scenarios: int, seed: int, *engine: str) -> dict:
    subjects = ["--stores", STORES[suite]] if suite in STORES else []  # another suite: its own subjects
    done = subprocess.run([EOS, "chaos", "--suite", suite, *subjects, "--scenarios", str(scenarios),
                           "--seed", str(seed), "--no-report", "--out", str(out), *engine],
                          capture_output=True, text=True)
    campaign = json.loads((out / "chaos.json").read_text())
    verdicts = [(r["index"], r.get("store") or r.get("system"), r["verdict"]) for r in campaign["scenarios"]]
    return {"exit": done.returncode, "seconds": campaign["seconds"], "verdicts": verdicts,
            "rate": len(verdicts) / max(campaign["seconds"], 1e-9)}


def main() -> None:
    options = parse_options(__doc__, ("--suite", "lifecycle", "a suite --engine spark runs (lifecycle, conformance: a few "
                             "stores; others: their default subjects)"),
                            ("--scenarios", 40, "scenarios of each campaign"), ("--seed", 7, "campaign seed"),
                            ("--engines", "local,spark,cluster", "which of local, spark (local[*]), cluster1 (a standalone "
                             "worker of one core), cluster (two)"))
    wanted = options.engines.split(",")
    found: dict[str, dict] = {}
    with scratch_directory("engines") as scratch:
        if "local" in wanted:
            found["local pool"] = _campaign(scratch / "local", options.suite, options.scenarios, options.seed)
        if "spark" in wanted:
            found["spark local[*]"] = _campaign(scratch / "spark", options.suite, options.scenarios, options.seed,
                                                "--engine", "spark")
        for name, workers in (("cluster1", 1), ("cluster", 2)):
            if name not in wanted:
                continue
            from eos_harness.spark.standalone import StandaloneCluster

            with StandaloneCluster(scratch / name, workers=workers, cores=1) as cluster:
                found[f"standalone {workers}x1 core"] = _campaign(scratch / f"{name}-run", options.suite,
                                                                  options.scenarios, options.seed, "--engine", "spark",
                                                                  "--master", cluster.url)
    first = next(iter(found.values()))
    for name, run in found.items():
        same = "same verdicts" if run["verdicts"] == first["verdicts"] else "VERDICTS DIFFER"
        print(f"{name:22s} {options.scenarios} {options.suite} scenarios in {run['seconds']:7.1f} s: "
              f"{run['rate']:.2f}/s (exit {run['exit']}, {same})")


if __name__ == "__main__":
    main()
