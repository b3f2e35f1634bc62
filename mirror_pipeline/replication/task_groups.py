"""How a job's work units are dealt to Spark tasks, which copy them side by side or in turn (`copier.copy_units`).

A copy unit pays a fixed price before its first record: it fences the
partition, builds three clients and checks nothing moved since the plan (a
few hundred milliseconds, mostly round trips to the brokers). With one task
per unit, a cycle of 8 small units on 2 task slots ran in 4 waves and paid
that price four times over; with the small units grouped so that every slot
runs one task, the round trips overlap and the job runs in one wave.

A Spark task has a price of its own: in a warm local session a task started
0.1-0.25 s after the one before it ended on its slot, and 1.1-1.6 s in a
session's first job. So when there are more large units than slots, they
are dealt to one task per slot, to be copied in turn.
"""

from __future__ import annotations

import heapq
from typing import Sequence

from mirror_pipeline.config.setting_values import MIN_TASK_MEMORY_BYTES
from mirror_pipeline.replication.copier import InTurn, WorkUnit


def follow_groups(units: Sequence[WorkUnit], slots: int) -> list[list[WorkUnit]]:
    """Follow mode: at most `slots` groups, the units dealt round-robin (a topic's partitions spread over the tasks).

    Every task runs for the whole epoch, so there are never more than the slots.
    """
    count = max(1, min(slots, len(units)))
    return [list(units[i::count]) for i in range(count) if units[i::count]]


def cycle_groups(units: Sequence[WorkUnit], slots: int, task_memory_bytes: int) -> list[list[WorkUnit]]:
    """A cycle: small units share one task per slot, side by side; larger units are copied one at a time.

    Small means one chunk (`mirror.chunk.max.records`) or less: the unit's
    fixed price is most of its cost, which side by side is paid once per wave.
    A larger unit is never copied beside another: it keeps the task's whole
    memory budget and its Python interpreter; threads share one, and 8 large units
    in two tasks of four took 18 % more CPU in Spark's Python workers than
    in eight tasks (`benchmarks/throughput.py`, warm copy, one run each).
    A task's budget is split between its units, so a group holds at most
    budget / `MIN_TASK_MEMORY_BYTES` of them (16 at the default budget); past
    that the groups queue for slots as single units do.

    Large units beyond the slots are dealt to one task per slot (`InTurn`): each
    is still copied alone, with the whole budget, and the slot pays one task's
    start instead of one per unit.

    Either kind is dealt largest first, each unit to the group with the fewest
    records so far (and, on ties, the fewest units).
    """
    large = [u for u in units if _records(u) > u.chunk_records]
    small = [u for u in units if _records(u) <= u.chunk_records]
    if len(large) <= slots:
        large_groups = [[u] for u in large]
    else:
        large_groups = [InTurn(g) for g in _deal(large, slots, len(large))]
    if not small:
        return large_groups
    per_task = max(1, task_memory_bytes // MIN_TASK_MEMORY_BYTES)
    count = max(min(slots, len(small)), -(-len(small) // per_task))
    return large_groups + _deal(small, count, per_task)


def _deal(units: Sequence[WorkUnit], count: int, per_group: int) -> list[list[WorkUnit]]:
    """`units` in `count` groups of at most `per_group`, balanced by records (largest first)."""
    heap = [(0, 0, i) for i in range(count)]  # (records, units, group index)
    groups: list[list[WorkUnit]] = [[] for _ in range(count)]
    for unit in sorted(units, key=_records, reverse=True):
        records, size, i = heapq.heappop(heap)
        groups[i].append(unit)
        if size + 1 < per_group:
            heapq.heappush(heap, (records + _records(unit), size + 1, i))
    return [g for g in groups if g]


def _records(unit: WorkUnit) -> int:
    """Records the unit copies at most (fewer where the source is compacted or holds transaction markers)."""
    return unit.source_until - unit.source_from
