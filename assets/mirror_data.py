"""The mirror-copy asset of a link and its replicate job.

One run copies every mirror (dynamic partition) it covers in one replication
cycle, one Spark job (R-EX-1). Each mirror's materialization carries its own
lineage (R-OBS-4) through `context.add_asset_metadata(..., partition_key=...)`;
the cycle totals go on every one of them (both built in `mirror_metadata`, which
the CLI's runless records share). When some mirrors fail, the ones that copied
are still recorded (as `AssetMaterialization` events) and the run fails with
the engine's message.

The asset sits downstream of the link's `source_topics` (see `source_topics`).
Runs of the replicate job carry the link's run tag; a run launched ad hoc
(Materialize in the UI runs `__ASSET_JOB`, and Dagster 1.13 has no way to give
an asset's ad-hoc runs a tag) is still held to one copy step of the link at a
time by the op pool `mirror-pipeline/<link>`, and says so in its log.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import time
import warnings
from collections.abc import Callable
from datetime import timedelta

from dagster import (
    AssetCheckKey,
    AssetDep,
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    BackfillPolicy,
    BetaWarning,
    DynamicPartitionsDefinition,
    Failure,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    asset,
    define_asset_job,
    in_process_executor,
)
from dagster_pyspark import PySparkResource

from mirror_pipeline.engine import CycleFailed
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.text import some_of
from mirror_pipeline_dagster.mirror_metadata import cycle_metadata, materialization_metadata, mirror_metadata
from mirror_pipeline_dagster.naming import LINK_TAG, LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import existing_mirrors

_PROGRESS_EVERY_S = 10.0


def mirror_partitions(names: LinkNames) -> DynamicPartitionsDefinition:
    """The link's mirror topics; the lag sensor adds them as the CLI creates them."""
    return DynamicPartitionsDefinition(name=names.mirrors_partitions)


def built_quietly(build: Callable[[LinkNames], AssetsDefinition], names: LinkNames) -> AssetsDefinition:
    """`build(names)` without the beta warning of `backfill_policy`.

    A single-run backfill policy is the documented way to get one run over
    many partitions, so the warning is noise at every load.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        return build(names)


def build_mirror_data_asset(names: LinkNames) -> AssetsDefinition:
    return built_quietly(_mirror_data_asset, names)


def _mirror_data_asset(names: LinkNames) -> AssetsDefinition:
    @asset(
        key=names.mirror_data_key,
        group_name=names.group,
        partitions_def=mirror_partitions(names),
        backfill_policy=BackfillPolicy.single_run(),
        # Lineage in the graph: what the link reads. Unpartitioned upstream, so
        # every mirror (partition) depends on it.
        deps=[AssetDep(names.source_topics_key)],
        pool=names.pool,
        freshness_policy=freshness_policy(names),
        kinds={"kafka", "spark"},
        description=(
            f"Records of link '{names.link}' copied into its mirror topics, one partition per "
            "mirror topic. One run copies every mirror it covers in one Spark job."
        ),
    )
    def _mirror_data(
        context: AssetExecutionContext,
        mirror_engine: MirrorEngine,
        pyspark: PySparkResource,
    ):
        # A generator, so that the lineage of the mirrors that did copy reaches
        # the event log even when the step then fails.
        mirror_engine.link(names.link)  # fails clearly if the link left the file since load
        _note_untagged_run(context, names)
        mirrors = _mirrors_to_copy(context, mirror_engine, names)
        try:
            result = mirror_engine.run_cycle(
                names.link,
                pyspark.spark_session,
                mirrors=mirrors,
                progress=_progress_logger(context),
            )
        except CycleFailed as exc:
            metadata_of = materialization_metadata(exc.result)
            for mirror in sorted(exc.result.mirrors):
                yield AssetMaterialization(
                    asset_key=names.mirror_data_key,
                    partition=mirror,
                    metadata=metadata_of(mirror),
                )
            raise Failure(description=str(exc), metadata=cycle_metadata(exc.result)) from exc
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc

        for mirror in context.partition_keys:
            context.add_asset_metadata(mirror_metadata(result.mirrors.get(mirror)), partition_key=mirror)
        context.log.info(
            f"link {names.link}: {result.records} records, {result.bytes} bytes, "
            f"{len(result.mirrors)} mirror(s) in {result.duration_s:.1f}s; lag after {result.lag_after}"
        )
        yield MaterializeResult(
            metadata={**cycle_metadata(result), **_heartbeat_metadata(context, mirror_engine, names)}
        )

    return _mirror_data


def _heartbeat_metadata(context: AssetExecutionContext, mirror_engine, names: LinkNames) -> dict:
    """The age of the newest heartbeat on the mirror after the cycle (R-OBS-3), plotted run over run."""
    try:
        status = mirror_engine.heartbeat_status(names.link)
    except MirrorError as exc:
        context.log.warning(f"link {names.link}: heartbeats not read: {exc}")
        return {}
    if status.age_ms is None:
        return {}
    return {
        "heartbeat_age_ms": MetadataValue.int(status.age_ms),
        "heartbeat_emitted_at": MetadataValue.timestamp(status.newest_emitted_ms / 1000),
    }


def freshness_policy(names: LinkNames) -> FreshnessPolicy | None:
    """Stale in the UI when no mirror of the link was copied within the link's target (warn at half of it).

    Dagster evaluates it on the asset as a whole: any mirror's copy counts.
    """
    if not names.freshness_ms:
        return None
    return FreshnessPolicy.time_window(
        fail_window=timedelta(milliseconds=names.freshness_ms),
        warn_window=timedelta(milliseconds=names.freshness_ms // 2),
    )


def _note_untagged_run(context: AssetExecutionContext, names: LinkNames) -> None:
    """Say in the run's log when it is not queued behind the link's other runs (no run tag)."""
    if context.run.tags.get(LINK_TAG) != names.link:
        context.log.info(
            f"this run has no '{LINK_TAG}: {names.link}' tag (launched ad hoc, e.g. Materialize in the UI): "
            f"it was not queued behind the link's other runs; the pool '{names.pool}' still lets one copy "
            "step of the link run at a time"
        )


def _mirrors_to_copy(context: AssetExecutionContext, mirror_engine, names: LinkNames) -> list[str]:
    """The run's partition keys that are mirrors of the link.

    A run covers a range of partitions, which may hold a mirror deleted since
    it was registered; copying the others must not fail because of it.
    """
    mirrors = existing_mirrors(context, mirror_engine, names)
    context.log.info(f"link {names.link}: copying {len(mirrors)} mirror(s): {some_of(mirrors)}")
    return mirrors


def build_replicate_job(names: LinkNames):
    """All of the link's mirrors that a run covers, in one run (tagged for the concurrency limit)."""
    # Not the link's verify: it has its own daily job, and every cycle would read both clusters again.
    verify = AssetSelection.checks(AssetCheckKey(names.mirror_data_key, "mirror_verified"))
    return define_asset_job(
        names.replicate_job,
        selection=AssetSelection.assets(names.mirror_data_key) - verify,
        tags=names.run_tags,
        description=f"One replication cycle of link '{names.link}' over the mirrors the run covers.",
        # The run's work is in Spark: a process per step would only load Python and the
        # definitions once more before every cycle, a fixed cost that sensor-driven runs pay each time.
        executor_def=in_process_executor,
    )


def _progress_logger(context: AssetExecutionContext):
    last = [0.0]

    def report(copied: int, total: int) -> None:
        now = time.monotonic()
        if copied >= total or now - last[0] >= _PROGRESS_EVERY_S:
            last[0] = now
            context.log.info(f"copied {copied} of {total} records")

    return report
