"""The link's registry and offset map read right however far the log cleaner has got.

The internal topics are compacted (`state_store.STATE_TOPIC_CONFIG`): the
cleaner drops every value a later one of its key replaced, and a tombstone
once `delete.retention.ms` has passed since it reached it. Here both topics
are made before the link uses them, with a cleaner as eager as Kafka allows
(segments rolled after 100 ms, tombstones dropped 100 ms after): cycles and
follow-mode epochs, whose checks read the map on from a plan's snapshot,
copy every record once all the same.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import NewTopic

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.topic_reading import read_topic as read_state_topic
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.replication import cycle
from tests.integration.conftest import LINK
from tests.integration.test_follow_hand_over import _Epochs, _produce_until, watermark_of
from tests.kafka_records import assert_identical, load_source, read_topic

PARTITIONS = 3  # as `_produce_until` writes
EAGER_CLEANER = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "100",
    "retention.ms": "-1",
}


def _state_records(bootstrap: str, admin, topic: str) -> list[tuple[str, bytes | None, int]]:
    """Every (key, value, offset) the topic holds now, tombstones (None) included."""
    conf = kc.client_config({"bootstrap.servers": bootstrap}, LINK, "state-reader")
    return list(read_state_topic(conf, admin, topic, "b"))


def test_cycles_and_epochs_copy_right_on_state_the_cleaner_compacted(
    monkeypatch,
    write_config,
    own_state,
    admin,
    spark,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
):
    dest_admin = admin(destination_bootstrap)
    made = dest_admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=1, config=EAGER_CLEANER) for t in own_state.values()]
    )
    for done in made.values():
        done.result(30)
    config = load_config(write_config(own_state))
    offset_map = own_state["mirror.offset.map.topic"]
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    engine.create_mirror(config, LINK, topic)

    # Every cycle merges its partitions' segments (there are 16 before one does, otherwise): each
    # merge writes the merged segment and a tombstone for every key merged away.
    monkeypatch.setattr(cycle, "CONSOLIDATE_AFTER", 1)
    merged_away: list[set[str]] = []
    for _ in range(8):
        load_source(source_bootstrap, topic, records=40, partitions=PARTITIONS)
        assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
        present = _state_records(destination_bootstrap, dest_admin, offset_map)
        merged_away.append({key for key, value, _ in present if value is None})
        time.sleep(0.2)  # the next cycle's first write rolls the segment this one wrote: the cleaner may take it
    dropped = set().union(*merged_away[:-1])
    assert dropped, "no cycle merged segments: nothing for the cleaner to drop"

    def still_held() -> set[str]:
        return dropped & {key for key, _, _ in _state_records(destination_bootstrap, dest_admin, offset_map)}

    # A tombstone goes at a cleaning after its delete horizon; the last ones wait for writes to come.
    deadline = time.monotonic() + 60
    while len(left := still_held()) > len(dropped) // 2:
        assert time.monotonic() < deadline, f"the cleaner kept {len(left)} of {len(dropped)} tombstones"
        time.sleep(1)

    stop, done = threading.Event(), threading.Event()
    report = _Epochs(stop)
    producer = threading.Thread(target=_produce_until, args=(done, source_bootstrap, topic))
    producer.start()
    try:
        engine.follow(config, LINK, spark, report, stop, epoch_s=3.0, mirrors=[topic])
    finally:
        done.set()
        producer.join()
    assert all(not e.error for e in report.seen), [e.error for e in report.seen if e.error]

    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )
    segments = LinkContext.open(config, LINK).store.read_segments([topic]).segments
    for p in range(PARTITIONS):
        end = watermark_of(destination_bootstrap, topic, p)
        assert resolve_keyed(segments[(topic, p)], end).offset_map.dest_end == end
