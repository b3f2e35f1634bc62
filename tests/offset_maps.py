"""Writing a link's offset map as a copy task does, for tests that set up what a task left behind."""

from __future__ import annotations

from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import Segment


def announce(ctx: LinkContext, topic: str, segment: Segment, partition: int = 0) -> None:
    """A writer's segment for a mirror partition, as a copy task writes it before producing the
    chunk (its writer slot fenced first, so a task still writing to it is cut off)."""
    writer = ctx.segment_writer(topic, partition)
    try:
        writer.fence()
        writer.write(puts=[segment])
    finally:
        writer.close()
