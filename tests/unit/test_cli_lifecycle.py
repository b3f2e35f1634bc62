"""promote and failover from the CLI: bad input is refused before a Dagster run exists; a failed run says why in one paragraph.

Offline: the engine is stubbed; the failed-run cases run the real Dagster job
in-process against a throwaway Dagster home, with the engine's verb raising.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.model.errors import MirrorRefused
from tests.config_files import write_pair_config

LINK = "west-to-east"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    ensure_dagster_home(tmp_path / "dagster-home")  # as a first CLI run makes it: telemetry off
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    monkeypatch.setattr(engine, "list_mirrors", lambda cfg, link: [SimpleNamespace(mirror_topic="orders")])
    return str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK))


def no_dagster_run(tmp_path: Path) -> bool:
    made = [p.name for p in (tmp_path / "dagster-home").iterdir()]
    return made == ["dagster.yaml"] and not (tmp_path / ".dagster-home").exists()


@pytest.mark.parametrize("verb", ["promote", "failover"])
def test_an_unknown_mirror_is_refused_before_a_dagster_run(config, tmp_path, verb):
    result = CliRunner().invoke(cli, ["mirror", verb, "orders", "nosuch", "--link", LINK, "--config", config])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: TOPICS: no mirror 'nosuch' on link 'west-to-east'; give mirror topics of the link (orders), or --all\n"
    )
    assert "Traceback" not in result.output and "Stack Trace" not in result.output
    assert no_dagster_run(tmp_path)


@pytest.mark.parametrize("verb", ["promote", "failover"])
def test_an_unknown_link_is_refused_before_a_dagster_run(config, tmp_path, verb):
    result = CliRunner().invoke(cli, ["mirror", verb, "orders", "--link", "nosuch", "--config", config])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: --link: no link 'nosuch' in ") and "links: west-to-east" in result.stderr
    assert no_dagster_run(tmp_path)


def test_a_bad_timeout_is_refused_before_a_dagster_run(config, tmp_path):
    result = CliRunner().invoke(cli, ["mirror", "promote", "orders", "--link", LINK, "--timeout", "nan", "--config", config])
    assert result.exit_code == 2 and "'--timeout'" in result.stderr
    assert no_dagster_run(tmp_path)


def test_a_failed_dagster_run_shows_only_its_message(config, tmp_path, monkeypatch):
    def refuse(cfg, link, mirrors):
        raise MirrorRefused(f"mirror '{mirrors[0]}' is FAILED\x1b[31m; nothing changed")

    monkeypatch.setattr(engine, "failover", refuse)
    result = CliRunner().invoke(cli, ["mirror", "failover", "orders", "--link", LINK, "--config", config])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Stack Trace" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: failover failed (Dagster run ")
    assert lines[0].endswith("): mirror 'orders' is FAILED\\x1b[31m; nothing changed")


def test_a_bug_inside_the_dagster_run_is_its_message_without_a_stack(config, monkeypatch):
    monkeypatch.setattr(engine, "failover", lambda cfg, link, mirrors: {}["missing"])
    result = CliRunner().invoke(cli, ["mirror", "failover", "orders", "--link", LINK, "--config", config, "--json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Stack Trace" not in result.output
    assert json.loads(result.stderr)["error"].endswith(
        'Error occurred while executing op "failover_mirrors" (caused by KeyError: \'missing\')')


@pytest.mark.parametrize("auto_create", [False, True])
def test_run_refuses_an_unknown_mirror_before_auto_create_and_spark(tmp_path, monkeypatch, auto_create):
    monkeypatch.chdir(tmp_path)
    settings = {"auto.create.mirror.topics.enable": True, "auto.create.mirror.topics.filters": {
        "topicFilters": [{"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"}]}} if auto_create else {}
    path = write_pair_config(tmp_path / "auto.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK, link_settings=settings)
    scans = []

    def scan(cfg, link, dry_run=False):
        scans.append(dry_run)
        return SimpleNamespace(to_dict=lambda: {"to_create": [{"mirror_topic": "new-orders"}]})

    def no_spark(*args):
        raise AssertionError("Spark must not start")

    monkeypatch.setattr(engine, "list_mirrors", lambda cfg, link: [SimpleNamespace(mirror_topic="orders")])
    monkeypatch.setattr(engine, "auto_create", scan)
    monkeypatch.setattr(sys.modules["mirror_pipeline.cli.run"], "spark_session", no_spark)  # the module, not the command
    result = CliRunner().invoke(cli, ["run", "--link", LINK, "--mirror", "orders", "--mirror", "nosuch",
                                      "--config", str(path)])
    assert result.exit_code == 1, result.output
    known = "new-orders, orders" if auto_create else "orders"
    assert result.stderr == f"error: --mirror: no mirror 'nosuch' on link '{LINK}'; give mirror topics of the link ({known})\n"
    assert scans == ([True] if auto_create else [])  # a dry run only: nothing was created
