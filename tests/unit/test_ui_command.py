"""`mirror-pipeline ui` refuses what it cannot serve before starting anything (the UI itself: tests/browser)."""

from __future__ import annotations

import importlib
import socket
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mirror_pipeline.cli import cli
from tests.config_files import write_pair_config

REPO = Path(__file__).resolve().parents[2]
# The module, not the command `mirror_pipeline.cli` binds to the same name.
ui = importlib.import_module("mirror_pipeline.cli.ui")


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    return str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", "west-to-east"))


def invoke(*args: str):
    return CliRunner().invoke(cli, ["ui", *args])


def test_the_code_location_is_the_one_workspace_yaml_declares():
    (entry,) = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
    assert entry["python_module"] == {"module_name": ui.MODULE, "location_name": ui.LOCATION}


def test_a_port_in_use_is_one_line_and_nothing_starts(config, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("--config", config, "--port", str(port))
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: --port {port}: 127.0.0.1:{port} is already in use (another Dagster UI?); "
        f"stop what listens there or pick another port with --port\n"
    )
    assert result.stdout == ""
    assert not (tmp_path / ".dagster-home").exists()


def test_a_bad_config_is_the_usual_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("--config", str(tmp_path / "absent.yaml"))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {tmp_path / 'absent.yaml'}: configuration file not found")


@pytest.mark.parametrize("args", [["--port", "0"], ["--port", "65536"], ["--host", ""], ["--host", "a\nb"]])
def test_bad_host_or_port_is_a_usage_error(config, args):
    result = invoke("--config", config, *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1


def test_a_given_dagster_home_that_is_not_a_directory_is_refused(config, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "nowhere"))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = invoke("--config", config, "--port", str(port))
    assert result.exit_code == 1
    assert "is not a directory" in result.stderr
