"""The collector policy of a process that plans cycles: a plan-sized heap of acyclic objects makes no full
collection under it, where Python's defaults made several; cyclic garbage is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from mirror_pipeline.replication import gc_policy

# About what planning 10,000 partitions keeps at once (a PartitionPlan, its offset map and runs, futures).
PLAN_OBJECTS = 300_000


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _full_collections_while_planning() -> int:
    # At least as many objects as the heap holds already (a test process's imports): Python's defaults then
    # make a full collection whatever that heap, and the policy none (it would take 5,000,000).
    made = max(PLAN_OBJECTS, len(gc.get_objects())) // 3
    full = []
    gc.collect()  # the generations' counts start at zero

    def count(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(info["collected"])

    gc.callbacks.append(count)
    try:
        plan = [{"partition": i, "runs": [(i, i + 1)]} for i in range(made)]
    finally:
        gc.callbacks.remove(count)
    assert len(plan) == made
    return len(full)


def test_a_plan_sized_heap_makes_no_full_collection(thresholds):
    gc.set_threshold(700, 10, 10)  # Python's defaults
    assert _full_collections_while_planning() > 0
    gc_policy.apply()
    assert _full_collections_while_planning() == 0


def test_cyclic_garbage_is_still_collected(thresholds):
    gc_policy.apply()

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    gone = weakref.ref(node)
    del node
    kept = [[] for _ in range(gc_policy.YOUNG_THRESHOLD * 2)]  # what a command goes on to allocate
    assert kept and gone() is None
