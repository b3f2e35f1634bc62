"""Promote and failover: a mirror becomes a normal writable topic, for good (R-LC-3, R-LC-4, R-LC-8, R-OFS-7)."""

from __future__ import annotations

import time
from dataclasses import replace

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import MIRROR_TIMESTAMP_BOUNDS, describe_topic_configs, split_for_mirror
from mirror_pipeline.link import write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_writers import SegmentWriter
from mirror_pipeline.model.errors import ClusterUnreachable, ConcurrentWriter, MirrorError, MirrorRefused
from mirror_pipeline.model.lag import records_behind
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.model.offset_results import OffsetSyncResult
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    OFFSET_SYNCED_STATES,
    PENDING_STOPPED,
    STOPPED,
    STOPPING,
    transition,
    with_flag,
)
from mirror_pipeline.operations.all_or_nothing import Incomplete, checked, one_by_one, record_failure
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline.operations.mirrors import describe_mirror, partition_progress
from mirror_pipeline.replication.repair import InDoubt, settle_in_doubt
from mirror_pipeline.sync.config_records import read_sync_records
from mirror_pipeline.sync.config_sync import sync_topic_configs
from mirror_pipeline.sync.offset_sync import sync_mirrors


def stop(
    ctx: LinkContext, info: MirrorInfo, reason: str, held_back: dict | None = None, changed: list[str] | None = None
) -> MirrorInfo:
    """Make a mirror a normal writable topic, for good (R-LC-3, R-LC-4, R-LC-8).

    Mark, fence, then read -- in that order, each step relying on the one before:
    1. mark the mirror STOPPING: a copy task checks the mark right after it
       takes a partition's writer, so one that fences after step 2 never writes;
    2. fence every partition's writer: a task that fenced before can announce
       no further chunk;
    3. wait out the last announced chunk and cut the offset map at what landed
       (`repair`): the stop point is read after fencing, so it is exact, and
       nothing from the link lands in the topic after this returns.
    Then the held-back configs are applied and the state becomes STOPPED.
    `changed` hears of the mark, which a failure after it leaves in place.
    """
    name = info.mirror_topic

    def mark(current: MirrorInfo | None) -> MirrorInfo:
        if current is None:
            raise MirrorRefused(f"mirror '{name}' was deleted meanwhile")
        if current.state == STOPPED or STOPPING in current.flags:
            return current
        return replace(with_flag(current, STOPPING), reason=f"{reason}: stopping")

    marked = ctx.store.update_mirror(name, mark)
    if marked.state == STOPPED:
        return marked
    if changed is not None:
        changed.append("it is marked STOPPING and copies nothing more: run failover again to finish")
    last_source, problems = _fence_and_settle(ctx, marked)
    held = _current_held_back(ctx, info) if held_back is None else held_back
    _apply_held_back(ctx, name, held)
    # Its applications must be able to write to it once it is STOPPED (R-ACL-3).
    write_guard.lift(ctx, name)

    def finish(current: MirrorInfo | None) -> MirrorInfo:
        if current is None:
            raise MirrorRefused(f"mirror '{name}' was deleted meanwhile")
        if current.state == STOPPED:
            return current
        said = reason + "".join(f"; {p}" for p in problems)
        after = transition(
            current, STOPPED, said, stopped_at=time.time(), last_source_offsets=last_source, held_back=held
        )
        return with_flag(after, STOPPING, present=False)

    return ctx.store.update_mirror(name, finish)


def _fence_and_settle(ctx: LinkContext, info: MirrorInfo, attempts: int = 5) -> tuple[dict[int, int], list[str]]:
    """Steps 2 and 3 of `stop`: per partition, the next source offset the mirror would have copied."""
    name = info.mirror_topic
    for attempt in range(attempts):
        parts = kc.topic_partitions(ctx.dest_admin, name, ctx.dest.alias) or 0
        try:
            with ctx.fenced_writers([(name, p) for p in range(parts)]) as writers:
                return _settle(ctx, info, parts, writers)
        except ConcurrentWriter:
            # A planner, a copy task or a consolidation fenced a slot after us (it
            # will see the mark and back off): take the writers again.
            if attempt + 1 == attempts:
                raise
    raise AssertionError("unreachable")


def _settle(
    ctx: LinkContext, info: MirrorInfo, parts: int, writers: dict[tuple[str, int], SegmentWriter]
) -> tuple[dict[int, int], list[str]]:
    """Step 3 of `stop`, with every partition's writer fenced."""
    name = info.mirror_topic
    segments = ctx.store.read_segments([name]).segments
    ends = kc.list_offsets(
        ctx.dest_admin, [(name, p) for p in range(parts)], "latest", ctx.dest.alias, read_committed=False
    )
    in_doubt = [
        InDoubt(name, info.source_topic, p, tuple(segments.get((name, p), [])))
        for p in range(parts)
        if resolve_keyed(segments.get((name, p), []), ends[(name, p)]).in_doubt
    ]
    settled = settle_in_doubt(ctx, in_doubt, writers)
    problems = [s.problem for s in settled.values() if s.problem]
    segments = ctx.store.read_segments([name]).segments
    last_source = {}
    for p in range(parts):
        leo = settled[(name, p)].log_end if (name, p) in settled else ends[(name, p)]
        res = resolve_keyed(segments.get((name, p), []), leo)
        last_source[p] = res.offset_map.next_source_offset or 0
    return last_source, problems


def _current_held_back(ctx: LinkContext, info: MirrorInfo) -> dict:
    """The newest known source values held back: config sync's record, else the creation-time ones.

    The source is not asked: failover must not wait on a source that may be gone.
    """
    return dict(read_sync_records(ctx).get(info.mirror_topic, {}).get("held_back") or info.held_back)


def source_held_back(ctx: LinkContext, info: MirrorInfo) -> dict:
    """The source's held-back values as they are now (promote: the source answers)."""
    return split_for_mirror(describe_topic_configs(ctx.source_admin, info.source_topic, ctx.source.alias))[1]


def _apply_held_back(ctx: LinkContext, mirror_topic: str, held_back: dict) -> None:
    """Give the stopped topic the source's timestamp settings (R-CS-5)."""
    ops = []
    for name in MIRROR_TIMESTAMP_BOUNDS:
        if name in held_back:
            ops.append(ConfigEntry(name, held_back[name], incremental_operation=AlterConfigOpType.SET))
        else:
            ops.append(ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE))
    if held_back.get("message.timestamp.type") == "LogAppendTime":
        ops.append(ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.TOPIC, mirror_topic, incremental_configs=ops)
    with kc.kafka_errors(f"mirror '{mirror_topic}': applying held-back configs failed"):
        for fut in ctx.dest_admin.incremental_alter_configs([resource]).values():
            fut.result()


def failover(ctx: LinkContext, topics: list[str] | None) -> LifecycleResult:
    """Stop at once, whatever the lag and whether the source answers (R-LC-3); all or nothing (`all_or_nothing`)."""
    ctx.check_destination()
    result = LifecycleResult("failover", ctx.link.name)
    selected = checked(ctx, "failover", topics)
    landings = _landings_by_mirror(_final_offset_sync(ctx, [m for m in selected if m.state != STOPPED]))

    def act(info: MirrorInfo, changed: list[str]) -> None:
        if info.state == STOPPED:
            result.add(info, info, "already stopped")
            return
        reason = "failover" + (" (cancelled a pending promote)" if info.state == PENDING_STOPPED else "")
        after = stop(ctx, info, reason, changed=changed)
        result.add(
            info,
            after,
            "stopped: now a normal writable topic",
            last_source_offsets=after.last_source_offsets,
            **landings.get(info.mirror_topic, {}),
        )

    return one_by_one(result, selected, act)


def _final_offset_sync(ctx: LinkContext, infos: list[MirrorInfo], dry_run: bool = False):
    """The last offset sync of mirrors about to stop (R-OFS-7), when the link syncs offsets.

    Also clamps destination offsets above the mirror's log end. It never
    stands in the way of a failover: a failure is reported, not raised.
    """
    infos = [m for m in infos if m.state in OFFSET_SYNCED_STATES]
    if not ctx.link.offset_sync_enable or not infos:
        return None
    try:
        return sync_mirrors(ctx, infos, final=True, dry_run=dry_run)
    except MirrorError as exc:
        failed = OffsetSyncResult(ctx.link.name, ctx.link.offset_translation_mode, dry_run=dry_run, final=True)
        failed.notes.append(f"offset sync failed: {exc}")
        failed.complete = False
        return failed


def _landings_by_mirror(sync) -> dict[str, dict]:
    """Per mirror topic: where each synced group lands (for the lifecycle result and the dry run)."""
    if sync is None:
        return {}
    out: dict[str, dict] = {}
    for g in sync.groups:
        for p in g.partitions:
            out.setdefault(p.mirror_topic, {"consumer_groups": []})["consumer_groups"].append(
                {
                    "source_group": g.source_group,
                    "destination_group": g.destination_group,
                    "status": g.status,
                    "partition": p.partition,
                    "source_offset": p.source_offset,
                    "lands_at": p.translated_offset,
                    "destination_offset_before": p.previous_offset,
                    "destination_offset": p.destination_offset,
                    "action": p.action,
                }
            )
    if sync.notes:
        for entry in out.values():
            entry["offset_sync_notes"] = list(sync.notes)
    return out


def promote(
    ctx: LinkContext, topics: list[str] | None, copy_cycle, timeout_s: float = 300.0, poll_s: float = 1.0
) -> LifecycleResult:
    """Planned migration: finish copying, then stop with zero lag (R-LC-3).

    `copy_cycle(mirror_topics)` runs one replication cycle and returns its
    CycleResult; promote repeats it until data lag is zero. A failover while
    it waits cancels the wait. All or nothing (`all_or_nothing`): every mirror
    is checked before any is asked to stop; a promote that fails part-way (or
    times out) says which mirrors it promoted, and the others stay PENDING_STOPPED.
    """
    ctx.check_destination()
    try:
        ctx.check_source()
    except ClusterUnreachable as exc:
        raise MirrorRefused(
            f"promote needs the source to be reachable ({exc}); failover stops a mirror without it"
        ) from None
    result = LifecycleResult("promote", ctx.link.name)
    waiting: dict[str, MirrorInfo] = {}  # asked to stop, not stopped yet: as they were before

    def request_stop(info: MirrorInfo, _changed: list[str]) -> None:
        if info.state == STOPPED:
            result.add(info, info, "already stopped")
            return

        def request(current: MirrorInfo | None) -> MirrorInfo | None:
            if current is None or current.state in (PENDING_STOPPED, STOPPED):
                return current
            return transition(current, PENDING_STOPPED, "promote requested")

        after = ctx.store.update_mirror(info.mirror_topic, request)
        if after is None or after.state == STOPPED:
            result.add(info, after or info, "stopped meanwhile")
        else:
            waiting[info.mirror_topic] = info

    try:
        one_by_one(result, checked(ctx, "promote", topics), request_stop)
    except Incomplete as exc:
        for name in waiting:
            result.not_done[name] = {
                "state": PENDING_STOPPED,
                "why": f"not stopped before the promote failed; {_STILL}",
            }
        raise Incomplete(result) from exc.__cause__
    _stop_at_zero_lag(ctx, result, waiting, copy_cycle, timeout_s, poll_s)
    return result


_STILL = "it stays PENDING_STOPPED: run promote again, or failover to stop it now"


def _stop_at_zero_lag(
    ctx: LinkContext,
    result: LifecycleResult,
    waiting: dict[str, MirrorInfo],
    copy_cycle,
    timeout_s: float,
    poll_s: float,
) -> None:
    """Promote's wait: copy, and stop each mirror of `waiting` once its lags are all zero (R-LC-3).

    Raises `Incomplete` when the deadline passes or something fails: the
    mirrors stopped so far are in `result`, the others in its `not_done`.
    """
    deadline = time.monotonic() + timeout_s
    last_failure = ""
    name = ""
    changed: list[str] = []
    try:
        while waiting:
            try:
                copy_cycle(sorted(waiting))
            except MirrorError as exc:
                # A failover fencing the mirrors, a concurrent cycle, a passing
                # broker error: the state check below and the deadline decide.
                last_failure = f" (last cycle: {exc})"
            name = ""  # a failure before the next mirror's turn is none's in particular
            registry = ctx.registry()
            for name in sorted(waiting):
                before, current, changed = waiting[name], registry[name], []
                if current.state != PENDING_STOPPED:  # a failover cancelled the wait
                    result.add(before, current, f"promote cancelled: mirror is {current.state}")
                    del waiting[name]
                    continue
                lag = describe_mirror(ctx, name).lag
                if lag == 0 and sync_topic_configs(ctx, [name]).mirrors[name].in_sync:
                    offsets = _final_offset_sync(ctx, [current])
                    if offsets is not None and (offsets.offset_sync_lag or not offsets.complete):
                        # R-LC-3: consumer-offset lag must be zero too (e.g. a group still active on the destination).
                        last_failure = (
                            f" (offset-sync lag {offsets.offset_sync_lag}{''.join('; ' + n for n in offsets.notes)})"
                        )
                        continue
                    after = stop(ctx, current, "promoted", held_back=source_held_back(ctx, current), changed=changed)
                    said = "data, config and offset-sync lag 0" if offsets is not None else "data and config lag 0"
                    result.add(
                        before,
                        after,
                        f"promoted: {said}, now a normal writable topic",
                        last_source_offsets=after.last_source_offsets,
                        **_landings_by_mirror(offsets).get(name, {}),
                    )
                    del waiting[name]
            name = ""
            if waiting and time.monotonic() > deadline:
                raise MirrorError(
                    f"did not reach zero lag within {timeout_s:.0f}s (producers still writing to the "
                    f"source?){last_failure}"
                )
            if waiting:
                time.sleep(poll_s)
    except Exception as exc:
        for other in sorted(waiting):
            if other == name:
                record_failure(result, replace(waiting[other], state=PENDING_STOPPED), exc, changed or [_STILL])
            else:
                failure = exc if not name else MirrorError(f"not stopped before the promote failed at '{name}'")
                record_failure(result, replace(waiting[other], state=PENDING_STOPPED), failure, [_STILL])
        raise Incomplete(result) from exc


def preview_stop(ctx: LinkContext, topics: list[str] | None) -> dict:
    """What a failover would lose now: per partition, records not yet mirrored and the time they span."""
    ctx.check_destination()
    try:
        ctx.check_source()
        reachable = True
    except ClusterUnreachable:
        reachable = False
    out: dict[str, dict] = {}
    selected = ctx.select(topics)
    landings = _landings_by_mirror(_final_offset_sync(ctx, [m for m in selected if m.state != STOPPED], dry_run=True))
    for info in selected:
        if info.state == STOPPED:
            out[info.mirror_topic] = {"state": STOPPED, "partitions": [], "note": "already stopped"}
            continue
        rows = []
        for p, next_source, source_end in partition_progress(ctx, info, with_source=reachable):
            row = {"partition": p, "mirrored_up_to": next_source}
            if source_end is None:
                row.update(unmirrored=None, note="source unreachable: unknown")
            else:
                row["unmirrored"] = records_behind(source_end, next_source)
                if row["unmirrored"]:
                    first, last = _timestamps(ctx, info.source_topic, p, next_source, source_end - 1)
                    row.update(first_unmirrored_timestamp=first, last_source_timestamp=last)
            rows.append(row)
        out[info.mirror_topic] = {"state": info.state, "partitions": rows, **landings.get(info.mirror_topic, {})}
    return out


def _timestamps(ctx: LinkContext, topic: str, partition: int, first: int, last: int) -> tuple[int | None, int | None]:
    """Timestamps of the first committed records at or after `first` and at or after `last`."""
    found = []
    for offset in (first, last):
        cons = kc.consumer(ctx.source_conf("reader", **{"auto.offset.reset": "latest"}))
        try:
            cons.assign([TopicPartition(topic, partition, offset)])
            msgs = [m for m in cons.consume(1, 5.0) if m.error() is None]
            found.append(msgs[0].timestamp()[1] if msgs else None)
        finally:
            cons.close()
    return found[0], found[1]
