"""A copy task's producers sized to its thread budget (`task_clients.producer_count`)."""

from __future__ import annotations

from mirror_pipeline.replication.chunks import MAX_TASK_PRODUCERS
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.task_clients import (
    PRODUCER_THREADS,
    READER_THREADS,
    SLOT_THREADS,
    TASK_THREADS,
    WRITER_THREADS,
    copying_threads,
    producer_count,
    producers_first,
)

LINK_SLOTS = 16


def task(partitions: int, slots: int, follow_s: float = 0.0) -> list[Member]:
    """`partitions` members of a task whose units are in the link's first `slots` writer slots."""
    out: list[Member] = []
    p = 0
    while len(out) < partitions:
        unit = WorkUnit(
            "l", "src", "mirror", p, 0, 10, 0, 0, 1 << 40, 1000, 1048588, follow_s=follow_s, writer_slots=LINK_SLOTS
        )
        member = Member(unit, UnitResult("mirror", p, 0, 0, 0, 0), 0, 0)
        if member.slot < slots:
            out.append(member)
        p += 1
    return out


def test_a_wide_cycle_task_of_half_the_slots_keeps_every_producer_within_the_budget():
    parts = task(5_000, LINK_SLOTS // 2)
    assert producer_count(parts) == MAX_TASK_PRODUCERS
    # main, Python's, 8 writers, the consumer and the admin client, 4 producers
    assert copying_threads(parts, MAX_TASK_PRODUCERS) == 1 + SLOT_THREADS + 8 * WRITER_THREADS + 8 + 12
    assert copying_threads(parts, MAX_TASK_PRODUCERS) <= TASK_THREADS


def test_a_wide_follow_task_gives_a_producer_up_for_the_consumer_that_settles_a_held_partition():
    parts = task(5_000, LINK_SLOTS // 2, follow_s=60.0)
    assert producer_count(parts) == MAX_TASK_PRODUCERS - 1
    assert copying_threads(parts, 0) == copying_threads(task(5_000, LINK_SLOTS // 2), 0) + READER_THREADS
    assert copying_threads(parts, MAX_TASK_PRODUCERS - 1) <= TASK_THREADS
    assert copying_threads(parts, MAX_TASK_PRODUCERS) > TASK_THREADS  # a fourth would pass it


def test_a_task_of_more_slots_than_the_budget_holds_still_writes_through_one_producer():
    parts = task(5_000, LINK_SLOTS, follow_s=60.0)
    assert producer_count(parts) == 1
    assert copying_threads(parts, 1) - PRODUCER_THREADS > TASK_THREADS  # its writers alone pass it
    assert not producers_first(parts)  # a wide task's producer waits for its checks to end


def test_a_narrow_task_has_one_producer_whatever_its_slots():
    assert producer_count(task(8, 4, follow_s=60.0)) == 1
