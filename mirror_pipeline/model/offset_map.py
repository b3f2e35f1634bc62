"""Exact source -> mirror offset correspondence of one mirrored partition.

The map is built from *segments*. Each chunk a copy task writes is announced by
a segment (written, transactionally, to the offset-map topic *before* its
records are produced), so after any crash the mirror's log end tells exactly
how much of the last segments landed.

Invariants:
- Segments of a partition are contiguous on the mirror side: each starts where
  the previous one ends (`dest_start == previous.dest_end`).
- Within and across segments, source offsets strictly increase with mirror
  offsets; a record's mirror offset never exceeds its source offset.
- Only the part of the segments below the mirror's log end is real: a segment
  (or its tail) above the log end is *in doubt* and is resolved by the planner
  before anything else is written to that partition.

A follow-mode task may announce a *reservation* (`open`): a segment for up to
a chunk of consecutive source offsets, written in several rounds while its
writer's deadline lasts, and rewritten cut at what landed once closed. Until
then only its start is certain (`sure_end`); readers that resolve against the
log end treat its unlanded tail as in doubt, like any segment's.

A gap-free partition is one run whose source and mirror offsets are equal
(`offsets_preserved`); compaction holes and transaction markers add one run per
stretch of consecutive offsets, never one entry per record.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property


@dataclass(frozen=True)
class Run:
    """`length` consecutive source offsets from `source` landed at `dest`.. on the mirror."""

    source: int
    dest: int
    length: int

    @property
    def source_end(self) -> int:
        return self.source + self.length

    @property
    def dest_end(self) -> int:
        return self.dest + self.length


def runs_of(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Run-length encode increasing source offsets: [(first offset, count), ...]."""
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and runs[-1][0] + runs[-1][1] == offset:
            runs[-1][1] += 1
        else:
            runs.append([offset, 1])
    return [(start, count) for start, count in runs]


@dataclass(frozen=True)
class Segment:
    """What one chunk wrote, or is about to write, to one mirror partition.

    `padding` placeholder records come first (log-start alignment, R-MT-5) and
    stand for no source record; then the `runs` of source offsets, in order.
    `source_end` is where reading resumes: past the last record copied and any
    gap (aborted data, control records) the chunk read through.
    """

    dest_start: int
    runs: tuple[tuple[int, int], ...]
    source_end: int
    padding: int = 0
    written_at: float = 0.0
    open: bool = False  # a reservation not closed yet: how much of it landed is the log end's to tell

    # Cached (a frozen segment never changes): a plan of 10,000 partitions asked them 180,000 times.
    @cached_property
    def records(self) -> int:
        return sum(count for _, count in self.runs)

    @cached_property
    def dest_end(self) -> int:
        return self.dest_start + self.padding + self.records

    def truncated(self, dest_end: int) -> Segment | None:
        """This segment cut at mirror offset `dest_end` (what actually landed).

        None when nothing of it landed. Padding is not truncated: an unfinished
        alignment is finished, not rolled back (placeholders are all alike).
        """
        if dest_end >= self.dest_end:
            return self.closed()
        if dest_end <= self.dest_start:
            return None
        if self.padding and dest_end < self.dest_start + self.padding:
            return self.closed()
        keep = dest_end - self.dest_start - self.padding
        runs: list[tuple[int, int]] = []
        for start, count in self.runs:
            if keep <= 0:
                break
            runs.append((start, min(count, keep)))
            keep -= count
        # Resume at the first source record that did not land.
        flat_end = self._source_offset_at(dest_end - self.dest_start - self.padding)
        return replace(self, runs=tuple(runs), source_end=flat_end, open=False)

    def closed(self) -> Segment:
        return replace(self, open=False) if self.open else self

    def in_doubt(self) -> Segment:
        """This segment as a reservation: how much of it landed only the mirror's log end tells."""
        return replace(self, open=True)

    def sure_end(self) -> tuple[int, int]:
        """(mirror offset, source offset) where this segment certainly ends: an open reservation
        at its start (how much of it landed only the mirror's log end tells)."""
        if not self.open:
            return self.dest_end, self.source_end
        return self.dest_start + self.padding, self.runs[0][0] if self.runs else self.source_end

    def _source_offset_at(self, index: int) -> int:
        for start, count in self.runs:
            if index < count:
                return start + index
            index -= count
        return self.source_end

    # Wire format: compact JSON, next to the fields it encodes.
    def to_json(self) -> bytes:
        body = {"d": self.dest_start, "r": [list(r) for r in self.runs], "e": self.source_end, "t": self.written_at}
        if self.padding:
            body["p"] = self.padding
        if self.open:
            body["o"] = 1
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Segment:
        body = json.loads(raw)
        return cls(
            dest_start=body["d"],
            runs=tuple((int(s), int(c)) for s, c in body["r"]),
            source_end=body["e"],
            padding=body.get("p", 0),
            written_at=body.get("t", 0.0),
            open=bool(body.get("o", 0)),
        )


@dataclass(frozen=True)
class OffsetMap:
    """The landed part of a partition's segments, as merged runs."""

    runs: tuple[Run, ...] = ()
    next_source_offset: int | None = None  # None: nothing copied or aligned yet
    dest_end: int = 0
    padding: int = 0
    _sources: tuple[int, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_runs(
        cls, runs: Sequence[Run], next_source_offset: int | None, dest_end: int, padding: int = 0
    ) -> OffsetMap:
        return cls(tuple(runs), next_source_offset, dest_end, padding, tuple(r.source for r in runs))

    @property
    def offsets_preserved(self) -> bool:
        """True when every mapped record sits at its own source offset."""
        return all(r.source == r.dest for r in self.runs)

    @property
    def records(self) -> int:
        return sum(r.length for r in self.runs)

    def dest_of(self, source_offset: int) -> int | None:
        """Mirror offset of the record at `source_offset`, or None if it was not copied."""
        i = bisect.bisect_right(self._sources, source_offset) - 1
        if i >= 0 and source_offset < self.runs[i].source_end:
            run = self.runs[i]
            return run.dest + (source_offset - run.source)
        return None

    def translate(self, source_position: int) -> int:
        """Mirror position for a consumer position (next offset to read) on the source.

        Lands on the first copied record at or after `source_position`; past
        everything copied it lands on the mirror's end (R-OFS-2).
        """
        i = bisect.bisect_right(self._sources, source_position) - 1
        if i >= 0 and source_position < self.runs[i].source_end:
            return self.runs[i].dest + (source_position - self.runs[i].source)
        if i + 1 < len(self.runs):
            return self.runs[i + 1].dest
        return self.dest_end


@dataclass(frozen=True)
class Resolution:
    """The map of what landed, plus what the planner must repair first."""

    offset_map: OffsetMap
    landed: tuple[Segment, ...]
    in_doubt: tuple[Segment, ...]  # segments reaching past the mirror's log end
    foreign_records: int  # records on the mirror no segment accounts for


def resolve(segments: Iterable[Segment], mirror_log_end: int) -> Resolution:
    """Merge a partition's segments into its offset map, clipped at the mirror's log end."""
    ordered = _without_overlaps(_reservations_closed(segments))
    landed: list[Segment] = []
    in_doubt: list[Segment] = []
    for seg in ordered:
        (landed if seg.dest_end <= mirror_log_end else in_doubt).append(seg)
    runs: list[Run] = []
    padding = 0
    next_source: int | None = None
    dest_end = 0
    for seg in landed:
        padding += seg.padding
        dest = seg.dest_start + seg.padding
        for start, count in seg.runs:
            if runs and runs[-1].source_end == start and runs[-1].dest_end == dest:
                last = runs.pop()
                runs.append(Run(last.source, last.dest, last.length + count))
            else:
                runs.append(Run(start, dest, count))
            dest += count
        next_source = seg.source_end
        dest_end = seg.dest_end
    covered = in_doubt[-1].dest_end if in_doubt else dest_end
    return Resolution(
        OffsetMap.from_runs(runs, next_source, dest_end, padding),
        tuple(landed),
        tuple(in_doubt),
        foreign_records=max(0, mirror_log_end - covered),
    )


def resolve_keyed(keyed: Iterable[tuple[str, Segment]], mirror_log_end: int) -> Resolution:
    """`resolve` of one partition's segments as the state store reads them: (key, segment) pairs."""
    return resolve([segment for _, segment in keyed], mirror_log_end)


# Runs one stored segment may hold. A run costs at most ~25 bytes of JSON, so
# this keeps every segment record near 500 KB, under Kafka's default 1 MB
# message limit, however many holes a compacted partition has.
MAX_RUNS_PER_SEGMENT = 20_000


def consolidate(landed: Sequence[Segment], max_runs: int = MAX_RUNS_PER_SEGMENT) -> list[Segment]:
    """Consecutive landed segments packed into as few segments as hold `max_runs` runs each.

    Each packed segment is keyed by the start of its first part. A part that
    alone exceeds `max_runs` stays a segment of its own. Segments that do not
    follow each other on the mirror are never merged: a merge would map the
    records after the gap (or overlap) to the wrong mirror offsets.
    """
    packs: list[list[Segment]] = []
    runs_in_pack = 0
    for seg in landed:
        if not packs or runs_in_pack + len(seg.runs) > max_runs or seg.dest_start != packs[-1][-1].dest_end:
            packs.append([])
            runs_in_pack = 0
        packs[-1].append(seg)
        runs_in_pack += len(seg.runs)
    return [pack[0] if len(pack) == 1 else _merge(pack) for pack in packs]


def pack(landed: Sequence[Segment], max_runs: int = MAX_RUNS_PER_SEGMENT) -> tuple[list[Segment], list[int]]:
    """`consolidate(landed)`, and the `dest_start`s of the landed segments it makes stale: their
    keys are deleted in the transaction that writes the packed ones (a packed segment keeps the
    key of its first part)."""
    packed = consolidate(landed, max_runs)
    kept = {s.dest_start for s in packed}
    return packed, [s.dest_start for s in landed if s.dest_start not in kept]


def _merge(parts: Sequence[Segment]) -> Segment:
    runs: list[tuple[int, int]] = []
    for seg in parts:
        for start, count in seg.runs:
            if runs and runs[-1][0] + runs[-1][1] == start:
                runs[-1] = (runs[-1][0], runs[-1][1] + count)
            else:
                runs.append((start, count))
    first, last = parts[0], parts[-1]
    # Padding only ever opens a partition's map, so it belongs to the first segment.
    return Segment(first.dest_start, tuple(runs), last.source_end, sum(s.padding for s in parts), last.written_at)


def without_stale(segments: Iterable[Segment]) -> list[Segment]:
    """A partition's segments without those its writers replaced, in mirror-offset order.

    A reader that follows the offset map from some point can miss a replacement:
    when the log cleaner drops a tombstone (`delete.retention.ms` after it was
    written) and the value it replaced before the reader reads on, the reader
    keeps the value it read first. What was replaced is known all the same: an
    open reservation that a later segment starts inside was closed there (the
    partition's next announcement closes it in the same transaction), and a
    segment another covers was merged into it. Taken as they were read, either
    would map records to the wrong mirror offsets.
    """
    kept: list[Segment] = []
    covered_to = -1
    for seg in sorted(_reservations_closed(segments), key=lambda s: (s.dest_start, -s.dest_end)):
        if seg.dest_start < covered_to and seg.dest_end <= covered_to:
            continue
        kept.append(seg)
        covered_to = max(covered_to, seg.dest_end)
    return kept


def _reservations_closed(segments: Iterable[Segment]) -> list[Segment]:
    """`segments`, each open reservation that a later segment starts inside cut where that one starts
    (as its closing did; left out when nothing of it is before). One that landed whole, with the next
    segment from its end, stays as it is: nobody closes it, and it maps exactly what landed."""
    ordered = sorted(segments, key=lambda s: s.dest_start)
    result: list[Segment] = []
    for i, seg in enumerate(ordered):
        after = ordered[i + 1] if i + 1 < len(ordered) else None
        if seg.open and after is not None and after.dest_start < seg.dest_end:
            cut = seg.truncated(after.dest_start)
            if cut is not None:
                result.append(cut)
        else:
            result.append(seg)
    return result


def _without_overlaps(segments: Iterable[Segment]) -> list[Segment]:
    """Keep one segment per stretch of the mirror, preferring consolidated ones.

    Consolidation writes the merged segment before deleting the parts it
    replaces, so after a crash both may be present; they agree, so the parts
    are dropped. Segments are taken in the order they were written, which is
    the order of their `source_end` (each chunk moves it forward).
    """
    kept: list[Segment] = []
    for seg in sorted(segments, key=lambda s: (s.source_end, s.dest_start)):
        if kept and _covers(kept[-1], seg):
            continue
        while kept and _covers(seg, kept[-1]):
            kept.pop()
        kept.append(seg)
    return kept


def _covers(outer: Segment, inner: Segment) -> bool:
    return (
        outer.dest_start <= inner.dest_start
        and inner.dest_end <= outer.dest_end
        and inner.source_end <= outer.source_end
    )
