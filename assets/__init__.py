"""Per-link Dagster definitions: thin adapters over the engine, no Kafka or Spark logic.

Each link gets an asset group named after it (`[A-Za-z0-9_]` only) holding the
mirror-copy asset (partitioned by mirror topic), its replicate job, the
replicate schedule, the lag, health and auto-create sensors (which only read and
request runs: of the replicate job, the health job, the auto-create job) and the copy asset's checks
(lag under the threshold, no foreign writes); the config-sync asset
(same partitions) with its `config_in_sync` check, job and schedule; and the
consumer-offsets asset (same partitions) with its `offsets_in_sync` check,
job and schedule.
"""

from __future__ import annotations

from dagster import Definitions

from mirror_pipeline_dagster.auto_create_sensor import build_auto_create_sensor
from mirror_pipeline_dagster.config_sync import (
    build_config_in_sync_check,
    build_config_sync_job,
    build_config_sync_schedule,
    build_mirror_config_asset,
)
from mirror_pipeline_dagster.follow_job import build_follow_job
from mirror_pipeline_dagster.health_sensor import build_health_sensor
from mirror_pipeline_dagster.housekeeping_jobs import build_auto_create_job, build_health_job
from mirror_pipeline_dagster.lag_sensor import build_lag_sensor
from mirror_pipeline_dagster.link_stop_jobs import build_link_stop_jobs
from mirror_pipeline_dagster.mirror_checks import build_mirror_checks
from mirror_pipeline_dagster.mirror_data import build_mirror_data_asset, build_replicate_job
from mirror_pipeline_dagster.naming import LINK_TAG, LinkNames, dagster_name
from mirror_pipeline_dagster.offset_sync import (
    build_consumer_offsets_asset,
    build_offset_sync_job,
    build_offset_sync_schedule,
)
from mirror_pipeline_dagster.replicate_schedule import build_replicate_schedule

__all__ = ["LINK_TAG", "LinkNames", "dagster_name", "link_definitions"]


def link_definitions(
    link: str,
    config_sync_ms: int | None = None,
    offset_sync_ms: int | None = None,
    automation_running: bool = False,
    freshness_ms: int = 0,
    lag_sensor_interval_s: int = 30,
    run_max_runtime_s: int = 0,
) -> Definitions:
    """Everything Dagster shows for one link. Builds objects only: no I/O.

    `config_sync_ms` is the link's `topic.config.sync.ms` (the config-sync
    schedule's interval), `offset_sync_ms` its `consumer.offset.sync.ms` (the
    offset-sync schedule's); None: the setting's default. `automation_running` is its
    `dagster.automation.running`: the replicate schedule and the three sensors start running;
    `freshness_ms` its `mirror.freshness.target.ms` (0: no freshness policy);
    `lag_sensor_interval_s` its `dagster.lag.sensor.interval.seconds`; `run_max_runtime_s` its
    `dagster.run.max.runtime.seconds` (0: no bound).
    """
    names = LinkNames(link, automation_running, freshness_ms, lag_sensor_interval_s, run_max_runtime_s)
    job = build_replicate_job(names)
    config_job = build_config_sync_job(names)
    offsets_job = build_offset_sync_job(names)
    health_job = build_health_job(names)
    auto_create_job = build_auto_create_job(names)
    follow_job = build_follow_job(names)
    stop_jobs = build_link_stop_jobs(names)
    return Definitions(
        assets=[build_mirror_data_asset(names), build_mirror_config_asset(names), build_consumer_offsets_asset(names)],
        asset_checks=[build_config_in_sync_check(names), *build_mirror_checks(names)],
        jobs=[job, config_job, offsets_job, health_job, auto_create_job, follow_job, *stop_jobs],
        schedules=[
            build_replicate_schedule(names, job),
            build_config_sync_schedule(names, config_job, config_sync_ms),
            build_offset_sync_schedule(names, offsets_job, offset_sync_ms),
        ],
        sensors=[
            build_lag_sensor(names, job),
            build_health_sensor(names, health_job),
            build_auto_create_sensor(names, job, auto_create_job),
        ],
    )
