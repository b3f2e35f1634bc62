"""A reservation the task before left open, settled by the follow-mode task that took over (`left_open`).

The task before announced a reservation, landed some of its records and was
fenced before it could close it (killed, or the next epoch's fence met its
last transaction). The continuing unit's task holds the partition until none
of those records can still land, checks what landed against the source,
closes the reservation there and copies on: the partition is not left to a
full plan two epochs later. The copy runs in this process (no Spark), so the
reservation can be left open at an exact place.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import Segment, resolve_keyed
from mirror_pipeline.replication import epochs, group_copy
from mirror_pipeline.replication.cycle import copy_context
from mirror_pipeline.replication.planner import plan_cycle
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, produce_records, read_partition, read_topic
from tests.offset_maps import announce

FOLLOW_S = 8.0
# The writers' delivery timeout is half of it: the held partition is settled 2 + 2 s (clock skew)
# after the reservation was written.
FENCE_WAIT_MS = 2000


def _left_open_by_the_task_before(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, name, landed, reserved=True
):
    """A mirror copied to offset 50 of a source of 100, and a unit continuing it planned before the
    task before announced a reservation for source offsets 50.. (or, past its pack, a closed segment
    of 30 records: `reserved` False) and landed `landed` records under it."""
    create_topic(source_bootstrap, name, partitions=1)
    load_source(source_bootstrap, name, records=50, partitions=1)
    engine.create_mirror(config, LINK, name)
    assert engine.run_cycle(config, LINK, spark, mirrors=[name]).lag_after == 0
    load_source(source_bootstrap, name, records=50, partitions=1)
    ctx = LinkContext.open(config, LINK)
    mirror = [m for m in ctx.registry().values() if m.mirror_topic == name]
    unit = plan_cycle(ctx, mirror, follow_s=FOLLOW_S).units[0]
    unit = replace(unit, continues=True, map_snapshot_end=epochs.offset_map_end(ctx))
    reservation = Segment(50, ((50, 30),), 80, written_at=time.time(), open=reserved)
    announce(ctx, name, reservation)
    produce_records(destination_bootstrap, name, landed(read_partition(source_bootstrap, name, 0)))
    return ctx, unit


def _segments(ctx: LinkContext, topic: str):
    return ctx.store.read_segments([topic]).segments[(topic, 0)]


@pytest.mark.parametrize("reserved", [True, False], ids=["reservation", "closed-segment-past-the-pack"])
def test_the_task_that_took_over_settles_it_at_what_landed_and_copies_on(
    reserved, write_config, own_state, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({**own_state, "mirror.writer.fence.wait.ms": FENCE_WAIT_MS}))
    topic = unique_name()
    ctx, unit = _left_open_by_the_task_before(
        config, spark, source_bootstrap, destination_bootstrap, create_topic, topic, lambda s: s[50:60], reserved
    )

    [result] = group_copy.copy_group([unit], copy_context(ctx))

    assert not result.error, result.error
    assert not result.left_to_next_epoch
    # Its copy starts where the reservation's landed records end, and copies the rest once.
    assert (result.source_from, result.dest_from, result.records) == (60, 60, 40)
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, topic, 1))
    segments = _segments(ctx, topic)
    assert not [s for _, s in segments if s.open], "the reservation was closed"
    assert resolve_keyed(segments, 100).offset_map.dest_end == 100


def test_landed_records_that_are_not_the_source_stop_the_unit_unwritten(
    write_config, own_state, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({**own_state, "mirror.writer.fence.wait.ms": FENCE_WAIT_MS}))
    topic = unique_name()
    # A batch of the task before timed out and a later one landed: source offset 55 is missing.
    ctx, unit = _left_open_by_the_task_before(
        config,
        spark,
        source_bootstrap,
        destination_bootstrap,
        create_topic,
        topic,
        lambda source: source[50:55] + source[56:61],
    )

    [result] = group_copy.copy_group([unit], copy_context(ctx))

    assert result.error_kind == "MirrorDiverged"
    assert "the record at mirror offset 55 is not source offset 55" in result.error
    assert len(read_partition(destination_bootstrap, topic, 0)) == 60, "nothing more was written to it"
    assert [s for _, s in _segments(ctx, topic) if s.open], "the reservation is left for the next plan's repair"


@pytest.mark.parametrize("wrote_past", [False, True], ids=["fenced", "fenced-and-announced-past-it"])
def test_a_held_partition_whose_slot_was_fenced_meanwhile_is_settled_unless_the_other_writer_went_on(
    wrote_past,
    write_config,
    own_state,
    spark,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    monkeypatch,
    caplog,
):
    """Another writer fences the held partition's slot while the task waits to settle it (a pause
    of a mirror sharing the slot, another cycle): the task takes the slot back and still settles
    the reservation when none of its records can land. Before, the partition was let go at the
    retake, left idle for the rest of the epoch and reported as written to by another writer.
    When that writer also announced a segment past the reservation, the partition is its own: the
    task stops it without writing."""
    config = load_config(write_config({**own_state, "mirror.writer.fence.wait.ms": FENCE_WAIT_MS}))
    topic = unique_name()
    ctx, unit = _left_open_by_the_task_before(
        config, spark, source_bootstrap, destination_bootstrap, create_topic, topic, lambda s: s[50:60]
    )
    checked = threading.Event()

    def check_then_tell(*args, **kwargs):
        group_copy_checks(*args, **kwargs)
        checked.set()

    group_copy_checks = group_copy.check_after_fencing
    monkeypatch.setattr(group_copy, "check_after_fencing", check_then_tell)
    caplog.set_level(logging.INFO, logger=group_copy.__name__)
    results: list = []
    task = threading.Thread(target=lambda: results.extend(group_copy.copy_group([unit], copy_context(ctx))))
    task.start()
    assert checked.wait(30), "the task did not get past its checks"
    # The task holds the partition now (until 4 s after the reservation was written): fence its slot.
    other = ctx.segment_writer(topic, 0)
    try:
        other.fence()
        if wrote_past:  # the reservation closed at what landed, and a segment after it
            other.write(puts=[Segment(50, ((50, 10),), 60), Segment(60, ((60, 5),), 65, open=True)])
    finally:
        other.close()
    task.join(FOLLOW_S + 60)

    assert not task.is_alive()
    assert [r for r in caplog.records if "taking it back" in r.getMessage()], "the task's slot was not retaken"
    [result] = results
    if wrote_past:
        assert result.error_kind == "ConcurrentWriter"
        assert "another writer wrote to it while it was held" in result.error
        assert len(read_partition(destination_bootstrap, topic, 0, committed_only=False)) == 60, "nothing written"
        return
    assert not result.error, result.error
    assert (result.source_from, result.dest_from, result.records) == (60, 60, 40)
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, topic, 1))
    segments = _segments(ctx, topic)
    assert not [s for _, s in segments if s.open], "the reservation was closed"
    assert resolve_keyed(segments, 100).offset_map.dest_end == 100
