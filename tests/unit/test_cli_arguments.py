"""Bad names and numbers are refused before anything runs: exit code 2, one paragraph naming the argument.

Offline: the config's clusters sit on 127.0.0.1:1, where nothing listens, and
every case here is refused before a client would be opened.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.model.errors import ConfigError
from tests.config_files import write_pair_config

LINK = "west-to-east"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))

    def no_kafka(*args, **kwargs):
        raise AssertionError("a refused argument must not reach the engine")

    for verb in (
        "list_mirrors",
        "describe_mirror",
        "ensure_mirror",
        "pause",
        "resume",
        "preview_stop",
        "delete_mirrors",
        "reverse",
        "sync_offsets",
        "export_offsets",
        "translate_offset",
        "auto_create",
    ):
        monkeypatch.setattr(engine, verb, no_kafka)
    return str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK))


def refused(args: list[str], names: str) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert names in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "value, says",
    [
        ("nan", "'nan' is not a finite number"),
        ("inf", "'inf' is not a finite number"),
        ("-inf", "'-inf' is not a finite number"),
        ("-5", "-5 is out of range"),
        ("0", "0 is out of range"),
        ("0.5", "0.5 is out of range"),
        ("1e9", "1e+09 is out of range"),
        ("soon", "'soon' is not a number"),
    ],
)
def test_promote_timeout_must_be_finite_positive_seconds(config, value, says):
    line = refused(
        ["mirror", "promote", "orders", "--link", LINK, "--timeout", value, "--config", config], "'--timeout'"
    )
    assert says in line and "from 1 to 604800" in line


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("--offset", str(10**25), f"{10**25} is out of range; give a whole number from 0 to {2**63 - 1}"),
        ("--offset", str(2**63), f"{2**63} is out of range"),
        ("--offset", "-1", "-1 is out of range"),
        ("--offset", "1.5", "'1.5' is not a whole number"),
        ("--offset", "9" * 5000, "is out of range"),
        ("--partition", str(2**31), f"{2**31} is out of range; give a whole number from 0 to {2**31 - 1}"),
        ("--partition", "-1", "-1 is out of range"),
        ("--partition", "zero", "'zero' is not a whole number"),
    ],
)
def test_translate_offset_and_partition_are_bounded(config, option, value, says):
    args = {"--offset": "1", "--partition": "0", option: value}
    line = refused(
        [
            "offsets",
            "translate",
            "--link",
            LINK,
            "--topic",
            "orders",
            "--partition",
            args["--partition"],
            "--offset",
            args["--offset"],
            "--config",
            config,
        ],
        f"'{option}'",
    )
    assert says in line
    assert len(line) < 400  # a 5000-digit value is cut, not echoed whole


def test_translate_accepts_the_bounds_themselves(config, monkeypatch):
    seen = {}
    monkeypatch.setattr(
        engine,
        "translate_offset",
        lambda cfg, link, topic, partition, offset, mode: (
            seen.update(partition=partition, offset=offset) or {"ok": True}
        ),
    )
    result = CliRunner().invoke(
        cli,
        [
            "offsets",
            "translate",
            "--link",
            LINK,
            "--topic",
            "orders",
            "--partition",
            str(2**31 - 1),
            "--offset",
            str(2**63 - 1),
            "--config",
            config,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert seen == {"partition": 2**31 - 1, "offset": 2**63 - 1}


@pytest.mark.parametrize(
    "args, names",
    [
        (["demo", "--records", "0"], "'--records'"),
        (["demo", "--records", "10000001"], "'--records'"),
        (["local", "up", "--clusters", "0"], "'--clusters'"),
        (["local", "up", "--clusters", "6"], "'--clusters'"),
        (["local", "up", "--base-port", "80"], "'--base-port'"),
        (["local", "up", "--base-port", "70000"], "'--base-port'"),
    ],
)
def test_every_other_numeric_option_is_bounded(config, tmp_path, args, names):
    refused([*args] + (["--dir", str(tmp_path / "kafka")] if args[0] == "local" else []), names)
    assert not (tmp_path / "kafka").exists()
    assert not (tmp_path / ".dagster-home").exists()


def test_local_up_refuses_a_base_port_the_cluster_count_overflows(tmp_path):
    line = refused(
        ["local", "up", "--clusters", "3", "--base-port", "60000", "--dir", str(tmp_path / "kafka")],
        "'--base-port' / '--clusters'",
    )
    assert "at most 45534" in line
    assert not (tmp_path / "kafka").exists()


CONTROL = "orders\x1b[31m\x07"
ESCAPED = r"'orders\x1b[31m\x07'"


@pytest.mark.parametrize(
    "args, names",
    [
        (["mirror", "describe", CONTROL, "--link", LINK], "'MIRROR_TOPIC'"),
        (["mirror", "create", CONTROL, "--link", LINK], "'SOURCE_TOPIC'"),
        (["mirror", "create", "orders", "--mirror-topic", CONTROL, "--link", LINK], "'--mirror-topic'"),
        (["mirror", "pause", "orders", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "resume", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "promote", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "failover", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "delete", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "reverse", CONTROL, "--link", LINK], "TOPICS"),
        (["mirror", "reverse", "orders", "--link", LINK, "--reverse-link", CONTROL], "'--reverse-link'"),
        (["run", "--mirror", CONTROL, "--link", LINK], "'--mirror'"),
        (["offsets", "sync", "--mirror", CONTROL, "--link", LINK], "'--mirror'"),
        (
            ["offsets", "translate", "--topic", CONTROL, "--partition", "0", "--offset", "0", "--link", LINK],
            "'--topic'",
        ),
        (["mirror", "list", "--link", CONTROL], "'--link'"),
        (["offsets", "export", "--link", CONTROL], "'--link'"),
        (["link", "describe", CONTROL], "'NAME'"),
    ],
)
def test_control_characters_in_names_are_refused_and_shown_escaped(config, args, names):
    line = refused([*args, "--config", config], names)
    assert ESCAPED in line and r"'\x1b'" in line and r"'\x07'" in line
    assert "\x1b" not in line and "\x07" not in line
    assert "a-z A-Z 0-9 . _ -" in line


@pytest.mark.parametrize(
    "name, says",
    [
        ("", "an empty name"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("a" * 250, "is too long"),
        ("orders/v2", "contains '/'"),
        ("caf\u00e9", "contains '\u00e9'"),
        ("a b", "contains ' '"),
        ("zero\u200bwidth", r"contains '\u200b'"),
    ],
)
def test_topic_names_follow_kafkas_rule(config, name, says):
    line = refused(["mirror", "describe", name, "--link", LINK, "--config", config], "'MIRROR_TOPIC'")
    assert says in line and "1 to 249" in line


def test_a_topic_name_of_249_characters_is_accepted(config, monkeypatch):
    name = "a-Z_0." + "x" * 243
    monkeypatch.setattr(
        engine, "describe_mirror", lambda cfg, link, topic: SimpleNamespace(to_dict=lambda: {"mirror_topic": topic})
    )
    result = CliRunner().invoke(cli, ["mirror", "describe", name, "--link", LINK, "--config", config, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"mirror_topic": name}


def test_an_empty_group_is_refused(config):
    refused(["offsets", "export", "--link", LINK, "--group", "", "--config", config], "'--group'")


def test_a_group_with_control_characters_is_echoed_escaped(config, monkeypatch):
    def unknown(cfg, link, groups):
        raise ConfigError(f"no checkpoints for group {groups[0]} on link '{link}'")

    monkeypatch.setattr(engine, "export_offsets", unknown)
    result = CliRunner().invoke(
        cli, ["offsets", "export", "--link", LINK, "--group", "app\x1b]0;pwned\x07", "--config", config]
    )
    assert result.exit_code == 1
    assert r"app\x1b]0;pwned\x07" in result.stderr and "\x1b" not in result.output


def test_a_usage_error_with_json_is_json(config):
    result = CliRunner().invoke(
        cli, ["mirror", "promote", "orders", "--link", LINK, "--timeout", "nan", "--json", "--config", config]
    )
    assert result.exit_code == 2 and result.stdout == ""
    assert "'--timeout'" in json.loads(result.stderr)["error"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["mirror", "describe", "--link", LINK], "Missing argument 'MIRROR_TOPIC'"),
        (["mirror", "list"], "Missing option '--link'"),
        (["mirror", "list", "--link", LINK, "--bogus\x07"], r"--bogus\x07"),
        (["mirror", "nosuch\x1b"], r"'nosuch\x1b'"),
        (["mirror", "pause", "orders", "--all", "--link", LINK], "give mirror topics or --all, not both"),
        (["mirror", "pause", "--link", LINK], "name the mirror topics, or pass --all"),
        (["mirror", "reverse", "--link", LINK], "Missing argument 'TOPICS...'"),
        (
            [
                "offsets",
                "translate",
                "--link",
                LINK,
                "--topic",
                "t",
                "--partition",
                "0",
                "--offset",
                "0",
                "--mode",
                "fast\x07",
            ],
            "'--mode'",
        ),
    ],
)
def test_click_usage_errors_are_one_escaped_paragraph_with_exit_code_2(config, args, says):
    line = refused([*args, "--config", config], says)
    assert "See '" in line and "--help'" in line
    assert "\x1b" not in line and "\x07" not in line


def test_a_group_without_a_command_shows_its_help():
    result = CliRunner().invoke(cli, ["mirror"])
    assert result.exit_code == 2 and "Usage:" in result.output and "error:" not in result.output


@pytest.mark.parametrize(
    "args, names",
    [
        (["offsets", "export", "--link", LINK, "--output", "no/such/folder/plan.csv"], "'--output'"),
        (["demo", "--config", "no/such/folder/mirror.yaml"], "'--config'"),
    ],
)
def test_a_file_to_write_needs_an_existing_folder_before_anything_runs(config, tmp_path, args, names):
    line = refused([*args] + (["--config", config] if args[0] == "offsets" else []), names)
    assert "'no/such/folder' does not exist" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror.yaml"]  # no clusters, no Dagster home, no file
