"""Asset checks on a link's copy asset: lag under the threshold, no foreign writes."""

# No `from __future__ import annotations`: Dagster reads the check signatures' types.
from typing import List

from dagster import AssetCheckResult, AssetCheckSeverity, AssetChecksDefinition, MetadataValue, asset_check

from assets.naming import LinkNames
from mirror_pipeline import engine
from mirror_pipeline.states import FOREIGN_WRITE
from resources.mirror_config import MirrorConfigResource


def build_mirror_checks(names: LinkNames) -> List[AssetChecksDefinition]:
    @asset_check(
        asset=names.mirror_data_key,
        name="lag_under_threshold",
        description=f"Every mirror of link '{names.link}' is at most mirror.lag.alert.records behind its source.",
    )
    def lag_under_threshold(mirror_config: MirrorConfigResource) -> AssetCheckResult:
        config = mirror_config.load()
        limit = config.link(names.link).lag_alert_records
        lags = engine.mirror_lags(config, names.link)
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
    def no_foreign_writes(mirror_config: MirrorConfigResource) -> AssetCheckResult:
        mirrors = engine.list_mirrors(mirror_config.load(), names.link)
        flagged = sorted(m.mirror_topic for m in mirrors if FOREIGN_WRITE in m.flags)
        return AssetCheckResult(
            passed=not flagged,
            severity=AssetCheckSeverity.ERROR,
            metadata={"flagged": MetadataValue.json(flagged)},
        )

    return [lag_under_threshold, no_foreign_writes]
