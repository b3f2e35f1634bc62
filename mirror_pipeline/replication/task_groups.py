"""How a job's work units are dealt to Spark tasks (`group_copy.copy_units` copies a task's units).

Two rules decide it:
- A writer slot's units are always in one task (`state_keys.writer_slot`):
  two tasks holding the same slot would fence each other.
- A unit of more than one chunk is copied alone, with the task's whole memory
  budget and its Python interpreter (`copier.copy_unit`, the throughput
  path): 8 large units in two tasks of four, side by side, took 18 % more CPU
  in Spark's Python workers than in eight tasks. Small units (a chunk or
  less) are copied together (`group_copy`), paying the copy's fixed price
  (fences, clients, checks) once per task instead of once per unit.

A Spark task has a price of its own: in a warm local session a task started
0.1-0.25 s after the one before it ended on its slot, and 1.1-1.6 s in a
session's first job. So there are never more tasks of small units than task
slots, and when there are more large units than slots they are dealt to one
task per slot, to be copied in turn.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from mirror_pipeline.link.state_keys import writer_slot
from mirror_pipeline.replication.copier import InTurn, WorkUnit

Bundle = list[WorkUnit]


def follow_groups(units: Sequence[WorkUnit], slots: int) -> list[list[WorkUnit]]:
    """Follow mode: at most `slots` groups, each writer slot's units in one, balanced by units
    (a topic's partitions, in consecutive writer slots, spread over the tasks).

    Every task runs for the whole epoch, so there are never more than the slots.
    """
    bundles = _by_writer_slot(units)
    return _deal(bundles, max(1, min(slots, len(bundles))), len)


def cycle_groups(units: Sequence[WorkUnit], slots: int) -> list[list[WorkUnit]]:
    """A cycle: small units together, at most one task per slot; larger units one at a time.

    A writer slot that has a large unit is copied in turn, all its units
    alone (a slot's units never go to two tasks). Either kind is dealt
    largest first, each slot's units to the group with the fewest records so
    far (and, on ties, the fewest units).
    """
    bundles = _by_writer_slot(units)
    large = [b for b in bundles if any(_records(u) > u.chunk_records for u in b)]
    small = [b for b in bundles if all(_records(u) <= u.chunk_records for u in b)]
    if len(large) <= slots:
        large_groups: list[list[WorkUnit]] = [InTurn(b) if len(b) > 1 else list(b) for b in large]
    else:
        large_groups = [InTurn(g) for g in _deal(large, slots, _bundle_records)]
    if not small:
        return large_groups
    return large_groups + _deal(small, min(slots, len(small)), _bundle_records)


def _by_writer_slot(units: Sequence[WorkUnit]) -> list[Bundle]:
    """The units of each writer slot, in the order their first unit comes."""
    bundles: dict[int, Bundle] = {}
    for unit in units:
        bundles.setdefault(writer_slot(unit.mirror_topic, unit.partition, unit.writer_slots), []).append(unit)
    return list(bundles.values())


def _deal(bundles: Sequence[Bundle], count: int, weight: Callable[[Bundle], int]) -> list[list[WorkUnit]]:
    """`bundles` in `count` groups balanced by `weight` (heaviest first, each to the lightest group)."""
    heap = [(0, 0, i) for i in range(count)]  # (weight, units, group index)
    groups: list[list[WorkUnit]] = [[] for _ in range(count)]
    for bundle in sorted(bundles, key=weight, reverse=True):
        load, size, i = heapq.heappop(heap)
        groups[i] += bundle
        heapq.heappush(heap, (load + weight(bundle), size + len(bundle), i))
    return [g for g in groups if g]


def _bundle_records(bundle: Bundle) -> int:
    return sum(map(_records, bundle))


def _records(unit: WorkUnit) -> int:
    """Records the unit copies at most (fewer where the source is compacted or holds transaction markers)."""
    return unit.source_until - unit.source_from
