"""`dagster.automation.running`: whether a link's schedule and sensors start running when Dagster loads it."""

import pytest

from mirror_pipeline.config.loader import parse_config
from mirror_pipeline.model.errors import ConfigError

SRC = "mirror.yaml"
KEY = "dagster.automation.running"


def config(link_settings: dict | None = None, defaults: dict | None = None) -> dict:
    data = {
        "clusters": {"a": {"bootstrap.servers": "h1:9092"}, "b": {"bootstrap.servers": "h2:9092"}},
        "links": {
            "l": {"source": "a", "destination": "b", **(link_settings or {})},
            "m": {"source": "b", "destination": "a"},
        },
    }
    if defaults is not None:
        data["defaults"] = defaults
    return data


def problem(data: dict) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data, SRC, {})
    return str(err.value)


def test_off_by_default():
    cfg = parse_config(config(), SRC, {})
    assert cfg.link("l").automation_running is False
    assert cfg.link("l").to_dict()[KEY] is False


@pytest.mark.parametrize(
    "raw, expected", [(True, True), ("true", True), ("TRUE", True), (False, False), ("false", False)]
)
def test_values(raw, expected):
    assert parse_config(config({KEY: raw}), SRC, {}).link("l").automation_running is expected


@pytest.mark.parametrize(
    "raw, got",
    [
        ("yes", "'yes'"),
        ("on", "'on'"),
        (1, "a number"),
        (None, "null"),
        ("", "''"),
        ([True], "a list"),
        ({"x": 1}, "a mapping"),
    ],
)
def test_anything_but_true_or_false_is_refused_naming_the_key(raw, got):
    assert problem(config({KEY: raw})) == f"{SRC}: links.l.{KEY}: expected true or false, got {got}"


def test_defaults_apply_to_every_link_and_a_link_wins():
    cfg = parse_config(config({KEY: False}, defaults={KEY: True}), SRC, {})
    assert (cfg.link("l").automation_running, cfg.link("m").automation_running) == (False, True)


def test_a_bad_default_is_reported_under_defaults():
    assert problem(config(defaults={KEY: "sometimes"})) == (
        f"{SRC}: defaults.{KEY}: expected true or false, got 'sometimes'"
    )


def test_a_misspelt_key_suggests_the_setting():
    assert f"(did you mean '{KEY}'?)" in problem(config({"dagster.automation.runing": True}))
