"""Where a consumer group lands on a mirror: the pure rules of offset sync (R-OFS-2/3/6/7).

No Kafka here. `offset_sync` gathers the facts (offset maps, log bounds,
committed offsets, timestamps) and asks these functions what to commit, so the
rules can be tested exhaustively without a cluster.

A committed offset is a consumer *position*: the next offset to read. Landing
it on the mirror means finding the mirror position from which the group reads
exactly the records it had not read on the source: no record skipped, none
read twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirror_pipeline.model.offset_map import OffsetMap
from mirror_pipeline.model.offset_results import PartitionOffsetSync

EXACT = "exact"
TIMESTAMP = "timestamp"
MODES = (EXACT, TIMESTAMP)

# What a sync did with one (group, partition).
COMMITTED = "committed"
UNCHANGED = "unchanged"
KEPT_AHEAD = "kept (destination ahead)"
CLAMPED = "clamped to mirror log end"
WOULD_COMMIT = "would commit"  # dry run (failover preview)
REALIGNED = "moved back to its translation"  # reverse with realigned groups: the old offset was stale


@dataclass(frozen=True)
class MirrorPartition:
    """What translation needs to know of one mirror partition, read once per sync."""

    mirror_topic: str
    source_topic: str
    partition: int
    offset_map: OffsetMap
    log_start: int  # the mirror's: placeholders and retention may have removed its head
    log_end: int

    @property
    def mirrored_until(self) -> int | None:
        """The next source offset to mirror (None: nothing mirrored or aligned yet)."""
        return self.offset_map.next_source_offset

    def is_ahead(self, position: int) -> bool:
        """True when the source group has read past everything mirrored so far (R-OFS-2)."""
        return self.mirrored_until is None or position > self.mirrored_until

    def reached_mirror_end(self, position: int) -> bool:
        return self.mirrored_until is None or position >= self.mirrored_until

    def clip(self, offset: int) -> int:
        """`offset` kept within the mirror's log: a consumer outside it would be reset by its client."""
        return min(max(offset, self.log_start), self.log_end)


def translate_exact(mp: MirrorPartition, position: int) -> int:
    """Mirror position for source position `position`, through the offset map (R-OFS-2).

    Exact at any lag: inside a run the position moves by the run's shift; in a
    gap (compaction hole, aborted data, transaction marker) it lands on the
    first mirrored record after the gap; past everything mirrored it lands on
    the map's end, i.e. the mirror's log end; below the first mapped record it
    lands on the mirror's log start.
    """
    return mp.clip(mp.offset_map.translate(position))


def translate_by_timestamp(mp: MirrorPartition, position: int, mirror_offset_for_time: int | None) -> int:
    """Mirror position by record timestamp (R-OFS-6), MirrorMaker's proposed timestamp way.

    `mirror_offset_for_time` is what the destination answered for the
    timestamp of the first source record at or after `position`: the first
    mirror offset with that timestamp or later (None or negative: no such
    record). Positions at or past what is mirrored land on the log end, as in
    exact mode: a record the mirror does not hold yet has no mirror timestamp.
    """
    if mp.reached_mirror_end(position):
        return mp.clip(mp.offset_map.dest_end)
    if mirror_offset_for_time is None or mirror_offset_for_time < 0:
        return mp.log_end
    return mp.clip(mirror_offset_for_time)


def translate(mp: MirrorPartition, position: int, mode: str, mirror_offset_for_time: int | None = None) -> int:
    if mode == EXACT:
        return translate_exact(mp, position)
    if mode == TIMESTAMP:
        return translate_by_timestamp(mp, position, mirror_offset_for_time)
    raise ValueError(f"unknown offset translation mode {mode!r} (expected one of {', '.join(MODES)})")


def plan_commit(
    translated: int,
    previous: int | None,
    log_end: int,
    *,
    source_ahead: bool = False,
    final: bool = False,
    realign: bool = False,
) -> tuple[int | None, str]:
    """(offset to commit on the destination or None, action) for one group partition.

    Never moves a destination group backwards (R-OFS-3, R-OFS-6), with one
    exception at promote and failover (`final`, R-OFS-7): an offset above the
    mirror's log end is clamped down to it, since a group there would skip the
    records the topic receives once it is writable. And one at a reverse when
    the operator asks (`realign`): the group's offset on the old source is
    stale, the one it moved to is the truth.
    """
    if previous is not None and previous > translated:
        if realign:
            return translated, REALIGNED
        if final and previous > log_end:
            return log_end, CLAMPED
        return None, KEPT_AHEAD
    if previous == translated:
        return None, UNCHANGED
    return translated, CLAMPED if source_ahead else COMMITTED


def behind(translated: int, destination_offset: int | None) -> bool:
    """True when a destination group still sits before its translation (offset-sync lag)."""
    return destination_offset is None or destination_offset < translated


def decide_commits(
    landings: dict[tuple[str, int], tuple[int | None, int]],
    partitions: dict[tuple[str, int], MirrorPartition],
    previous: dict[tuple[str, int], int],
    busy: str | None,
    *,
    final: bool,
    dry_run: bool,
    realign: bool,
) -> tuple[list[PartitionOffsetSync], dict[tuple[str, int], int], bool]:
    """What to commit of a group's `landings` ((source position, translation) per mirror partition)
    over its destination offsets `previous`; `busy`: why the group may not be written (None: it may).

    Returns a row per partition, the offsets to commit, and whether any would
    be committed but for `dry_run`.
    """
    rows: list[PartitionOffsetSync] = []
    to_commit: dict[tuple[str, int], int] = {}
    wanted = False
    for key, (position, translated) in sorted(landings.items()):
        mp, before = partitions[key], previous.get(key)
        if busy is not None:
            offset, action = None, "skipped"
        else:
            ahead = position is not None and mp.is_ahead(position)
            offset, action = plan_commit(
                translated, before, mp.log_end, final=final, source_ahead=ahead, realign=realign
            )
        wanted = wanted or offset is not None
        if offset is not None and dry_run:
            offset, action = None, action if action == CLAMPED else WOULD_COMMIT
        elif offset is not None:
            to_commit[key] = offset
        rows.append(
            PartitionOffsetSync(key[0], key[1], position, translated, before, action, to_commit.get(key, before))
        )
    return rows, to_commit, wanted
