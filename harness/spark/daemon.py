"""The Python worker daemon of a pipeline run (Spark's ``spark.python.daemon.module``): PySpark's own
daemon, with pandas and pyarrow imported before it forks its workers.

Spark starts one daemon per run and forks a worker per task from it; a worker imports pandas and
pyarrow on its first pandas UDF (``applyInPandasWithState``, ``transformWithStateInPandas``), every
worker anew, which made the first micro-batch of those pipelines seconds slower than the next.
Imported once here, the forked workers share them. The workers run PySpark's own code unchanged.
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):  # a run without pandas has no pandas UDF either
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.sql.pandas.serializers  # noqa: F401

from pyspark.daemon import manager

if __name__ == "__main__":
    manager()
