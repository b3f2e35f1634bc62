"""What the source answers moves mirrors between ACTIVE, SOURCE_UNAVAILABLE, LINK_FAILED and FAILED (R-LC-5, R-MT-9).

Every cycle and the health sensor call these; every change is decided from
the mirror's record as it is when written (compare-and-set), never from the
caller's earlier read, so a pause or a stop that landed meanwhile is kept.
"""

from __future__ import annotations

import time
from dataclasses import replace

from mirror_pipeline import kafka_clients as kc
from mirror_pipeline.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.link_context import LinkContext
from mirror_pipeline.results import MirrorInfo
from mirror_pipeline.states import (
    ACTIVE, FAILED, FOREIGN_WRITE, LINK_FAILED, SOURCE_UNAVAILABLE, WATCHED, may_copy, transition, with_flag,
)


def track_source_reachability(ctx: LinkContext, mirrors: list[MirrorInfo]) -> list[MirrorInfo]:
    """Move watched mirrors by what the source cluster answers; return those that may copy (R-LC-5).

    - no answer: ACTIVE -> SOURCE_UNAVAILABLE (and ClusterUnreachable is raised);
    - an answer from a different cluster than the mirror was created from
      (a wiped and recreated source, a wrong address): -> LINK_FAILED, since
      copying from it would corrupt the mirror;
    - the right cluster again: SOURCE_UNAVAILABLE / LINK_FAILED -> ACTIVE.
    """
    names = {m.mirror_topic for m in mirrors}
    try:
        ctx.check_source()
        source_id = kc.cluster_id(ctx.source_admin, ctx.source.alias)
    except ClusterUnreachable as exc:
        why = str(exc)
        ctx.store.update_mirrors(lambda current: [
            (n, transition(m, SOURCE_UNAVAILABLE, why)) for n, m in current.items() if n in names and m.state == ACTIVE
        ])
        raise

    def decide(current: dict[str, MirrorInfo]):
        # Decided from the records as they are now, never from the cycle's
        # earlier read: a pause or a stop that landed since is kept (R-LC-8).
        for n in sorted(names & set(current)):
            m = current[n]
            if _other_cluster(m, source_id):
                if m.state in (ACTIVE, SOURCE_UNAVAILABLE):
                    yield n, transition(
                        m, LINK_FAILED,
                        f"cluster '{ctx.source.alias}' answers with cluster id {source_id}, not {m.source_cluster_id} "
                        f"that the mirror was created from",
                    )
            elif m.state in (SOURCE_UNAVAILABLE, LINK_FAILED):
                yield n, transition(m, ACTIVE, f"source cluster '{ctx.source.alias}' answers again")

    now = ctx.store.update_mirrors(lambda current: list(decide(current)))
    return [now[n] for n in sorted(names & set(now)) if not _other_cluster(now[n], source_id) and may_copy(now[n])]


def _other_cluster(info: MirrorInfo, source_id: str) -> bool:
    """The source address answers as another cluster than the one the mirror was created from."""
    return bool(info.source_cluster_id) and info.source_cluster_id != source_id


def track_source_failures(ctx: LinkContext, mirrors: list[MirrorInfo], source_failures: dict, diverged: dict) -> None:
    """A source topic gone or unreadable for longer than the retry timeout fails its mirror (R-LC-5).

    Foreign records in a mirror flag it: it is copied to no more (R-MT-9).
    Every change is decided from the mirror's record as it is now, so a state
    another verb set meanwhile is never undone (R-LC-8).
    """
    now = time.time()
    timeout_s = ctx.link.retry_timeout_ms / 1000
    names = {m.mirror_topic for m in mirrors}

    def decide(current: dict[str, MirrorInfo]):
        for name in sorted(names & set(current)):
            m = current[name]
            if m.state not in WATCHED:
                continue  # paused, stopped or failed meanwhile: nothing of this cycle applies
            if name in diverged:
                if FOREIGN_WRITE not in m.flags:
                    yield name, replace(with_flag(m, FOREIGN_WRITE), reason=diverged[name])
            elif name in source_failures:
                since = m.failing_since or now
                if now - since >= timeout_s:
                    yield name, transition(m, FAILED, source_failures[name], failing_since=since)
                elif not m.failing_since:
                    yield name, replace(m, failing_since=since, reason=source_failures[name])
            elif m.failing_since:
                yield name, replace(m, failing_since=0.0, reason="source topic readable again")

    ctx.store.update_mirrors(lambda current: list(decide(current)))


def check_health(ctx: LinkContext) -> dict[str, str]:
    """Probe the source without copying: reachability and each source topic (R-LC-5).

    Moves mirrors between ACTIVE, SOURCE_UNAVAILABLE and FAILED exactly as a
    cycle would, and returns every mirror's state afterwards.
    """
    ctx.check_destination()
    watched = [m for m in ctx.registry().values() if m.state in WATCHED]
    try:
        watched = track_source_reachability(ctx, watched)
    except ClusterUnreachable:
        return {m.mirror_topic: m.state for m in ctx.registry().values()}
    failures = {}
    for m in watched:
        try:
            if kc.topic_partitions(ctx.source_admin, m.source_topic, ctx.source.alias) is None:
                failures[m.mirror_topic] = f"source topic '{m.source_topic}' no longer exists on cluster '{ctx.source.alias}'"
        except ClusterUnreachable:
            raise
        except MirrorError as exc:
            failures[m.mirror_topic] = str(exc)
    track_source_failures(ctx, watched, failures, {})
    return {m.mirror_topic: m.state for m in ctx.registry().values()}
