"""What a reverse (failback, R-LC-7) does to each partition of the old source topic.

After promote or failover of mirror M (link L: A -> B), the old source topic S
on A may become a mirror of M on the reverse link (B -> A). Per partition of S:

- *continue*: every record S holds sits at the same offset in M (L's offset map
  is the identity over S's log) and S holds nothing past the point L had
  mirrored up to (not even a transaction marker). S keeps its data; copying
  resumes at S's log end, offsets equal on both sides, nothing copied twice.
- otherwise S cannot follow M in place: Kafka cannot cut a topic's tail, so S is
  *rebuilt* (deleted, created again as a new mirror of M, copied from M's log
  start). Before that, every committed record of S that the rebuilt topic would
  not hold again is *saved*: the divergent tail (past what L mirrored) and the
  head that M no longer holds (M's retention already deleted it).

One partition that needs a rebuild rebuilds the whole topic: a topic is
deleted as a whole. This module decides; `operations.reverse` acts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mirror_pipeline.model.offset_map import OffsetMap

CONTINUE = "continue"
REBUILD = "rebuild"


@dataclass(frozen=True)
class PartitionFacts:
    """What both clusters say about one partition of the old source S and its stopped mirror M."""

    partition: int
    source_log_start: int  # S on A (the old source, the new mirror)
    source_log_end: int  # high watermark: transaction markers and aborted data count
    mirrored_up_to: int | None  # next offset of S that L would have copied; None: M never had this partition
    mirror_log_start: int | None  # M on B (the new source); None: M has no such partition
    mirror_log_end: int | None


@dataclass(frozen=True)
class PartitionReverse:
    """The decision for one partition, and the ranges of S saved before a rebuild ([from, until) offsets of S)."""

    partition: int
    action: str
    reason: str
    mirrored_up_to: int
    source_log_start: int
    source_log_end: int
    saved_ranges: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["saved_ranges"] = [list(r) for r in self.saved_ranges]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionReverse:
        return cls(**{**d, "saved_ranges": tuple(tuple(r) for r in d.get("saved_ranges", ()))})


def decide_partition(facts: PartitionFacts, offset_map: OffsetMap | None) -> PartitionReverse:
    """Continue in place or rebuild, for one partition of S; `offset_map` is L's map of it (None: none)."""
    a0, a_end = facts.source_log_start, facts.source_log_end
    if facts.mirror_log_end is None:
        return PartitionReverse(
            facts.partition,
            REBUILD,
            f"the new source has no partition {facts.partition}",
            a0,
            a0,
            a_end,
            _nonempty((a0, a_end)),
        )
    n = a0 if facts.mirrored_up_to is None else facts.mirrored_up_to
    tail = (n, a_end) if a_end > n else None
    if tail is None and identity_over(offset_map, a0, n):
        return PartitionReverse(
            facts.partition, CONTINUE, "same records at the same offsets on both sides", n, a0, a_end
        )
    keep_from = first_still_held(offset_map, a0, n, facts.mirror_log_start or 0)
    reason = (
        f"{a_end - n} offsets past what was mirrored (divergent tail)"
        if tail
        else "offsets differ between the two sides (gaps or a translated offset map)"
    )
    ranges = _nonempty((a0, keep_from)) + (_nonempty(tail) if tail else ())
    return PartitionReverse(facts.partition, REBUILD, reason, n, a0, a_end, ranges)


def new_source_partition(partition: int) -> PartitionReverse:
    """A partition only the new source has: the rebuilt or grown mirror copies it from the start."""
    return PartitionReverse(
        partition, CONTINUE, "only the new source has this partition: copied from its start", 0, 0, 0
    )


def topic_action(partitions: list[PartitionReverse]) -> str:
    return REBUILD if any(p.action == REBUILD for p in partitions) else CONTINUE


def identity_over(offset_map: OffsetMap | None, start: int, end: int) -> bool:
    """Whether every offset in [start, end) of the source landed at the same offset of the mirror."""
    if end <= start:
        return True
    if offset_map is None:
        return False
    covered = start
    for run in offset_map.runs:
        if run.source_end <= covered:
            continue
        if run.source > covered or run.source != run.dest:
            return False
        covered = run.source_end
        if covered >= end:
            return True
    return False


def first_still_held(offset_map: OffsetMap | None, start: int, end: int, mirror_log_start: int) -> int:
    """The first offset of [start, end) on the source whose copy the mirror still holds (`end` if none).

    Offsets before it were copied once and then deleted by the mirror's retention.
    """
    if offset_map is None:
        return end
    for run in offset_map.runs:
        if run.source_end <= start or run.dest_end <= mirror_log_start:
            continue
        first = max(run.source + max(0, mirror_log_start - run.dest), start)
        return min(first, end)
    return end


def _nonempty(span: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    return (span,) if span[1] > span[0] else ()
