"""The CLI's work as asset events in the Dagster instance the UI reads, outside any run.

Imported only through `dagster_events` (which turns any failure here into a
warning). The instance is `$DAGSTER_HOME`, else `./.dagster-home`, exactly the
one promote and failover runs are recorded in (`dagster_runs.dagster_instance`).
Events go in as `DagsterInstance.report_runless_asset_event` writes them, under
the asset keys the code location defines (`mirror_pipeline_dagster.naming`),
and carry the same metadata as a materialization by a Dagster run, built by
the same functions. A command's materializations (one per mirror) are written
in batches (`dagster_batch`): one at a time, 1,000 mirrors took 20-40 s. The
mirrors become partitions first, so the UI lists them at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dagster import AssetCheckEvaluation, AssetMaterialization, DagsterInstance

import mirror_pipeline.cli.dagster_batch as dagster_batch

# Also reached through here by `dagster_events.dagster_runs()`.
import mirror_pipeline.cli.dagster_runs as dagster_runs
from mirror_pipeline import engine
from mirror_pipeline.cli.common import dagster_home_in_use
from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_results import OffsetSyncResult
from mirror_pipeline.model.results import CycleResult, MirrorInfo
from mirror_pipeline.model.states import OFFSET_SYNCED_STATES
from mirror_pipeline.sync.config_plan import ConfigSyncResult
from mirror_pipeline_dagster.config_sync import config_in_sync_result, mirror_config_metadata, sync_metadata
from mirror_pipeline_dagster.mirror_checks import foreign_writes_check_result, lag_check_result
from mirror_pipeline_dagster.mirror_metadata import materialization_metadata
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.offset_sync import (
    group_rows,
    mirror_groups_metadata,
    offset_sync_metadata,
    offsets_in_sync_result,
)


def record_cycle(
    config: PipelineConfig,
    link: str,
    result: CycleResult,
    covered: Sequence[str],
    origin: str,
    overview: Callable[[], tuple[list[MirrorInfo], dict[str, int]] | None],
) -> None:
    """Per mirror in `covered` (see `dagster_events.changed_mirrors`), a `mirror_data` materialization;
    then the copy asset's checks (lag under the threshold, no foreign writes), as a Dagster run records them.

    The checks are decided on what `overview()` returns once the materializations are written
    (`dagster_events.copy_checks_overview`: the link's mirrors and their lags, read meanwhile; None when
    Kafka stopped answering since the cycle: the copy is still recorded, the checks next time)."""
    names = LinkNames(link)
    with _instance() as instance:
        register(instance, names, covered)
        _materialize(instance, names.mirror_data_key, covered, materialization_metadata(result), origin)
        if (read := overview()) is not None:
            mirrors, lags = read
            _evaluate(instance, names.mirror_data_key, lag_check_result(config.link(link).lag_alert_records, lags))
            _evaluate(instance, names.mirror_data_key, foreign_writes_check_result(mirrors))


def _evaluate(instance, key, check) -> None:
    """A check's outcome (an `AssetCheckResult`) recorded outside a run, as the UI shows a run's."""
    instance.report_runless_asset_event(
        AssetCheckEvaluation(
            asset_key=key,
            check_name=check.check_name,
            passed=check.passed,
            severity=check.severity,
            description=check.description,
            metadata=check.metadata,
        )
    )


def _materialize(instance, key, partitions: Sequence[str], metadata_of, origin: str) -> None:
    """One runless materialization of `key` per partition, saying which command recorded it."""
    dagster_batch.materialize(
        instance,
        [
            AssetMaterialization(asset_key=key, partition=p, metadata=metadata_of(p), description=_by(origin))
            for p in partitions
        ],
    )


def record_offset_sync(
    config: PipelineConfig, link: str, result: OffsetSyncResult, mirrors: Sequence[str], origin: str
) -> None:
    """Per mirror synced, a `consumer_offsets` materialization; then the `offsets_in_sync` check's outcome."""
    names = LinkNames(link)
    # With no mirror named, the sync covered the link's syncable mirrors (engine.sync_offsets).
    covered = sorted(set(mirrors)) or sorted(
        m.mirror_topic for m in engine.list_mirrors(config, link) if m.state in OFFSET_SYNCED_STATES
    )
    groups = group_rows(result)
    totals = offset_sync_metadata(result, groups)
    check = offsets_in_sync_result(names, result)
    with _instance() as instance:
        register(instance, names, covered)
        groups_of = mirror_groups_metadata(groups)
        _materialize(instance, names.consumer_offsets_key, covered, lambda m: {**totals, **groups_of(m)}, origin)
        _evaluate(instance, names.consumer_offsets_key, check)


def record_config_sync(config: PipelineConfig, link: str, result: ConfigSyncResult, origin: str) -> None:
    """Per mirror synced (failed ones left out, as a Dagster run leaves them), a `mirror_config` materialization;
    then the `config_in_sync` check's outcome over the mirrors the sync covered, as a Dagster run records it."""
    names = LinkNames(link)
    synced = sorted(m for m, r in result.mirrors.items() if r.error is None)
    totals = sync_metadata(result)
    try:
        check = config_in_sync_result(engine.link_config_drift(config, link, sorted(result.mirrors)))
    except MirrorError:
        check = None  # a cluster stopped answering since the sync: the sync is still recorded
    with _instance() as instance:
        register(instance, names, synced)
        _materialize(
            instance,
            names.mirror_config_key,
            synced,
            lambda m: {**totals, **mirror_config_metadata(result.mirrors[m])},
            origin,
        )
        if check is not None:
            _evaluate(instance, names.mirror_config_key, check)


def register_mirrors(link: str, mirrors: Sequence[str]) -> None:
    with _instance() as instance:
        register(instance, LinkNames(link), mirrors)


def register(instance: DagsterInstance, names: LinkNames, mirrors: Sequence[str]) -> None:
    """The mirrors as keys of the link's dynamic partitions (the ones already there are left as they are)."""
    known = set(instance.get_dynamic_partitions(names.mirrors_partitions))
    new = [m for m in dict.fromkeys(mirrors) if m not in known]
    if new:
        instance.add_dynamic_partitions(names.mirrors_partitions, new)


# An instance opened before the record needed it (`open_instance_ahead`), and the Dagster home it is of.
_ahead: tuple[str, DagsterInstance] | None = None


def open_instance_ahead(home: str) -> None:
    """Open the instance the next record uses, that of `home` (`dagster_events.prepare_in_background`):
    a process's first opening loads what the storage needs, about 0.6 s on a 2-core machine. One
    already opened ahead for `home` (when the Spark session's start asked first) is the one used."""
    global _ahead
    if _ahead is not None and _ahead[0] == home:
        return
    if _ahead is not None:
        _ahead[1].dispose()
    _ahead = (home, dagster_runs.dagster_instance())


def _instance() -> DagsterInstance:
    """The UI's instance: the one opened ahead when the process still uses its home; used in `with`, so
    it is closed after use (a CLI process does not keep it)."""
    global _ahead
    ahead, _ahead = _ahead, None
    if ahead is not None and ahead[0] == dagster_home_in_use():
        return ahead[1]
    if ahead is not None:
        ahead[1].dispose()
    return dagster_runs.dagster_instance()


def _by(origin: str) -> str:
    return f"recorded by `mirror-pipeline {origin}` (the CLI, outside a Dagster run)"
