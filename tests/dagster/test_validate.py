"""`dagster definitions validate` on the real workspace.yaml, as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dagster.offline_config import VALID_CONFIG

REPO = Path(__file__).resolve().parents[2]
WORKSPACE = REPO / "workspace.yaml"


def validate(cwd: Path, config: Path | None, dagster_home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MIRROR_PIPELINE_CONFIG"}
    if config is not None:
        env["MIRROR_PIPELINE_CONFIG"] = str(config)
    # Its own instance directory: validate otherwise makes a temporary one in the cwd.
    env["DAGSTER_HOME"] = str(dagster_home)
    return subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(WORKSPACE)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster-home"
    home.mkdir()
    return home


def test_validate_passes_with_a_config_from_any_directory(tmp_path: Path, dagster_home: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text(VALID_CONFIG)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = validate(elsewhere, config, dagster_home)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_missing_config_is_the_locations_load_error_naming_the_file(tmp_path: Path, dagster_home: Path) -> None:
    absent = tmp_path / "absent.yaml"
    result = validate(tmp_path, absent, dagster_home)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{absent}: configuration file not found" in output
    assert "MIRROR_PIPELINE_CONFIG" in output


def test_validate_fails_on_an_invalid_config_naming_the_problem(tmp_path: Path, dagster_home: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text(VALID_CONFIG.replace("destination: us-east", "destination: us-west"))
    result = validate(REPO, config, dagster_home)
    assert result.returncode != 0
    assert "links.west-to-east.destination" in result.stdout + result.stderr
