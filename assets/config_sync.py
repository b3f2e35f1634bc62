"""Config sync of a link in Dagster: the `mirror_config` asset, its check, job and schedule (R-CS).

- Asset `[<link>, "mirror_config"]`, partitioned by mirror topic exactly like
  `mirror_data` (same dynamic partitions), single-run backfill: one run syncs
  the configs of every mirror it covers with one call to the engine. Each
  mirror's materialization says what changed, what is an operator override,
  what is held back while it is a mirror, whether it is in sync and its
  config-sync lag.
- Asset check `config_in_sync` on it (severity WARN, non-blocking): runs with
  the asset in the same run and re-reads the drift of the run's mirrors; it
  fails while any of them still differs from its source.
- Job `<link>_config_sync` and schedule `<link>_config_sync_schedule`
  (stopped by default), one run over all the link's ACTIVE and PAUSED mirrors.
  Its interval is `topic.config.sync.ms`, rounded UP to whole minutes (a cron
  cannot go below one minute: the 5000 ms default runs every minute), then
  DOWN to the nearest step that cron repeats evenly (1-6, 10, 12, 15, 20, 30
  minutes; 1-4, 6, 8, 12, 24 hours) -- e.g. 7 min runs every 6 minutes -- so a
  source change never waits longer than the configured interval (R-CS-4), the
  one-minute floor aside.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
from collections.abc import Callable

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    BackfillPolicy,
    DefaultScheduleStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    asset,
    asset_check,
    define_asset_job,
    schedule,
)

from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.states import CONFIG_SYNCED_STATES as SYNCED_STATES
from mirror_pipeline.model.text import some_of
from mirror_pipeline.sync.config_sync import (
    ConfigSyncFailed,
    ConfigSyncResult,
    MirrorConfigSync,
)
from mirror_pipeline_dagster.mirror_data import built_quietly, mirror_partitions
from mirror_pipeline_dagster.naming import CONFIG_IN_SYNC_CHECK, LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import existing_mirrors, one_run_over_mirrors

DEFAULT_CONFIG_SYNC_MS: int = LinkSettings.model_fields["config_sync_ms"].default

# Steps a cron field repeats evenly: minutes within an hour, hours within a day.
_MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
_HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12, 24)


def interval_cron(interval_ms: int) -> str:
    """The cron schedule for a sync interval in ms (`topic.config.sync.ms`,
    `consumer.offset.sync.ms`): rounded up to whole minutes, then down to a step
    cron repeats evenly (see the module docstring)."""
    minutes = max(1, -(-int(interval_ms) // 60_000))  # whole minutes, rounded up: cron's floor is one minute
    if minutes < 60:
        step = max(s for s in _MINUTE_STEPS if s <= minutes)
        return "* * * * *" if step == 1 else f"*/{step} * * * *"
    step = max(s for s in _HOUR_STEPS if s <= minutes // 60)
    if step == 24:
        return "0 0 * * *"
    return "0 * * * *" if step == 1 else f"0 */{step} * * *"


config_sync_cron = interval_cron  # the config-sync schedule's name for it


# --- the asset ----------------------------------------------------------------------------


def build_mirror_config_asset(names: LinkNames) -> AssetsDefinition:
    return built_quietly(_mirror_config_asset, names)


def _mirror_config_asset(names: LinkNames) -> AssetsDefinition:
    @asset(
        key=names.mirror_config_key,
        group_name=names.group,
        partitions_def=mirror_partitions(names),
        backfill_policy=BackfillPolicy.single_run(),
        kinds={"kafka"},
        description=(
            f"Topic configs of link '{names.link}''s mirrors, synced from their source topics "
            "(R-CS): always-synced configs follow the source, overridable ones unless overridden on "
            "the mirror, the rest is never touched; LogAppendTime and the timestamp bounds are held "
            "back while the topic is a mirror. One partition per mirror topic."
        ),
    )
    def _mirror_config(context: AssetExecutionContext, mirror_engine: MirrorEngine):
        # A generator, so that the mirrors that did sync are recorded even when the step fails.
        mirror_engine.link(names.link)  # fails clearly if the link left the file since load
        mirrors = existing_mirrors(context, mirror_engine, names)
        try:
            result = mirror_engine.sync_configs(names.link, mirrors=mirrors)
        except ConfigSyncFailed as exc:
            for mirror, synced in sorted(exc.result.mirrors.items()):
                if synced.error is None:
                    yield AssetMaterialization(
                        asset_key=names.mirror_config_key, partition=mirror, metadata=mirror_config_metadata(synced)
                    )
            raise Failure(description=str(exc), metadata=sync_metadata(exc.result)) from exc
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc

        for mirror in context.partition_keys:
            context.add_asset_metadata(
                mirror_config_metadata(result.mirrors.get(mirror), result.skipped.get(mirror)),
                partition_key=mirror,
            )
        context.log.info(
            f"link {names.link}: {result.configs_changed} config(s) changed on "
            f"{sum(1 for r in result.mirrors.values() if r.changed)} of {len(result.mirrors)} mirror(s)"
            + (
                f"; skipped {some_of([f'{m} ({s})' for m, s in sorted(result.skipped.items())])}"
                if result.skipped
                else ""
            )
        )
        yield MaterializeResult(metadata=sync_metadata(result))

    return _mirror_config


def mirror_config_metadata(synced: MirrorConfigSync | None, skipped_state: str | None = None) -> dict:
    """One mirror's config sync: changed, overridden, held back, in sync, lag."""
    if synced is None:
        why = f"the mirror is {skipped_state}" if skipped_state else "the mirror no longer exists"
        return {
            "in_sync": MetadataValue.bool(False),
            "note": MetadataValue.text(f"configs not synced: {why} (only ACTIVE and PAUSED mirrors are synced)"),
        }
    return {
        "source_topic": MetadataValue.text(synced.source_topic),
        "state": MetadataValue.text(synced.state),
        "changed": MetadataValue.json(
            {k: {"old": old, "new": new} for k, (old, new) in sorted(synced.changed.items())}
        ),
        "overridden": MetadataValue.json(dict(sorted(synced.overridden.items()))),
        "held_back": MetadataValue.json(dict(sorted(synced.held_back.items()))),
        "in_sync": MetadataValue.bool(synced.in_sync),
        "config_sync_lag_ms": MetadataValue.int(synced.config_sync_lag_ms),
        "source_partitions": MetadataValue.int(synced.source_partitions or 0),
        "mirror_partitions": MetadataValue.int(synced.mirror_partitions or 0),
    }


def sync_metadata(result: ConfigSyncResult) -> dict:
    """Totals of the run; recorded on every mirror's materialization of it."""
    return {
        "sync_configs_changed": MetadataValue.int(result.configs_changed),
        "sync_mirrors": MetadataValue.int(len(result.mirrors)),
        "sync_failed": MetadataValue.json(result.failed),
        "sync_duration_s": MetadataValue.float(round(result.duration_s, 3)),
        "sync_started_at": MetadataValue.timestamp(result.started_at),
    }


# --- the check ----------------------------------------------------------------------------


def build_config_in_sync_check(names: LinkNames) -> AssetChecksDefinition:
    @asset_check(
        asset=names.mirror_config_key,
        name=CONFIG_IN_SYNC_CHECK,
        description=(
            f"Every mirror of link '{names.link}' the run covered (all its ACTIVE and PAUSED mirrors "
            "outside a partitioned run) has its source's configs, operator overrides and held-back "
            "settings aside. Warns while any differs."
        ),
    )
    def _config_in_sync(context: AssetCheckExecutionContext, mirror_engine: MirrorEngine) -> AssetCheckResult:
        mirrors = _run_partition_keys(context)
        try:
            drifts = mirror_engine.link_config_drift(names.link, mirrors)
        except MirrorError as exc:
            return AssetCheckResult(
                passed=False,
                severity=AssetCheckSeverity.WARN,
                description=f"drift of link {names.link} could not be read: {exc}",
            )
        return config_in_sync_result(drifts)

    return _config_in_sync


def config_in_sync_result(drifts: dict[str, dict]) -> AssetCheckResult:
    """The `config_in_sync` outcome from each mirror's drift (`engine.link_config_drift`); the CLI's
    config sync records the same outcome."""
    drifted = {m: d for m, d in sorted(drifts.items()) if not d["in_sync"]}
    lag = max((d["config_sync_lag_ms"] for d in drifts.values()), default=0)
    return AssetCheckResult(
        check_name=CONFIG_IN_SYNC_CHECK,
        passed=not drifted,
        severity=AssetCheckSeverity.WARN,
        description=(
            f"{len(drifted)} of {len(drifts)} mirror(s) differ from their source: {some_of(list(drifted))}"
            if drifted
            else f"{len(drifts)} mirror(s) in sync with their source"
        ),
        metadata={
            "mirrors_checked": MetadataValue.int(len(drifts)),
            "mirrors_with_drift": MetadataValue.json(sorted(drifted)),
            "drift": MetadataValue.json(
                {m: d.get("drift", {}) or {"error": d.get("error")} for m, d in drifted.items()}
            ),
            "max_config_sync_lag_ms": MetadataValue.int(lag),
        },
    )


def _run_partition_keys(context: AssetCheckExecutionContext) -> list[str] | None:
    """The mirrors of the run the check runs in; None (every mirror) outside a partitioned run."""
    try:
        if context.has_partition_key_range or context.has_partition_key:
            return list(context.partition_keys)
    except Exception:  # noqa: BLE001 - a context without partitions: check them all
        return None
    return None


# --- job and schedule ---------------------------------------------------------------------


def build_config_sync_job(names: LinkNames):
    """The asset and its check, over the mirrors a run covers, in one run."""
    return define_asset_job(
        names.config_sync_job,
        selection=AssetSelection.assets(names.mirror_config_key),
        tags=names.config_sync_tags,
        description=f"One config sync of link '{names.link}' over the mirrors the run covers (R-CS).",
    )


def build_config_sync_schedule(names: LinkNames, job, config_sync_ms: int | None = None) -> ScheduleDefinition:
    """`job` is the link's config-sync job; the interval is `topic.config.sync.ms` (default 5000 ms)."""
    return build_sync_schedule(
        names,
        job,
        name=names.config_sync_schedule,
        setting="topic.config.sync.ms",
        interval_ms=config_sync_ms or DEFAULT_CONFIG_SYNC_MS,
        what=f"One config-sync run of link '{names.link}' over its ACTIVE and PAUSED mirrors",
        run_key_prefix=f"{names.link}:config-sync",
        tags=names.config_sync_tags,
    )


def build_sync_schedule(
    names: LinkNames,
    job,
    *,
    name: str,
    setting: str,
    interval_ms: int,
    what: str,
    run_key_prefix: str,
    tags: dict,
    skip_reason: Callable[[PipelineConfig], str | None] | None = None,
) -> ScheduleDefinition:
    """A link's sync schedule (config sync, offset sync): one run of `job` over the link's
    ACTIVE and PAUSED mirrors every `interval_ms` (the link's `setting`), as `interval_cron`
    rounds it. `skip_reason(config)`, when given and not None, skips the tick."""
    cron = interval_cron(interval_ms)

    @schedule(
        name=name,
        cron_schedule=cron,
        job=job,
        default_status=DefaultScheduleStatus.STOPPED,
        description=f"{what}, on '{cron}' ({setting}={interval_ms}, rounded up to whole minutes).",
    )
    def _sync_schedule(context: ScheduleEvaluationContext, mirror_engine: MirrorEngine):
        why = skip_reason(mirror_engine.load()) if skip_reason else None
        if why:
            return SkipReason(why)
        return one_run_over_mirrors(
            context,
            mirror_engine,
            names,
            job.name,
            keep=lambda m: m.state in SYNCED_STATES,
            what="sync",
            run_key_prefix=run_key_prefix,
            tags=tags,
        )

    return _sync_schedule
