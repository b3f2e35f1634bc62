"""The Spark side: session settings and running a cycle's work units as one job.

Work units become one Spark job of one task each (R-EX-1). `mapInArrow` is
used rather than the RDD API so the same code runs under classic Spark and
Spark Connect.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from mirror_pipeline.replication.copier import CopyContext, UnitResult, WorkUnit, copy_unit

LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")

RESULT_SCHEMA = pa.schema(
    [
        ("mirror_topic", pa.string()),
        ("partition", pa.int64()),
        ("source_from", pa.int64()),
        ("source_until", pa.int64()),
        ("dest_from", pa.int64()),
        ("dest_until", pa.int64()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("first_timestamp", pa.int64()),
        ("last_timestamp", pa.int64()),
        ("error_kind", pa.string()),
        ("error", pa.string()),
    ]
)

# Settings the copy job's correctness depends on: they win over user settings.
REQUIRED_CONF = {
    # A speculative duplicate of a copy task would be a second writer.
    "spark.speculation": "false",
    # A retried task would find the mirror moved on and refuse; the next
    # cycle resumes instead, from what actually landed.
    "spark.task.maxFailures": "1",
}


def use_this_python() -> None:
    """Make Spark's Python workers run this interpreter (the one with confluent-kafka).

    PySpark reads only the environment for this, not the Spark conf.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local sessions bind to loopback, not whatever the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def spark_conf(settings) -> dict[str, str]:
    """Spark settings for the pipeline's session: defaults, the user's, then the required ones."""
    use_this_python()
    conf = {
        "spark.master": settings.master,
        "spark.app.name": "mirror-pipeline",
        # Executors must run the interpreter that has confluent-kafka installed.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
    }
    conf.update({k: str(v) for k, v in settings.conf.items()})
    conf.update(REQUIRED_CONF)
    return conf


def spark_session(settings):
    """A Spark session for the CLI and tests (Dagster gets its own through dagster-pyspark)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_units(spark, units: Sequence[WorkUnit], ctx: CopyContext, description: str = "") -> list[UnitResult]:
    """Copy every unit in one Spark job, one task per unit; one result per unit."""
    rows = run_tasks(spark, units, lambda unit: copy_unit(unit, ctx).to_row(), RESULT_SCHEMA, description)
    return [UnitResult(**row) for row in rows]


def run_tasks(spark, items: Sequence, run_one: Callable[[object], dict], schema: pa.Schema,
              description: str = "") -> list[dict]:
    """`run_one(item)` for every item in one Spark job, one task each; its result rows, as dicts of `schema`.

    `items` and `run_one` are shipped to the tasks, so they must be picklable
    plain values (clients are built inside the task).
    """
    if not items:
        return []
    items = list(items)

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [run_one(items[i]) for i in batch.column("id").to_pylist()]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    if description:
        try:
            spark.sparkContext.setJobDescription(description)
        except Exception:  # Spark Connect has no SparkContext; the description is cosmetic.
            pass
    frame = spark.range(0, len(items), 1, numPartitions=len(items)).mapInArrow(run_partition, ddl_of(schema))
    return [row.asDict() for row in frame.collect()]


def ddl_of(schema: pa.Schema) -> str:
    """Spark's DDL for a schema of strings and 64-bit integers."""
    return ", ".join(f"{f.name} {'string' if f.type == pa.string() else 'long'}" for f in schema)
