"""Consumer offset sync: source groups' positions translated and committed on the destination (R-OFS-1..7).

One sync reads, for every source group the link's group filters select, its
committed offsets on the mirrored source topics; lands each on the mirror
(exactly through the offset map, or by timestamp, see `offset_translation`);
commits it on the destination group when that group has no members there and
the commit moves it forward; and records every translation in the checkpoints
topic. Promote and failover run a last, `final` sync that also clamps
destination offsets above the mirror's log end (R-OFS-7).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError, MirrorRefused
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.model.offset_results import (
    GroupOffsetSync,
    OffsetCheckpoint,
    OffsetSyncResult,
    PartitionOffsetSync,
)
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import OFFSET_SYNCED_STATES
from mirror_pipeline.sync import offset_checkpoints, offset_groups
from mirror_pipeline.sync.committed_offsets import Expected, Offsets, commit_if_unchanged, committed_offsets
from mirror_pipeline.sync.offset_translation import (
    CLAMPED,
    COMMITTED,
    REALIGNED,
    TIMESTAMP,
    WOULD_COMMIT,
    MirrorPartition,
    behind,
    decide_commits,
    translate,
)

Position = tuple[str, int]  # (topic, partition)
GROUP_WORKERS = 16


@dataclass(frozen=True)
class DeferredCommit:
    """A group's commit decided from the destination's listing, made with every other at once."""

    expected: Expected  # the destination offsets it was decided from
    offsets: Offsets  # what to commit
    rows: list[PartitionOffsetSync]
    read_at: float  # when the group's sync began (for the checkpoint latency)


def destination_group(link, source_group: str) -> str:
    """The group's name on the destination (R-OFS-4)."""
    return f"{link.prefix}{source_group}" if link.group_prefix_enable and link.prefix else source_group


def sync_offsets(ctx: LinkContext, mirrors: Sequence[str] | None = None) -> OffsetSyncResult:
    """One sync of the named mirrors (all syncable mirrors of the link when None)."""
    ctx.check_destination()
    if mirrors is None:
        infos = [m for m in ctx.select(None) if m.state in OFFSET_SYNCED_STATES]
    else:
        infos = ctx.select(list(mirrors))
        refused = [m for m in infos if m.state not in OFFSET_SYNCED_STATES]
        if refused:
            m = refused[0]
            raise MirrorRefused(
                f"mirror '{m.mirror_topic}' is {m.state}; offsets are synced only for mirrors that are "
                f"{', '.join(sorted(OFFSET_SYNCED_STATES))}"
            )
    result = sync_mirrors(ctx, infos)
    if not ctx.link.offset_sync_enable:
        result.notes.append("consumer.offset.sync.enable is false on this link: synced on request only")
    return result


def sync_mirrors(
    ctx: LinkContext, infos: list[MirrorInfo], *, final: bool = False, dry_run: bool = False, realign: bool = False
) -> OffsetSyncResult:
    """Translate and commit the selected groups' offsets for `infos`.

    `final` (promote, failover): destination offsets above the mirror's log
    end are clamped, and an unreachable source only limits the sync to that
    clamp instead of failing it. `dry_run` commits and records nothing.
    `realign` (a reverse, when the operator asks) moves a destination group
    that is ahead of its translation back to it: its offsets there are stale.
    """
    started = time.monotonic()
    mode = ctx.link.offset_translation_mode
    result = OffsetSyncResult(ctx.link.name, mode, dry_run=dry_run, final=final, started_at=time.time())
    if ctx.link.offset_group_filters.is_empty:
        result.notes.append("consumer.offset.group.filters selects no group")
    if not infos or ctx.link.offset_group_filters.is_empty:
        return result
    partitions = mirror_partitions(ctx, infos)
    try:
        ctx.check_source()
        groups = [
            g
            for g in offset_groups.list_groups(ctx.source_admin, ctx.source.alias)
            if ctx.link.offset_group_filters.selects(g)
        ]
    except ClusterUnreachable as exc:
        if not final:
            raise
        result.notes.append(
            f"source unreachable, only destination offsets above the mirror log end were clamped: {exc}"
        )
        result.complete = False
        groups = _groups_on_destination(ctx)
        _sync_groups(ctx, result, partitions, groups, final=True, dry_run=dry_run, source=False)
    else:
        _sync_groups(ctx, result, partitions, groups, final=final, dry_run=dry_run, source=True, realign=realign)
    result.duration_s = time.monotonic() - started
    return result


def mirror_partitions(ctx: LinkContext, infos: list[MirrorInfo]) -> dict[Position, MirrorPartition]:
    """Every partition of the mirrors, keyed by (mirror topic, partition), with its offset map and log bounds."""
    counts = kc.partition_counts(ctx.dest_admin, ctx.dest.alias) if infos else {}
    parts = {m.mirror_topic: counts.get(m.mirror_topic, 0) for m in infos}
    tps = [(m.mirror_topic, p) for m in infos for p in range(parts[m.mirror_topic])]
    # Three independent reads, side by side (on 10,000 partitions each takes about a second).
    with ThreadPoolExecutor(3, thread_name_prefix="mirror-bounds") as pool:
        asked_starts = pool.submit(
            kc.list_offsets, ctx.dest_admin, tps, "earliest", ctx.dest.alias, read_committed=False
        )
        asked_ends = pool.submit(kc.list_offsets, ctx.dest_admin, tps, "latest", ctx.dest.alias, read_committed=False)
        asked_segments = pool.submit(ctx.store.read_segments, [m.mirror_topic for m in infos])
        starts, ends, segments = asked_starts.result(), asked_ends.result(), asked_segments.result().segments
    out = {}
    for m in infos:
        for p in range(parts[m.mirror_topic]):
            omap = resolve_keyed(segments.get((m.mirror_topic, p), []), ends[(m.mirror_topic, p)]).offset_map
            out[(m.mirror_topic, p)] = MirrorPartition(
                m.mirror_topic, m.source_topic, p, omap, starts[(m.mirror_topic, p)], ends[(m.mirror_topic, p)]
            )
    return out


def _groups_on_destination(ctx: LinkContext) -> list[str]:
    """Source group names of the destination groups the link syncs into (the source may be gone)."""
    link, out = ctx.link, []
    for group in offset_groups.list_groups(ctx.dest_admin, ctx.dest.alias):
        if link.group_prefix_enable and link.prefix:
            if not group.startswith(link.prefix):
                continue
            group = group[len(link.prefix) :]
        if link.offset_group_filters.selects(group):
            out.append(group)
    return out


def _sync_groups(
    ctx: LinkContext,
    result: OffsetSyncResult,
    partitions: dict[Position, MirrorPartition],
    groups: list[str],
    *,
    final: bool,
    dry_run: bool,
    source: bool,
    realign: bool = False,
) -> None:
    """Sync each group into `result`; `source` False: the source is gone, only clamp (R-OFS-7)."""
    dest_names = {g: destination_group(ctx.link, g) for g in groups}
    activity = offset_groups.activity(ctx.dest_admin, dest_names.values(), ctx.dest.alias) if groups else {}
    # Each group's offsets whole, all groups at once, on both clusters (two child processes side by
    # side); a group missing from a listing is asked for the link's partitions.
    timeout = offset_groups.OFFSET_TIMEOUT_S
    with ThreadPoolExecutor(2, thread_name_prefix="list-offsets") as pool:
        on_source = (  # not when the source is gone (`final`)
            pool.submit(committed_offsets, ctx.source_conf("admin"), groups, ctx.source.alias, timeout)
            if source
            else None
        )
        dest_offsets = committed_offsets(ctx.dest_conf("admin"), list(dest_names.values()), ctx.dest.alias, timeout)
        source_offsets = on_source.result() if on_source else {}
    checkpoints: list[OffsetCheckpoint] = []
    latencies: list[float] = []
    outcomes = {g: GroupOffsetSync(g, dest_names[g], "synced") for g in groups}
    # A group's offsets name source partitions; looked up here, not by scanning every mirror
    # partition per group (1,000 groups x 10,000 partitions cost seconds of CPU).
    mirrored_at = mirrors_of_sources(partitions)

    deferred: dict[str, DeferredCommit] = {}

    def one(group: str, defer: bool) -> float | None:
        outcome = outcomes[group]
        committed = (source_offsets.get(group), dest_offsets.get(outcome.destination_group))
        return _sync_group(
            ctx,
            result.mode,
            outcome,
            partitions,
            mirrored_at,
            activity.get(outcome.destination_group),
            committed,
            final=final,
            dry_run=dry_run,
            source=source,
            realign=realign,
            deferred=deferred if defer else None,
        )

    # Each group costs a few round trips to both clusters' coordinators: run them side by side.
    with ThreadPoolExecutor(max_workers=GROUP_WORKERS) as pool:
        futures = {g: pool.submit(one, g, True) for g in groups}
        for future in list(futures.values()):
            future.exception()  # wait: every deferred commit is decided
        committed_now = commit_if_unchanged(
            ctx.dest_conf("admin"),
            {dest_names[g]: (d.expected, d.offsets) for g, d in deferred.items()},
            ctx.dest.alias,
            timeout,
        )
        for group, commit in deferred.items():
            if dest_names[group] in committed_now:
                outcomes[group].partitions += commit.rows
                futures[group] = Future()
                futures[group].set_result((time.monotonic() - commit.read_at) * 1000)
            else:  # its offsets moved since they were listed, or the commit was refused: as without a listing
                futures[group] = pool.submit(one, group, False)
    for group in groups:
        outcome = outcomes[group]
        try:
            latency = futures[group].result()
        except MirrorError as exc:
            # Nothing of this group was committed: its rows say where it stays.
            outcome.status = f"error: {exc}"
            outcome.partitions = [
                replace(p, action="error", destination_offset=p.previous_offset) for p in outcome.partitions
            ]
            result.offset_sync_lag += max(
                1, sum(1 for p in outcome.partitions if behind(p.translated_offset, p.destination_offset))
            )
            result.groups.append(outcome)
            continue
        if latency is None and not outcome.partitions:
            continue  # the group never consumed a mirrored topic, or nothing to clamp
        if latency:
            latencies.append(latency)
            result.committed += sum(1 for p in outcome.partitions if p.action in (COMMITTED, CLAMPED, REALIGNED))
        result.offset_sync_lag += sum(
            1
            for p in outcome.partitions
            if p.source_offset is not None
            and p.action != WOULD_COMMIT
            and behind(p.translated_offset, p.destination_offset)
        )
        if not dry_run:
            checkpoints += [
                OffsetCheckpoint(
                    ctx.link.name,
                    group,
                    outcome.destination_group,
                    partitions[(p.mirror_topic, p.partition)].source_topic,
                    p.mirror_topic,
                    p.partition,
                    p.source_offset,
                    p.translated_offset,
                    result.mode,
                    time.time(),
                )
                for p in outcome.partitions
                if p.source_offset is not None
            ]
        result.groups.append(outcome)
    if checkpoints:
        result.checkpoints_written = offset_checkpoints.write(ctx, checkpoints)
    result.checkpoint_latency_ms = round(max(latencies), 3) if latencies else None


def _sync_group(
    ctx: LinkContext,
    mode: str,
    outcome: GroupOffsetSync,
    partitions: dict[Position, MirrorPartition],
    mirrored_at: dict[Position, list[Position]],
    busy: str | None,
    committed: tuple[Offsets | None, Offsets | None],
    *,
    final: bool,
    dry_run: bool,
    source: bool,
    realign: bool = False,
    deferred: dict[str, DeferredCommit] | None = None,
) -> float | None:
    """Translate and commit one group, filling `outcome`; the checkpoint latency in ms when it committed.

    `busy` is why the destination group may not be written (None: it may).
    `committed` holds the group's offsets on the source and on the
    destination, as listed for all groups at once (None: not listed, the
    link's partitions are asked here). With `deferred`, a commit decided from
    that listing is left there, for `commit_if_unchanged` to make.
    """
    read_at = time.monotonic()
    source_offsets, dest_offsets = committed
    landings: dict[Position, tuple[int | None, int]] = (
        _landings(ctx, outcome.source_group, partitions, mirrored_at, mode, source_offsets) if source else {}
    )
    if source and not landings:
        return None
    options = {"final": final, "dry_run": dry_run, "realign": realign}
    if source and dest_offsets is not None:
        # By the destination's offsets as listed before the syncs began, nothing to commit (in sync,
        # kept ahead, or busy): reported from that listing, without a client of its own (about 4 ms
        # a group). A group with something to commit has them read again just before its commit,
        # so that it never moves backwards: by the commit child, which commits only if they are
        # still as listed, or else by a client of its own, which decides again from what it reads.
        rows, to_commit, wanted = decide_commits(landings, partitions, dest_offsets, busy, **options)
        if not wanted:
            outcome.partitions += rows
            _note_busy(outcome, busy)
            return None
        if deferred is not None and to_commit and busy is None:
            expected = {key: dest_offsets.get(key) for key in landings}
            deferred[outcome.source_group] = DeferredCommit(expected, to_commit, rows, read_at)
            return None
    with offset_groups.GroupClient(ctx.dest_conf("reader"), outcome.destination_group, ctx.dest.alias) as dest:
        if source:
            previous = dest.committed(list(landings))
        elif dest_offsets is None:
            previous = dest.committed(list(partitions))
        else:  # fresh, but only for the partitions the group has offsets on
            previous = dest.committed([key for key in dest_offsets if key in partitions])
        if not source:  # where the destination group is, kept within the log
            landings = {
                k: (None, min(o, partitions[k].log_end)) for k, o in previous.items() if o > partitions[k].log_end
            }
        rows, to_commit, _ = decide_commits(landings, partitions, previous, busy, **options)
        outcome.partitions += rows
        _note_busy(outcome, busy)
        if busy is not None or not to_commit:
            return None
        dest.commit(to_commit)
        return (time.monotonic() - read_at) * 1000


def _note_busy(outcome: GroupOffsetSync, busy: str | None) -> None:
    if busy is not None:
        outcome.status = busy if busy.startswith("error:") else f"skipped: {busy}"


def mirrors_of_sources(partitions: dict[Position, MirrorPartition]) -> dict[Position, list[Position]]:
    """{(source topic, partition): the mirror partitions it is copied to} (a source may have several mirrors)."""
    out: dict[Position, list[Position]] = {}
    for key, mp in partitions.items():
        out.setdefault((mp.source_topic, mp.partition), []).append(key)
    return out


def _landings(
    ctx: LinkContext,
    group: str,
    partitions: dict[Position, MirrorPartition],
    mirrored_at: dict[Position, list[Position]],
    mode: str,
    positions: Offsets | None,
) -> dict[Position, tuple[int | None, int]]:
    """(source position, mirror position) per mirror partition the group has a committed offset for
    (`positions`: the group's offsets on the source, when already listed)."""
    if positions is None:
        with offset_groups.GroupClient(ctx.source_conf("reader"), group, ctx.source.alias) as src:
            positions = src.committed(sorted(mirrored_at))
    wanted = {key: position for source, position in positions.items() for key in mirrored_at.get(source, ())}
    mirror_times = (
        mirror_offsets_for_times(ctx, {k: (partitions[k], pos) for k, pos in wanted.items()})
        if mode == TIMESTAMP
        else {}
    )
    return {k: (pos, translate(partitions[k], pos, mode, mirror_times.get(k))) for k, pos in wanted.items()}


def mirror_offsets_for_times(
    ctx: LinkContext, wanted: dict[Position, tuple[MirrorPartition, int]]
) -> dict[Position, int | None]:
    """Timestamp mode (R-OFS-6): the source record's timestamp, asked of the mirror."""
    lookups = {k: (mp, pos) for k, (mp, pos) in wanted.items() if not mp.reached_mirror_end(pos)}
    stamps = offset_groups.record_timestamps(
        ctx.source_conf("reader"),
        {(mp.source_topic, mp.partition): pos for mp, pos in lookups.values()},
        ctx.source.alias,
    )
    times = {k: stamps[(mp.source_topic, mp.partition)] for k, (mp, _pos) in lookups.items()}
    found = offset_groups.offsets_for_times(
        ctx.dest_conf("reader"), {k: ts for k, ts in times.items() if ts is not None}, ctx.dest.alias
    )
    return {k: found.get(k) for k in lookups}
