"""Follow mode's pure parts: how a link's partitions are dealt to long-lived tasks."""

from __future__ import annotations

import pytest

from mirror_pipeline.replication.copier import WorkUnit
from mirror_pipeline.replication.cycle import unit_groups


def units(topics: int, partitions: int) -> list[WorkUnit]:
    return [WorkUnit("l", f"t{t}", f"t{t}", p, 0, 2**63 - 1, 0, 0, 1, 1, 1, follow_until=1.0)
            for t in range(topics) for p in range(partitions)]


@pytest.mark.parametrize("slots", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("topics,partitions", [(1, 1), (1, 8), (3, 5), (100, 10)])
def test_every_partition_goes_to_exactly_one_task_and_there_are_no_more_tasks_than_slots(slots, topics, partitions):
    work = units(topics, partitions)
    groups = unit_groups(work, slots)
    assert len(groups) == min(slots, len(work))
    assert sorted((u.mirror_topic, u.partition) for g in groups for u in g) == sorted(
        (u.mirror_topic, u.partition) for u in work)
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1, "the partitions are spread evenly"


def test_a_topics_partitions_are_spread_over_the_tasks():
    groups = unit_groups(units(1, 8), 2)
    assert [[u.partition for u in g] for g in groups] == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_no_work_no_task():
    assert unit_groups([], 4) == []
