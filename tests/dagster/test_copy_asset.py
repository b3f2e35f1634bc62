"""The copy asset, materialised for real: Dagster -> engine -> Spark -> the local Kafka pair."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import yaml
from confluent_kafka import Producer

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.engine import create_mirror
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.resources import MirrorEngine, pyspark_resource
from tests.kafka_records import assert_identical, read_topic

LINK = "src-to-dst"
ASSET_KEY = dg.AssetKey(["src_to_dst", "mirror_data"])
PARTITIONS = 3
RECORDS = 100


def write_config(tmp_path: Path, source: str, destination: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "src": {"bootstrap.servers": source},
                    "dst": {"bootstrap.servers": destination},
                },
                "links": {LINK: {"source": "src", "destination": "dst"}},
                "spark": {"master": "local[2]"},
            }
        )
    )
    return path


def produce_records(bootstrap: str, topic: str) -> None:
    # Recent explicit timestamps: copied as they are, and young enough that
    # time-based retention (7 days by default) does not delete them mid-test.
    base_timestamp = int(time.time() * 1000) - 60_000
    failures = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        headers = [("trace", f"t-{i}".encode()), ("dup", b"one"), ("dup", b"two"), ("bin", bytes([0, i, 255]))]
        producer.produce(
            topic,
            key=None if i % 10 == 0 else f"key-{i}".encode(),
            value=None if i % 17 == 0 else f"value-{i}".encode() * (1 + i % 4),
            headers=headers if i % 5 else None,
            partition=i % PARTITIONS,
            timestamp=base_timestamp + i,
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failures == []


def load_definitions(config_path: Path) -> dg.Definitions:
    return build_definitions(config_path)


def materialize_mirror(defs: dg.Definitions, keys: list[dg.AssetKey], mirror: str, config_path: Path):
    """Materialise `keys` for one mirror of link `src-to-dst`, in a fresh ephemeral instance."""
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("src_to_dst_mirrors", [mirror])
    return dg.materialize(
        [defs.get_assets_def(key) for key in keys],
        partition_key=mirror,
        resources={
            "mirror_engine": MirrorEngine(config_path=str(config_path)),
            "pyspark": pyspark_resource(load_config(config_path)),
        },
        instance=instance,
    )


def test_materialising_the_copy_asset_mirrors_every_record(
    tmp_path: Path, source_bootstrap: str, destination_bootstrap: str, unique_name, create_topic, monkeypatch
) -> None:
    config_path = write_config(tmp_path, source_bootstrap, destination_bootstrap)
    config = load_config(config_path)
    topic = create_topic(source_bootstrap, unique_name("orders"), partitions=PARTITIONS)
    produce_records(source_bootstrap, topic)
    mirror = create_mirror(config, LINK, topic).mirror_topic

    result = materialize_mirror(load_definitions(config_path), [ASSET_KEY], mirror, config_path)

    assert result.success
    (event,) = result.get_asset_materialization_events()
    materialization = event.materialization
    assert materialization.partition == mirror
    metadata = materialization.metadata
    assert metadata["records"].value == RECORDS
    assert metadata["lag_after"].value == 0
    assert metadata["bytes"].value > 0
    assert metadata["cycle_records"].value == RECORDS
    lineage = {p["partition"]: p for p in metadata["lineage_json"].value}
    assert sorted(lineage) == list(range(PARTITIONS))

    source = read_topic(source_bootstrap, topic, PARTITIONS)
    assert_identical(source, read_topic(destination_bootstrap, mirror, PARTITIONS))
    assert sum(len(records) for records in source.values()) == RECORDS
    for partition, records in source.items():
        # Lineage names the source range read and the mirror range written (R-OBS-4).
        assert (lineage[partition]["source_from"], lineage[partition]["source_until"]) == (0, len(records))
        assert (lineage[partition]["dest_from"], lineage[partition]["dest_until"]) == (0, len(records))
