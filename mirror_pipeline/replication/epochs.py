"""Follow mode's epochs as Spark jobs that hand over without a gap (see `operations.follow`).

An epoch's job copies every partition of the link as records arrive, until
the epoch's end. The next epoch is planned and started a little before that
end (`continue_from`), its tasks open their clients, wait for the end
(`WorkUnit.starts_at`), then fence the partitions' writers: the tasks of the
epoch before, fenced, stop, and the new ones go on from where the offset map
says once that has landed (`group_checks`). So some task is always copying,
and a partition's writer is only ever held by one of them.

The protocol is a cycle's, with one more moment: the hand-over. What makes
it safe is fencing, as everywhere else: a task announces no chunk after the
next epoch's task has taken the writer, so at most its last round is in
flight, and the next task waits for it to land (or fails the partition for
the next full plan to repair). The driver plans a continuing epoch without
reading the mirrors' log ends and without repairing anything (it must not
fence the running epoch's writers): that is left to the tasks' checks, and
an epoch that failed anything makes the one after it a full plan, with no
epoch copying meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.partitions import settled_partitions
from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.replication.copier import UnitResult
from mirror_pipeline.replication.cycle import copy_context, outcome, planned, selected_mirrors
from mirror_pipeline.replication.planner import Plan, max_message_bytes_of
from mirror_pipeline.replication.spark_runner import Spark, run_unit_groups, task_slots
from mirror_pipeline.replication.task_groups import follow_groups

log = logging.getLogger(__name__)


@dataclass
class RunningEpoch:
    number: int
    plan: Plan
    started: float  # when its planning started (time.time)
    ends_at: float  # when the next epoch's tasks fence its writers (time.time)
    job: Future[list[UnitResult]] | None  # None: nothing to copy
    submitted: float = 0.0  # when its job was submitted (time.time)
    starts_at: float = 0.0  # when its tasks fence (time.time): the epoch before's end, or its submission


def start(
    ctx: LinkContext,
    spark: Spark,
    jobs: Executor,
    number: int,
    mirror_topics: Sequence[str] | None,
    follow_s: float,
    waiting_s: float | None = None,
) -> RunningEpoch:
    """An epoch planned in full (repairs included) while no epoch copies; its tasks fence at once.

    It lasts `follow_s`, at most `waiting_s` when it leaves out mirrors the destination does not list yet."""
    started = time.time()
    ctx.check_destination()
    ctx.store.settle_cleaning()
    plan = planned(ctx, selected_mirrors(ctx, mirror_topics), follow_s)
    return _submitted(ctx, spark, jobs, number, plan, started, time.time(), _length(plan, follow_s, waiting_s))


def offset_map_end(ctx: LinkContext) -> int:
    """Where the next epoch's tasks read the offset map from: its end now, open transactions
    included. Taken before its plan reads the map, so the tasks see whatever that read missed."""
    topic = ctx.store.offset_map_topic
    return kc.list_offsets(ctx.dest_admin, [(topic, 0)], "latest", ctx.dest.alias, read_committed=False)[(topic, 0)]


def continue_from(
    ctx: LinkContext,
    spark: Spark,
    jobs: Executor,
    running: RunningEpoch,
    mirror_topics: Sequence[str] | None,
    follow_s: float,
    map_end: int,
    waiting_s: float | None = None,
) -> RunningEpoch | None:
    """The epoch after `running`, started while it copies; its tasks take over at `running.ends_at`,
    or now when that has passed (the driver waited that long for the epoch before `running` to end).
    Its length is `start`'s.

    The partitions `running` copies continue (`WorkUnit.continues`), each
    from its newest segment as the map has it now (its task moves on to what
    was announced after `map_end`). Mirrors it does not copy (new, resumed,
    or not planned last time) are planned in full. None when a copied mirror
    gained partitions (growing it is a full plan's), or when there is nothing to copy.
    """
    started = time.time()
    ctx.check_destination()
    selected = selected_mirrors(ctx, mirror_topics)
    before = {(u.mirror_topic, u.partition): u for u in running.plan.units}
    counts: dict[str, int] = {}
    for mirror, _ in before:
        counts[mirror] = counts.get(mirror, 0) + 1
    continuing = [m for m in selected if m.mirror_topic in counts]
    settled = settled_partitions(ctx, continuing)
    grown = [m.mirror_topic for m in continuing if settled.get(m.mirror_topic) != counts[m.mirror_topic]]
    if grown:
        log.info("%s: %s changed partitions; the next epoch is planned in full", ctx.link.name, grown[0])
        return None
    new = [m for m in selected if m.mirror_topic not in counts]
    plan = planned(ctx, new, follow_s) if new else Plan()
    names = [m.mirror_topic for m in continuing]
    segments = ctx.store.read_segments(names).segments
    max_bytes = max_message_bytes_of(ctx, names)
    infos = {m.mirror_topic: m for m in continuing}
    for (mirror, p), unit in before.items():
        if mirror not in infos:
            continue  # paused, stopped or deleted since
        # The newest segment's sure end: a reservation still open is closed by its task before the
        # hand-over, and the next task takes the closed one from the map (`group_checks`).
        newest = max((seg for _, seg in segments.get((mirror, p), [])), key=lambda s: s.dest_start, default=None)
        source_from, dest_start = unit.source_from, unit.dest_start
        if newest is not None and newest.sure_end()[0] > dest_start:
            dest_start, source_from = newest.sure_end()
        plan.units.append(
            replace(
                unit,
                source_from=source_from,
                dest_start=dest_start,
                map_snapshot_end=map_end,
                max_message_bytes=max_bytes[mirror],
                follow_s=follow_s,
                continues=True,
                continues_open=(
                    newest if newest is not None and newest.open and newest.sure_end()[0] >= dest_start else None
                ),
            )
        )
        lineage = running.plan.partitions[(mirror, p)]
        plan.partitions[(mirror, p)] = replace(
            lineage, mirror=infos[mirror], mirror_log_end=dest_start, next_source=source_from
        )
    if not plan.units:
        return None  # nothing left to follow (every mirror paused, say): the idle wait of a full plan
    # A hand-over later than `running.ends_at` leaves a gap, never an overlap: `running`'s tasks stop
    # reading before their own hand-over and take a later fence for a take-over (`FollowTimes`).
    # Anchored in the past, every epoch after would start as late and its tasks leave their partitions.
    starts_at = max(running.ends_at, time.time())
    return _submitted(
        ctx, spark, jobs, running.number + 1, plan, started, starts_at, _length(plan, follow_s, waiting_s)
    )


def _length(plan: Plan, follow_s: float, waiting_s: float | None) -> float:
    """Mirrors created moments ago and not listed yet join the next epoch: it comes sooner."""
    return min(follow_s, waiting_s) if plan.not_listed_yet and waiting_s else follow_s


def finish(ctx: LinkContext, epoch: RunningEpoch, handed_over: bool) -> CycleResult:
    """Wait for the epoch's job and return its lineage (raises CycleFailed as a cycle does).

    `handed_over`: the next epoch copies already, so its segments are left for its tasks to pack.
    """
    results = epoch.job.result() if epoch.job is not None else []
    log.info("%s: epoch %d copied %d records", ctx.link.name, epoch.number, sum(r.records for r in results))
    return outcome(ctx, epoch.plan, results, epoch.started, consolidate=not handed_over)


def last_ready_at(epoch: RunningEpoch) -> float | None:
    """When the epoch's last task was ready to fence (its clients opened, `hand_over.wait_for_start`),
    from the results of its ended job; None: not known (nothing copied, the job failed, or no task
    got that far). See `epoch_pace` for what it tells."""
    if epoch.job is None or not epoch.job.done() or epoch.job.exception() is not None:
        return None
    return max((r.ready_at for r in epoch.job.result() if r.ready_at), default=None)


def _submitted(
    ctx: LinkContext,
    spark: Spark,
    jobs: Executor,
    number: int,
    plan: Plan,
    started: float,
    starts_at: float,
    follow_s: float,
) -> RunningEpoch:
    # Every unit, continuing or new, ends with the epoch (`hand_over.FollowTimes`).
    plan.units = [replace(u, starts_at=starts_at, follow_s=follow_s) for u in plan.units]
    job, submitted = None, time.time()
    if plan.units:
        # Half the slots: the next epoch's tasks start in the other half while this one's still copy.
        groups = follow_groups(plan.units, max(1, task_slots(spark) // 2))
        description = (
            f"mirror-pipeline {ctx.link.name}: follow epoch {number}, "
            f"{len(plan.units)} partitions in {len(groups)} tasks"
        )
        job = jobs.submit(run_unit_groups, spark, groups, copy_context(ctx), description)
    return RunningEpoch(number, plan, started, starts_at + follow_s, job, submitted, starts_at)
