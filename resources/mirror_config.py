"""The configuration file as a Dagster resource."""

from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource
from pydantic import Field

from mirror_pipeline.config import PipelineConfig, load_config


class MirrorConfigResource(ConfigurableResource):
    """Loads and validates `mirror.yaml` when a run, sensor or schedule needs it.

    With no `config_path`, the path is resolved when `load()` is called, not at
    import: `$MIRROR_PIPELINE_CONFIG`, else `./mirror.yaml`.
    """

    config_path: Optional[str] = Field(
        default=None,
        description=(
            "Path of the mirror-pipeline configuration file. Empty: "
            "$MIRROR_PIPELINE_CONFIG, else ./mirror.yaml, resolved at run time."
        ),
    )

    def load(self) -> PipelineConfig:
        """The validated configuration; raises `ConfigError` naming the file and key."""
        return load_config(self.config_path or None)
