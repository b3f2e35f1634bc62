"""Where one source offset lands on its mirror (`offsets translate`), read as a sync reads it (R-OFS-6)."""

from __future__ import annotations

from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.sync.offset_sync import mirror_offsets_for_times, mirror_partitions
from mirror_pipeline.sync.offset_translation import MODES, TIMESTAMP, translate


def translate_offset(ctx: LinkContext, topic: str, partition: int, offset: int, mode: str | None = None) -> dict:
    """Where source position `offset` of `topic` (the source or the mirror topic's name) lands on the mirror."""
    mode = mode or ctx.link.offset_translation_mode
    if mode not in MODES:
        raise ConfigError(f"unknown offset translation mode '{mode}' (expected {' or '.join(MODES)})")
    if offset < 0:
        raise ConfigError(f"offset must be 0 or more, got {offset}")
    ctx.check_destination()
    info = _mirror_for(ctx, topic)
    mp = mirror_partitions(ctx, [info]).get((info.mirror_topic, partition))
    if mp is None:
        raise ConfigError(f"mirror '{info.mirror_topic}' has no partition {partition}")
    lookup = {}
    if mode == TIMESTAMP:
        ctx.check_source()
        lookup = mirror_offsets_for_times(ctx, {(info.mirror_topic, partition): (mp, offset)})
    translated = translate(mp, offset, mode, lookup.get((info.mirror_topic, partition)))
    return {
        "link": ctx.link.name,
        "mode": mode,
        "source_topic": info.source_topic,
        "mirror_topic": info.mirror_topic,
        "partition": partition,
        "source_offset": offset,
        "translated_offset": translated,
        "mirror_log_start": mp.log_start,
        "mirror_log_end": mp.log_end,
        "mirrored_until": mp.mirrored_until,
        "beyond_mirror": mp.is_ahead(offset),
        "mirror_state": info.state,
    }


def _mirror_for(ctx: LinkContext, topic: str) -> MirrorInfo:
    registry = ctx.registry()
    if topic in registry:
        return registry[topic]
    matches = [m for m in registry.values() if m.source_topic == topic]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(sorted(m.mirror_topic for m in matches))
        raise ConfigError(
            f"source topic '{topic}' has several mirrors on link '{ctx.link.name}' ({names}): name the mirror topic"
        )
    known = ", ".join(sorted(registry)) or "none"
    raise ConfigError(
        f"'{topic}' is neither a mirror topic nor a mirrored source topic of link '{ctx.link.name}' (mirrors: {known})"
    )
