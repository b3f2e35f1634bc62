"""The copy asset, materialised for real: Dagster -> engine -> Spark -> the local Kafka pair."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import dagster as dg
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.config import load_config
from mirror_pipeline.engine import create_mirror
from resources import MirrorConfigResource, pyspark_resource

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


def create_source_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    futures[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        assert time.monotonic() < deadline, f"{topic} not ready on {bootstrap}"
        time.sleep(0.1)


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


def read_partition(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    """(offset, key, value, headers, (timestamp type, timestamp)) of every record, in order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-copy-asset-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        records: list[tuple] = []
        if high <= low:
            return records
        consumer.assign([TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                records.append((msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()))
                if msg.offset() >= high - 1:
                    return records
        raise AssertionError(f"{topic}[{partition}] not read up to offset {high} within 60 s")
    finally:
        consumer.close()


def load_definitions(config_path: Path, monkeypatch) -> dg.Definitions:
    # Importing the root module builds its module-level `defs` from the
    # environment: point it at this test's file, not at whatever ./mirror.yaml holds.
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", str(config_path))
    from definitions import build_definitions

    return build_definitions(config_path)


def test_materialising_the_copy_asset_mirrors_every_record(
    tmp_path: Path, source_bootstrap: str, destination_bootstrap: str, unique_name, monkeypatch
) -> None:
    config_path = write_config(tmp_path, source_bootstrap, destination_bootstrap)
    config = load_config(config_path)
    topic = unique_name("orders")
    create_source_topic(source_bootstrap, topic)
    produce_records(source_bootstrap, topic)
    mirror = create_mirror(config, LINK, topic).mirror_topic

    defs = load_definitions(config_path, monkeypatch)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("src_to_dst_mirrors", [mirror])
    result = dg.materialize(
        [defs.get_assets_def(ASSET_KEY)],
        partition_key=mirror,
        resources={
            "mirror_config": MirrorConfigResource(config_path=str(config_path)),
            "pyspark": pyspark_resource(config.spark),
        },
        instance=instance,
    )

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

    for partition in range(PARTITIONS):
        source = read_partition(source_bootstrap, topic, partition)
        copied = read_partition(destination_bootstrap, mirror, partition)
        assert copied == source, f"partition {partition} differs"
        # Lineage names the source range read and the mirror range written (R-OBS-4).
        assert (lineage[partition]["source_from"], lineage[partition]["source_until"]) == (0, len(source))
        assert (lineage[partition]["dest_from"], lineage[partition]["dest_until"]) == (0, len(source))
    assert sum(len(read_partition(source_bootstrap, topic, p)) for p in range(PARTITIONS)) == RECORDS
