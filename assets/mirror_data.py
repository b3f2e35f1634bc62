"""The mirror-copy asset of a link and its replicate job.

One run copies every mirror (dynamic partition) it covers in one replication
cycle, one Spark job (R-EX-1). Each mirror's materialization carries its own
lineage (R-OBS-4) through `context.add_asset_metadata(..., partition_key=...)`;
the cycle totals go on every one of them. When some mirrors fail, the ones
that copied are still recorded (as `AssetMaterialization` events) and the run
fails with the engine's message.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import time
import warnings
from typing import Callable

from dagster import (
    AssetCheckKey,
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    BackfillPolicy,
    BetaWarning,
    DynamicPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
    define_asset_job,
)
from dagster_pyspark import PySparkResource

from mirror_pipeline.engine import CycleFailed
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult
from mirror_pipeline_dagster.naming import LinkNames
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
        pool=names.pool,
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
        mirrors = _mirrors_to_copy(context, mirror_engine, names)
        try:
            result = mirror_engine.run_cycle(
                names.link,
                pyspark.spark_session,
                mirrors=mirrors,
                progress=_progress_logger(context),
            )
        except CycleFailed as exc:
            for mirror, copy in sorted(exc.result.mirrors.items()):
                yield AssetMaterialization(
                    asset_key=names.mirror_data_key,
                    partition=mirror,
                    metadata={**cycle_metadata(exc.result), **mirror_metadata(copy)},
                )
            raise Failure(description=str(exc), metadata=cycle_metadata(exc.result)) from exc
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc

        for mirror in context.partition_keys:
            context.add_asset_metadata(
                mirror_metadata(result.mirrors.get(mirror)), partition_key=mirror
            )
        context.log.info(
            f"link {names.link}: {result.records} records, {result.bytes} bytes, "
            f"{len(result.mirrors)} mirror(s) in {result.duration_s:.1f}s; lag after {result.lag_after}"
        )
        yield MaterializeResult(metadata=cycle_metadata(result))

    return _mirror_data


def _mirrors_to_copy(context: AssetExecutionContext, mirror_engine, names: LinkNames) -> list[str]:
    """The run's partition keys that are mirrors of the link.

    A run covers a range of partitions, which may hold a mirror deleted since
    it was registered; copying the others must not fail because of it.
    """
    mirrors = existing_mirrors(context, mirror_engine, names)
    context.log.info(f"link {names.link}: copying {len(mirrors)} mirror(s): {', '.join(mirrors)}")
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
    )


def _progress_logger(context: AssetExecutionContext):
    last = [0.0]

    def report(copied: int, total: int) -> None:
        now = time.monotonic()
        if copied >= total or now - last[0] >= _PROGRESS_EVERY_S:
            last[0] = now
            context.log.info(f"copied {copied} of {total} records")

    return report


def mirror_metadata(copy: MirrorCopyResult | None) -> dict:
    """One mirror's lineage: per Kafka partition, source range read and mirror range written."""
    if copy is None:
        return {
            "records": MetadataValue.int(0),
            "bytes": MetadataValue.int(0),
            "note": MetadataValue.text(
                "nothing copied this cycle: the mirror is not active (paused, stopped, "
                "failed) or no longer exists"
            ),
        }
    return {
        "source_topic": MetadataValue.text(copy.source_topic),
        "records": MetadataValue.int(copy.records),
        "bytes": MetadataValue.int(copy.bytes),
        "lag_after": MetadataValue.int(copy.lag_after),
        "partitions_added": MetadataValue.int(copy.partitions_added),
        "lineage": MetadataValue.md(lineage_table(copy)),
        "lineage_json": MetadataValue.json([p.to_dict() for p in copy.partitions]),
    }


def lineage_table(copy: MirrorCopyResult) -> str:
    rows = [
        "| partition | source offsets read | mirror offsets written | records | bytes | lag after |",
        "| ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for p in sorted(copy.partitions, key=lambda p: p.partition):
        rows.append(
            f"| {p.partition} | [{p.source_from}, {p.source_until}) | [{p.dest_from}, {p.dest_until}) "
            f"| {p.records} | {p.bytes} | {p.lag_after} |"
        )
    if not copy.partitions:
        rows.append("| – | nothing to copy | – | 0 | 0 | 0 |")
    return "\n".join(rows)


def cycle_metadata(result: CycleResult) -> dict:
    """Totals of the whole cycle; recorded on every mirror's materialization of the run."""
    return {
        "cycle_records": MetadataValue.int(result.records),
        "cycle_bytes": MetadataValue.int(result.bytes),
        "cycle_lag_after": MetadataValue.int(result.lag_after),
        "cycle_duration_s": MetadataValue.float(round(result.duration_s, 3)),
        "cycle_mirrors": MetadataValue.int(len(result.mirrors)),
        "cycle_work_units": MetadataValue.int(result.work_units),
        "cycle_started_at": MetadataValue.timestamp(result.started_at),
    }
