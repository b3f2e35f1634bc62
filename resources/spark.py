"""Spark as a Dagster resource: dagster-pyspark's PySparkResource with the engine's settings.

A resource's settings are shown in the UI and stored in the repository
snapshot, so Spark settings that hold a secret are left out of them: the
session gets those from the configuration file when a run starts (R-CFG-5).
"""

from __future__ import annotations

from pathlib import Path

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

from mirror_pipeline.config.loader import PipelineConfig, load_config
from mirror_pipeline.config.redaction import is_secret_key
from mirror_pipeline.replication.spark_runner import session_from_conf, spark_conf


class MirrorPySparkResource(PySparkResource):
    """PySparkResource whose secret Spark settings come from `config_path` at run time only."""

    config_path: str | None = Field(
        default=None, description="The mirror-pipeline configuration file the secret Spark settings are read from."
    )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        secret = secret_settings(load_config(self.config_path)) if self.config_path else {}
        # The runner's own builder (not dagster-pyspark's): the same session as the CLI's, and
        # a Spark Connect server that would run speculative copies is refused.
        self._spark_session = session_from_conf({**self.spark_config, **secret})


def pyspark_resource(config: PipelineConfig) -> PySparkResource:
    """The session the copy job needs (speculation off, UI off, ...).

    The session itself starts only in runs that use the resource, when the run
    begins, never while definitions load.
    """
    secret = secret_settings(config)
    shown = {k: v for k, v in spark_conf(config.spark).items() if k not in secret}
    path = str(Path(config.path).resolve()) if config.path else None
    return MirrorPySparkResource(spark_config=shown, config_path=path)


def secret_settings(config: PipelineConfig) -> dict[str, str]:
    """The Spark settings whose key names a secret or whose value holds one of the file's secrets."""
    secrets = [s for s in config.secret_values() if s]
    return {k: v for k, v in spark_conf(config.spark).items() if is_secret_key(k) or any(s in str(v) for s in secrets)}
