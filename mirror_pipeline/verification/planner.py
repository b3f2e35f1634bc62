"""The driver side of a verify: what to compare, one Spark job, and the result.

For every selected mirror and partition it reads (never writes) the source's
log start and last stable offset, the mirror's log start and end, and the
partition's offset-map segments; from those it takes the common range (see
`ranges.common_range`), cuts it into checksum ranges, samples them, and hands
them to the tasks of ONE Spark job. Any mirror state can be verified: a
stopped mirror's map ends where copying stopped, so what was written to the
topic after the stop is outside the common range. A mirror that is not
stopped holds nothing past its map: what lies there the link did not write
(R-MT-9), and is reported with its offsets, from the log ends alone, whatever
range or sample is compared. The registry's flags are reported too.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import describe_topic_configs
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ConfigError, TopicNotFound
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import STOPPED
from mirror_pipeline.replication.spark_runner import task_slots
from mirror_pipeline.verification import ranges
from mirror_pipeline.verification.results import MirrorVerify, Mismatch, PartitionVerify, VerifyResult
from mirror_pipeline.verification.spark_job import run_verify_tasks
from mirror_pipeline.verification.task import TaskResult, VerifyContext, VerifyTask
from mirror_pipeline.verification.throttle import per_task_rate


@dataclass(frozen=True)
class VerifyOptions:
    sample: float = 1.0  # fraction of checksum ranges compared, in (0, 1]
    from_offset: int | None = None  # source offsets compared start here ...
    until_offset: int | None = None  # ... and end before this one
    max_bytes_per_second: int | None = None  # read throttle over all tasks (both clusters); None: none
    seed: str = ""  # moves which ranges a sample picks (same seed, same ranges)

    def check(self) -> None:
        """Refuse values that make no sense, naming the option (nothing is read yet)."""
        sample: object = self.sample  # as given: the check is for values from outside
        if not (isinstance(sample, (int, float)) and math.isfinite(sample) and 0 < sample <= 1):
            raise ConfigError(f"sample: {self.sample!r} is not a fraction in (0, 1]; 1 compares everything")
        for name in ("from_offset", "until_offset", "max_bytes_per_second"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name}: {value!r} is not a whole number >= 0")
        if self.from_offset is not None and self.until_offset is not None and self.until_offset <= self.from_offset:
            raise ConfigError(f"until_offset ({self.until_offset}) must be above from_offset ({self.from_offset})")


@dataclass
class _PartitionPlan:
    """One partition's common range and the checksum ranges chosen in it."""

    row: PartitionVerify  # the range and counts known before reading; the tasks fill in the rest
    chosen: list[tuple[int, int]]
    index: ranges.RunIndex | None = None  # the partition's map (driver only: tasks get their runs clipped)


def verify(ctx: LinkContext, spark, mirrors: list[str] | None, options: VerifyOptions) -> VerifyResult:
    options.check()
    started = time.time()
    ctx.check_destination()
    infos = ctx.select(mirrors)  # an unknown mirror is refused here, by name
    ctx.check_source()
    slots = task_slots(spark)
    plans, skipped = {}, {}
    for info in infos:
        try:
            plans[info.mirror_topic] = _plan_mirror(ctx, info, options)
        except TopicNotFound as exc:
            if mirrors is not None:
                raise  # a mirror asked for by name must be verifiable
            skipped[info.mirror_topic] = str(exc)  # a whole link: the others are still verified
    partitions = sum(len(p) for p in plans.values())
    pieces = ranges.pieces_per_partition(partitions, slots)
    tasks = [
        task
        for info in infos
        if info.mirror_topic in plans
        for task in _tasks(ctx, info, plans[info.mirror_topic], pieces)
    ]
    rate = per_task_rate(options.max_bytes_per_second, min(len(tasks), slots))
    tasks = [_with_rate(t, rate) for t in tasks]
    vctx = VerifyContext(ctx.source.alias, ctx.dest.alias, dict(ctx.source.properties), dict(ctx.dest.properties))
    rows = run_verify_tasks(spark, tasks, vctx, description=f"mirror-pipeline verify {ctx.link.name}")
    results = {
        info.mirror_topic: MirrorVerify(
            info.mirror_topic,
            info.source_topic,
            info.state,
            _assemble(plans.get(info.mirror_topic, {}), rows, info.mirror_topic),
            skipped.get(info.mirror_topic, ""),
            tuple(info.flags),
            info.reason if info.flags else "",
        )
        for info in infos
    }
    return VerifyResult(
        ctx.link.name,
        started,
        time.time() - started,
        options.sample,
        options.from_offset,
        options.until_offset,
        options.max_bytes_per_second,
        len(tasks),
        results,
    )


def _partition_counts(ctx: LinkContext, info: MirrorInfo) -> tuple[int, int]:
    source = kc.topic_partitions(ctx.source_admin, info.source_topic, ctx.source.alias)
    if source is None:
        raise TopicNotFound(
            f"mirror '{info.mirror_topic}': its source topic '{info.source_topic}' does not exist "
            f"on cluster '{ctx.source.alias}'; there is nothing to verify it against"
        )
    mirror = kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    if mirror is None:
        raise TopicNotFound(f"mirror '{info.mirror_topic}': the topic does not exist on cluster '{ctx.dest.alias}'")
    return source, mirror


def _is_compacted(ctx: LinkContext, info: MirrorInfo) -> bool:
    """Either side compacts: then each side's cleaner may drop records the other still holds."""
    policies = (
        describe_topic_configs(ctx.source_admin, info.source_topic, ctx.source.alias).get("cleanup.policy", ""),
        describe_topic_configs(ctx.dest_admin, info.mirror_topic, ctx.dest.alias).get("cleanup.policy", ""),
    )
    return any("compact" in p.split(",") for p in policies)


def _plan_mirror(ctx: LinkContext, info: MirrorInfo, options: VerifyOptions) -> dict[int, _PartitionPlan]:
    source_parts, mirror_parts = _partition_counts(ctx, info)
    name, common = info.mirror_topic, min(source_parts, mirror_parts)
    src_tps = [(info.source_topic, p) for p in range(common)]
    dst_tps = [(name, p) for p in range(mirror_parts)]
    src_start = kc.list_offsets(ctx.source_admin, src_tps, "earliest", ctx.source.alias)
    src_end = kc.list_offsets(ctx.source_admin, src_tps, "latest", ctx.source.alias)
    dst_start = kc.list_offsets(ctx.dest_admin, dst_tps, "earliest", ctx.dest.alias, read_committed=False)
    dst_end = kc.list_offsets(ctx.dest_admin, dst_tps, "latest", ctx.dest.alias, read_committed=False)
    # Read after the log ends: every record below them was announced by a segment written
    # before it, so a cycle copying meanwhile never makes its records look foreign.
    segments = ctx.store.read_segments([name]).segments
    stopped = info.state == STOPPED
    plans = {}
    for p in range(common):
        res = resolve_keyed(segments.get((name, p), []), dst_end[(name, p)])
        omap, foreign = res.offset_map, ranges.foreign_tail(res.foreign_records, dst_end[(name, p)], stopped)
        if omap.next_source_offset is None:
            plans[p] = _PartitionPlan(_empty_row(p, "nothing mirrored yet", foreign), [])
            continue
        index = ranges.RunIndex(
            tuple((r.source, r.dest, r.length) for r in omap.runs), omap.next_source_offset, omap.dest_end
        )
        lo, hi = ranges.common_range(
            index,
            src_start[(info.source_topic, p)],
            src_end[(info.source_topic, p)],
            dst_start[(name, p)],
            options.from_offset,
            options.until_offset,
        )
        every = ranges.blocks(lo, hi)
        chosen = ranges.sample_blocks(every, options.sample, f"{name}/{p}/{options.seed}")
        row = PartitionVerify(
            p,
            lo,
            hi,
            index.mirror_position(lo),
            index.mirror_position(hi),
            len(every),
            0,
            0,
            0,
            0,
            note="" if every else "no records in common in the range asked for",
            foreign_from=foreign[0],
            foreign_until=foreign[1],
        )
        plans[p] = _PartitionPlan(row, chosen, index)
    for p in range(common, source_parts):
        plans[p] = _PartitionPlan(_empty_row(p, "not on the mirror yet: the next cycle adds it"), [])
    for p in range(common, mirror_parts):  # partitions the source lacks: nothing there is the link's to compare
        res = resolve_keyed(segments.get((name, p), []), dst_end[(name, p)])
        plans[p] = _PartitionPlan(
            _empty_row(p, "not on the source", ranges.foreign_tail(res.foreign_records, dst_end[(name, p)], stopped)),
            [],
        )
    return plans


def _empty_row(partition: int, note: str, foreign: tuple[int, int] = (0, 0)) -> PartitionVerify:
    return PartitionVerify(
        partition, 0, 0, 0, 0, 0, 0, 0, 0, 0, note=note, foreign_from=foreign[0], foreign_until=foreign[1]
    )


def _tasks(ctx: LinkContext, info: MirrorInfo, plans: dict[int, _PartitionPlan], pieces: int) -> list[VerifyTask]:
    compacted = _is_compacted(ctx, info) if any(plan.chosen for plan in plans.values()) else False
    tasks = []
    for p, plan in sorted(plans.items()):
        index = plan.index
        if not plan.chosen or index is None:  # a partition with ranges chosen has its run index
            continue
        for group in ranges.split_evenly(plan.chosen, pieces):
            first, last = group[0][0], group[-1][1]
            # Mirror bounds come from the whole map: a task's clipped runs cannot tell where the next run starts.
            blocks = tuple((a, b, index.mirror_position(a), index.mirror_position(b)) for a, b in group)
            tasks.append(
                VerifyTask(
                    ctx.link.name,
                    info.mirror_topic,
                    info.source_topic,
                    p,
                    blocks,
                    index.clipped(first, last),
                    last,
                    index.mirror_position(last),
                    compacted,
                    None,
                )
            )
    return tasks


def _with_rate(task: VerifyTask, rate: float | None) -> VerifyTask:
    return VerifyTask(**{**task.__dict__, "bytes_per_second": rate})


def _assemble(plans: dict[int, _PartitionPlan], rows: list[TaskResult], mirror: str) -> tuple[PartitionVerify, ...]:
    """Per partition: the planned range plus what its tasks found (the lowest mismatch wins)."""
    out = []
    for p, plan in sorted(plans.items()):
        mine = [r for r in rows if r.mirror_topic == mirror and r.partition == p]
        mismatches = [Mismatch.from_dict(json.loads(r.mismatch)) for r in mine if r.mismatch]
        base = plan.row
        out.append(
            PartitionVerify(
                p,
                base.source_from,
                base.source_until,
                base.mirror_from,
                base.mirror_until,
                base.ranges_total,
                ranges_checked=sum(r.ranges_checked for r in mine),
                source_records=sum(r.source_records for r in mine),
                mirror_records=sum(r.mirror_records for r in mine),
                bytes_read=sum(r.bytes_read for r in mine),
                compacted_away=sum(r.compacted_away for r in mine),
                mismatch=min(mismatches, key=lambda m: m.source_offset) if mismatches else None,
                note=base.note,
                error="; ".join(sorted({r.error for r in mine if r.error})),
                foreign_from=base.foreign_from,
                foreign_until=base.foreign_until,
            )
        )
    return tuple(out)
