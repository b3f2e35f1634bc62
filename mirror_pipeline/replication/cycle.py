"""One replication cycle of a link: plan, copy (one Spark job), record (R-EX-1).

The driver plans and repairs (`planner`), Spark runs the work units in one job
(`task_groups` deals them to tasks, `spark_runner.run_unit_groups` ->
`group_copy.copy_units`), and the driver then consolidates the offset map,
measures the lag left and returns the lineage of the cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.health import track_source_failures, track_source_reachability
from mirror_pipeline.link.state_keys import segment_key, writer_slot
from mirror_pipeline.link.state_writers import SlotWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError, MirrorRefused, StateChanged
from mirror_pipeline.model.lag import records_behind
from mirror_pipeline.model.offset_map import Segment, pack, resolve_keyed
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, MirrorInfo, PartitionCopy, TaskMemory
from mirror_pipeline.model.states import DELETING, NO_COPY_FLAGS, WATCHED, may_copy
from mirror_pipeline.model.text import first_few
from mirror_pipeline.replication.chunks import chunk_delivery_timeout_ms
from mirror_pipeline.replication.copier import CopyContext, UnitResult
from mirror_pipeline.replication.planner import Plan, plan_cycle
from mirror_pipeline.replication.spark_runner import Spark, run_unit_groups, task_slots
from mirror_pipeline.replication.task_groups import cycle_groups

log = logging.getLogger(__name__)

# Segments a partition may gather before the driver merges them into one.
CONSOLIDATE_AFTER = 16
# Mirrors whose reason a failed cycle's message gives; the others are counted (CycleFailed.errors has all).
MIRROR_ERRORS_SHOWN = 5

ProgressCallback = Callable[[int, int], None]


class CycleFailed(MirrorError):
    """Some mirrors could not be copied; the others were, and their lineage is attached."""

    def __init__(self, message: str, result: CycleResult, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.result = result
        self.errors = errors or {}  # mirror topic -> why, for every mirror (the message names the first few)


def run_cycle(
    ctx: LinkContext,
    spark: Spark,
    mirror_topics: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> CycleResult:
    """One cycle (follow mode's epochs are `epochs`')."""
    started = time.time()
    ctx.check_destination()
    ctx.store.settle_cleaning()
    plan = planned(ctx, selected_mirrors(ctx, mirror_topics))
    copy_ctx = copy_context(ctx)
    t0 = time.monotonic()
    if not plan.units:
        results: list[UnitResult] = []  # nothing to copy: no Spark job (and a lazy session never starts)
    else:
        groups = cycle_groups(plan.units, task_slots(spark))
        with _ProgressReporter(ctx, plan, progress):
            results = run_unit_groups(
                spark,
                groups,
                copy_ctx,
                description=f"mirror-pipeline {ctx.link.name}: copy {len(plan.units)} units in {len(groups)} tasks",
            )
    log.info("%s: copied %d records in %.2fs", ctx.link.name, sum(r.records for r in results), time.monotonic() - t0)
    return outcome(ctx, plan, results, started)


def selected_mirrors(ctx: LinkContext, mirror_topics: Sequence[str] | None) -> list[MirrorInfo]:
    """The link's mirrors a cycle copies (of `mirror_topics`, or all), with what the source answers
    applied (`track_source_reachability`)."""
    registry = ctx.registry()
    if mirror_topics is not None:
        unknown = sorted(set(mirror_topics) - set(registry))
        if unknown:
            raise MirrorRefused(f"no mirror {', '.join(repr(u) for u in unknown)} on link '{ctx.link.name}'")
    selected = [
        m
        for m in registry.values()
        if (mirror_topics is None or m.mirror_topic in mirror_topics)
        and m.state in WATCHED
        and not NO_COPY_FLAGS & set(m.flags)
    ]
    return track_source_reachability(ctx, selected)


def planned(ctx: LinkContext, mirrors: list[MirrorInfo], follow_s: float = 0.0) -> Plan:
    """`plan_cycle`, with the source failures it found applied to the mirrors' states."""
    t0 = time.monotonic()
    plan = plan_cycle(ctx, mirrors, follow_s)
    track_source_failures(ctx, mirrors, plan.source_failures, plan.diverged)
    log.info("%s: planned %d units in %.2fs", ctx.link.name, len(plan.units), time.monotonic() - t0)
    return plan


def outcome(
    ctx: LinkContext, plan: Plan, results: list[UnitResult], started: float, consolidate: bool = True
) -> CycleResult:
    """The lineage of a cycle's copy; raises CycleFailed when some mirrors were not fully copied.

    `consolidate`: merge the partitions' segments first (not while the next epoch of follow mode
    copies them: it would fence that epoch's writers).
    """
    if consolidate:
        _consolidate(ctx, plan)
    result = _cycle_result(ctx, plan, results, started)
    errors = dict(plan.errors)
    if any(r.error for r in results):
        registry = ctx.store.read_mirrors()
        stopped_slots = {
            writer_slot(m, p, ctx.writer_slots) for (m, p) in plan.partitions if not may_copy(registry.get(m))
        }
        for r in results:
            if r.error and _a_verb_won(r, registry.get(r.mirror_topic), stopped_slots, ctx.writer_slots):
                r.error_kind = StateChanged.__name__
    for r in results:
        if r.error_kind == StateChanged.__name__:
            # A pause, promote or failover won the race: not a failure of the cycle.
            log.info("%s", r.error)
        elif r.error:
            errors.setdefault(r.mirror_topic, f"partition {r.partition}: {r.error}")
    if errors:
        raise CycleFailed(
            f"link '{ctx.link.name}': {len(errors)} mirror(s) not fully copied: {_first_errors(errors)}", result, errors
        )
    return result


def _first_errors(errors: dict[str, str]) -> str:
    """The first mirrors' reasons, in name order: a message a person reads, on a link of thousands of mirrors too."""
    said, more = first_few([f"{m}: {why}" for m, why in sorted(errors.items())], "; ", MIRROR_ERRORS_SHOWN)
    return f"{said}; and {more} more mirror(s) (`run --json` names every one)" if more else said


def copy_context(ctx: LinkContext) -> CopyContext:
    """What a cycle's copy tasks get of the link: client settings and names (plain, picklable values)."""
    return CopyContext(
        source_alias=ctx.source.alias,
        dest_alias=ctx.dest.alias,
        source_properties=dict(ctx.source.properties),
        dest_properties=dict(ctx.dest.properties),
        offset_map_topic=ctx.store.offset_map_topic,
        writer_delivery_timeout_ms=chunk_delivery_timeout_ms(ctx.link.fence_wait_ms),
        state_topic=ctx.store.state_topic,
        task_memory_bytes=ctx.link.task_memory_bytes,
    )


def _a_verb_won(failed: UnitResult, now: MirrorInfo | None, stopped_slots: set[int], writer_slots: int) -> bool:
    """Whether a copy task's failure is a verb winning the race against it, not a failure of the cycle.

    A pause or a stop fences the writer slots of a mirror it marked (the task
    sees another writer), and with them the other partitions those slots
    serve: theirs is an interruption, not a failure, and the next cycle copies
    them. A delete also removes the topic under a task still writing:
    whatever that task reports, the mirror is gone by the operator's wish.
    """
    if now is None or DELETING in now.flags:
        return True
    if failed.error_kind != ConcurrentWriter.__name__:
        return False
    return not may_copy(now) or writer_slot(failed.mirror_topic, failed.partition, writer_slots) in stopped_slots


def _cycle_result(ctx: LinkContext, plan: Plan, results: list[UnitResult], started: float) -> CycleResult:
    by_partition = {(r.mirror_topic, r.partition): r for r in results}
    if results:
        tps = [(pp.mirror.source_topic, p) for (_, p), pp in plan.partitions.items()]
        source_end_now = kc.list_offsets(ctx.source_admin, tps, "latest", ctx.source.alias)
    else:  # nothing was copied: the plan's ends were read a moment ago
        source_end_now = {(pp.mirror.source_topic, p): pp.source_end for (_, p), pp in plan.partitions.items()}
    mirrors: dict[str, list[PartitionCopy]] = {}
    sources: dict[str, str] = {}
    for (mirror, p), pp in sorted(plan.partitions.items()):
        r = by_partition.get((mirror, p))
        reached = r.source_until if r else pp.next_source
        copy = PartitionCopy(
            partition=p,
            # A continuing follow-mode unit starts where the offset map said when its task fenced.
            source_from=r.source_from if r else pp.next_source,
            source_until=reached,
            dest_from=r.dest_from if r else pp.mirror_log_end,
            dest_until=r.dest_until if r else pp.mirror_log_end,
            records=r.records if r else 0,
            bytes=r.bytes if r else 0,
            lag_after=records_behind(source_end_now[(pp.mirror.source_topic, p)], reached),
            latency_min_ms=r.latency_min_ms if r else -1,
            latency_max_ms=r.latency_max_ms if r else -1,
            latency_sum_ms=r.latency_sum_ms if r else 0,
            latency_records=r.latency_records if r else 0,
            left_to_next_epoch=r.left_to_next_epoch if r else False,
            rounds_held=r.rounds_held if r else 0,
        )
        mirrors.setdefault(mirror, []).append(copy)
        sources[mirror] = pp.mirror.source_topic
    return CycleResult(
        link=ctx.link.name,
        started_at=started,
        duration_s=time.time() - started,
        work_units=len(plan.units),
        mirrors={
            m: MirrorCopyResult(m, sources[m], tuple(parts), plan.partitions_added.get(m, 0))
            for m, parts in mirrors.items()
        },
        not_listed_yet=tuple(sorted(plan.not_listed_yet)),
        task_memory=TaskMemory.of(ctx.link.task_memory_bytes, ((r.rss_start_bytes, r.rss_peak_bytes) for r in results)),
        hand_over_ms=_slowest_take_over(results),
        measured_lags={
            m: sum(c.lag_after for c in mirrors[m])
            for m, n in plan.partition_counts.items()
            if len(mirrors.get(m, ())) == n
        },
    )


def _slowest_take_over(results: list[UnitResult]) -> dict[str, int] | None:
    """Follow mode: the latest fence and the latest readiness of the tasks that took over from the
    epoch before (which may be two different tasks'), in ms after the hand-over time."""
    took_over = [r for r in results if r.ready_after_hand_over_ms >= 0]
    if not took_over:
        return None
    return {
        "fenced": max(r.fenced_after_hand_over_ms for r in took_over),
        "ready": max(r.ready_after_hand_over_ms for r in took_over),
    }


def _consolidate(ctx: LinkContext, plan: Plan) -> None:
    """Merge partitions' many small segments into few, so reading state stays cheap.

    Invariant: a merge is decided from the segments as read once this driver
    holds the partitions' writers (see `fenced_batches`). A merge of an older
    view would put a shorter segment back under the first key and delete the
    newer ones another cycle wrote meanwhile, leaving the records they mapped
    unmapped (seen as records the link did not write).
    """
    copied = sorted({u.mirror_topic for u in plan.units})
    if not copied:
        return
    crowded = [tp for tp, keyed in ctx.store.read_segments(copied).segments.items() if len(keyed) > CONSOLIDATE_AFTER]
    if not crowded:
        return
    for writers in ctx.fenced_batches(crowded):
        # After fencing, the state decides: a stopping mirror's map is the stop's to write.
        copyable = ctx.store.copyable()
        mine = [tp for tp in writers if tp[0] in copyable]
        segments = ctx.store.read_segments(sorted({m for m, _ in mine})).segments
        log_ends = kc.list_offsets(ctx.dest_admin, mine, "latest", ctx.dest.alias, read_committed=False)
        # One transaction per writer slot for all its partitions' merges (one per partition
        # took 4 ms each: 5,600 partitions spent 22 s).
        by_slot: dict[SlotWriter, tuple[list[tuple[str, int, Segment]], list[str]]] = {}
        for mirror, p in mine:
            res = resolve_keyed(segments.get((mirror, p), []), log_ends[(mirror, p)])
            merged, stale_starts = pack(res.landed)
            if len(merged) < len(res.landed):
                puts, deletes = by_slot.setdefault(writers[(mirror, p)].slot_writer, ([], []))
                puts += [(mirror, p, seg) for seg in merged]
                deletes += [segment_key(ctx.link.name, mirror, p, s) for s in stale_starts]
        for slot_writer, (puts, deletes) in by_slot.items():
            slot_writer.write_segments(puts, deletes, doing="merging segments")


class _ProgressReporter:
    """Reports records copied of records to copy while the Spark job runs.

    It watches the mirrors' log ends from the driver, so it needs nothing from
    the Spark tasks and works the same on a cluster.
    """

    def __init__(self, ctx: LinkContext, plan: Plan, callback: ProgressCallback | None, interval: float = 1.0):
        self.ctx, self.plan, self.callback, self.interval = ctx, plan, callback, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.total = sum(u.source_until - u.source_from for u in plan.units)

    def __enter__(self) -> _ProgressReporter:
        if self.callback and self.plan.units:
            self.callback(0, self.total)
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
            self._report()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._report()

    def _report(self) -> None:
        if self.callback is None:  # started only with a callback
            return
        tps = [(u.mirror_topic, u.partition) for u in self.plan.units]
        try:
            ends = kc.list_offsets(self.ctx.dest_admin, tps, "latest", self.ctx.dest.alias, read_committed=False)
        except MirrorError:
            return
        done = sum(
            min(ends[(u.mirror_topic, u.partition)] - u.dest_start, u.source_until - u.source_from)
            for u in self.plan.units
        )
        self.callback(max(0, done), self.total)
