"""Fixtures for engine tests on the real local Kafka clusters."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror_pipeline.config.loader import load_config
from tests.config_files import write_pair_config

LINK = "west-to-east"


@pytest.fixture
def write_config(tmp_path: Path, source_bootstrap: str, destination_bootstrap: str):
    """Factory: a mirror.yaml for the test pair with link `west-to-east` and extra link settings."""

    def write(settings: dict | None = None) -> Path:
        return write_pair_config(tmp_path / "mirror.yaml", source_bootstrap, destination_bootstrap, LINK, settings)

    return write


@pytest.fixture
def config(write_config):
    return load_config(write_config())
