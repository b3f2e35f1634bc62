"""The consumer-offsets asset, its check, job and schedule (R-OFS, R-OBS-1/2, R-ORC-1).

The definition tests load the code location from a config whose clusters are
not running; the last test materialises the copy and offset-sync assets for
real against the local Kafka pair.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.engine import create_mirror
from mirror_pipeline_dagster.resources import MirrorEngine
from tests.dagster.offline_config import VALID_CONFIG, mirrors_answer, stub_engine, tick_schedule
from tests.dagster.test_copy_asset import PARTITIONS, load_definitions, materialize_mirror, produce_records

LINKS = {"west-to-east": "west_to_east", "east.to.west": "east_to_west"}


@pytest.fixture
def defs(config_file: Path) -> dg.Definitions:
    return load_definitions(config_file)


def test_each_link_has_consumer_offsets_asset_check_job_and_schedule(defs: dg.Definitions) -> None:
    repo = defs.get_repository_def()
    for link, name in LINKS.items():
        key = dg.AssetKey([name, "consumer_offsets"])
        data_key = dg.AssetKey([name, "mirror_data"])
        asset = defs.get_assets_def(key)
        assert asset.group_names_by_key[key] == name
        assert asset.partitions_def == defs.get_assets_def(data_key).partitions_def
        assert asset.backfill_policy == dg.BackfillPolicy.single_run()
        assert "pyspark" not in asset.required_resource_keys  # no Spark session for an offset sync
        # Lineage: the offsets are offsets of the records the copy asset wrote.
        assert repo.asset_graph.get(key).parent_keys == {data_key}
        check_key = dg.AssetCheckKey(key, "offsets_in_sync")
        assert check_key in repo.asset_graph.asset_check_keys

        job = repo.get_job(f"{name}_offset_sync")
        assert job.asset_layer.selected_asset_keys == {key}
        assert job.tags["mirror-pipeline/offset-sync"] == link
        assert "mirror-pipeline/link" not in job.tags  # never queues behind a copy run

        schedule = repo.get_schedule_def(f"{name}_offset_sync_schedule")
        assert schedule.job_name == job.name
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
        assert schedule.cron_schedule == "* * * * *"  # consumer.offset.sync.ms 30000 -> every minute


def test_offset_sync_schedule_follows_the_links_interval(tmp_path: Path) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        VALID_CONFIG.replace(
            "    destination: us-east\n", "    destination: us-east\n    consumer.offset.sync.ms: 600000\n", 1
        )
    )
    repo = load_definitions(path).get_repository_def()
    assert repo.get_schedule_def("west_to_east_offset_sync_schedule").cron_schedule == "*/10 * * * *"
    assert "consumer.offset.sync.ms=600000" in repo.get_schedule_def("west_to_east_offset_sync_schedule").description
    assert repo.get_schedule_def("east_to_west_offset_sync_schedule").cron_schedule == "* * * * *"


def test_offset_sync_schedule_skips_while_sync_is_off(defs, config_file) -> None:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("west_to_east_mirrors", ["a"])
        result = tick_schedule(
            defs, MirrorEngine(config_path=str(config_file)), instance, "west_to_east_offset_sync_schedule"
        )
    assert result.run_requests == []
    assert "consumer.offset.sync.enable: false" in result.skip_message


def test_offset_sync_schedule_requests_one_run_over_active_and_paused_mirrors(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        VALID_CONFIG.replace(
            "    destination: us-east\n", "    destination: us-east\n    consumer.offset.sync.enable: true\n", 1
        )
    )
    defs = load_definitions(path)
    engine = stub_engine(
        path, list_mirrors=mirrors_answer([("a", "STOPPED"), ("b", "ACTIVE"), ("c", "PAUSED"), ("d", "FAILED")])
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("west_to_east_mirrors", ["a", "b", "c", "d"])
        result = tick_schedule(defs, engine, instance, "west_to_east_offset_sync_schedule")
    (request,) = result.run_requests
    assert request.run_key == "west-to-east:offset-sync:2026-01-01T12:00:00+00:00"
    assert request.tags["dagster/asset_partition_range_start"] == "b"
    assert request.tags["dagster/asset_partition_range_end"] == "c"
    assert request.tags["mirror-pipeline/offset-sync"] == "west-to-east"


def test_materialising_with_sync_off_records_that_and_does_nothing(defs, config_file) -> None:
    # The offline clusters do not answer: the asset must not even try to reach them.
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("west_to_east_mirrors", ["m1"])
    result = dg.materialize(
        [defs.get_assets_def(dg.AssetKey(["west_to_east", "consumer_offsets"]))],
        partition_key="m1",
        resources={"mirror_engine": MirrorEngine(config_path=str(config_file))},
        instance=instance,
    )
    assert result.success
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["offset_sync"].value == "off"
    assert "consumer.offset.sync.enable is false" in event.materialization.metadata["note"].value
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "offsets_in_sync" and check.passed


# --- for real, on the local pair ------------------------------------------------------------

LINK = "src-to-dst"


def test_materialising_the_offsets_asset_lands_the_source_group_on_the_mirror(
    tmp_path: Path, source_bootstrap: str, destination_bootstrap: str, unique_name, create_topic, monkeypatch
) -> None:
    group = unique_name("readers")
    config_path = tmp_path / "mirror.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "src": {"bootstrap.servers": source_bootstrap},
                    "dst": {"bootstrap.servers": destination_bootstrap},
                },
                "links": {
                    LINK: {
                        "source": "src",
                        "destination": "dst",
                        "consumer.offset.sync.enable": True,
                        "consumer.offset.group.filters": {"groupFilters": [{"name": group, "patternType": "LITERAL"}]},
                    }
                },
                "spark": {"master": "local[2]"},
            }
        )
    )
    config = load_config(config_path)
    topic = create_topic(source_bootstrap, unique_name("orders"), partitions=PARTITIONS)
    produce_records(source_bootstrap, topic)  # 100 records over 3 partitions: 34, 33, 33
    mirror = create_mirror(config, LINK, topic).mirror_topic

    # The source group has read 10 records of partition 0, 20 of partition 1, all of partition 2.
    committed = {0: 10, 1: 20, 2: 33}
    consumer = Consumer({"bootstrap.servers": source_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    finally:
        consumer.close()

    keys = [dg.AssetKey(["src_to_dst", "mirror_data"]), dg.AssetKey(["src_to_dst", "consumer_offsets"])]
    result = materialize_mirror(load_definitions(config_path), keys, mirror, config_path)
    assert result.success

    # A gap-free partition keeps its offsets: the group lands where it stopped on the source.
    reader = Consumer({"bootstrap.servers": destination_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        landed = reader.committed([TopicPartition(mirror, p) for p in committed], timeout=30)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in landed} == committed

    (event,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == dg.AssetKey(["src_to_dst", "consumer_offsets"])
    ]
    metadata = event.materialization.metadata
    assert event.materialization.partition == mirror
    assert metadata["offset_sync"].value == "on"
    assert metadata["mode"].value == "exact"
    assert metadata["groups_synced"].value == 1
    assert metadata["offsets_committed"].value == len(committed)
    assert metadata["offset-sync-lag"].value == 0
    assert isinstance(metadata["checkpoint-latency-ms"], dg.FloatMetadataValue)
    assert metadata["checkpoint-latency-ms"].value >= 0
    assert group in metadata["groups"].value
    (synced,) = metadata["groups_json"].value
    assert {p["partition"]: p["destination_offset"] for p in synced["partitions"]} == committed
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "offsets_in_sync" and check.passed
