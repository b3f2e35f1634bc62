"""What the source answers moves mirrors between ACTIVE, SOURCE_UNAVAILABLE, LINK_FAILED and FAILED (R-LC-5, R-MT-9).

The decisions are pure functions of the mirrors' records and what a probe
found (`reachability_changes`, `source_failure_changes`). Every cycle and the
health job apply them through compare-and-set, deciding from each record as
it is when written, never from the caller's earlier read, so a pause or a
stop that landed meanwhile is kept (R-LC-8). `health_changes` only probes and
decides: the health sensor calls it and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link import read_probe
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    ACTIVE,
    ALLOWED,
    FAILED,
    FOREIGN_WRITE,
    LINK_FAILED,
    SOURCE_UNAVAILABLE,
    WATCHED,
    may_copy,
    transition,
    with_flag,
)

Changes = list[tuple[str, MirrorInfo]]


# --- decisions (no I/O) ---------------------------------------------------------------


def reachability_changes(
    current: Mapping[str, MirrorInfo], names: Iterable[str], source_alias: str, source_id: str | None, why: str = ""
) -> Changes:
    """What the source's answer does to the named mirrors; `source_id` None: it did not answer (`why`).

    - no answer: ACTIVE -> SOURCE_UNAVAILABLE;
    - an answer from a different cluster than the mirror was created from
      (a wiped and recreated source, a wrong address): -> LINK_FAILED, since
      copying from it would corrupt the mirror;
    - the right cluster again: SOURCE_UNAVAILABLE / LINK_FAILED -> ACTIVE.
    """
    changes = []
    for n in sorted(set(names) & set(current)):
        m = current[n]
        if source_id is None:
            if m.state == ACTIVE:
                changes.append((n, transition(m, SOURCE_UNAVAILABLE, why)))
        elif other_cluster(m, source_id):
            if m.state in (ACTIVE, SOURCE_UNAVAILABLE):
                changes.append(
                    (
                        n,
                        transition(
                            m,
                            LINK_FAILED,
                            f"cluster '{source_alias}' answers with cluster id {source_id}, not {m.source_cluster_id} "
                            f"that the mirror was created from",
                        ),
                    )
                )
        elif m.state in (SOURCE_UNAVAILABLE, LINK_FAILED):
            changes.append((n, transition(m, ACTIVE, f"source cluster '{source_alias}' answers again")))
    return changes


def source_failure_changes(
    current: Mapping[str, MirrorInfo],
    names: Iterable[str],
    failures: Mapping[str, str],
    diverged: Mapping[str, str],
    now: float,
    timeout_s: float,
) -> Changes:
    """A source topic gone or unreadable for longer than the retry timeout fails its mirror (R-LC-5).

    A mirror whose state cannot become FAILED (a promote's PENDING_STOPPED) is
    only noted. Foreign records in a mirror flag it: it is copied to no more (R-MT-9).
    """
    changes = []
    for name in sorted(set(names) & set(current)):
        m = current[name]
        if m.state not in WATCHED:
            continue  # paused, stopped or failed meanwhile: nothing of this probe applies
        if name in diverged:
            if FOREIGN_WRITE not in m.flags:
                changes.append((name, replace(with_flag(m, FOREIGN_WRITE), reason=diverged[name])))
        elif name in failures:
            since = m.failing_since or now
            # The lifecycle has no PENDING_STOPPED -> FAILED (`ALLOWED`): a promote's mirror was failing the
            # whole cycle here; it stays noted instead, and its failover ends it.
            if now - since >= timeout_s and FAILED in ALLOWED[m.state]:
                changes.append((name, transition(m, FAILED, failures[name], failing_since=since)))
            elif not m.failing_since:
                changes.append((name, replace(m, failing_since=since, reason=failures[name])))
        elif m.failing_since:
            changes.append((name, replace(m, failing_since=0.0, reason="source topic readable again")))
    return changes


def other_cluster(info: MirrorInfo, source_id: str) -> bool:
    """The source address answers as another cluster than the one the mirror was created from."""
    return bool(info.source_cluster_id) and info.source_cluster_id != source_id


# --- applied by cycles and the health job ------------------------------------------------


def track_source_reachability(ctx: LinkContext, mirrors: list[MirrorInfo]) -> list[MirrorInfo]:
    """Apply what the source answers to `mirrors`; return those that may copy.

    Raises `ClusterUnreachable` (after marking them) when the source does not answer.
    """
    names = {m.mirror_topic for m in mirrors}
    source_id, why = _source_id(ctx)
    alias = ctx.source.alias
    now = ctx.store.update_mirrors(lambda current: reachability_changes(current, names, alias, source_id, why))
    if source_id is None:
        raise ClusterUnreachable(why)
    return [now[n] for n in sorted(names & set(now)) if not other_cluster(now[n], source_id) and may_copy(now[n])]


def track_source_failures(
    ctx: LinkContext, mirrors: list[MirrorInfo], source_failures: dict[str, Any], diverged: dict[str, Any]
) -> None:
    """Apply `source_failure_changes` to `mirrors`, each decided from its record as it is now."""
    names = {m.mirror_topic for m in mirrors}
    now, timeout_s = time.time(), ctx.link.retry_timeout_ms / 1000
    ctx.store.update_mirrors(
        lambda current: source_failure_changes(current, names, source_failures, diverged, now, timeout_s)
    )


def check_health(ctx: LinkContext) -> dict[str, str]:
    """Probe the source without copying and apply what it finds; every mirror's state afterwards."""
    ctx.check_destination()
    watched = [m for m in ctx.registry().values() if m.state in WATCHED]
    try:
        watched = track_source_reachability(ctx, watched)
    except ClusterUnreachable:
        return {m.mirror_topic: m.state for m in ctx.registry().values()}
    track_source_failures(ctx, watched, _topic_failures(ctx, watched), {})
    return {m.mirror_topic: m.state for m in ctx.registry().values()}


# --- read only --------------------------------------------------------------------------


def health_changes(ctx: LinkContext) -> dict[str, dict[str, Any]]:
    """What `check_health` would change now, per mirror: {"before", "after", "reason"}. Writes nothing."""
    ctx.check_destination()
    registry = ctx.registry()
    watched = {n for n, m in registry.items() if m.state in WATCHED}
    source_id, why = _source_id(ctx)
    planned = dict(reachability_changes(registry, watched, ctx.source.alias, source_id, why))
    if source_id is not None:
        after = {**registry, **planned}
        copyable = [after[n] for n in sorted(watched) if not other_cluster(after[n], source_id) and may_copy(after[n])]
        failures = _topic_failures(ctx, copyable)
        planned.update(
            source_failure_changes(
                after, {m.mirror_topic for m in copyable}, failures, {}, time.time(), ctx.link.retry_timeout_ms / 1000
            )
        )
    return {n: {"before": registry[n].state, "after": m.state, "reason": m.reason} for n, m in sorted(planned.items())}


def _source_id(ctx: LinkContext) -> tuple[str | None, str]:
    """The source cluster's id, or None and why it did not answer."""
    try:
        ctx.check_source()
        return kc.cluster_id(ctx.source_admin, ctx.source.alias), ""
    except ClusterUnreachable as exc:
        return None, str(exc)


def _topic_failures(ctx: LinkContext, mirrors: list[MirrorInfo]) -> dict[str, str]:
    """Why each mirror's source topic cannot be read, for those that cannot: gone, not
    visible, or visible but not readable (one READ probe for all the others, see `read_probe`)."""
    failures = {}
    for m in mirrors:
        try:
            if kc.topic_partitions(ctx.source_admin, m.source_topic, ctx.source.alias) is None:
                failures[m.mirror_topic] = (
                    f"source topic '{m.source_topic}' no longer exists on cluster '{ctx.source.alias}'"
                )
        except ClusterUnreachable:
            raise
        except MirrorError as exc:
            failures[m.mirror_topic] = str(exc)
    denied = read_probe.probe(ctx, sorted({m.source_topic for m in mirrors if m.mirror_topic not in failures})).denied
    for m in mirrors:
        if m.source_topic in denied:
            failures[m.mirror_topic] = read_probe.cannot_read(ctx, m.source_topic, denied[m.source_topic])
    return failures
