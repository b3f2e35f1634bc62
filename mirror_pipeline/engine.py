"""The engine's verbs: one function each, taking the config and a link name and
returning result objects that both the CLI and Dagster render.

Nothing here imports Dagster.
"""

from __future__ import annotations

from typing import Sequence

from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.link import health
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_results import OffsetCheckpoint, OffsetSyncResult
from mirror_pipeline.model.results import CycleResult, MirrorDescription, MirrorInfo
from mirror_pipeline.operations import auto_create as auto_create_scan
from mirror_pipeline.operations import lifecycle, mirrors, stopping
from mirror_pipeline.operations.auto_create import AutoCreateResult
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline.replication import cycle
from mirror_pipeline.replication.cycle import CycleFailed, ProgressCallback
from mirror_pipeline.sync import offset_sync
from mirror_pipeline.sync.config_sync import ConfigSyncFailed, link_config_drift, sync_configs

__all__ = [
    "CycleFailed",
    "run_cycle",
    "create_mirror",
    "ensure_mirror",
    "list_mirrors",
    "describe_mirror",
    "mirror_lags",
    "pause",
    "resume",
    "promote",
    "failover",
    "preview_stop",
    "delete_mirrors",
    "check_health",
    "health_changes",
    "sync_configs",
    "link_config_drift",
    "ConfigSyncFailed",
    "sync_offsets",
    "export_offsets",
    "translate_offset",
    "OffsetSyncResult",
    "OffsetCheckpoint",
    "auto_create",
    "AutoCreateResult",
]


def run_cycle(
    config: PipelineConfig,
    link: str,
    spark,
    *,
    mirrors: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> CycleResult:
    """Plan, copy (one Spark job) and record one replication cycle of `link`.

    Raises `CycleFailed` (carrying the partial result) when some mirrors could
    not be copied; the others were.
    """
    return cycle.run_cycle(LinkContext.open(config, link), spark, mirrors, progress)


def create_mirror(
    config: PipelineConfig, link: str, source_topic: str, mirror_topic: str | None = None
) -> MirrorInfo:
    """Create a mirror topic (idempotent for the same source and mirror name)."""
    return ensure_mirror(config, link, source_topic, mirror_topic)[0]


def ensure_mirror(
    config: PipelineConfig, link: str, source_topic: str, mirror_topic: str | None = None
) -> tuple[MirrorInfo, bool]:
    """`create_mirror`, also telling whether this call created it (False: it was there)."""
    return mirrors.create_mirror(LinkContext.open(config, link), source_topic, mirror_topic)


def list_mirrors(config: PipelineConfig, link: str) -> list[MirrorInfo]:
    return mirrors.list_mirrors(LinkContext.open(config, link))


def describe_mirror(config: PipelineConfig, link: str, mirror_topic: str) -> MirrorDescription:
    return mirrors.describe_mirror(LinkContext.open(config, link), mirror_topic)


def mirror_lags(config: PipelineConfig, link: str) -> dict[str, int]:
    """Source records not yet mirrored, per mirror topic of `link` (for the lag sensor)."""
    return mirrors.link_lags(LinkContext.open(config, link))


# --- lifecycle (R-LC) -------------------------------------------------------------


def pause(config: PipelineConfig, link: str, mirrors: Sequence[str] | None = None) -> LifecycleResult:
    """Pause the named mirrors, or every mirror of the link."""
    return lifecycle.pause(LinkContext.open(config, link), _names(mirrors))


def resume(config: PipelineConfig, link: str, mirrors: Sequence[str] | None = None) -> LifecycleResult:
    return lifecycle.resume(LinkContext.open(config, link), _names(mirrors))


def failover(config: PipelineConfig, link: str, mirrors: Sequence[str] | None = None) -> LifecycleResult:
    """Stop at once, whatever the lag and whether the source answers."""
    return stopping.failover(LinkContext.open(config, link), _names(mirrors))


def promote(
    config: PipelineConfig, link: str, spark, mirrors: Sequence[str] | None = None, timeout_s: float = 300.0
) -> LifecycleResult:
    """Finish copying, verify zero lag, then stop (the source must answer)."""
    ctx = LinkContext.open(config, link)

    def copy(names: list[str]):
        return cycle.run_cycle(ctx, spark, names)

    return stopping.promote(ctx, _names(mirrors), copy, timeout_s=timeout_s)


def preview_stop(config: PipelineConfig, link: str, mirrors: Sequence[str] | None = None) -> dict:
    """What failing over now would leave behind, per partition (the dry run of promote and failover)."""
    return stopping.preview_stop(LinkContext.open(config, link), _names(mirrors))


def delete_mirrors(config: PipelineConfig, link: str, mirrors: Sequence[str]) -> LifecycleResult:
    return lifecycle.delete(LinkContext.open(config, link), list(mirrors))


def check_health(config: PipelineConfig, link: str) -> dict[str, str]:
    """Probe the source and move mirrors between ACTIVE, SOURCE_UNAVAILABLE and FAILED."""
    return health.check_health(LinkContext.open(config, link))


def health_changes(config: PipelineConfig, link: str) -> dict[str, dict]:
    """What `check_health` would change now, per mirror ({"before", "after", "reason"}); writes nothing."""
    return health.health_changes(LinkContext.open(config, link))


def _names(mirrors: Sequence[str] | None) -> list[str] | None:
    return list(mirrors) if mirrors else None


# --- auto-create (R-AC) -------------------------------------------------------------


def auto_create(config: PipelineConfig, link: str, dry_run: bool = False) -> AutoCreateResult:
    """Create mirrors for the source topics the link's auto-create filters select (R-AC-1..3).

    Nothing happens when auto-create is off. One failing create does not stop
    the others: `result.errors` names them. `dry_run` creates nothing and lists
    what it would create in `result.to_create`.
    """
    return auto_create_scan.scan(LinkContext.open(config, link), dry_run)


# --- consumer offsets (R-OFS) -------------------------------------------------------


def sync_offsets(config: PipelineConfig, link: str, mirrors: Sequence[str] | None = None) -> OffsetSyncResult:
    """Translate the selected source groups' offsets and commit them on the destination (R-OFS-1..4, 6).

    Only groups with no members on the destination are written, never
    backwards; every translation is also recorded in the checkpoints topic.
    """
    return offset_sync.sync_offsets(LinkContext.open(config, link), _names(mirrors))


def export_offsets(config: PipelineConfig, link: str, groups: Sequence[str] | None = None) -> list[OffsetCheckpoint]:
    """The latest checkpoints of the named groups (source or destination names), or of all (R-OFS-5)."""
    return offset_sync.export_checkpoints(LinkContext.open(config, link), list(groups) if groups else None)


def translate_offset(
    config: PipelineConfig, link: str, topic: str, partition: int, offset: int, mode: str | None = None
) -> dict:
    """Where source position `offset` lands on the mirror; `topic` names the source or the mirror topic.

    `mode` None is the link's `offset.translation.mode`.
    """
    return offset_sync.translate_offset(LinkContext.open(config, link), topic, partition, offset, mode)
