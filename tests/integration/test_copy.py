"""The copy engine on the real local pair: fidelity, offsets, gaps, growth (R-MT-4..8, R-MT-10)."""

from __future__ import annotations

import time
from itertools import pairwise

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka.clients import admin_client, list_offsets, watermark
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import resolve
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_partition, read_topic

OLD_TIMESTAMP = 978307200000  # 2001-01-01: older than any broker's default timestamp bound


def produce(bootstrap: str, topic: str, records: list[dict], **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def offset_map(config, topic: str, partition: int):
    ctx = LinkContext.open(config, LINK)
    segments = ctx.store.read_segments([topic]).segments.get((topic, partition), [])
    _, leo = read_watermarks(config.cluster("us-east").bootstrap_servers, topic, partition)
    return resolve([s for _, s in segments], leo).offset_map


def read_watermarks(bootstrap, topic, partition):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return watermark(c, topic, partition)
    finally:
        c.close()


def test_records_are_copied_byte_for_byte(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    # Kept forever, so that records with 2001 timestamps are not expired by time retention.
    topic = create_topic(source_bootstrap, unique_name("orders"), partitions=3, config={"retention.ms": "-1"})
    records = []
    for i in range(600):
        headers = [("trace", b"\x00\x01\xff"), ("dup", b"first"), ("dup", b"second"), ("empty", b"")] if i % 3 else None
        records.append(
            {
                "key": None if i % 7 == 0 else f"key-{i}".encode(),
                "value": None if i % 11 == 0 else bytes(range(256)) * (i % 5),
                "headers": headers,
                "partition": i % 3,
                "timestamp": OLD_TIMESTAMP + i if i % 2 else 0,
            }
        )
    produce(source_bootstrap, topic, records)
    engine.create_mirror(config, LINK, topic)

    result = engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert result.mirrors[topic].records == 600
    assert result.lag_after == 0
    source = read_topic(source_bootstrap, topic, 3)
    assert_identical(source, read_topic(destination_bootstrap, topic, 3))
    # Lineage: the source range copied and the mirror range written, per partition.
    for p in result.mirrors[topic].partitions:
        assert (p.source_from, p.source_until) == (0, 200)
        assert (p.dest_from, p.dest_until) == (0, 200)


def test_later_cycles_copy_only_new_records(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, [{"value": b"a%d" % i, "partition": i % 2} for i in range(100)])
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    produce(source_bootstrap, topic, [{"value": b"b%d" % i, "partition": i % 2} for i in range(40)])

    second = engine.run_cycle(config, LINK, spark, mirrors=[topic])
    third = engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert second.records == 40
    assert [(p.source_from, p.source_until) for p in second.mirrors[topic].partitions] == [(50, 70), (50, 70)]
    assert third.records == 0 and third.work_units == 0
    assert_identical(read_topic(source_bootstrap, topic, 2), read_topic(destination_bootstrap, topic, 2))


def test_log_start_above_zero_is_aligned(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(100)])
    admin(source_bootstrap).delete_records([TopicPartition(topic, 0, 40)])[TopicPartition(topic, 0, 40)].result()
    engine.create_mirror(config, LINK, topic)

    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    low, high = read_watermarks(destination_bootstrap, topic, 0)
    assert (low, high) == (40, 100)
    assert read_partition(destination_bootstrap, topic, 0) == read_partition(source_bootstrap, topic, 0)
    description = engine.describe_mirror(config, LINK, topic)
    assert description.to_dict()["offsets"] == "preserved"


def test_log_start_past_alignment_budget_translates_offsets(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    config = load_config(write_config({"mirror.log.start.alignment.max.records": 10}))
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, [{"value": b"v%d" % i} for i in range(60)])
    admin(source_bootstrap).delete_records([TopicPartition(topic, 0, 25)])[TopicPartition(topic, 0, 25)].result()
    engine.create_mirror(config, LINK, topic)

    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    source, mirror = read_partition(source_bootstrap, topic, 0), read_partition(destination_bootstrap, topic, 0)
    assert [m.offset for m in mirror] == list(range(35))
    assert [m.content() for m in mirror] == [s.content() for s in source]
    omap = offset_map(config, topic, 0)
    assert all(omap.dest_of(s.offset) == m.offset for s, m in zip(source, mirror, strict=True))
    assert len(omap.runs) == 1
    assert engine.describe_mirror(config, LINK, topic).to_dict()["offsets"] == "translated"


def test_transactional_source_copies_only_committed_records(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    tx = Producer({"bootstrap.servers": source_bootstrap, "transactional.id": unique_name("tx")})
    tx.init_transactions(30)
    committed = []
    for batch in range(6):
        tx.begin_transaction()
        for i in range(10):
            value = f"batch{batch}-{i}".encode()
            tx.produce(topic, value=value, key=b"k", partition=i % 2)
            if batch % 3 != 1:
                committed.append(value)
        if batch % 3 == 1:
            tx.flush(10)
            tx.abort_transaction(30)
        else:
            tx.commit_transaction(30)
    _wait_for_commit_markers(source_bootstrap, topic, partitions=2)
    engine.create_mirror(config, LINK, topic)

    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    for p in range(2):
        source = read_partition(source_bootstrap, topic, p)
        mirror = read_partition(destination_bootstrap, topic, p, committed_only=False)
        assert [m.content() for m in mirror] == [s.content() for s in source]
        assert [m.offset for m in mirror] == list(range(len(source)))  # no markers, no aborted data
        omap = offset_map(config, topic, p)
        assert all(omap.dest_of(s.offset) == m.offset for s, m in zip(source, mirror, strict=True))
        # One run per committed transaction, not one entry per record.
        assert len(omap.runs) == 4
    assert sorted(r.value for p in range(2) for r in read_partition(destination_bootstrap, topic, p)) == sorted(
        committed
    )


def _wait_for_commit_markers(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until every transaction's markers are written, a read_committed reader sees less than a later one.

    `commit_transaction` returns once the commit is decided, before its markers
    reach the partitions: a cycle planned in between would copy one transaction
    fewer than the source read afterwards shows.
    """
    admin = admin_client({"bootstrap.servers": bootstrap})
    parts = [(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout
    while list_offsets(admin, parts, "latest", "source") != list_offsets(
        admin, parts, "latest", "source", read_committed=False
    ):
        assert time.monotonic() < deadline, f"{topic}: transactions still open after {timeout:.0f}s"
        time.sleep(0.05)


def test_compacted_source_keeps_tombstones_and_maps_holes(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(
        source_bootstrap,
        unique_name(),
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "86400000",
        },
    )
    # Rewrite a few keys many times, across several segments, with tombstones.
    for round_ in range(6):
        produce(
            source_bootstrap,
            topic,
            [
                {"key": b"k%d" % (i % 5), "value": None if (i + round_) % 9 == 0 else b"r%d-%d" % (round_, i)}
                for i in range(20)
            ],
        )
        time.sleep(0.3)
    produce(source_bootstrap, topic, [{"key": b"k0", "value": None}, {"key": b"k1", "value": None}])
    before = _wait_for_holes(source_bootstrap, topic)
    engine.create_mirror(config, LINK, topic)

    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    # The cleaner may go on removing records after the read above, and before or after the copy:
    # the cycle copied the source as it was in between, which holds every record still there after.
    after = {s.offset for s in read_partition(source_bootstrap, topic, 0)}
    omap = offset_map(config, topic, 0)
    source = [s for s in before if omap.dest_of(s.offset) is not None]
    assert after <= {s.offset for s in source}
    mirror = read_partition(destination_bootstrap, topic, 0)
    assert [m.content() for m in mirror] == [s.content() for s in source]
    assert any(s.value is None for s in source), "tombstones are part of the test"
    assert all(omap.dest_of(s.offset) == m.offset for s, m in zip(source, mirror, strict=True))
    stretches = 1 + sum(1 for a, b in pairwise(source) if b.offset != a.offset + 1)
    assert len(omap.runs) == stretches < len(source)


def _wait_for_holes(bootstrap: str, topic: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = read_partition(bootstrap, topic, 0)
        if records and any(b.offset != a.offset + 1 for a, b in pairwise(records)):
            return records
        produce(bootstrap, topic, [{"key": b"roll", "value": b"x"}])
        time.sleep(1)
    pytest.fail("the log cleaner did not compact the source within the timeout")


def test_describe_and_the_drift_check_only_read_a_grown_source(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    engine.create_mirror(config, LINK, topic)
    admin(source_bootstrap).create_partitions([NewPartitions(topic, 4)])[topic].result()
    time.sleep(1)

    described = engine.describe_mirror(config, LINK, topic)
    drift = engine.link_config_drift(config, LINK, [topic])[topic]

    # Read-only verbs report the growth and leave it to the next cycle or sync.
    assert (described.source_partitions, described.mirror_partitions) == (4, 2)
    assert (drift["source_partitions"], drift["mirror_partitions"]) == (4, 2)
    assert admin(destination_bootstrap).list_topics(topic=topic, timeout=10).topics[topic].partitions.keys() == {0, 1}


def test_source_partition_growth_reaches_the_mirror(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    admin(source_bootstrap).create_partitions([NewPartitions(topic, 4)])[topic].result()
    time.sleep(1)
    produce(source_bootstrap, topic, [{"value": b"new%d" % i, "partition": i % 4} for i in range(40)])

    result = engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert result.mirrors[topic].partitions_added == 2
    assert_identical(read_topic(source_bootstrap, topic, 4), read_topic(destination_bootstrap, topic, 4))
