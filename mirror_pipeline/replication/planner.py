"""The planner side of a cycle: decide the work, and repair what a crash left.

For every mirrored partition the planner reads the source's log start and last
stable offset, the mirror's log end and the partition's offset-map segments,
and asks once per source topic whether the link may still READ it (`read_probe`;
a mirror it may not is a source failure, heading for FAILED), then:
- grows the mirror when the source gained partitions (R-MT-10);
- resolves segments left *in doubt* by a crashed or fenced writer: fence the
  partition, wait out the old writer's delivery timeout, then cut the segments
  at what actually landed (R-REL-1);
- aligns a new mirror's log start with the source's (R-MT-5);
- emits one work unit per partition that is behind.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import describe_topics_configs
from mirror_pipeline.link import read_probe
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.partitions import (
    MirrorTopicNotListedYet,
    SourceTopicUnusable,
    grow_partitions,
    settled_partitions,
)
from mirror_pipeline.model.errors import MirrorError, StateChanged
from mirror_pipeline.model.lag import records_behind
from mirror_pipeline.model.offset_map import OffsetMap, Segment, resolve, resolve_keyed
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.text import first_few
from mirror_pipeline.replication.copier import FOLLOW_END, WorkUnit
from mirror_pipeline.replication.late_landing import foreign_records_problem
from mirror_pipeline.replication.repair import InDoubt, Settled, delete_placeholders, finish_padding, settle_in_doubt

log = logging.getLogger(__name__)

# How long the planner waits for its own repair of in-doubt segments to become readable.
REPAIR_VISIBLE_S = 10.0


@dataclass
class PartitionPlan:
    mirror: MirrorInfo
    partition: int
    source_log_start: int
    source_end: int  # last stable offset at plan time
    mirror_log_end: int
    offset_map: OffsetMap
    next_source: int

    @property
    def lag(self) -> int:
        return records_behind(self.source_end, self.next_source)


@dataclass
class Plan:
    units: list[WorkUnit] = field(default_factory=list)
    partitions: dict[tuple[str, int], PartitionPlan] = field(default_factory=dict)
    partitions_added: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # mirror topic -> why it was skipped
    source_failures: dict[str, str] = field(default_factory=dict)  # source topic missing or unreadable
    diverged: dict[str, str] = field(default_factory=dict)  # foreign records in the mirror
    state_changed: set[str] = field(default_factory=set)  # paused, stopped or deleted while planning
    not_listed_yet: list[str] = field(default_factory=list)  # created moments ago, not in the destination's metadata
    map_snapshot_end: int = 0
    # Each mirror planned over, and its partitions then: a mirror with fewer in `partitions` was planned in part.
    partition_counts: dict[str, int] = field(default_factory=dict)


def plan_cycle(ctx: LinkContext, mirrors: list[MirrorInfo], follow_s: float = 0.0) -> Plan:
    """The cycle's work: a unit per partition that is behind; with `follow_s`
    (follow mode's epoch length) a unit per partition, behind or not, that copies
    as records arrive for that long once its task is ready."""
    plan = Plan()
    live: list[tuple[MirrorInfo, int]] = []
    settled = settled_partitions(ctx, mirrors)
    for info in mirrors:
        try:
            count, added = (
                (settled[info.mirror_topic], 0) if info.mirror_topic in settled else grow_partitions(ctx, info)
            )
            if added:
                plan.partitions_added[info.mirror_topic] = added
            live.append((info, count))
        except MirrorTopicNotListedYet as exc:  # just created: the next cycle copies it
            log.info("%s", exc)
            plan.not_listed_yet.append(info.mirror_topic)
        except SourceTopicUnusable as exc:
            plan.errors[info.mirror_topic] = plan.source_failures[info.mirror_topic] = str(exc)
        except MirrorError as exc:
            plan.errors[info.mirror_topic] = str(exc)
    # Offsets need only DESCRIBE; whether the link may still READ is asked meanwhile (R-LC-5), and so are
    # the mirrors' `max.message.bytes` (on 1,000 mirrors a describe took 0.3 s after the offsets' second).
    with ThreadPoolExecutor(2, thread_name_prefix="plan-read-probe") as pool:
        probed = pool.submit(read_probe.probe, ctx, sorted({info.source_topic for info, _ in live}))
        limits = pool.submit(max_message_bytes_of, ctx, [info.mirror_topic for info, _ in live])
        src_start, src_end, dst_end = _log_bounds(ctx, live)
        live = _readable(ctx, live, probed.result(), plan)
    plan.partition_counts = {info.mirror_topic: n for info, n in live}

    snapshot = ctx.store.read_segments([m.mirror_topic for m, _ in live])
    resolutions = {}
    in_doubt = []
    for info, n in live:
        for p in range(n):
            keyed = snapshot.segments.get((info.mirror_topic, p), [])
            res = resolve_keyed(keyed, dst_end[(info.mirror_topic, p)])
            # Records past the map may be a chunk of the link's that landed after its repair: settled
            # like one in doubt, they are mapped if they are the source's next records (`late_landing`).
            late = res.foreign_records and not res.in_doubt and res.offset_map.next_source_offset is not None
            if res.foreign_records and not late:
                plan.errors[info.mirror_topic] = plan.diverged[info.mirror_topic] = foreign_records_problem(
                    info.mirror_topic, p, res.foreign_records, dst_end[(info.mirror_topic, p)]
                )
            resolutions[(info.mirror_topic, p)] = res
            if res.in_doubt or late:
                in_doubt.append((info, p, keyed))

    if in_doubt:
        settled_all = _repair_in_doubt(ctx, in_doubt)
        for info, p, _ in in_doubt:
            repaired = settled_all.get((info.mirror_topic, p))
            if repaired is None:
                plan.state_changed.add(info.mirror_topic)
            elif repaired.problem:
                plan.errors[info.mirror_topic] = plan.diverged[info.mirror_topic] = repaired.problem
            else:
                dst_end[(info.mirror_topic, p)] = repaired.log_end
        in_doubt = [(i, p, k) for i, p, k in in_doubt if i.mirror_topic not in plan.state_changed]
        # A commit is acknowledged before its markers are written, so a
        # read_committed reader may not see the repair at once: read again
        # until it does (the check below refuses to plan on a stale view).
        deadline = time.monotonic() + REPAIR_VISIBLE_S
        while True:
            snapshot = ctx.store.read_segments([m.mirror_topic for m, _ in live])
            for info, p, _ in in_doubt:
                keyed = snapshot.segments.get((info.mirror_topic, p), [])
                resolutions[(info.mirror_topic, p)] = resolve_keyed(keyed, dst_end[(info.mirror_topic, p)])
            unsettled = [(i, p) for i, p, _ in in_doubt if i.mirror_topic not in plan.diverged]
            settled_now = not any(
                resolutions[(i.mirror_topic, p)].in_doubt or resolutions[(i.mirror_topic, p)].foreign_records
                for i, p in unsettled
            )
            if settled_now or time.monotonic() > deadline:
                break
            time.sleep(0.2)

    padded = [
        (info.mirror_topic, p)
        for info, n in live
        for p in range(n)
        if resolutions[(info.mirror_topic, p)].offset_map.padding
    ]
    dst_start = kc.list_offsets(ctx.dest_admin, padded, "earliest", ctx.dest.alias, read_committed=False)
    for info, n in live:
        if info.mirror_topic in plan.errors or info.mirror_topic in plan.state_changed:
            continue
        for p in range(n):
            res = resolutions[(info.mirror_topic, p)]
            start, end = src_start[(info.source_topic, p)], src_end[(info.source_topic, p)]
            omap = res.offset_map
            if omap.next_source_offset is None and start > 0 and dst_end[(info.mirror_topic, p)] == 0:
                try:
                    omap = _align_log_start(ctx, info, p, start)
                except StateChanged:
                    plan.state_changed.add(info.mirror_topic)
                    break
                dst_end[(info.mirror_topic, p)] = omap.dest_end
            elif omap.padding and dst_start[(info.mirror_topic, p)] < omap.padding:
                delete_placeholders(ctx, info.mirror_topic, p, omap.padding)  # a crash came between
            if res.in_doubt or omap.dest_end != dst_end[(info.mirror_topic, p)]:
                # Invariant: a unit starts where the map ends, on both sides. A
                # map that does not account exactly for the mirror's log end
                # (a repair not visible yet) would copy a range twice.
                log.warning(
                    "%s[%d]: offset map not settled (ends at %d, log end %d); left for the next cycle",
                    info.mirror_topic,
                    p,
                    omap.dest_end,
                    dst_end[(info.mirror_topic, p)],
                )
                continue
            next_source = start if omap.next_source_offset is None else omap.next_source_offset
            if next_source < start:
                log.warning(
                    "%s[%d]: source offsets %d..%d expired on the source before they were mirrored",
                    info.source_topic,
                    p,
                    next_source,
                    start - 1,
                )
                next_source = start
            pp = PartitionPlan(info, p, start, end, dst_end[(info.mirror_topic, p)], omap, next_source)
            plan.partitions[(info.mirror_topic, p)] = pp
    # Units check for segments written after this point: it must be the end of
    # what the plan read, so that nothing written in between goes unseen.
    plan.map_snapshot_end = snapshot.end_offset
    behind = [pp for pp in plan.partitions.values() if pp.lag or follow_s]
    max_bytes = _max_message_bytes(ctx, limits, [pp.mirror.mirror_topic for pp in behind])
    for pp in behind:
        unit = _unit(ctx, pp, plan.map_snapshot_end, max_bytes[pp.mirror.mirror_topic])
        if follow_s:
            unit = replace(unit, source_until=FOLLOW_END, follow_s=follow_s)
        plan.units.append(unit)
    return plan


def _readable(
    ctx: LinkContext, live: list[tuple[MirrorInfo, int]], probed: read_probe.ReadProbe, plan: Plan
) -> list[tuple[MirrorInfo, int]]:
    """The mirrors whose source topic the link may still READ; the others head for FAILED (R-LC-5).

    A revoked READ right otherwise showed only in a copy task, and in none
    when the mirror had no lag. A topic whose probe got no answer is left to
    its copy task (no evidence either way).
    """
    for info, _ in live:
        why = probed.denied.get(info.source_topic)
        if why:
            plan.errors[info.mirror_topic] = plan.source_failures[info.mirror_topic] = read_probe.cannot_read(
                ctx, info.source_topic, why
            )
    if probed.unanswered:
        said, more = first_few(probed.unanswered, ", ", 5)
        log.warning(
            "%s: no Fetch answer from source topics %s%s within %.0fs; copying is left to tell",
            ctx.link.name,
            said,
            f" and {more} more" if more else "",
            read_probe.READ_PROBE_S,
        )
    return [(info, n) for info, n in live if info.mirror_topic not in plan.errors]


# An offset per (topic, partition).
PartitionOffsets = dict[tuple[str, int], int]


def _log_bounds(
    ctx: LinkContext, live: list[tuple[MirrorInfo, int]]
) -> tuple[PartitionOffsets, PartitionOffsets, PartitionOffsets]:
    """The source's log starts and last stable offsets, and the mirrors' log ends, asked side by side.

    Each is one request per broker but thousands of futures to the client: on
    10,000 partitions each took about a second, one after another.
    """
    src_tps = [(m.source_topic, p) for m, n in live for p in range(n)]
    dst_tps = [(m.mirror_topic, p) for m, n in live for p in range(n)]
    with ThreadPoolExecutor(3, thread_name_prefix="plan-offsets") as pool:
        src_start = pool.submit(kc.list_offsets, ctx.source_admin, src_tps, "earliest", ctx.source.alias)
        src_end = pool.submit(kc.list_offsets, ctx.source_admin, src_tps, "latest", ctx.source.alias)
        dst_end = pool.submit(kc.list_offsets, ctx.dest_admin, dst_tps, "latest", ctx.dest.alias, read_committed=False)
        return src_start.result(), src_end.result(), dst_end.result()


def _unit(ctx: LinkContext, pp: PartitionPlan, snapshot_end: int, max_message_bytes: int) -> WorkUnit:
    return WorkUnit(
        link=ctx.link.name,
        source_topic=pp.mirror.source_topic,
        mirror_topic=pp.mirror.mirror_topic,
        partition=pp.partition,
        source_from=pp.next_source,
        source_until=pp.source_end,
        dest_start=pp.mirror_log_end,
        map_snapshot_end=snapshot_end,
        max_bytes=ctx.link.unit_max_bytes,
        chunk_records=ctx.link.chunk_max_records,
        max_message_bytes=max_message_bytes,
        writer_slots=ctx.writer_slots,
    )


def max_message_bytes_of(ctx: LinkContext, mirror_topics: list[str]) -> dict[str, int]:
    """Each mirror's `max.message.bytes`, asked of the destination in one request."""
    configs = describe_topics_configs(ctx.dest_admin, mirror_topics, ctx.dest.alias)
    return {topic: int(c.get("max.message.bytes", 1048588)) for topic, c in configs.items()}


def _max_message_bytes(ctx: LinkContext, asked: Future[dict[str, int]], mirror_topics: list[str]) -> dict[str, int]:
    """`max_message_bytes_of` the mirrors copied to, from what was `asked` of every mirror planned; asked
    again of the copied ones alone when that failed (a mirror with nothing to copy does not fail the plan)."""
    if not mirror_topics:
        return {}
    try:
        return asked.result()
    except MirrorError:
        return max_message_bytes_of(ctx, mirror_topics)


def _repair_in_doubt(
    ctx: LinkContext, in_doubt: list[tuple[MirrorInfo, int, list[tuple[str, Segment]]]]
) -> dict[tuple[str, int], Settled]:
    """Fence every in-doubt partition, then settle it (see `repair`)."""
    with ctx.fenced_writers([(info.mirror_topic, p) for info, p, _ in in_doubt]) as writers:
        # After fencing, the state decides: a mirror a stop has marked is the stop's to settle.
        copyable = ctx.store.copyable()
        # And so do the segments: the planner's snapshot came before the fence, and
        # another cycle may have settled or written this partition since. Cutting a
        # segment as that older read saw it would overwrite a newer one of the same key.
        segments = ctx.store.read_segments(sorted({info.mirror_topic for info, _, _ in in_doubt})).segments
        items = [
            InDoubt(info.mirror_topic, info.source_topic, p, tuple(segments.get((info.mirror_topic, p), [])))
            for info, p, _ in in_doubt
            if info.mirror_topic in copyable
        ]
        return settle_in_doubt(ctx, items, writers)


def _align_log_start(ctx: LinkContext, info: MirrorInfo, partition: int, source_start: int) -> OffsetMap:
    """Bring an empty mirror partition's log start to the source's (R-MT-5).

    Placeholder records fill offsets 0..start-1 and are then deleted, so the
    first copied record lands at its own source offset. Past the budget the
    mirror starts at 0 and its offsets are translated through the map instead.
    """
    if source_start > ctx.link.alignment_max_records:
        return OffsetMap(next_source_offset=source_start)
    segment = Segment(0, (), source_start, padding=source_start, written_at=time.time())
    writer = ctx.segment_writer(info.mirror_topic, partition)
    try:
        writer.fence()
        if info.mirror_topic not in ctx.store.copyable():
            raise StateChanged(f"mirror '{info.mirror_topic}' stopped copying while the cycle planned")
        writer.write(puts=[segment])
    finally:
        writer.close()
    finish_padding(ctx, info.mirror_topic, partition, segment, 0)
    return resolve([segment], source_start).offset_map
