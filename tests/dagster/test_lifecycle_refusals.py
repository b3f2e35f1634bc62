"""Promote and failover refuse a bad request in their first step, before the engine is called (issue #13).

Offline: the engine's verbs are stubs that record their calls. The CLI's
`--all` is checked to hand the job every mirror by name.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

import mirror_pipeline.cli.dagster_runs as dagster_runs
from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.cli.dagster_runs import failure_message
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.lifecycle_jobs import stop_run_config
from tests.dagster.offline_config import mirrors_answer, stub_engine

LINK = "west-to-east"
TAGS = {"mirror-pipeline/link": LINK}


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def calls() -> list:
    return []


@pytest.fixture
def launch(config_file: Path, instance, calls):
    """`launch(job, link, topics, tags)`: (success, the failure's message) of one run of the real job."""
    defs = build_definitions(config_file)
    mirror_engine = stub_engine(
        config_file,
        list_mirrors=lambda link: calls.append(("list_mirrors", link)) or mirrors_answer([("orders", "ACTIVE")])(link),
        promote=lambda link, spark, topics, timeout_s: (
            calls.append(("promote", link, list(topics))) or LifecycleResult("promote", link, {})
        ),
        failover=lambda link, topics: (
            calls.append(("failover", link, list(topics))) or LifecycleResult("failover", link, {})
        ),
    )

    def run(job: str, link: str, topics: list[str], tags: dict | None = None):
        result = defs.get_job_def(job).execute_in_process(
            run_config=stop_run_config(job, link, topics),
            instance=instance,
            tags=TAGS if tags is None else tags,
            # No Spark session: a refused request must not need one, and an accepted one calls the stub.
            resources={"mirror_engine": mirror_engine, "pyspark": dg.ResourceDefinition.none_resource()},
            raise_on_error=False,
        )
        return result.success, (None if result.success else failure_message(result.all_events)), result

    return run


@pytest.mark.parametrize("job", ["promote", "failover"])
def test_an_empty_topic_list_is_refused_before_anything(launch, calls, job):
    success, message, result = launch(job, LINK, [])

    assert not success
    assert message == (
        f"{job} refused: name the mirror topics in `topics`; an empty list is not 'all' "
        "(the CLI's --all passes every mirror by name)"
    )
    assert calls == []  # not even a read of the link's mirrors
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == [f"check_{job}"]  # the engine step never ran


@pytest.mark.parametrize("job", ["promote", "failover"])
def test_an_unknown_topic_is_refused_naming_it(launch, calls, job):
    success, message, _ = launch(job, LINK, ["orders", "nosuch"])

    assert not success
    assert (
        message
        == f"{job} refused: no mirror 'nosuch' on link 'west-to-east' (its mirrors: orders); nothing was changed"
    )
    assert calls == [("list_mirrors", LINK)]  # read, never a promote or failover


def test_an_unknown_link_is_refused_naming_the_links(launch, calls, config_file):
    success, message, _ = launch("failover", "nosuch", ["orders"], tags={"mirror-pipeline/link": "nosuch"})

    assert not success
    assert message == (
        f"failover refused: no link 'nosuch' in {config_file.resolve()}; its links: east.to.west, west-to-east"
    )
    assert calls == []


@pytest.mark.parametrize(
    ("tags", "has"),
    [({}, "it has none"), ({"mirror-pipeline/link": "east.to.west"}, "it has 'mirror-pipeline/link: east.to.west'")],
)
def test_a_run_without_the_links_tag_is_refused(launch, calls, tags, has):
    success, message, _ = launch("promote", LINK, ["orders"], tags=tags)

    assert not success
    assert message == (
        f"promote refused: the run must carry the tag 'mirror-pipeline/link: west-to-east' ({has}), "
        "so that it queues behind the link's other runs; the CLI sets it, in the launchpad add it under Tags"
    )
    assert calls == []


def test_a_valid_request_reaches_the_engine_with_the_names_given(launch, calls):
    success, _, result = launch("failover", LINK, ["orders", "orders"])

    assert success
    assert calls == [("list_mirrors", LINK), ("failover", LINK, ["orders"])]
    assert result.dagster_run.tags["mirror-pipeline/link"] == LINK


@pytest.mark.parametrize("verb", ["promote", "failover"])
def test_the_clis_all_passes_every_mirror_by_name(config_file, tmp_path, monkeypatch, verb):
    monkeypatch.chdir(tmp_path)
    mirrors = [MirrorInfo(LINK, name, name, "ACTIVE", 0.0, "", 0.0) for name in ("returns", "orders")]
    monkeypatch.setattr(engine, "list_mirrors", lambda config, link: mirrors)
    launched = []

    def launch_stop_job(verb, config_path, link, topics, timeout_s, debug=False):
        launched.append((verb, link, topics))
        return "run-1", True, {"link": link, "mirrors": {}}

    monkeypatch.setattr(dagster_runs, "launch_stop_job", launch_stop_job)
    result = CliRunner().invoke(cli, ["mirror", verb, "--all", "--link", LINK, "--config", str(config_file)])

    assert result.exit_code == 0, result.output
    assert launched == [(verb, LINK, ["orders", "returns"])]


def test_the_clis_all_on_a_link_without_mirrors_launches_nothing(config_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "list_mirrors", lambda config, link: [])
    result = CliRunner().invoke(cli, ["mirror", "failover", "--all", "--link", LINK, "--config", str(config_file)])

    assert result.exit_code == 1
    assert result.stderr == f"error: --all: link '{LINK}' has no mirrors to failover\n"
    assert not (tmp_path / ".dagster-home").exists()  # no Dagster run was launched


@pytest.mark.parametrize(
    ("job", "refused"),
    [
        ("promote", "mirror 'refunds' is LINK_FAILED (it cannot be promoted; failover can stop it)"),
        (
            "failover",
            "mirror 'refunds' is being set up by a reverse that did not finish (run reverse again to finish it, "
            "then promote or fail it over)",
        ),
    ],
)
def test_a_mirror_the_verb_cannot_take_is_refused_before_the_engine(config_file, instance, job, refused):
    calls = []
    state = "LINK_FAILED" if job == "promote" else "PAUSED"
    mirrors = [
        MirrorInfo(LINK, "orders", "orders", "ACTIVE", 0.0, "", 0.0),
        MirrorInfo(LINK, "refunds", "refunds", state, 0.0, "", 0.0, flags=("REVERSING",) * (job == "failover")),
    ]
    mirror_engine = stub_engine(
        config_file,
        list_mirrors=lambda link: mirrors,
        promote=lambda *args: calls.append("promote"),
        failover=lambda *args: calls.append("failover"),
    )
    result = (
        build_definitions(config_file)
        .get_job_def(job)
        .execute_in_process(
            run_config=stop_run_config(job, LINK, ["orders", "refunds"]),
            instance=instance,
            tags=TAGS,
            resources={"mirror_engine": mirror_engine, "pyspark": dg.ResourceDefinition.none_resource()},
            raise_on_error=False,
        )
    )

    assert not result.success
    assert failure_message(result.all_events) == f"{job} refused: {refused}; nothing was changed"
    assert [e.step_key for e in result.all_events if e.is_step_failure] == [f"check_{job}"]
    assert calls == []  # 'orders' was neither promoted nor failed over
