"""A link of a test of its own on the local pair, for the tests that drive the CLI, and records for it."""

from __future__ import annotations

from pathlib import Path

import yaml
from confluent_kafka import Producer


def write_config(tmp_path: Path, source: str, destination: str, group: str, link: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": destination}},
                "links": {
                    link: {
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
    return path


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0
