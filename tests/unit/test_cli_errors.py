"""The CLI's one error boundary: a message and an exit code, never a traceback unless --debug asks.

Offline: the engine is stubbed where a command would reach Kafka.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli, common
from mirror_pipeline.model.errors import ClusterUnreachable
from tests.config_files import write_pair_config

LINK = "west-to-east"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    return str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK))


def raising(exc: BaseException):
    def stub(*args, **kwargs):
        raise exc

    return stub


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


def test_a_library_error_is_one_line_with_exit_code_1(config, monkeypatch):
    monkeypatch.setattr(
        engine, "list_mirrors", raising(ClusterUnreachable("cluster 'us-east' (127.0.0.1:1) did not answer"))
    )
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 1
    assert result.stderr == "error: cluster 'us-east' (127.0.0.1:1) did not answer\n"
    assert result.stdout == ""


def test_a_library_error_with_json_is_json(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(ClusterUnreachable("cluster 'us-east' did not answer")))
    result = invoke("mirror", "list", "--link", LINK, "--config", config, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stderr) == {"error": "cluster 'us-east' did not answer"}


def test_control_characters_in_a_library_message_are_escaped(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(ClusterUnreachable("topic 'a\x1b[2Jb': gone\rsee\x00")))
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 1
    assert result.stderr == "error: topic 'a\\x1b[2Jb': gone\\rsee\\x00\n"


def test_an_unexpected_exception_is_one_paragraph_with_exit_code_3(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(KeyError("no\nsuch\x07key")))
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert (
        result.stderr == "error: internal error: KeyError: 'no\\nsuch\\x07key'; rerun with --debug for the traceback\n"
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback_and_keeps_the_exit_code(config, monkeypatch, how):
    monkeypatch.setattr(engine, "list_mirrors", raising(ZeroDivisionError("boom")))
    args = ["mirror", "list", "--link", LINK, "--config", config]
    result = invoke("--debug", *args) if how == "flag" else invoke(*args, env={"MIRROR_PIPELINE_DEBUG": "1"})
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr and "ZeroDivisionError: boom" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == "error: internal error: ZeroDivisionError: boom"


def test_an_interrupt_exits_130(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(KeyboardInterrupt()))
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 130 and result.stderr == "error: interrupted\n"


def test_an_unknown_link_names_the_argument_and_the_links_there(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(AssertionError("must not be reached")))
    result = invoke("mirror", "list", "--link", "east-to-west", "--config", "mirror.yaml")
    assert result.exit_code == 1
    assert (
        result.stderr == "error: --link: no link 'east-to-west' in mirror.yaml; give one of its links: west-to-east\n"
    )


def test_link_describe_names_its_argument(config):
    result = invoke("link", "describe", "nowhere", "--config", config)
    assert result.exit_code == 1 and result.stderr.startswith("error: NAME: no link 'nowhere'")


def test_a_missing_config_file_is_exit_code_1_with_the_name_escaped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("mirror", "list", "--link", LINK, "--config", "no\x07such.yaml")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no\\x07such.yaml: configuration file not found")


def test_success_exits_0_and_text_output_is_escaped(config, monkeypatch):
    class Info:
        def to_dict(self):
            return {"mirror_topic": "orders", "source_topic": "orders", "state": "ACTIVE\x1b[0m"}

    monkeypatch.setattr(engine, "list_mirrors", lambda cfg, link: [Info()])
    text = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert text.exit_code == 0 and "ACTIVE\\x1b[0m" in text.stdout and "\x1b" not in text.stdout
    as_json = invoke("mirror", "list", "--link", LINK, "--config", config, "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)[0]["state"] == "ACTIVE\x1b[0m"


def test_help_and_version_exit_0():
    assert invoke("--help").exit_code == 0
    assert invoke("mirror", "promote", "-h").exit_code == 0
    version = invoke("--version")
    assert version.exit_code == 0 and "version" in version.stdout


def test_the_exit_code_table_is_documented():
    for code in ("0 ", "1 ", "2 ", "3 ", "130 "):
        assert f"\n    {code}" in common.__doc__, code


def test_a_file_system_refusal_is_exit_code_1_naming_the_file(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(PermissionError(13, "Permission denied", "/srv/x\x07.csv")))
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 1
    assert result.stderr == "error: '/srv/x\\x07.csv': Permission denied\n"


def test_a_broken_pipe_exits_quietly(config, monkeypatch):
    monkeypatch.setattr(engine, "list_mirrors", raising(BrokenPipeError(32, "Broken pipe")))
    result = invoke("mirror", "list", "--link", LINK, "--config", config)
    assert result.exit_code == 1 and result.stderr == ""
