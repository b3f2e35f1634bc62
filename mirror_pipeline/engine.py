"""The engine's verbs: one function each, taking the config and a link name and
returning result objects that both the CLI and Dagster render.

Nothing here imports Dagster.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.link import health
from mirror_pipeline.link import required_acls as least_privilege
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_results import OffsetCheckpoint, OffsetSyncResult
from mirror_pipeline.model.results import CycleResult, MirrorDescription, MirrorInfo
from mirror_pipeline.operations import all_or_nothing, divergence, heartbeats, lifecycle, mirrors, stopping
from mirror_pipeline.operations import auto_create as auto_create_scan
from mirror_pipeline.operations import follow as following
from mirror_pipeline.operations import reverse as reversing
from mirror_pipeline.operations.all_or_nothing import Incomplete
from mirror_pipeline.operations.auto_create import AutoCreateResult
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline.replication import cycle
from mirror_pipeline.replication.cycle import CycleFailed, ProgressCallback
from mirror_pipeline.sync import acl_sync, offset_checkpoints, offset_lookup, offset_sync
from mirror_pipeline.sync.acl_plan import AclSyncFailed, AclSyncResult
from mirror_pipeline.sync.config_sync import ConfigSyncFailed, link_config_drift, sync_configs
from mirror_pipeline.verification import planner as verification
from mirror_pipeline.verification.planner import VerifyOptions
from mirror_pipeline.verification.results import VerifyResult

__all__ = [
    "CycleFailed",
    "run_cycle",
    "follow",
    "create_mirror",
    "ensure_mirror",
    "list_mirrors",
    "describe_mirror",
    "mirror_lags",
    "mirror_overview",
    "check_lifecycle",
    "Incomplete",
    "pause",
    "resume",
    "promote",
    "failover",
    "preview_stop",
    "delete_mirrors",
    "reverse",
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
    "verify_mirrors",
    "VerifyResult",
    "sync_acls",
    "acl_sync_status",
    "AclSyncResult",
    "AclSyncFailed",
    "required_acls",
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
    ctx = LinkContext.open(config, link)
    if ctx.link.heartbeats_enabled:
        # Before the plan, so that this cycle copies it (when it covers the heartbeats mirror).
        heartbeats.HeartbeatEmitter(ctx).beat()
    return cycle.run_cycle(ctx, spark, mirrors, progress)


def heartbeat_status(config: PipelineConfig, link: str) -> heartbeats.HeartbeatStatus:
    """What the newest heartbeat on the link's heartbeats mirror says (R-OBS-3); reads the destination only."""
    return heartbeats.heartbeat_status(LinkContext.open(config, link))


def follow(
    config: PipelineConfig,
    link: str,
    spark,
    report: following.FollowReport,
    stop: threading.Event,
    *,
    epoch_s: float = following.DEFAULT_EPOCH_S,
    mirrors: Sequence[str] | None = None,
    scanned: bool = False,
) -> int:
    """Keep `link`'s mirrors copying as records arrive, epoch after epoch, until `stop` is set
    (follow mode, R-EX-4; see `operations.follow`). Returns the number of epochs run.
    `scanned`: auto-create scanned just now, the first epoch need not."""
    return following.follow(lambda: LinkContext.open(config, link), spark, report, stop, epoch_s, mirrors, scanned)


def create_mirror(config: PipelineConfig, link: str, source_topic: str, mirror_topic: str | None = None) -> MirrorInfo:
    """Create a mirror topic (idempotent for the same source and mirror name)."""
    return ensure_mirror(config, link, source_topic, mirror_topic)[0]


def ensure_mirror(
    config: PipelineConfig, link: str, source_topic: str, mirror_topic: str | None = None
) -> tuple[MirrorInfo, bool]:
    """`create_mirror`, also telling whether this call created it (False: it was there)."""
    return mirrors.create_mirror(LinkContext.open(config, link), source_topic, mirror_topic)


def list_mirrors(config: PipelineConfig, link: str) -> list[MirrorInfo]:
    return mirrors.list_mirrors(LinkContext.open(config, link))


def link_mirrors(config: PipelineConfig, link: str) -> tuple[list[MirrorInfo], int]:
    """`list_mirrors`, and the writer slot count the link works under (its record's while it has
    live mirrors, which may differ from an unset setting's default)."""
    ctx = LinkContext.open(config, link)
    return mirrors.list_mirrors(ctx), ctx.writer_slots


def describe_mirror(config: PipelineConfig, link: str, mirror_topic: str) -> MirrorDescription:
    return mirrors.describe_mirror(LinkContext.open(config, link), mirror_topic)


def mirror_lags(config: PipelineConfig, link: str) -> dict[str, int]:
    """Source records not yet mirrored, per mirror topic of `link` (for the lag check)."""
    return mirrors.link_lags(LinkContext.open(config, link))


def mirror_overview(
    config: PipelineConfig, link: str, measured_lags: Mapping[str, int] | None = None
) -> tuple[list[MirrorInfo], dict[str, int]]:
    """Every mirror of `link` and the lag of each not STOPPED, read together (for the lag sensor, the metrics and
    the copy asset's checks); `measured_lags` (a cycle's, `CycleResult.measured_lags`) are taken, not read again."""
    return mirrors.link_overview(LinkContext.open(config, link), measured_lags)


# --- lifecycle (R-LC) -------------------------------------------------------------


def check_lifecycle(
    config: PipelineConfig, link: str, verb: str, known: Sequence[MirrorInfo], mirrors: Sequence[str] | None
) -> list[MirrorInfo]:
    """The named mirrors (None: all) once `verb` can take every one; else `MirrorRefused` naming each
    that cannot and why. Reads nothing: `known` is the link's mirrors as `list_mirrors` answered.

    The verbs check the same themselves; the CLI and the Dagster jobs ask
    first, so that a refused promote or failover launches nothing.
    """
    registry = {m.mirror_topic: m for m in known}
    return all_or_nothing.check_request(verb, config.link(link), registry, None if mirrors is None else list(mirrors))


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


def reverse(
    config: PipelineConfig,
    link: str,
    mirrors: Sequence[str],
    reverse_link: str | None = None,
    start: bool = True,
    dry_run: bool = False,
    realign_groups: bool = False,
) -> LifecycleResult:
    """Failback (R-LC-7): the old sources of stopped mirrors become mirrors of them on the reverse link.

    `reverse_link` None: the one link the config declares from `link`'s
    destination to its source. `start` False leaves the new mirrors PAUSED.
    Records the old source holds that the new mirror would not are saved to
    `<topic>.diverged` first. `dry_run` changes nothing and says per partition
    what would happen. Consumer groups are translated back under offset sync's
    rules; `realign_groups` also moves groups backwards to their translation
    (their offsets on the old source are stale once the applications moved).
    """
    back = reversing.reverse_link_for(config, link, reverse_link)
    return reversing.reverse(
        LinkContext.open(config, link),
        LinkContext.open(config, back),
        list(mirrors),
        start=start,
        dry_run=dry_run,
        realign_groups=realign_groups,
    )


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
    return offset_checkpoints.export_checkpoints(LinkContext.open(config, link), list(groups) if groups else None)


def translate_offset(
    config: PipelineConfig, link: str, topic: str, partition: int, offset: int, mode: str | None = None
) -> dict:
    """Where source position `offset` lands on the mirror; `topic` names the source or the mirror topic.

    `mode` None is the link's `offset.translation.mode`.
    """
    return offset_lookup.translate_offset(LinkContext.open(config, link), topic, partition, offset, mode)


# --- ACL sync (R-ACL-1) -------------------------------------------------------------


def sync_acls(config: PipelineConfig, link: str, dry_run: bool = False) -> AclSyncResult:
    """Copy the source's ACL bindings that `acl.filters` select to the destination, topic
    names mapped by the link's naming, and delete the ones this link created that the
    source no longer has (R-ACL-1).

    Nothing happens when `acl.sync.enable` is false (the result says so). A
    cluster without an authorizer is refused. Bindings the link did not create
    are never touched. `dry_run` changes nothing and lists what would be created
    and deleted. Raises `AclSyncFailed` (carrying the result) when it stopped part-way.
    """
    return acl_sync.sync_acls(LinkContext.open(config, link), dry_run)


def acl_sync_status(config: PipelineConfig, link: str) -> dict:
    """The link's last recorded ACL sync: `at`, `created`, `deleted`, `error` ({} before the first)."""
    return acl_sync.acl_sync_status(LinkContext.open(config, link))


# --- verify (R-REL-4) -------------------------------------------------------------


def verify_mirrors(
    config: PipelineConfig,
    link: str,
    spark,
    mirrors: Sequence[str] | None = None,
    sample: float = 1.0,
    from_offset: int | None = None,
    until_offset: int | None = None,
    max_bytes_per_second: int | None = None,
    seed: str = "",
) -> VerifyResult:
    """Compare mirrors with their sources over their common range, in one Spark job.

    Per partition and checksum range, both sides' checksums of (offsets, key,
    value, headers, timestamp) are compared; a difference is narrowed to the
    first differing source offset. `sample` compares that fraction of the
    ranges, spread over each partition (`seed` moves the pick); offsets are
    source offsets, `until_offset` excluded; `max_bytes_per_second` caps what
    all tasks read together. Reads only; any mirror state can be verified.
    """
    options = VerifyOptions(sample, from_offset, until_offset, max_bytes_per_second, seed)
    return verification.verify(LinkContext.open(config, link), spark, _names(mirrors), options)


# --- security (R-ACL-3) -------------------------------------------------------------


def required_acls(config: PipelineConfig, link: str, topics: Sequence[str], groups: Sequence[str] = ()) -> dict:
    """The least privilege of the link's principals, to mirror `topics` and sync `groups`.

    Patterns: `orders` a name, `pay.*` a prefix, `*` every name. Returns
    {"source": [grant, ...], "destination": [grant, ...]}, each grant a resource
    pattern, its operations and why. Reads no cluster.
    """
    ctx = LinkContext.open(config, link)
    dest_groups = [ctx.link.prefix + g if ctx.link.group_prefix_enable and ctx.link.prefix else g for g in groups]
    # The reverse of a declared link: `reverse` may rebuild topics there, saving what it drops first.
    reversible = any(
        (other.source, other.destination) == (ctx.link.destination, ctx.link.source) for other in config.links.values()
    )
    return least_privilege.link_acls(
        link,
        ctx.naming,
        list(topics),
        list(groups),
        dest_groups,
        acl_sync=ctx.link.acl_sync_enable,
        heartbeats=ctx.link.heartbeats_enabled,
        saved_suffix=divergence.SUFFIX if reversible else None,
    )
