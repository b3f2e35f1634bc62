"""Fixtures for engine tests on the real local Kafka clusters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mirror_pipeline.config import load_config

LINK = "west-to-east"


@pytest.fixture
def write_config(tmp_path: Path, source_bootstrap: str, destination_bootstrap: str):
    """Factory: a mirror.yaml for the test pair with link `west-to-east` and extra link settings."""

    def write(settings: dict | None = None) -> Path:
        settings = settings or {}
        data = {
            "clusters": {
                "us-west": {"bootstrap.servers": source_bootstrap},
                "us-east": {"bootstrap.servers": destination_bootstrap},
            },
            # Short fence wait: tests kill writers on purpose and need not wait 16 s.
            "defaults": {"mirror.writer.fence.wait.ms": 4000},
            "links": {LINK: {"source": "us-west", "destination": "us-east", **settings}},
            "spark": {"master": "local[2]"},
        }
        path = tmp_path / "mirror.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def config(write_config):
    return load_config(write_config())
