"""Per-link Dagster definitions: thin adapters over the engine, no Kafka or Spark logic.

Each link gets an asset group named after it (`[A-Za-z0-9_]` only) holding the
mirror-copy asset (partitioned by mirror topic), its replicate job, the
replicate schedule and the lag sensor.
"""

from __future__ import annotations

from dagster import Definitions

from assets.lag_sensor import build_lag_sensor
from assets.mirror_data import build_mirror_data_asset, build_replicate_job
from assets.naming import LINK_TAG, LinkNames, dagster_name
from assets.replicate_schedule import build_replicate_schedule

__all__ = ["LINK_TAG", "LinkNames", "dagster_name", "link_definitions"]


def link_definitions(link: str) -> Definitions:
    """Everything Dagster shows for one link. Builds objects only: no I/O."""
    names = LinkNames(link)
    job = build_replicate_job(names)
    return Definitions(
        assets=[build_mirror_data_asset(names)],
        jobs=[job],
        schedules=[build_replicate_schedule(names, job)],
        sensors=[build_lag_sensor(names, job)],
    )
