"""ACL sync of a link in Dagster: the `acl_bindings` asset, its job and schedule (R-ACL-1).

Built only for links with `acl.sync.enable` (see `definitions`):

- Asset `[<link>, "acl_bindings"]` in the link's group, not partitioned (a
  sync covers the whole link, not a mirror). Each materialization is one
  `sync_acls`: its metadata counts what was created and deleted, lists those
  bindings, what was skipped and why, and how many destination bindings are
  not the link's (never touched). Bindings name principals and resources,
  never a secret.
- Job `<link>_acl_sync` and schedule `<link>_acl_sync_schedule` (stopped by
  default, like every schedule), every `acl.sync.ms` as `interval_cron`
  rounds it (the 60000 ms default: every minute). ACL sync never writes
  records of mirrors, so its runs carry a tag of their own and never queue
  behind a long copy run.
"""

# No `from __future__ import annotations`: Dagster reads the asset's annotations as real types.

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    Definitions,
    Failure,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    asset,
    define_asset_job,
)

from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.sync.acl_plan import AclSyncFailed, AclSyncResult
from mirror_pipeline_dagster.config_sync import interval_cron
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine

DEFAULT_ACL_SYNC_MS: int = LinkSettings.model_fields["acl_sync_ms"].default

# Runs of a link's ACL-sync job carry this tag (value: the link).
ACL_SYNC_TAG = "mirror-pipeline/acl-sync"


def acl_bindings_key(names: LinkNames) -> AssetKey:
    return AssetKey([names.group, "acl_bindings"])


def acl_sync_job_name(names: LinkNames) -> str:
    return f"{names.group}_acl_sync"


def acl_sync_schedule_name(names: LinkNames) -> str:
    return f"{names.group}_acl_sync_schedule"


def acl_sync_definitions(link: str, acl_sync_ms: int | None = None) -> Definitions:
    """The asset, job and schedule of one link's ACL sync. Builds objects only: no I/O."""
    names = LinkNames(link)
    job = define_asset_job(
        acl_sync_job_name(names),
        selection=AssetSelection.assets(acl_bindings_key(names)),
        tags={ACL_SYNC_TAG: link},
        description=f"One ACL sync of link '{link}' (R-ACL-1).",
    )
    interval = acl_sync_ms or DEFAULT_ACL_SYNC_MS
    cron = interval_cron(interval)
    schedule = ScheduleDefinition(
        name=acl_sync_schedule_name(names),
        cron_schedule=cron,
        job=job,
        default_status=DefaultScheduleStatus.STOPPED,
        description=f"One ACL sync of link '{link}', on '{cron}' (acl.sync.ms={interval}, rounded up to "
        f"whole minutes).",
    )
    return Definitions(assets=[build_acl_bindings_asset(names)], jobs=[job], schedules=[schedule])


def build_acl_bindings_asset(names: LinkNames) -> AssetsDefinition:
    @asset(
        key=acl_bindings_key(names),
        group_name=names.group,
        kinds={"kafka"},
        description=(
            f"ACL bindings of link '{names.link}''s destination that come from its source (R-ACL-1): "
            "the source's bindings that acl.filters select, with topic names as the link names "
            "mirrors. Bindings the link did not create are never touched."
        ),
    )
    def _acl_bindings(context: AssetExecutionContext, mirror_engine: MirrorEngine) -> MaterializeResult:
        mirror_engine.link(names.link)  # fails clearly if the link left the file since load
        try:
            result = mirror_engine.sync_acls(names.link)
        except AclSyncFailed as exc:
            raise Failure(description=str(exc), metadata=acl_sync_metadata(exc.result)) from exc
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc
        context.log.info(_summary(result))
        return MaterializeResult(metadata=acl_sync_metadata(result))

    return _acl_bindings


def acl_sync_metadata(result: AclSyncResult) -> dict:
    """What one sync did, for the materialization."""
    if not result.enabled:
        return {"enabled": MetadataValue.bool(False), "note": MetadataValue.text(result.message)}
    return {
        "enabled": MetadataValue.bool(True),
        "created": MetadataValue.int(len(result.created)),
        "deleted": MetadataValue.int(len(result.deleted)),
        "forgotten": MetadataValue.int(result.forgotten),
        "in_sync": MetadataValue.bool(result.in_sync),
        "source_bindings": MetadataValue.int(result.source_bindings),
        "selected": MetadataValue.int(result.selected),
        "already_in_place": MetadataValue.int(result.in_sync_bindings),
        "foreign_bindings": MetadataValue.int(result.foreign),
        "created_bindings": MetadataValue.json([dict(b) for b in result.created]),
        "deleted_bindings": MetadataValue.json([dict(b) for b in result.deleted]),
        "skipped": MetadataValue.json([dict(s) for s in result.skipped]),
        "error": MetadataValue.text(result.error or "none"),
        "duration_s": MetadataValue.float(round(result.duration_s, 3)),
        "started_at": MetadataValue.timestamp(result.started_at),
    }


def _summary(result: AclSyncResult) -> str:
    if not result.enabled:
        return result.message
    return (
        f"link {result.link}: {len(result.created)} ACL binding(s) created, {len(result.deleted)} deleted, "
        f"{result.in_sync_bindings} already in place, {result.foreign} not the link's (left alone)"
    )
