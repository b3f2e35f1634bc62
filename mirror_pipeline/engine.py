"""The engine's verbs: one function each, taking the config and a link name and
returning result objects that both the CLI and Dagster render.

Nothing here imports Dagster.
"""

from __future__ import annotations

from typing import Sequence

from mirror_pipeline import cycle, mirrors
from mirror_pipeline.config import PipelineConfig
from mirror_pipeline.cycle import CycleFailed, ProgressCallback
from mirror_pipeline.link_context import LinkContext
from mirror_pipeline.results import CycleResult, MirrorDescription, MirrorInfo

__all__ = [
    "CycleFailed",
    "run_cycle",
    "create_mirror",
    "list_mirrors",
    "describe_mirror",
    "mirror_lags",
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
    info, _created = mirrors.create_mirror(LinkContext.open(config, link), source_topic, mirror_topic)
    return info


def list_mirrors(config: PipelineConfig, link: str) -> list[MirrorInfo]:
    return mirrors.list_mirrors(LinkContext.open(config, link))


def describe_mirror(config: PipelineConfig, link: str, mirror_topic: str) -> MirrorDescription:
    return mirrors.describe_mirror(LinkContext.open(config, link), mirror_topic)


def mirror_lags(config: PipelineConfig, link: str) -> dict[str, int]:
    """Source records not yet mirrored, per mirror topic of `link` (for the lag sensor)."""
    ctx = LinkContext.open(config, link)
    return {d.mirror.mirror_topic: d.lag for d in (mirrors.describe_mirror(ctx, m.mirror_topic) for m in mirrors.list_mirrors(ctx))}
