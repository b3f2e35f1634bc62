"""Dagster resources: the engine, and Spark for the runs that copy."""

from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.resources.spark import pyspark_resource

__all__ = ["MirrorEngine", "pyspark_resource"]
