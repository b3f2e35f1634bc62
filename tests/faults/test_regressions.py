"""One regression test per hole that fault-safety review found; each failed before its fix.

1. partial writes: what landed of a chunk was assumed to be its prefix;
2. state overwrite: a cycle wrote a mirror's state from an old read, undoing
   a pause or a failover that landed meanwhile;
3. read-after-commit: state was read up to the last stable offset, so a
   transaction left open elsewhere on the topic hid later commits and a
   mirror was flagged as foreign-written;
4. a stop read the stop point before it fenced, so a chunk still landing was
   missing from the stop point it reported.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.health import track_source_failures
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.states import FOREIGN_WRITE
from tests.faults.conftest import LINK
from tests.faults.harness import assert_clean, log_ends, preload
from tests.offset_maps import announce as announce_segment


@pytest.fixture
def mirror_of(fault_config, source_bootstrap, create_topic, unique_name):
    """Factory: (config path, topic, writer) for a mirror of a 1-partition source holding `records` records."""

    def make(records: int):
        path = fault_config()
        topic = create_topic(source_bootstrap, unique_name(), partitions=1)
        writer = preload(source_bootstrap, topic, 1, records)
        engine.create_mirror(load_config(path), LINK, topic)
        return path, topic, writer

    return make


def source_records(bootstrap: str, topic: str, count: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "regression-reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while len(out) < count:
            out += [m for m in c.consume(1000, 1.0) if m.error() is None]
        return out[:count]
    finally:
        c.close()


def announce(path, topic: str, segment: Segment) -> None:
    """A writer's segment for partition 0, as a copy task writes it before producing the chunk."""
    announce_segment(LinkContext.open(load_config(path), LINK), topic, segment)


def produce_copies(bootstrap: str, topic: str, records: list) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for m in records:
        p.produce(topic, key=m.key(), value=m.value(), headers=m.headers(), timestamp=m.timestamp()[1], partition=0)
    assert p.flush(30) == 0


def test_1_a_hole_inside_the_last_chunk_is_found_not_mapped_as_copied(
    mirror_of, spark, source_bootstrap, destination_bootstrap
):
    path, topic, _ = mirror_of(100)
    announce(path, topic, Segment(0, ((0, 100),), 100))
    source = source_records(source_bootstrap, topic, 100)
    # A batch in the middle timed out and a later one landed: records 50..59 are missing.
    produce_copies(destination_bootstrap, topic, source[:50] + source[60:90])

    with pytest.raises(engine.CycleFailed, match="is not source offset 50"):
        engine.run_cycle(load_config(path), LINK, spark, mirrors=[topic])

    info = {m.mirror_topic: m for m in engine.list_mirrors(load_config(path), LINK)}[topic]
    assert FOREIGN_WRITE in info.flags, "a mirror that is no longer identical is flagged, never copied further"
    assert log_ends(destination_bootstrap, topic, 1) == {0: 80}, "nothing more was written into it"


@pytest.mark.parametrize("verb", ["pause", "failover"])
def test_2_a_cycle_never_writes_a_state_from_an_older_read(verb, mirror_of, spark, source_bootstrap):
    path, topic, _ = mirror_of(10)
    config = load_config(path)
    ctx = LinkContext.open(config, LINK)
    stale = list(ctx.registry().values())  # what a cycle read when it started
    getattr(engine, verb)(config, LINK, [topic])

    # The cycle then finds foreign records and flags what it read.
    track_source_failures(ctx, stale, {}, {topic: "foreign records"})

    after = {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[topic]
    assert after.state == ("PAUSED" if verb == "pause" else "STOPPED")
    assert FOREIGN_WRITE not in after.flags


def test_3_a_transaction_left_open_on_the_state_topics_hides_nothing(
    mirror_of, spark, source_bootstrap, destination_bootstrap
):
    path, topic, writer = mirror_of(1000)
    config = load_config(path)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    ctx = LinkContext.open(config, LINK)
    # Another writer of the offset-map topic dies mid-transaction.
    hung = Producer(
        {
            "bootstrap.servers": destination_bootstrap,
            "transactional.id": f"hung-{topic}",
            "transaction.timeout.ms": 5000,
        }
    )
    hung.init_transactions(30)
    hung.begin_transaction()
    hung.produce(ctx.store.offset_map_topic, key=b"other-link/x/0/00000000000000000000", value=b"{}")
    hung.flush(10)
    preload(source_bootstrap, topic, 1, 500, source=writer)  # more to copy, committed after the open transaction
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    info = {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[topic]
    assert FOREIGN_WRITE not in info.flags, info.reason
    assert_clean(path, LINK, source_bootstrap, destination_bootstrap, topic, 1, complete=True, expected_state="ACTIVE")


def test_4_a_stop_reports_the_chunk_that_was_still_landing(mirror_of, source_bootstrap, destination_bootstrap):
    path, topic, _ = mirror_of(1000)
    announce(path, topic, Segment(0, ((0, 1000),), 1000))
    source = source_records(source_bootstrap, topic, 1000)
    # The chunk's records are still on their way when the failover starts.
    landing = threading.Thread(target=lambda: (time.sleep(0.5), produce_copies(destination_bootstrap, topic, source)))
    landing.start()
    try:
        result = engine.failover(load_config(path), LINK, [topic])
    finally:
        landing.join()

    assert result.mirrors[topic]["last_source_offsets"] == {0: 1000}
    assert log_ends(destination_bootstrap, topic, 1) == {0: 1000}
    assert_clean(path, LINK, source_bootstrap, destination_bootstrap, topic, 1, complete=True, expected_state="STOPPED")
