"""Spark as a Dagster resource: dagster-pyspark's PySparkResource with the engine's settings."""

from __future__ import annotations

from dagster_pyspark import PySparkResource

from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.replication.spark_runner import spark_conf


def pyspark_resource(settings: SparkSettings) -> PySparkResource:
    """The session the copy job needs (speculation off, UI off, ...).

    The session itself starts only in runs that use the resource, when the run
    begins, never while definitions load.
    """
    return PySparkResource(spark_config=spark_conf(settings))
