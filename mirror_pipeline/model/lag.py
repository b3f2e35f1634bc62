"""Data lag: how far a mirror partition is behind its source (one formula for every report)."""

from __future__ import annotations


def records_behind(source_end: int, next_source_offset: int) -> int:
    """Records of a source partition not yet mirrored.

    `source_end` is the source partition's end as the link reads it (its last
    stable offset: the offset the next committed record will get);
    `next_source_offset` is the source offset the mirror copies next (where
    its offset map ends, or the source's log start when nothing was copied).
    Offsets are counted, so records a compaction removed or transaction
    markers still count until copying passes them. Never negative.
    """
    return max(0, source_end - next_source_offset)
