"""Asset checks on a link's copy asset: lag under the threshold, no foreign writes."""

# No `from __future__ import annotations`: Dagster reads the check signatures' types.
from typing import List

from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, MetadataValue, asset_check

from mirror_pipeline.model.states import FOREIGN_WRITE
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine


def build_mirror_checks(names: LinkNames) -> List[AssetChecksDefinition]:
    @asset_check(
        asset=names.mirror_data_key,
        name="lag_under_threshold",
        description=f"Every mirror of link '{names.link}' is at most mirror.lag.alert.records behind its source.",
    )
    def lag_under_threshold(mirror_engine: MirrorEngine) -> AssetCheckResult:
        limit = mirror_engine.link(names.link).lag_alert_records
        lags = mirror_engine.mirror_lags(names.link)
        behind = {m: lag for m, lag in lags.items() if lag > limit}
        return AssetCheckResult(
            passed=not behind,
            severity=AssetCheckSeverity.WARN,
            metadata={"threshold": limit, "lags": MetadataValue.json(lags), "behind": MetadataValue.json(behind)},
        )

    @asset_check(
        asset=names.mirror_data_key,
        name="no_foreign_writes",
        description=f"No mirror of link '{names.link}' holds records the link did not write (R-MT-9).",
    )
    def no_foreign_writes(mirror_engine: MirrorEngine) -> AssetCheckResult:
        mirrors = mirror_engine.list_mirrors(names.link)
        flagged = sorted(m.mirror_topic for m in mirrors if FOREIGN_WRITE in m.flags)
        return AssetCheckResult(
            passed=not flagged,
            severity=AssetCheckSeverity.ERROR,
            metadata={"flagged": MetadataValue.json(flagged)},
        )

    return [lag_under_threshold, no_foreign_writes]
