"""Reverse (failback, R-LC-7): the old source topic becomes a mirror of the topic it fed.

After promote or failover of mirror M on link L (A -> B), `reverse` makes the
source topic S on A a mirror of M on the reverse link R (B -> A), a link the
config declares. Per partition `model.reverse_plan` decides whether S can
follow M in place or must be rebuilt; before a rebuild deletes S, the records
it would drop are saved (`divergence`) and reported.

Crash safety: the plan is recorded first, on R's registry record of S
(PAUSED, flagged REVERSING, so no cycle copies into it), and every later step
is idempotent and records how far it got (`phase`): running reverse again
after a crash, or concurrently, carries out the same recorded plan.
"""

from __future__ import annotations

import time
from dataclasses import replace

from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import add_partitions, create_topic
from mirror_pipeline.kafka.topic_configs import (
    MIRROR_TIMESTAMP_BOUNDS,
    describe_topic_configs,
    setting,
    split_for_mirror,
)
from mirror_pipeline.link import write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.reverse_plan import (
    REBUILD,
    PartitionReverse,
)
from mirror_pipeline.model.states import ACTIVE, PAUSED, REVERSING, STOPPED
from mirror_pipeline.operations import divergence
from mirror_pipeline.operations.all_or_nothing import checked, one_by_one
from mirror_pipeline.operations.lifecycle import LifecycleResult, rewrite_map
from mirror_pipeline.operations.reverse_planning import (
    PLANNED,
    REBUILT,
    SAVED,
    make_plan,
    plan_sentence,
    report,
    topic_id,
)
from mirror_pipeline.sync.offset_sync import sync_mirrors

TOPIC_GONE_S = 60.0


def reverse_link_for(config: PipelineConfig, link: str, named: str | None) -> str:
    """The link that copies the other way: `named`, else the one declared link from L's destination to L's source."""
    forward = config.link(link)
    if named:
        back = config.link(named)
        if (back.source, back.destination) != (forward.destination, forward.source):
            raise MirrorRefused(
                f"link '{named}' copies {back.source} -> {back.destination}; the reverse of link "
                f"'{link}' must copy {forward.destination} -> {forward.source}"
            )
        return named
    found = sorted(
        name
        for name, other in config.links.items()
        if (other.source, other.destination) == (forward.destination, forward.source)
    )
    if len(found) == 1:
        return found[0]
    if not found:
        raise MirrorRefused(
            f"no link copies {forward.destination} -> {forward.source}, the reverse of link '{link}': declare one "
            f"in the config (links: <name>: source: {forward.destination}, destination: {forward.source}) and run "
            f"reverse again"
        )
    raise MirrorRefused(
        f"links {', '.join(found)} all copy {forward.destination} -> {forward.source}: "
        f"name the one to use with --reverse-link"
    )


def reverse(
    ctx: LinkContext,
    back: LinkContext,
    topics: list[str],
    start: bool = True,
    dry_run: bool = False,
    realign_groups: bool = False,
) -> LifecycleResult:
    """Make the old sources of the stopped mirrors `topics` of `ctx`'s link follow them on link `back`.

    All or nothing (`all_or_nothing`): with several mirrors, every one's plan
    is made (as a dry run makes it) and may refuse before any is carried out.
    """
    ctx.check_destination()
    back.check_destination()
    selected = checked(ctx, "reverse", topics)
    if dry_run or len(selected) > 1:
        preview, refused = LifecycleResult("reverse (dry run)", ctx.link.name), []
        for info in selected:
            try:
                _reverse_one(ctx, back, info, start, True, realign_groups, preview, [])
            except MirrorRefused as exc:
                refused.append(str(exc))
        if refused:
            raise MirrorRefused(f"reverse refused: {'; '.join(refused)}; nothing was changed")
        if dry_run:
            return preview
    result = LifecycleResult("reverse", ctx.link.name)
    return one_by_one(
        result,
        selected,
        lambda info, changed: _reverse_one(ctx, back, info, start, False, realign_groups, result, changed),
    )


def _reverse_one(
    ctx: LinkContext,
    back: LinkContext,
    stopped: MirrorInfo,
    start: bool,
    dry_run: bool,
    realign_groups: bool,
    result: LifecycleResult,
    changed: list[str],
) -> None:
    old_source = stopped.source_topic
    current = back.registry().get(old_source)
    if current is not None and current.state != STOPPED and not _is_ours(current, ctx, stopped):
        if current.source_topic == stopped.mirror_topic and REVERSING not in current.flags:
            result.add(
                stopped,
                current,
                f"already reversed: '{old_source}' follows it on link '{back.link.name}' ({current.state})",
                new_mirror=old_source,
                reverse_link=back.link.name,
            )
            return
        raise MirrorRefused(
            f"'{old_source}' is already a mirror of '{current.source_topic}' on link "
            f"'{back.link.name}' ({current.state})"
        )
    plan = current.reverse_of if current is not None and _is_ours(current, ctx, stopped) else None
    if plan is None:
        plan = make_plan(ctx, back, stopped, start)
    if dry_run:
        result.add(stopped, stopped, plan_sentence(plan, back, dry_run=True), **report(plan, back, old_source))
        return
    info = _record_plan(back, stopped, plan)
    changed.append(
        f"its plan is recorded ('{old_source}' is PAUSED and REVERSING on link '{back.link.name}'): "
        f"run reverse again to finish it"
    )
    plan = info.reverse_of
    if plan["action"] == REBUILD:
        plan = _rebuild(back, info, plan)
    else:
        _continue_in_place(back, info, plan)
    # Read-only before it starts following, where the authorizer allows (R-ACL-3).
    write_guard.guard(back, info.mirror_topic)
    after = _finish(back, info.mirror_topic, plan)
    result.add(stopped, after, plan_sentence(plan, back, dry_run=False), **report(plan, back, old_source))
    result.mirrors[stopped.mirror_topic].update(_translate_groups(back, after, realign_groups))


def _is_ours(current: MirrorInfo, ctx: LinkContext, stopped: MirrorInfo) -> bool:
    """Whether `current` is a reverse of `stopped` still being carried out."""
    of = current.reverse_of or {}
    return REVERSING in current.flags and (of.get("link"), of.get("mirror")) == (ctx.link.name, stopped.mirror_topic)


def _record_plan(back: LinkContext, stopped: MirrorInfo, plan: dict) -> MirrorInfo:
    """Register the old source as a paused, REVERSING mirror of link `back`, holding the plan (first write)."""
    back.store.ensure_topics()
    back.record_naming()
    source_configs = describe_topic_configs(back.source_admin, stopped.mirror_topic, back.source.alias)
    cluster_id = kc.cluster_id(back.source_admin, back.source.alias)
    name = stopped.source_topic

    def decide(current: MirrorInfo | None) -> MirrorInfo:
        if current is not None and REVERSING in current.flags:
            if (current.reverse_of.get("link"), current.reverse_of.get("mirror")) == (plan["link"], plan["mirror"]):
                return current  # carried on from an earlier attempt
        if current is not None and current.state != STOPPED:
            raise MirrorRefused(
                f"'{name}' became a mirror of '{current.source_topic}' on link '{back.link.name}' meanwhile"
            )
        now = time.time()
        said = f"reverse of mirror '{plan['mirror']}' on link '{plan['link']}': in progress"
        return MirrorInfo(
            back.link.name,
            name,
            stopped.mirror_topic,
            PAUSED,
            now,
            said,
            now,
            held_back=split_for_mirror(source_configs)[1],
            flags=(REVERSING,),
            history=((now, "", PAUSED, said),),
            source_cluster=back.source.alias,
            source_cluster_id=cluster_id,
            reverse_of=plan,
        )

    return back.store.update_mirror(name, decide)


def _set_phase(back: LinkContext, name: str, plan: dict, phase: str) -> dict:
    new_plan = {**plan, "phase": phase}

    def decide(current: MirrorInfo | None) -> MirrorInfo:
        current = _still_reversing(current, back, name)
        return replace(current, reverse_of=new_plan)

    back.store.update_mirror(name, decide)
    return new_plan


# --- carrying it out ----------------------------------------------------------------------------------


def _rebuild(back: LinkContext, info: MirrorInfo, plan: dict) -> dict:
    """Save what would be dropped, then delete the old topic and create it again as an empty mirror."""
    name = info.mirror_topic
    if plan["phase"] == PLANNED:
        if plan["saved_topic"]:
            _save(back, info, plan)
        plan = _set_phase(back, name, plan, SAVED)
    if plan["phase"] == SAVED:
        if plan["old_topic_id"] and topic_id(back, name) == plan["old_topic_id"]:
            _delete_topic(back, name)
        _create_mirror_topic(back, info, plan)
        rewrite_map(back, name, range(plan["new_partitions"]))
        plan = _set_phase(back, name, plan, REBUILT)
    return plan


def _save(back: LinkContext, info: MirrorInfo, plan: dict) -> None:
    name, alias = info.mirror_topic, back.dest.alias
    parts = [PartitionReverse.from_dict(p) for p in plan["partitions"]]
    max_bytes = int(describe_topic_configs(back.dest_admin, name, alias).get("max.message.bytes", 1048588))
    divergence.ensure_saved_topic(back.dest_admin, alias, plan["saved_topic"], plan["old_partitions"], max_bytes)
    ranges = {p.partition: p.saved_ranges for p in parts if p.saved_ranges}
    writer_id = f"mirror-pipeline/{back.link.name}/{name}/diverged"
    saved = divergence.save_ranges(
        back.dest_conf("state-writer"), back.dest_conf("reader"), writer_id, name, plan["saved_topic"], ranges, alias
    )
    short = {
        p: (plan["saved_counts"][str(p)]["records"], got.records)
        for p, got in saved.items()
        if got.records != plan["saved_counts"][str(p)]["records"]
    }
    if short:
        detail = "; ".join(f"partition {p}: {want} to save, {got} saved" for p, (want, got) in sorted(short.items()))
        raise MirrorError(
            f"saving the records '{name}' would drop to '{plan['saved_topic']}' did not add up ({detail}); "
            f"nothing was deleted: run reverse again"
        )


def _delete_topic(back: LinkContext, name: str) -> None:
    fut = back.dest_admin.delete_topics([name], request_timeout=kc.REQUEST_TIMEOUT_S)[name]
    with kc.kafka_errors(
        f"cluster '{back.dest.alias}': deleting '{name}' for its rebuild failed", ignore=kc.UNKNOWN_TOPIC
    ):
        fut.result()


def _create_mirror_topic(back: LinkContext, info: MirrorInfo, plan: dict) -> None:
    """Create the old source again with the new source's partitions and configs (a deletion finishes first)."""
    name, alias = info.mirror_topic, back.dest.alias
    configs = split_for_mirror(describe_topic_configs(back.source_admin, info.source_topic, back.source.alias))[0]
    creating = f"cluster '{alias}': creating '{name}' as a mirror failed"
    deadline = time.monotonic() + TOPIC_GONE_S
    while True:
        existing = topic_id(back, name)
        if existing and existing != plan["old_topic_id"]:
            partitions = kc.topic_partitions(back.dest_admin, name, alias)
            if partitions is None:  # described, not yet in the metadata the broker answers with
                if time.monotonic() > deadline:
                    raise MirrorError(f"{creating}: '{name}' exists, the cluster does not list it; run reverse again")
                time.sleep(0.5)
                continue
            ends = kc.list_offsets(
                back.dest_admin,
                [(name, p) for p in range(partitions)],
                "latest",
                alias,
                read_committed=False,
            )
            if any(ends.values()):
                raise MirrorRefused(
                    f"'{name}' on cluster '{alias}' was created again by someone else and holds records; "
                    f"delete it (its old records are saved in '{plan['saved_topic'] or 'nothing to save'}') "
                    f"and run reverse again"
                )
            # An earlier attempt of this reverse created it, and may have ended before its last partitions.
            add_partitions(back.dest_admin, name, partitions, plan["new_partitions"], creating)
            return
        try:
            create_topic(back.dest_admin, alias, name, plan["new_partitions"], configs, creating, MirrorRefused)
            return
        except MirrorRefused:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # the deletion is still under way


def _continue_in_place(back: LinkContext, info: MirrorInfo, plan: dict) -> None:
    """Keep the old source's records: its map is the identity up to where the stopped mirror left off."""
    name = info.mirror_topic
    _mirror_mode_configs(back, name)
    pins = {}
    for part in (PartitionReverse.from_dict(p) for p in plan["partitions"]):
        start, end = part.source_log_start, part.mirrored_up_to
        if end > 0:
            runs = ((start, end - start),) if end > start else ()
            pins[part.partition] = Segment(start, runs, end, written_at=time.time())
    rewrite_map(back, name, range(plan["new_partitions"]), pins)


def _mirror_mode_configs(back: LinkContext, name: str) -> None:
    """A mirror keeps copied timestamps and takes old ones: CreateTime, bounds wide open (R-CS-5)."""
    resource = setting(name, {"message.timestamp.type": "CreateTime", **MIRROR_TIMESTAMP_BOUNDS})
    with kc.kafka_errors(f"cluster '{back.dest.alias}': setting '{name}' up as a mirror failed"):
        for fut in back.dest_admin.incremental_alter_configs([resource]).values():
            fut.result()


def _still_reversing(current: MirrorInfo | None, back: LinkContext, name: str) -> MirrorInfo:
    """Every step after the plan is recorded re-checks it is still the reverse's to take (R-LC-8);
    the mirror's record, then."""
    if current is None or REVERSING not in current.flags or current.state == STOPPED:
        what = "deleted" if current is None else current.state
        raise MirrorRefused(
            f"the reverse of '{name}' on link '{back.link.name}' stopped: the mirror is {what} meanwhile"
        )
    return current


def _finish(back: LinkContext, name: str, plan: dict) -> MirrorInfo:
    to = ACTIVE if plan["start"] else PAUSED
    said = f"reversed: follows '{plan['mirror']}'" + ("" if plan["start"] else "; paused until resumed")

    def decide(current: MirrorInfo | None) -> MirrorInfo:
        current = _still_reversing(current, back, name)
        now = time.time()
        history = (current.history + ((now, current.state, to, said),))[-20:]
        return replace(
            current,
            state=to,
            state_time=now,
            reason=said,
            history=history,
            flags=tuple(f for f in current.flags if f != REVERSING),
            reverse_of={**plan, "phase": "done"},
        )

    return back.store.update_mirror(name, decide)


def _translate_groups(back: LinkContext, info: MirrorInfo, realign: bool) -> dict:
    """Groups that moved to the new source, translated back through the new mirror's map (R-OFS rules;
    `realign`: also backwards, over offsets the groups left behind on the old source)."""
    if not back.link.offset_sync_enable:
        return {
            "offset_sync_notes": [
                f"consumer.offset.sync.enable is off on link '{back.link.name}': no consumer group was translated"
            ]
        }
    try:
        sync = sync_mirrors(back, [info], realign=realign)
    except MirrorError as exc:
        return {"offset_sync_notes": [f"offset sync failed: {exc}"]}
    groups = [
        {
            "group": g.destination_group,
            "status": g.status,
            "partitions": {p.partition: p.destination_offset for p in g.partitions},
        }
        for g in sync.groups
    ]
    return {"consumer_groups": groups, "offset_sync_notes": list(sync.notes)}
