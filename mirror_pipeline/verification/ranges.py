"""Which offsets a verify compares: the offset map as an index both ways, the common
range of a mirror and its source, the mirror's tail the link did not write, checksum
blocks, sampling and task splitting.

Pure: offsets in, offsets out.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

# Source offsets per checksum range. Small enough that narrowing a mismatched
# range re-reads little; large enough that a partition has few of them.
BLOCK_OFFSETS = 5000


@dataclass(frozen=True)
class RunIndex:
    """The runs of an offset map, `(source, mirror, length)` each, looked up from either side.

    Runs increase on both sides (the offset map's invariant), so one sorted
    list per side answers both directions with a bisection.
    """

    runs: tuple[tuple[int, int, int], ...]
    source_end: int  # next source offset the copy would read (the map's end on the source)
    mirror_end: int  # the map's end on the mirror
    _sources: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _mirrors: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sources", tuple(r[0] for r in self.runs))
        object.__setattr__(self, "_mirrors", tuple(r[1] for r in self.runs))

    def mirror_of(self, source_offset: int) -> int | None:
        """The mirror offset of the record copied from `source_offset`; None if none was."""
        i = bisect.bisect_right(self._sources, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i][0] + self.runs[i][2]:
            return self.runs[i][1] + source_offset - self.runs[i][0]
        return None

    def source_of(self, mirror_offset: int) -> int | None:
        """The source offset a mirror record was copied from; None for placeholders and foreign records."""
        i = bisect.bisect_right(self._mirrors, mirror_offset) - 1
        if i >= 0 and mirror_offset < self.runs[i][1] + self.runs[i][2]:
            return self.runs[i][0] + mirror_offset - self.runs[i][1]
        return None

    def mirror_position(self, source_position: int) -> int:
        """Mirror offset of the first copied record at or after `source_position` (the map's end past it)."""
        i = bisect.bisect_right(self._sources, source_position) - 1
        if i >= 0 and source_position < self.runs[i][0] + self.runs[i][2]:
            return self.runs[i][1] + source_position - self.runs[i][0]
        return self.runs[i + 1][1] if i + 1 < len(self.runs) else self.mirror_end

    def source_position(self, mirror_position: int) -> int:
        """Source offset of the first copied record at or after mirror offset `mirror_position`."""
        i = bisect.bisect_right(self._mirrors, mirror_position) - 1
        if i >= 0 and mirror_position < self.runs[i][1] + self.runs[i][2]:
            return self.runs[i][0] + mirror_position - self.runs[i][1]
        return self.runs[i + 1][0] if i + 1 < len(self.runs) else self.source_end

    def clipped(self, source_from: int, source_until: int) -> tuple[tuple[int, int, int], ...]:
        """The runs cut to source offsets [source_from, source_until): what a task needs, nothing more."""
        out = []
        first = max(0, bisect.bisect_right(self._sources, source_from) - 1)
        for source, mirror, length in self.runs[first:]:
            if source >= source_until:
                break
            start, end = max(source, source_from), min(source + length, source_until)
            if start < end:
                out.append((start, mirror + start - source, end - start))
        return tuple(out)


def common_range(
    index: RunIndex,
    source_start: int,
    source_end: int,
    mirror_start: int,
    from_offset: int | None = None,
    until_offset: int | None = None,
) -> tuple[int, int]:
    """Source offsets [lo, hi) that both sides still hold and the map covers.

    - below: the source's log start, the first mapped record (what came before
      it was gone when the mirror started), the mirror's log start (retention
      on the mirror), and `from_offset`;
    - above: the map's end (records written to a stopped mirror afterwards are
      not the mirror's), the source's last stable offset, and `until_offset`
      (exclusive).
    Empty (lo >= hi) when nothing is in common.
    """
    lo = max(source_start, index.source_position(mirror_start), from_offset or 0)
    if index.runs:
        lo = max(lo, index.runs[0][0])
    hi = min(index.source_end, source_end)
    if until_offset is not None:
        hi = min(hi, until_offset)
    return lo, max(lo, hi)


def foreign_tail(foreign_records: int, mirror_log_end: int, stopped: bool) -> tuple[int, int]:
    """Mirror offsets [from, until) the link did not write: the last `foreign_records` below the log end.

    `foreign_records` is `offset_map.resolve`'s count, past every segment the link
    wrote or announced (in doubt included): the very rule by which a cycle flags
    FOREIGN_WRITE (R-MT-9). Segments are contiguous on the mirror, so anything the
    link did not write lies past them, or, inside them, shifts what it wrote
    (which the checksums of the common range catch). Empty for a stopped mirror:
    its topic past the map is its new producers'.
    """
    if stopped or foreign_records <= 0:
        return mirror_log_end, mirror_log_end
    return mirror_log_end - foreign_records, mirror_log_end


def blocks(lo: int, hi: int, size: int = BLOCK_OFFSETS) -> list[tuple[int, int]]:
    """[lo, hi) cut at multiples of `size`, so that blocks stay put when lo moves (a log start advancing)."""
    out = []
    start = lo
    while start < hi:
        end = min(hi, (start // size + 1) * size)
        out.append((start, end))
        start = end
    return out


def sample_blocks(all_blocks: Sequence[tuple[int, int]], fraction: float, seed: str) -> list[tuple[int, int]]:
    """About `fraction` of the blocks, evenly spread over the partition, chosen deterministically.

    Every `1/fraction`-th block from a phase derived from `seed` (the mirror,
    partition and a caller's seed), so two runs with the same seed check the
    same blocks, and a new seed (e.g. the day) moves the sample along. At
    least one block when there is any.
    """
    n = len(all_blocks)
    if fraction >= 1 or n == 0:
        return list(all_blocks)
    wanted = max(1, min(n, round(n * fraction)))
    stride = n / wanted
    phase = (zlib.crc32(seed.encode()) % 10007) / 10007 * stride
    chosen = sorted({min(n - 1, int(phase + i * stride)) for i in range(wanted)})
    return [all_blocks[i] for i in chosen]


def split_evenly(items: Sequence, pieces: int) -> list[list]:
    """`items` in order, cut into at most `pieces` consecutive groups of near-equal size."""
    pieces = max(1, min(pieces, len(items)))
    size, extra = divmod(len(items), pieces)
    out, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [g for g in out if g]


def pieces_per_partition(partitions: int, task_slots: int) -> int:
    """Tasks per partition so that a few partitions still keep every task slot busy."""
    if partitions <= 0:
        return 1
    return max(1, -(-task_slots // partitions))
