"""A verify's tasks as ONE Spark job (R-REL-4, R-EX-1).

The copy job's runner (`replication.spark_runner.run_tasks`): one row per
task id, one Spark partition per row, `mapInArrow`, so it runs under classic
Spark and Spark Connect alike. Nothing here imports PySpark: the session is
handed in. Unlike the copy job, a verify only reads, so a retried or
speculative task would be harmless.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mirror_pipeline.replication.spark_runner import run_tasks
from mirror_pipeline.verification.task import TaskResult, VerifyContext, VerifyTask, verify_task

RESULT_SCHEMA = pa.schema(
    [
        ("mirror_topic", pa.string()),
        ("partition", pa.int64()),
        ("ranges_checked", pa.int64()),
        ("source_records", pa.int64()),
        ("mirror_records", pa.int64()),
        ("bytes_read", pa.int64()),
        ("compacted_away", pa.int64()),
        ("throttled_ms", pa.int64()),
        ("mismatch", pa.string()),
        ("error", pa.string()),
    ]
)


def run_verify_tasks(spark, tasks: Sequence[VerifyTask], ctx: VerifyContext, description: str = "") -> list[TaskResult]:
    """Every task in one Spark job, one Spark task each; one result per task."""
    rows = run_tasks(spark, tasks, lambda task: verify_task(task, ctx).to_row(), RESULT_SCHEMA, description)
    return [TaskResult(**row) for row in rows]
