"""promote and failover from the CLI: bad input is refused before a Dagster run exists;
a failed run says why in one paragraph.

Offline: the engine is stubbed; the failed-run cases run the real Dagster job
in-process against a throwaway Dagster home, with the engine's verb raising.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.operations.all_or_nothing import Incomplete, LifecycleResult
from tests.config_files import write_pair_config

LINK = "west-to-east"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    ensure_dagster_home(tmp_path / "dagster-home")  # as a first CLI run makes it: telemetry off
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    monkeypatch.setattr(
        engine, "list_mirrors", lambda cfg, link: [MirrorInfo(LINK, "orders", "orders", "ACTIVE", 0.0, "", 0.0)]
    )
    return str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK))


def no_dagster_run(tmp_path: Path) -> bool:
    made = [p.name for p in (tmp_path / "dagster-home").iterdir()]
    return made == ["dagster.yaml"] and not (tmp_path / ".dagster-home").exists()


@pytest.mark.parametrize("verb", ["promote", "failover"])
def test_an_unknown_mirror_is_refused_before_a_dagster_run(config, tmp_path, verb):
    result = CliRunner().invoke(cli, ["mirror", verb, "orders", "nosuch", "--link", LINK, "--config", config])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {verb} refused: no mirror 'nosuch' on link 'west-to-east' (its mirrors: orders); nothing was changed\n"
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
    result = CliRunner().invoke(
        cli, ["mirror", "promote", "orders", "--link", LINK, "--timeout", "nan", "--config", config]
    )
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
        "Error occurred while executing op \"failover_mirrors\" (caused by KeyError: 'missing')"
    )


@pytest.mark.parametrize("auto_create", [False, True])
def test_run_refuses_an_unknown_mirror_before_auto_create_and_spark(tmp_path, monkeypatch, auto_create):
    monkeypatch.chdir(tmp_path)
    settings = (
        {
            "auto.create.mirror.topics.enable": True,
            "auto.create.mirror.topics.filters": {
                "topicFilters": [{"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"}]
            },
        }
        if auto_create
        else {}
    )
    path = write_pair_config(tmp_path / "auto.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK, link_settings=settings)
    scans = []

    def scan(cfg, link, dry_run=False):
        scans.append(dry_run)
        return SimpleNamespace(to_dict=lambda: {"to_create": [{"mirror_topic": "new-orders"}]})

    def no_spark(*args):
        raise AssertionError("Spark must not start")

    monkeypatch.setattr(engine, "list_mirrors", lambda cfg, link: [SimpleNamespace(mirror_topic="orders")])
    monkeypatch.setattr(engine, "auto_create", scan)
    monkeypatch.setattr(
        sys.modules["mirror_pipeline.cli.run"], "spark_session", no_spark
    )  # the module, not the command
    result = CliRunner().invoke(
        cli, ["run", "--link", LINK, "--mirror", "orders", "--mirror", "nosuch", "--config", str(path)]
    )
    assert result.exit_code == 1, result.output
    known = "new-orders, orders" if auto_create else "orders"
    assert (
        result.stderr
        == f"error: --mirror: no mirror 'nosuch' on link '{LINK}'; give mirror topics of the link ({known})\n"
    )
    assert scans == ([True] if auto_create else [])  # a dry run only: nothing was created


@pytest.mark.parametrize("as_json", [False, True])
def test_a_dagster_run_that_failed_part_way_shows_what_changed(config, monkeypatch, as_json):
    infos = [MirrorInfo(LINK, name, name, "ACTIVE", 0.0, "", 0.0) for name in ("orders", "refunds")]
    monkeypatch.setattr(engine, "list_mirrors", lambda cfg, link: infos)

    def part_way(cfg, link, mirrors):
        result = LifecycleResult("failover", link)
        result.add(infos[0], replace(infos[0], state="STOPPED"), "stopped: now a normal writable topic")
        result.not_done["refunds"] = {"state": "ACTIVE", "why": "cluster 'us-east' did not answer"}
        raise Incomplete(result)

    monkeypatch.setattr(engine, "failover", part_way)
    result = CliRunner().invoke(
        cli,
        ["mirror", "failover", "orders", "refunds", "--link", LINK, "--config", config]
        + (["--json"] if as_json else []),
    )

    assert result.exit_code == 1, result.output
    said = (
        "failover did not finish on link 'west-to-east': failed over: orders; not failed over: refunds "
        "(cluster 'us-east' did not answer)"
    )
    if as_json:
        error, done = json.loads(result.stderr)["error"], json.loads(result.stdout)
        assert done["mirrors"]["orders"]["after"] == "STOPPED"
        assert done["not_done"] == {"refunds": {"state": "ACTIVE", "why": "cluster 'us-east' did not answer"}}
        assert done["dagster_run_id"] in error
    else:
        error = result.stderr.removeprefix("error: ").rstrip("\n")
        assert result.stdout.splitlines() == [
            "MIRROR   BEFORE  AFTER    WHAT HAPPENED",
            "orders   ACTIVE  STOPPED  stopped: now a normal writable topic",
            "refunds  ACTIVE  ACTIVE   not failed over: cluster 'us-east' did not answer",
        ]
    assert error.startswith("failover failed (Dagster run ") and error.endswith(f"): {said}")


def test_a_mirror_that_cannot_go_is_refused_before_a_dagster_run(config, tmp_path, monkeypatch):
    monkeypatch.setattr(
        engine,
        "list_mirrors",
        lambda cfg, link: [
            MirrorInfo(LINK, "orders", "orders", "ACTIVE", 0.0, "", 0.0),
            MirrorInfo(LINK, "refunds", "refunds", "FAILED", 0.0, "", 0.0),
        ],
    )
    result = CliRunner().invoke(
        cli, ["mirror", "promote", "orders", "refunds", "nosuch", "--link", LINK, "--config", config]
    )
    assert result.exit_code == 1
    assert result.stderr == (
        "error: promote refused: no mirror 'nosuch' on link 'west-to-east' (its mirrors: orders, "
        "refunds); mirror 'refunds' is FAILED (it cannot be promoted; failover can stop it); "
        "nothing was changed\n"
    )
    assert no_dagster_run(tmp_path)
