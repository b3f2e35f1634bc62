"""Dagster names for a link's definitions, and the run tag that serialises its runs.

Link names may hold `.` and `-`; Dagster names may not, so both become `_`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagster import AssetKey, DefaultScheduleStatus, DefaultSensorStatus

# Every run that writes a link's mirrors carries this tag; the instance's tag
# concurrency limit (deploy/dagster.yaml) allows one such run per value.
LINK_TAG = "mirror-pipeline/link"

# Dagster's own run tag: run monitoring (deploy/dagster.yaml) ends a run older than this many seconds.
MAX_RUNTIME_TAG = "dagster/max_runtime"

# Runs of a link's config-sync job carry this tag (value: the link).
CONFIG_SYNC_TAG = "mirror-pipeline/config-sync"

# The asset check on a link's `mirror_config` asset.
CONFIG_IN_SYNC_CHECK = "config_in_sync"

# Runs of a link's offset-sync job carry this tag (value: the link).
OFFSET_SYNC_TAG = "mirror-pipeline/offset-sync"

# Runs of a link's health and auto-create jobs carry this tag (value: the link).
# Not `LINK_TAG`: they change mirror records only by compare-and-set, so they
# need not queue behind a long copy run (a source outage must show at once).
HOUSEKEEPING_TAG = "mirror-pipeline/housekeeping"

# Runs of a link's follow job carry this tag (value: the link), one at a time
# per link. Not `LINK_TAG`: a promote or failover must not queue behind an
# always-on run that never ends; it fences the run's tasks instead.
FOLLOW_TAG = "mirror-pipeline/follow"

# The asset check on a link's `consumer_offsets` asset.
OFFSETS_IN_SYNC_CHECK = "offsets_in_sync"

_NOT_DAGSTER = re.compile(r"[^A-Za-z0-9_]")


def dagster_name(link: str) -> str:
    """`west-to-east` -> `west_to_east`."""
    return _NOT_DAGSTER.sub("_", link)


@dataclass(frozen=True)
class LinkNames:
    """Every Dagster name that belongs to one link (and how its schedule and sensors start)."""

    link: str
    # The link's `dagster.automation.running`: its replicate schedule and its lag, health
    # and auto-create sensors start running by default instead of stopped.
    automation_running: bool = False
    # The link's `mirror.freshness.target.ms` (0: no freshness policy, e.g. where only names matter).
    freshness_ms: int = 0
    # The link's `dagster.lag.sensor.interval.seconds`.
    lag_sensor_interval_s: int = 30
    # The link's `dagster.run.max.runtime.seconds` (0: no bound), on its replicate runs.
    run_max_runtime_s: int = 0

    @property
    def schedule_status(self) -> DefaultScheduleStatus:
        return DefaultScheduleStatus.RUNNING if self.automation_running else DefaultScheduleStatus.STOPPED

    @property
    def sensor_status(self) -> DefaultSensorStatus:
        return DefaultSensorStatus.RUNNING if self.automation_running else DefaultSensorStatus.STOPPED

    @property
    def group(self) -> str:
        return dagster_name(self.link)

    @property
    def mirror_data_key(self) -> AssetKey:
        return AssetKey([self.group, "mirror_data"])

    @property
    def source_topics_key(self) -> AssetKey:
        """The observable source asset: the source topics the link's mirrors read (log-end offsets)."""
        return AssetKey([self.group, "source_topics"])

    @property
    def observe_sources_op(self) -> str:
        return f"{self.group}_observe_source_topics"

    @property
    def mirrors_partitions(self) -> str:
        """Name of the dynamic partitions definition whose keys are the link's mirror topics."""
        return f"{self.group}_mirrors"

    @property
    def replicate_job(self) -> str:
        return f"{self.group}_replicate"

    @property
    def promote_job(self) -> str:
        """The link's own promote job (the Launchpad's one-form promote)."""
        return f"{self.group}_promote"

    @property
    def failover_job(self) -> str:
        return f"{self.group}_failover"

    @property
    def lifecycle_tags(self) -> dict[str, str]:
        """The link's promote and failover runs: queued behind its copies, with no max runtime (a promote waits
        for zero lag as long as its timeout says)."""
        return {LINK_TAG: self.link}

    @property
    def follow_job(self) -> str:
        return f"{self.group}_follow"

    @property
    def follow_tags(self) -> dict[str, str]:
        return {FOLLOW_TAG: self.link}

    @property
    def replicate_schedule(self) -> str:
        return f"{self.group}_replicate_schedule"

    @property
    def lag_sensor(self) -> str:
        return f"{self.group}_lag_sensor"

    @property
    def auto_create_sensor(self) -> str:
        return f"{self.group}_auto_create_sensor"

    @property
    def auto_create_job(self) -> str:
        return f"{self.group}_auto_create"

    @property
    def health_sensor(self) -> str:
        return f"{self.group}_health_sensor"

    @property
    def health_job(self) -> str:
        return f"{self.group}_health"

    @property
    def housekeeping_tags(self) -> dict[str, str]:
        return {HOUSEKEEPING_TAG: self.link}

    @property
    def mirror_config_key(self) -> AssetKey:
        """The config-sync asset: each mirror's topic configs, synced from its source (R-CS)."""
        return AssetKey([self.group, "mirror_config"])

    @property
    def config_sync_job(self) -> str:
        return f"{self.group}_config_sync"

    @property
    def config_sync_schedule(self) -> str:
        return f"{self.group}_config_sync_schedule"

    @property
    def config_sync_tags(self) -> dict[str, str]:
        """Tags of config-sync runs; not `LINK_TAG`: they never write mirror records, so
        they need not queue behind a long copy run."""
        return {CONFIG_SYNC_TAG: self.link}

    @property
    def consumer_offsets_key(self) -> AssetKey:
        """The offset-sync asset: source groups' committed offsets, translated onto the mirrors (R-OFS)."""
        return AssetKey([self.group, "consumer_offsets"])

    @property
    def offset_sync_job(self) -> str:
        return f"{self.group}_offset_sync"

    @property
    def offset_sync_schedule(self) -> str:
        return f"{self.group}_offset_sync_schedule"

    @property
    def offset_sync_tags(self) -> dict[str, str]:
        """Tags of offset-sync runs; not `LINK_TAG`: they commit group offsets, never mirror
        records, so they need not queue behind a long copy run."""
        return {OFFSET_SYNC_TAG: self.link}

    @property
    def pool(self) -> str:
        """Concurrency pool of the link's writers (a second guard besides the run tag)."""
        return f"mirror-pipeline/{self.link}"

    @property
    def run_tags(self) -> dict[str, str]:
        """The replicate runs' tags: the link's queue, and the bound Dagster's run monitoring ends them at."""
        bound = {MAX_RUNTIME_TAG: str(self.run_max_runtime_s)} if self.run_max_runtime_s else {}
        return {LINK_TAG: self.link, **bound}
