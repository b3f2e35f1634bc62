"""How a job's work units are dealt to Spark tasks: follow mode's long-lived tasks and a cycle's."""

from __future__ import annotations

import pytest

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS, MIN_TASK_MEMORY_BYTES
from mirror_pipeline.link.state_keys import writer_slot
from mirror_pipeline.replication import copier, group_copy
from mirror_pipeline.replication.copier import InTurn, WorkUnit
from mirror_pipeline.replication.task_groups import cycle_groups, follow_groups


def units(topics: int, partitions: int) -> list[WorkUnit]:
    return [
        WorkUnit("l", f"t{t}", f"t{t}", p, 0, 2**63 - 1, 0, 0, 1, 1, 1, follow_s=1.0, writer_slots=DEFAULT_WRITER_SLOTS)
        for t in range(topics)
        for p in range(partitions)
    ]


def slots_of(group) -> set[int]:
    return {writer_slot(u.mirror_topic, u.partition, u.writer_slots) for u in group}


def assert_no_slot_in_two_tasks(groups) -> None:
    seen: set[int] = set()
    for g in groups:
        assert not seen & slots_of(g), "two tasks would fence each other's writer"
        seen |= slots_of(g)


@pytest.mark.parametrize("slots", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("topics,partitions", [(1, 1), (1, 8), (3, 5), (100, 10)])
def test_every_partition_goes_to_exactly_one_task_and_there_are_no_more_tasks_than_slots(slots, topics, partitions):
    work = units(topics, partitions)
    groups = follow_groups(work, slots)
    assert len(groups) == min(slots, len({writer_slot(u.mirror_topic, u.partition, u.writer_slots) for u in work}))
    assert sorted((u.mirror_topic, u.partition) for g in groups for u in g) == sorted(
        (u.mirror_topic, u.partition) for u in work
    )
    assert_no_slot_in_two_tasks(groups)
    sizes = [len(g) for g in groups]
    largest_slot = max(
        len([u for u in work if writer_slot(u.mirror_topic, u.partition, u.writer_slots) == s])
        for s in range(DEFAULT_WRITER_SLOTS)
    )
    assert max(sizes) - min(sizes) <= largest_slot, "the partitions are spread evenly"


def test_a_topics_partitions_are_spread_over_the_tasks():
    groups = follow_groups(units(1, 8), 2)
    assert [[u.partition for u in g] for g in groups] == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_a_writer_slots_units_always_share_a_task():
    work = units(300, 4)  # 1,200 partitions over 64 slots: every slot serves several
    for groups in (follow_groups(work, 4), cycle_groups([replace_range(u, 5) for u in work], 4)):
        assert len(groups) == 4
        assert_no_slot_in_two_tasks(groups)


def replace_range(unit: WorkUnit, records: int) -> WorkUnit:
    return WorkUnit(
        unit.link,
        unit.source_topic,
        unit.mirror_topic,
        unit.partition,
        0,
        records,
        0,
        0,
        1,
        CHUNK,
        1,
        writer_slots=unit.writer_slots,
    )


def test_no_work_no_task():
    assert follow_groups([], 4) == []


CHUNK = 20_000


def ranged(sizes: list[int]) -> list[WorkUnit]:
    """A cycle's units of one topic, partition p copying sizes[p] records in chunks of CHUNK, on a
    link of 64 writer slots (so that up to 64 partitions each have a slot of their own)."""
    return [WorkUnit("l", "t", "t", p, 100, 100 + n, 0, 0, 1, CHUNK, 1, writer_slots=64) for p, n in enumerate(sizes)]


def keys(groups: list[list[WorkUnit]]) -> list[int]:
    return sorted(u.partition for g in groups for u in g)


@pytest.mark.parametrize("slots", [1, 2, 3, 8])
@pytest.mark.parametrize("count", [1, 2, 8, 33])
def test_a_cycle_of_small_units_runs_one_task_per_slot_holding_every_unit_once(slots, count):
    groups = cycle_groups(ranged([1000] * count), slots)
    assert len(groups) == min(slots, count)
    assert keys(groups) == list(range(count))
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1


def test_small_units_are_balanced_by_records_to_copy_not_by_units():
    groups = cycle_groups(ranged([14_000, 2_000, 2_000, 2_000, 2_000, 2_000, 2_000, 2_000]), 2)
    assert sorted(sorted(u.partition for u in g) for g in groups) == [[0], [1, 2, 3, 4, 5, 6, 7]]


def test_a_unit_of_more_than_one_chunk_is_never_copied_beside_another():
    groups = cycle_groups(ranged([CHUNK + 1, CHUNK + 1, 500, 500, 500]), 2)
    assert sorted(sorted(u.partition for u in g) for g in groups) == [[0], [1], [2, 4], [3]]
    assert not any(isinstance(g, InTurn) for g in groups)


@pytest.mark.parametrize("slots", [1, 2, 3, 4])
def test_large_units_beyond_the_slots_take_one_task_per_slot_in_turn_balanced_by_records(slots):
    sizes = [10 * CHUNK] * 6 + [40 * CHUNK, 2 * CHUNK]
    groups = cycle_groups(ranged(sizes), slots)
    assert len(groups) == slots and all(isinstance(g, InTurn) for g in groups)
    assert keys(groups) == list(range(8))
    loads = sorted(sum(sizes[u.partition] for u in g) for g in groups)
    # Largest first to the lightest task: no task carries more than the lightest plus its largest unit.
    assert loads[-1] - loads[0] <= 40 * CHUNK
    if slots == 2:
        assert loads == [40 * CHUNK, 62 * CHUNK] or loads == [50 * CHUNK, 52 * CHUNK]


def test_small_units_still_share_tasks_beside_large_units_in_turn():
    groups = cycle_groups(ranged([CHUNK + 1] * 3 + [500] * 4), 2)
    in_turn = [g for g in groups if isinstance(g, InTurn)]
    side_by_side = [g for g in groups if not isinstance(g, InTurn)]
    assert sorted(len(g) for g in in_turn) == [1, 2] and [len(g) for g in side_by_side] == [2, 2]
    assert keys(groups) == list(range(7))


def test_a_cycle_with_no_work_runs_no_task():
    assert cycle_groups([], 2) == []


@pytest.mark.parametrize("in_turn", [True, False])
def test_a_task_copies_large_units_in_turn_and_small_ones_together(monkeypatch, in_turn):
    calls = []
    monkeypatch.setattr(
        group_copy, "copy_unit", lambda unit, ctx: calls.append(("alone", unit.partition)) or unit.partition
    )
    monkeypatch.setattr(
        group_copy, "copy_group", lambda units, ctx: calls.append(("together", len(units))) or [0, 1, 2, 3]
    )
    ctx = copier.CopyContext("a", "b", {}, {}, "map", 1000, "state", task_memory_bytes=64 * MIN_TASK_MEMORY_BYTES)
    work = ranged([CHUNK + 1] * 4) if in_turn else ranged([5] * 4)
    assert group_copy.copy_units(InTurn(work) if in_turn else work, ctx) == [0, 1, 2, 3]
    assert calls == ([("alone", p) for p in range(4)] if in_turn else [("together", 4)])


def test_one_large_unit_takes_the_throughput_path_and_a_follow_unit_the_group_path(monkeypatch):
    calls = []
    monkeypatch.setattr(group_copy, "copy_unit", lambda unit, ctx: calls.append("alone") or 0)
    monkeypatch.setattr(group_copy, "copy_group", lambda units, ctx: calls.append("together") or [0])
    ctx = copier.CopyContext("a", "b", {}, {}, "map", 1000, "state")
    group_copy.copy_units(ranged([CHUNK + 1]), ctx)
    group_copy.copy_units(units(1, 1), ctx)
    assert calls == ["alone", "together"]
