"""Dagster resources: thin adapters that hand the engine its config and Spark."""

from resources.mirror_config import MirrorConfigResource
from resources.spark import pyspark_resource

__all__ = ["MirrorConfigResource", "pyspark_resource"]
