"""Spark settings the copy job depends on, for every place that builds a Spark conf.

The session builder (`replication.spark_runner`) puts them over the user's
settings; the local Spark Connect server (`local.spark_cluster`) starts with
them, since under Connect the server's conf rules.
"""

from __future__ import annotations

#: Session settings a Spark Connect client may set (the rest belongs to the server).
CONNECT_SESSION_CONF = {"spark.sql.execution.arrow.pyspark.enabled": "true"}

# Settings the copy job's correctness depends on: they win over user settings.
REQUIRED_CONF = {
    # A speculative duplicate of a copy task would be a second writer.
    "spark.speculation": "false",
    # A retried task would find the mirror moved on and refuse; the next
    # cycle resumes instead, from what actually landed.
    "spark.task.maxFailures": "1",
}
