"""Asset checks on a link's copy asset: lag under the threshold, no foreign writes.

The outcomes are built by `lag_check_result` and `foreign_writes_check_result`,
which the CLI's cycles record too (`cli/dagster_recording.py`), so a check
says the same whichever ran the cycle.
"""

# No `from __future__ import annotations`: Dagster reads the check signatures' types.
from collections.abc import Iterable

from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, MetadataValue, asset_check

from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import FOREIGN_WRITE
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine

LAG_CHECK = "lag_under_threshold"
FOREIGN_WRITES_CHECK = "no_foreign_writes"


def lag_check_result(limit: int, lags: dict) -> AssetCheckResult:
    """Every mirror at most `limit` records behind (warns otherwise)."""
    behind = {m: lag for m, lag in lags.items() if lag > limit}
    return AssetCheckResult(
        check_name=LAG_CHECK,
        passed=not behind,
        severity=AssetCheckSeverity.WARN,
        metadata={"threshold": limit, "lags": MetadataValue.json(lags), "behind": MetadataValue.json(behind)},
    )


def foreign_writes_check_result(mirrors: Iterable[MirrorInfo]) -> AssetCheckResult:
    """No mirror flagged FOREIGN_WRITE (an error otherwise)."""
    flagged = sorted(m.mirror_topic for m in mirrors if FOREIGN_WRITE in m.flags)
    return AssetCheckResult(
        check_name=FOREIGN_WRITES_CHECK,
        passed=not flagged,
        severity=AssetCheckSeverity.ERROR,
        metadata={"flagged": MetadataValue.json(flagged)},
    )


def build_mirror_checks(names: LinkNames) -> list[AssetChecksDefinition]:
    @asset_check(
        asset=names.mirror_data_key,
        name=LAG_CHECK,
        description=f"Every mirror of link '{names.link}' is at most mirror.lag.alert.records behind its source.",
    )
    def lag_under_threshold(mirror_engine: MirrorEngine) -> AssetCheckResult:
        return lag_check_result(mirror_engine.link(names.link).lag_alert_records, mirror_engine.mirror_lags(names.link))

    @asset_check(
        asset=names.mirror_data_key,
        name=FOREIGN_WRITES_CHECK,
        description=f"No mirror of link '{names.link}' holds records the link did not write (R-MT-9).",
    )
    def no_foreign_writes(mirror_engine: MirrorEngine) -> AssetCheckResult:
        return foreign_writes_check_result(mirror_engine.list_mirrors(names.link))

    return [lag_under_threshold, no_foreign_writes]
