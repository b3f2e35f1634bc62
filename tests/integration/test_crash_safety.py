"""Single-writer fencing and foreign writes on the real local pair (R-REL-1, R-REL-2), in process.

Cycles killed with SIGKILL at random points, and cycles racing each other, are
the fault suite's (tests/faults: test_kills, test_races), in `make test` as a
slice and in `make faults` in full.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from mirror_pipeline import engine
from mirror_pipeline.kafka.clients import watermark
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.copier import CopyContext, WorkUnit, copy_unit
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, produce_records, read_partition, read_topic

PARTITIONS = 4


def mirrored(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "progress-probe"})
    try:
        return sum(watermark(c, topic, p)[1] for p in range(partitions))
    finally:
        c.close()


def mirror_info(config, topic: str):
    return {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[topic]


def test_unit_refuses_when_another_writer_wrote_after_the_plan(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=100, partitions=1)
    engine.create_mirror(config, LINK, topic)
    ctx = LinkContext.open(config, LINK)
    snapshot_end = ctx.store.read_segments([topic]).end_offset
    unit = WorkUnit(
        LINK, topic, topic, 0, 0, 25, 0, snapshot_end, 1 << 30, 1000, 1048588, writer_slots=ctx.writer_slots
    )
    # Another writer announces a chunk of this partition after the plan was made.
    other = ctx.segment_writer(topic, 0)
    other.fence()
    other.write(puts=[Segment(0, ((0, 10),), 10)])
    other.close()
    copy_ctx = CopyContext(
        "us-west",
        "us-east",
        dict(ctx.source.properties),
        dict(ctx.dest.properties),
        ctx.store.offset_map_topic,
        3000,
        ctx.store.state_topic,
    )

    result = copy_unit(unit, copy_ctx)

    assert result.error_kind == "ConcurrentWriter", result
    assert result.records == 0
    assert mirrored_partition(destination_bootstrap, topic) == 0


def mirrored_partition(bootstrap, topic):
    return mirrored(bootstrap, topic, partitions=1)


def test_a_chunk_that_landed_after_its_repair_is_mapped_not_flagged(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    """A throttled writer's request lands after the repair settled its chunk without it: its records lie
    past the map, and they are the source's next records. The next cycle maps them and copies on."""
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=50, partitions=1)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    load_source(source_bootstrap, topic, records=30, partitions=1)
    late = read_partition(source_bootstrap, topic, 0)[50:70]
    produce_records(destination_bootstrap, topic, late)  # as the late request would have written them

    result = engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert result.records == 10, "only what had not landed is copied"
    assert "FOREIGN_WRITE" not in mirror_info(config, topic).flags
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, topic, 1))


def test_older_records_landing_again_are_flagged(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    """Records past the map that are not the source's next ones (here, copies of earlier ones) are a
    write the link did not make: the mirror is flagged, nothing is mapped over them."""
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=50, partitions=1)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    load_source(source_bootstrap, topic, records=30, partitions=1)
    produce_records(destination_bootstrap, topic, read_partition(source_bootstrap, topic, 0)[40:50])

    with pytest.raises(engine.CycleFailed, match="holds 10 records the link did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert "FOREIGN_WRITE" in mirror_info(config, topic).flags
    assert mirrored_partition(destination_bootstrap, topic) == 60  # nothing written after them


def test_foreign_write_into_a_mirror_is_detected(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=50, partitions=1)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    p = Producer({"bootstrap.servers": destination_bootstrap})
    p.produce(topic, value=b"not from the link", partition=0)
    p.flush(10)
    load_source(source_bootstrap, topic, records=10, partitions=1)

    with pytest.raises(engine.CycleFailed, match="records the link did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert mirrored_partition(destination_bootstrap, topic) == 51  # nothing interleaved after it
