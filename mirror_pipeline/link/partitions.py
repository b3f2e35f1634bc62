"""Partition growth: a mirror gets the partitions its source gained (R-MT-10, R-CS-1).

Its own module because both the planner (every cycle) and config sync (its
"always synced" partition count) apply it; neither is the other's.
"""

from __future__ import annotations

import logging
import time

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import add_partitions
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.results import MirrorInfo

log = logging.getLogger(__name__)


class SourceTopicUnusable(MirrorError):
    """The source topic is gone or cannot be read: the mirror heads for FAILED (R-LC-5)."""


class MirrorTopicNotListedYet(MirrorError):
    """A mirror created moments ago whose topic the destination's metadata does not show yet."""


# How long after its creation a mirror whose topic is not listed is taken for one not listed yet:
# a broker given thousands of new partitions at once listed the last of them tens of seconds later.
NEW_TOPIC_GRACE_S = 120.0


def source_partitions(ctx: LinkContext, info: MirrorInfo) -> int:
    """The source topic's partition count; read-only."""
    try:
        src = kc.topic_partitions(ctx.source_admin, info.source_topic, ctx.source.alias)
    except ClusterUnreachable:
        raise
    except MirrorError as exc:  # e.g. the link's principal lost read permission
        raise SourceTopicUnusable(str(exc)) from None
    if src is None:
        raise SourceTopicUnusable(
            f"source topic '{info.source_topic}' no longer exists on cluster '{ctx.source.alias}'"
        )
    return src


def grow_partitions(ctx: LinkContext, info: MirrorInfo) -> tuple[int, int]:
    """Give the mirror the source's partition count (R-MT-10, R-CS-1): (source partitions, partitions added)."""
    src = source_partitions(ctx, info)
    dst = kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    if dst is None:
        if time.time() - info.created_at < NEW_TOPIC_GRACE_S:
            raise MirrorTopicNotListedYet(
                f"mirror topic '{info.mirror_topic}' is not listed by cluster '{ctx.dest.alias}' yet"
            )
        raise MirrorError(f"mirror topic '{info.mirror_topic}' no longer exists on cluster '{ctx.dest.alias}'")
    if src > dst:
        add_partitions(
            ctx.dest_admin, info.mirror_topic, dst, src, f"mirror '{info.mirror_topic}': adding partitions failed"
        )
        log.info("%s: grew from %d to %d partitions", info.mirror_topic, dst, src)
        return src, src - dst
    return src, 0


def settled_partitions(ctx: LinkContext, infos: list[MirrorInfo]) -> dict[str, int]:
    """Mirror topic -> partition count, for the mirrors whose source has no more partitions than
    they have, told by one metadata request per cluster (a wide link's planning would otherwise
    ask twice per mirror). The others need `grow_partitions`, which also says why a topic is
    missing or unreadable."""
    if not infos:
        return {}
    source = kc.partition_counts(ctx.source_admin, ctx.source.alias)
    dest = kc.partition_counts(ctx.dest_admin, ctx.dest.alias)
    return {
        m.mirror_topic: dest[m.mirror_topic]
        for m in infos
        if m.source_topic in source and m.mirror_topic in dest and source[m.source_topic] == dest[m.mirror_topic]
    }
