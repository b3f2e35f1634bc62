"""How a job's work units are dealt to Spark tasks; a task copies its units side by side (`copier.copy_units`).

A copy task pays a fixed price before its first record: it fences the
partition, builds three clients and checks nothing moved since the plan (a
few hundred milliseconds, mostly round trips to the brokers). With one task
per unit, a cycle of 8 small units on 2 task slots ran in 4 waves and paid
that price four times over; with the units grouped so that every slot runs one
task, the round trips overlap and the job runs in one wave.
"""

from __future__ import annotations

import heapq
from typing import Sequence

from mirror_pipeline.config.setting_values import MIN_TASK_MEMORY_BYTES
from mirror_pipeline.replication.copier import WorkUnit


def follow_groups(units: Sequence[WorkUnit], slots: int) -> list[list[WorkUnit]]:
    """Follow mode: at most `slots` groups, the units dealt round-robin (a topic's partitions spread over the tasks).

    Every task runs for the whole epoch, so there are never more than the slots.
    """
    count = max(1, min(slots, len(units)))
    return [list(units[i::count]) for i in range(count) if units[i::count]]


def cycle_groups(units: Sequence[WorkUnit], slots: int, task_memory_bytes: int) -> list[list[WorkUnit]]:
    """A cycle: one group per slot, balanced by records to copy; more groups only to keep units' memory shares.

    A task's memory budget is split between its units, so a group holds at most
    budget / `MIN_TASK_MEMORY_BYTES` of them (16 at the default budget); beyond
    that the groups queue for slots as single units did. Balancing matters
    because a task's threads share one Python interpreter: a task left with the
    bulk of the records would copy it on one core while the other slots idle.
    The largest units go first, each to the group with the fewest records so
    far (and, on ties, the fewest units).
    """
    if not units:
        return []
    per_task = max(1, task_memory_bytes // MIN_TASK_MEMORY_BYTES)
    count = max(min(slots, len(units)), -(-len(units) // per_task))
    heap = [(0, 0, i) for i in range(count)]  # (records, units, group index)
    groups: list[list[WorkUnit]] = [[] for _ in range(count)]
    for unit in sorted(units, key=lambda u: u.source_until - u.source_from, reverse=True):
        records, size, i = heapq.heappop(heap)
        groups[i].append(unit)
        if size + 1 < per_task:
            heapq.heappush(heap, (records + unit.source_until - unit.source_from, size + 1, i))
    return [g for g in groups if g]
