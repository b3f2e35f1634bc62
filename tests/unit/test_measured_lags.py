"""Which mirrors' lags a cycle hands to the copy asset's checks (`CycleResult.measured_lags`).

A mirror counts only when the cycle planned every one of its partitions: the
checks read the lag of any other mirror, so a partition the plan left out (an
offset map not settled yet) is never counted as caught up.
"""

from __future__ import annotations

from types import SimpleNamespace

from mirror_pipeline.model.offset_map import OffsetMap
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.replication import cycle
from mirror_pipeline.replication.planner import PartitionPlan, Plan


def _info(topic: str) -> MirrorInfo:
    return MirrorInfo("l", topic, topic, "ACTIVE", 0.0, "", 0.0)


def _ctx() -> SimpleNamespace:
    return SimpleNamespace(link=SimpleNamespace(name="l", task_memory_bytes=1 << 28))


def _planned(plan: Plan, topic: str, partition: int, source_end: int, next_source: int) -> None:
    plan.partitions[(topic, partition)] = PartitionPlan(
        _info(topic), partition, 0, source_end, next_source, OffsetMap(next_source_offset=next_source), next_source
    )


def test_only_mirrors_planned_whole_hand_over_their_lag() -> None:
    plan = Plan(partition_counts={"whole": 2, "in-part": 2})
    _planned(plan, "whole", 0, source_end=10, next_source=7)
    _planned(plan, "whole", 1, source_end=5, next_source=5)
    _planned(plan, "in-part", 0, source_end=9, next_source=9)  # its partition 1 was left out

    result = cycle._cycle_result(_ctx(), plan, [], started=0.0)

    assert result.measured_lags == {"whole": 3}
    assert result.mirrors["in-part"].lag_after == 0  # what the cycle saw; the checks read this mirror again


def test_a_mirror_the_plan_skipped_is_not_measured() -> None:
    plan = Plan(partition_counts={"skipped": 1}, errors={"skipped": "its source topic is gone"})

    assert cycle._cycle_result(_ctx(), plan, [], started=0.0).measured_lags == {}
