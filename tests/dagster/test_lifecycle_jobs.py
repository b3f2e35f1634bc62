"""Promote and failover through their Dagster jobs, and the CLI leaving the same record (R-ORC-3)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline_dagster.lifecycle_jobs import stop_run_config
from tests.cli_process import run_cli

LINK = "src-to-dst"


def setup_mirror(tmp_path: Path, source: str, destination: str, create_topic, unique_name):
    path = tmp_path / "mirror.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": destination}},
                "links": {LINK: {"source": "src", "destination": "dst", "mirror.writer.fence.wait.ms": 3000}},
                "spark": {"master": "local[2]"},
            }
        )
    )
    config = load_config(path)
    topic = create_topic(source, unique_name(), partitions=1)
    p = Producer({"bootstrap.servers": source})
    for i in range(30):
        p.produce(topic, value=b"%d" % i)
    p.flush(10)
    engine.create_mirror(config, LINK, topic)
    return path, config, topic


def state_of(config, topic):
    return {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[topic].state


def test_promote_and_failover_jobs_stop_mirrors(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    path, config, promoted = setup_mirror(tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name)
    failed_over = create_topic(source_bootstrap, unique_name("b"), partitions=1)
    engine.create_mirror(config, LINK, failed_over)
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", str(path))
    from mirror_pipeline_dagster.definitions import build_definitions

    defs = build_definitions(path)
    instance = dg.DagsterInstance.ephemeral()

    tags = {"mirror-pipeline/link": LINK}  # without it the jobs refuse to run
    promote = defs.get_job_def("promote").execute_in_process(
        run_config=stop_run_config("promote", LINK, [promoted], 120), instance=instance, tags=tags
    )
    failover = defs.get_job_def("failover").execute_in_process(
        run_config=stop_run_config("failover", LINK, [failed_over]), instance=instance, tags=tags
    )

    assert promote.success and failover.success
    assert promote.output_for_node("promote_mirrors")["mirrors"][promoted]["after"] == "STOPPED"
    assert state_of(config, promoted) == "STOPPED" and state_of(config, failed_over) == "STOPPED"
    assert engine.describe_mirror(config, LINK, promoted).lag == 0


def test_cli_failover_is_the_same_job_recorded_in_dagster(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    path, config, topic = setup_mirror(tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name)
    home = tmp_path / "dagster-home"
    home.mkdir()
    out = run_cli(home, "mirror", "failover", topic, "--link", LINK, "--config", str(path), "--json", timeout=300)

    assert out.returncode == 0, out.stderr[-2000:]
    run_id = yaml.safe_load(out.stdout)["dagster_run_id"]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_run_by_id(run_id)
        assert run.job_name == "failover" and run.is_success
        assert run.run_config["ops"]["check_failover"]["config"] == {"link": LINK, "topics": [topic]}
        assert run.tags["mirror-pipeline/link"] == LINK
    assert state_of(config, topic) == "STOPPED"
    # State lives in Kafka: with the Dagster instance gone, the mirror is still STOPPED.
    import shutil

    shutil.rmtree(home)
    assert state_of(load_config(path), topic) == "STOPPED"


def test_the_links_own_jobs_ask_only_for_the_mirrors(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    """The Launchpad's one form: the link's promote and failover jobs carry its name and tag themselves,
    and take the mirror picked as the run's partition."""
    from mirror_pipeline_dagster.link_stop_jobs import link_stop_run_config
    from mirror_pipeline_dagster.naming import LINK_TAG, LinkNames

    path, config, promoted = setup_mirror(tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name)
    failed_over = create_topic(source_bootstrap, unique_name("b"), partitions=1)
    engine.create_mirror(config, LINK, failed_over)
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", str(path))
    from mirror_pipeline_dagster.definitions import build_definitions

    defs, names = build_definitions(path), LinkNames(LINK)
    instance = dg.DagsterInstance.ephemeral()
    promote_job, failover_job = defs.get_job_def(names.promote_job), defs.get_job_def(names.failover_job)
    assert promote_job.tags[LINK_TAG] == LINK == failover_job.tags[LINK_TAG]

    refused = promote_job.execute_in_process(
        run_config=link_stop_run_config(names, "promote", []), instance=instance, raise_on_error=False
    )
    assert not refused.success and state_of(config, promoted) == "ACTIVE"

    promote = promote_job.execute_in_process(
        run_config=link_stop_run_config(names, "promote", [promoted], 120), instance=instance
    )
    # The failover picks its mirror from the link's partitions, as the Launchpad offers them.
    instance.add_dynamic_partitions(names.mirrors_partitions, [promoted, failed_over])
    failover = failover_job.execute_in_process(
        run_config=link_stop_run_config(names, "failover", []), partition_key=failed_over, instance=instance
    )
    assert promote.success and failover.success
    assert instance.get_run_by_id(promote.run_id).tags[LINK_TAG] == LINK
    assert state_of(config, promoted) == "STOPPED" and state_of(config, failed_over) == "STOPPED"
    assert engine.describe_mirror(config, LINK, promoted).lag == 0
