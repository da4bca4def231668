"""Spark Structured Streaming pipelines verified under driver kills between micro-batch commit steps.

``eos_harness.spark.process`` starts a pipeline (``eos_harness.spark.app``) as its own OS process
group, ``eos_harness.faults.spark`` watches its checkpoint and output directories and SIGKILLs it
right after a chosen file appears, ``eos_harness.suites.spark.runner`` restarts it on the same
checkpoint and checks the outcome against the pure models in ``models/spark.py`` and
``models/windows.py``.

This module registers the ``spark-kafka`` jar bundle (Spark's Kafka connector at the version of
the installed pyspark), fetched once from Maven Central by ``python -m eos_harness.jars``.
"""

from __future__ import annotations

from eos_harness.jars import Bundle, register

SPARK_VERSION = "4.2.0"  # the pinned pyspark (pyproject's `spark` extra); the connector must match it

KAFKA_BUNDLE = register(
    Bundle(
        "spark-kafka",
        SPARK_VERSION,
        (f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}",),
        # Everything pyspark already ships in pyspark/jars; kept: the connector, kafka-clients,
        # spark-token-provider-kafka and commons-pool2.
        exclude_groups=(
            "org.apache.hadoop", "org.scala-lang", "org.scala-lang.modules", "org.lz4", "at.yawk.lz4", "org.xerial.snappy",
            "org.slf4j", "com.google.code.findbugs",
        ),
        exclude_artifacts=("spark-tags_2.13",),
        description="Spark's Kafka source and sink (spark-sql-kafka-0-10) and its dependencies",
    )
)
