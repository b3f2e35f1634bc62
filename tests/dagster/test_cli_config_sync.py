"""`mirror-pipeline link sync-configs`: one config sync without the daemon, recorded for the UI (issue #14).

Against the local Kafka pair, through the real command line with a throwaway
`DAGSTER_HOME`: a source topic's changed `retention.ms` reaches its mirror,
the sync is a `mirror_config` materialization, and an unknown `--mirror`
is refused before anything changes.
"""

from __future__ import annotations

import json
import uuid

import dagster as dg
from confluent_kafka.admin import AdminClient

from mirror_pipeline import engine
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.config.loader import load_config
from mirror_pipeline_dagster.naming import LinkNames
from tests.cli_process import run_cli
from tests.dagster.cli_link import write_config
from tests.integration.test_config_sync import set_configs, wait_for

LINK = f"cli-config-sync-{uuid.uuid4().hex[:8]}"


def test_sync_configs_once_from_the_cli(tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name):
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, unique_name("group"), link=LINK)
    topic = create_topic(source_bootstrap, unique_name("orders"))
    engine.create_mirror(load_config(path), LINK, topic)
    set_configs(AdminClient({"bootstrap.servers": source_bootstrap}), topic, retention_ms="7200000")
    home = ensure_dagster_home(tmp_path / "dagster-home")

    refused = run_cli(home, "link", "sync-configs", LINK, "--mirror", "nope", "--config", str(path))
    assert refused.returncode == 1 and "nope" in refused.stderr, refused.stderr[-2000:]

    synced = run_cli(home, "link", "sync-configs", LINK, "--config", str(path), "--json")
    assert synced.returncode == 0 and "not recorded" not in synced.stderr, synced.stderr[-2000:]
    printed = json.loads(synced.stdout)
    assert printed["mirrors"][topic]["changed"]["retention.ms"][1] == "7200000" and printed["in_sync"]
    wait_for(AdminClient({"bootstrap.servers": destination_bootstrap}), topic, {"retention.ms": "7200000"})

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.fetch_materializations(LinkNames(LINK).mirror_config_key, limit=5).records
        metadata = record.asset_materialization.metadata
        assert record.asset_materialization.partition == topic and record.run_id == ""
        assert metadata["changed"].value == {
            "retention.ms": {"old": printed["mirrors"][topic]["changed"]["retention.ms"][0], "new": "7200000"}
        }
        assert metadata["in_sync"].value is True
        assert f"mirror-pipeline link sync-configs {LINK}" in record.asset_materialization.description

    again = run_cli(home, "link", "sync-configs", LINK, "--config", str(path))
    assert again.returncode == 0 and again.stdout.startswith(f"link '{LINK}': 0 config(s) changed on 0 of 1 mirror(s)")
