"""Fixtures shared by the Dagster tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dagster.offline_config import VALID_CONFIG


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """`mirror.yaml` with two links whose clusters need not be running."""
    path = tmp_path / "mirror.yaml"
    path.write_text(VALID_CONFIG)
    return path
