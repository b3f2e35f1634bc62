"""A destination that throttles the link's writers (a produce quota on their client id, set with Kafka's
own kafka-configs): a chunk that misses its deadline under the throttle says so, naming the quota's client
id and what to change (`replication/throttling.py`), for a broker can land the records it held back after
the fence wait, behind records a later cycle copied, and that mirror would be flagged FOREIGN_WRITE with the
link's own records (`replication/late_landing.py` maps them only while nothing was copied after them)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaException, Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka.closing import close_producer
from mirror_pipeline.replication.cycle import CycleFailed
from tests.config_files import write_pair_config
from tests.kafka_tools import WriteQuota

PARTITIONS = 2
RECORDS = 2000  # a partition, of 1 KiB: chunks of 500 records (half a megabyte) against a 64 KiB/s quota
QUOTA_BYTES_S = 64 * 1024


def test_a_chunk_failed_under_a_throttle_names_the_quota(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    link = unique_name("throttled")  # a client id of its own: the quota throttles no other test's writers
    config = load_config(
        write_pair_config(
            tmp_path / "mirror.yaml",
            source_bootstrap,
            destination_bootstrap,
            link,
            # Each chunk's records must land within 1 s (half the fence wait).
            defaults={"mirror.writer.fence.wait.ms": 2000, "mirror.chunk.max.records": 500},
        )
    )
    topic = create_topic(source_bootstrap, unique_name("orders"), partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": source_bootstrap, "linger.ms": 20})
    for i in range(PARTITIONS * RECORDS):
        producer.produce(topic, value=b"x" * 1024, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0
    engine.create_mirror(config, link, topic)
    quota = WriteQuota(destination_bootstrap, f"mirror-pipeline.{link}.writer")
    quota.put(QUOTA_BYTES_S)
    try:
        with pytest.raises(CycleFailed) as failed:
            engine.run_cycle(config, link, spark, mirrors=[topic])
    finally:
        quota.lift()
    why = failed.value.errors[topic]
    assert "writing failed" in why, why
    assert "the destination throttled this link's writers for up to" in why, why
    assert f"client id 'mirror-pipeline.{link}.writer'" in why and "mirror.writer.fence.wait.ms" in why, why


def test_a_writer_let_go_with_a_throttled_request_in_flight_raises_nothing(
    destination_bootstrap, create_topic, unique_name
):
    """Dropping a gap-less writer's request in flight is fatal to the writer (librdkafka), and
    confluent-kafka raises that fatal error from the next call that serves the writer's events,
    `close` included. `close_producer` runs in `finally` blocks, where it would hide why a write
    failed (a chunk past its deadline under a throttle read as a bare gap-less error)."""
    topic = create_topic(destination_bootstrap, unique_name("held"), partitions=1)
    client_id = unique_name("held-writer")
    quota = WriteQuota(destination_bootstrap, client_id)
    quota.put(QUOTA_BYTES_S)
    try:
        with pytest.raises(KafkaException, match="gap-less"):
            _held_writer(destination_bootstrap, client_id, topic).close()
        close_producer(_held_writer(destination_bootstrap, client_id, topic))
    finally:
        quota.lift()


def _held_writer(bootstrap: str, client_id: str, topic: str) -> Producer:
    """A gap-less writer whose requests the quota holds back, its records in flight purged."""
    out = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "enable.idempotence": True,
            "enable.gapless.guarantee": True,
            "linger.ms": 0,
            "logger": logging.getLogger("held-writer"),
        }
    )
    for _ in range(6):  # 3 MiB in 2 s against 64 KiB/s: the broker holds requests back
        for _ in range(512):
            out.produce(topic, value=b"x" * 1024, partition=0)
        out.flush(0.3)
    out.purge(in_queue=True, in_flight=True)
    time.sleep(1)  # the purge's fatal error reaches the writer's event queue
    return out
