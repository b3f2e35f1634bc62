"""The checkpoints topic on the destination: every translated group position (R-OFS-5).

A compacted single-partition topic of the link's own (unless its state predates
per-link topics, see `LinkContext.registry`), keyed
`<link>/<source group>/<mirror topic>/<partition>`, so the latest translation
of each group partition survives compaction. `offsets export` reads it: the
translation stays available even for groups the sync could not commit
(active on the destination) and after the link's source is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import READ_ONLY_PROBE_S, LinkContext
from mirror_pipeline.link.state_store import ensure_internal_topics
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline.model.offset_results import OffsetCheckpoint


def ensure_topic(ctx: LinkContext) -> str:
    """The checkpoints topic's name, creating it when missing (like the state topics)."""
    topic = ctx.checkpoints_topic
    ensure_internal_topics(ctx.dest_admin, ctx.dest.alias, [topic], "or set mirror.checkpoints.topic")
    ctx.store.settle_cleaning([topic])
    return topic


def write(ctx: LinkContext, checkpoints: Iterable[OffsetCheckpoint]) -> int:
    """Append checkpoints; returns how many were written."""
    checkpoints = list(checkpoints)
    if not checkpoints:
        return 0
    topic = ensure_topic(ctx)
    kc.produce_all(
        ctx.dest_conf("state-writer"),
        topic,
        [(cp.key.encode(), cp.to_json()) for cp in checkpoints],
        f"cluster '{ctx.dest.alias}': writing checkpoints to '{topic}' failed",
    )
    return len(checkpoints)


def read_latest(ctx: LinkContext) -> list[OffsetCheckpoint]:
    """The newest checkpoint of every group partition of this link (none when the topic is missing)."""
    # Read incrementally, like the registry: a process reads only what is new since its last read.
    state = ctx.store.read_latest(ctx.checkpoints_topic)
    if state is None:
        return []
    prefix = f"{ctx.link.name}/"
    found = [OffsetCheckpoint.from_json(ctx.link.name, v) for k, v in state[0].items() if k.startswith(prefix)]
    return sorted(found, key=lambda c: (c.source_group, c.mirror_topic, c.partition))


def export_checkpoints(ctx: LinkContext, groups: Sequence[str] | None = None) -> list[OffsetCheckpoint]:
    """The latest checkpoints, of the named groups (source or destination names) or of all."""
    ctx.check_destination(READ_ONLY_PROBE_S)
    found = read_latest(ctx)
    if not groups:
        return found
    known = {c.source_group for c in found} | {c.destination_group for c in found}
    unknown = [g for g in groups if g not in known]
    if unknown:
        have = ", ".join(sorted({c.source_group for c in found})) or "none"
        raise ConfigError(
            f"no checkpoints for group {', '.join(repr(g) for g in unknown)} on link '{ctx.link.name}' "
            f"(groups with checkpoints: {have}); run `mirror-pipeline offsets sync --link {ctx.link.name}` first"
        )
    wanted = set(groups)
    return [c for c in found if c.source_group in wanted or c.destination_group in wanted]
