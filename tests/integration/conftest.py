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


@pytest.fixture
def own_state(unique_name) -> dict:
    """Link settings that keep this test's registry and offset maps in topics of its own, so the
    link record it writes never meets another test's link of the same name on the shared clusters."""
    tag = unique_name()
    return {"mirror.state.topic": f"ops.state.{tag}"[:249], "mirror.offset.map.topic": f"ops.omap.{tag}"[:249]}
