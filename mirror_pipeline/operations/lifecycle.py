"""The verbs that move mirrors between states (R-LC-1..6); the states themselves are in `states`.

Every transition is recorded on the mirror's registry record in the
destination cluster, with its time and reason, so a new machine with a fresh
Dagster instance sees the same states. Every verb is idempotent: asking for
the state a mirror is already in reports it and changes nothing. Given
several mirrors, a verb is all or nothing: every one is checked before any
changes, and one that fails part-way says what changed (`all_or_nothing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link import write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_keys import segment_key
from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    ACTIVE,
    DELETING,
    PAUSED,
    PENDING_STOPPED,
    REVERSING,
    SOURCE_UNAVAILABLE,
    STOPPED,
    transition,
    with_flag,
)
from mirror_pipeline.operations.all_or_nothing import DONE, LifecycleResult, checked, one_by_one
from mirror_pipeline.sync.config_records import config_sync_key

__all__ = ["LifecycleResult", "pause", "resume", "delete", "rewrite_map", "refuse_reversing"]


def pause(ctx: LinkContext, topics: list[str] | None) -> LifecycleResult:
    return _move(
        ctx,
        topics,
        "pause",
        PAUSED,
        "paused by operator",
        "paused: copies nothing until resumed",
        movable=(ACTIVE, SOURCE_UNAVAILABLE),
        already=(PAUSED,),
    )


def resume(ctx: LinkContext, topics: list[str] | None) -> LifecycleResult:
    return _move(
        ctx,
        topics,
        "resume",
        ACTIVE,
        "resumed by operator",
        "resumed: the next cycle copies what accumulated",
        movable=(PAUSED,),
        already=(ACTIVE, SOURCE_UNAVAILABLE, PENDING_STOPPED),
    )


def _move(
    ctx: LinkContext,
    topics: list[str] | None,
    verb: str,
    to: str,
    reason: str,
    said: str,
    *,
    movable: tuple[str, ...],
    already: tuple[str, ...],
) -> LifecycleResult:
    """Move mirrors in `movable` states to `to`, all or nothing (`all_or_nothing`); those in `already` are
    reported. With every mirror of the link (`topics` None) the STOPPED ones are left out and reported."""
    ctx.check_destination()
    result = LifecycleResult(verb, ctx.link.name)
    left_out = (STOPPED,) if topics is None else ()

    def act(info: MirrorInfo, _changed: list[str]) -> None:
        def decide(current: MirrorInfo | None) -> MirrorInfo:
            if current is None:
                raise MirrorRefused(f"mirror '{info.mirror_topic}' was deleted meanwhile")
            if current.state in already or current.state in left_out:
                return current
            if current.state not in movable:  # checked, then moved by someone else
                raise MirrorRefused(f"mirror '{current.mirror_topic}' became {current.state} meanwhile")
            return transition(current, to, reason)

        after = ctx.store.update_mirror(info.mirror_topic, decide)
        if after.state != to or info.state == to:  # already there, or left out
            result.add(
                after, after, f"already {DONE[verb]}" if after.state == to else f"not {DONE[verb]} ({after.state})"
            )
            return
        result.add(info, after, said)
        if to == PAUSED:
            # A copy task already running announces no further chunk: the
            # pause takes effect within one chunk, not at the end of its range.
            _fence_partitions(ctx, info.mirror_topic)

    return one_by_one(result, checked(ctx, verb, topics), act)


def _mark_deleting(ctx: LinkContext, name: str) -> None:
    """Mark the mirror DELETING before fencing: a copy task that fences later sees the mark and writes
    nothing, so no cycle already in flight copies into a mirror being deleted (R-LC-6, R-LC-8)."""

    def decide(current: MirrorInfo | None) -> MirrorInfo:
        if current is None:
            raise MirrorRefused(f"mirror '{name}' was deleted meanwhile")
        refuse_reversing([current], "delete it")
        return with_flag(current, DELETING)

    ctx.store.update_mirror(name, decide)


def rewrite_map(
    ctx: LinkContext, name: str, partitions: Iterable[int], pins: Mapping[int, Segment] | None = None
) -> None:
    """Per partition, in one transaction: delete every segment of `name`'s offset map but the
    partition's pin, and write the pin (a delete has none; a reverse pins where the map starts).

    The partitions are those given and any the map has. The segments are read
    after fencing (see `fenced_batches`): a read from before could miss a chunk
    a task announced in between and leave it mapped for a later mirror of the name.
    """
    pins = pins or {}
    parts = set(partitions) | {p for (_, p) in ctx.store.read_segments([name]).segments} | set(pins)
    for writers in ctx.fenced_batches([(name, p) for p in sorted(parts)]):
        old = ctx.store.read_segments([name]).segments
        for (_, p), writer in writers.items():
            pin = pins.get(p)
            keep = {segment_key(ctx.link.name, name, p, pin.dest_start)} if pin else set()
            deletes = [key for key, _ in old.get((name, p), []) if key not in keep]
            if deletes or pin is not None:
                writer.write(puts=[pin] if pin else [], deletes=deletes)


def _fence_partitions(ctx: LinkContext, name: str) -> None:
    parts = kc.topic_partitions(ctx.dest_admin, name, ctx.dest.alias) or 0
    for _ in ctx.fenced_batches([(name, p) for p in range(parts)]):
        pass  # fencing is all a pause needs


def refuse_reversing(infos: list[MirrorInfo], then: str) -> None:
    """A mirror a reverse is still setting up may hold the only copy of records it has yet to save:
    nothing but the reverse touches it until the reverse finished."""
    for info in infos:
        if REVERSING in info.flags:
            raise MirrorRefused(
                f"mirror '{info.mirror_topic}' is being set up by a reverse that did not finish; "
                f"run reverse again to finish it, then {then}"
            )


def delete(ctx: LinkContext, topics: list[str]) -> LifecycleResult:
    """Stop mirroring for good (R-LC-6).

    A mirror that is still a mirror loses its topic on the destination (its
    data is still on the source); a STOPPED mirror is a normal topic by now and
    keeps it: only the link's record of it is forgotten. The source is never
    touched (R-REL-3).
    """
    ctx.check_destination()
    result = LifecycleResult("delete", ctx.link.name)

    def act(info: MirrorInfo, changed: list[str]) -> None:
        _mark_deleting(ctx, info.mirror_topic)
        changed.append("it is marked DELETING and copies nothing more: run delete again to finish")
        rewrite_map(
            ctx, info.mirror_topic, range(kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias) or 0)
        )
        # The guard's bindings are listed on the record forgotten below: lifted first, or a topic of
        # that name made later would stay locked for its writers, by bindings nobody lists (R-ACL-3).
        write_guard.lift(ctx, info.mirror_topic)
        said = "forgotten; the topic stays (it is a normal topic since it stopped)"
        if info.state != STOPPED:
            fut = ctx.dest_admin.delete_topics([info.mirror_topic], request_timeout=kc.REQUEST_TIMEOUT_S)[
                info.mirror_topic
            ]
            # Already gone is as good as deleted.
            with kc.kafka_errors(f"deleting mirror topic '{info.mirror_topic}' failed", ignore=kc.UNKNOWN_TOPIC):
                fut.result()
            said = "deleted: mirror topic removed from the destination; the source is untouched"
        ctx.store.delete_mirror(info.mirror_topic)
        ctx.store._write_plain(ctx.store.state_topic, config_sync_key(ctx.link.name, info.mirror_topic), None)
        result.add(info, replace(info, state="DELETED"), said)

    return one_by_one(result, checked(ctx, "delete", topics), act)
