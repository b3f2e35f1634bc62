"""The link's sensors on a wide link: one tick of each, as the Dagster daemon evaluates and records it.

`scale_cli.py` calls `time_ticks` once every mirror exists: the link's
definitions are built from its config (what the code server loads once), and
each tick is evaluated with the link's real engine resource on a Dagster
instance of its own, then applied to it as the daemon does (the new mirrors
registered as dynamic partitions, the observations stored as events). The
lag sensor ticks twice: the first registers every mirror, the second
observes them. A tick that runs past the sensor's evaluation timeout (60 s by
default in Dagster) is lost, so these figures bound how wide a link the
automation serves.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg

from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.naming import LinkNames


def time_ticks(config_path: Path, link: str) -> dict[str, float]:
    """Seconds of each tick: evaluated, then applied (`*_recorded`)."""
    defs = build_definitions(config_path)
    repository = defs.get_repository_def()
    names = LinkNames(link)
    seconds: dict[str, float] = {}
    with dg.DagsterInstance.ephemeral() as instance:
        cursor = None
        for key, name in (
            ("lag_sensor_first", names.lag_sensor),
            ("lag_sensor_second", names.lag_sensor),
            ("auto_create_sensor", names.auto_create_sensor),
            ("health_sensor", names.health_sensor),
        ):
            sensor = repository.get_sensor_def(name)
            began = time.perf_counter()
            with dg.build_sensor_context(
                instance=instance,
                cursor=cursor if key == "lag_sensor_second" else None,
                definitions=defs,
                resources={"mirror_engine": defs.resources["mirror_engine"]},  # what the sensors ask for
            ) as context:
                result = sensor.evaluate_tick(context)
            seconds[key] = round(time.perf_counter() - began, 2)
            began = time.perf_counter()
            _apply(instance, result)
            seconds[f"{key}_recorded"] = round(time.perf_counter() - began, 2)
            if key == "lag_sensor_first":
                cursor = result.cursor
    return seconds


def _apply(instance: dg.DagsterInstance, result) -> None:
    """What the daemon does with a tick's result, run requests aside (no run is launched here)."""
    for request in result.dynamic_partitions_requests or ():
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    for event in result.asset_events or ():
        instance.report_runless_asset_event(event)


# The rows `scale_cli.py` prints of them (every figure is in its JSON document).
ROWS = [
    ("lag_sensor_first", "lag sensor tick that registers every mirror, evaluated"),
    ("lag_sensor_first_recorded", "  then the mirrors registered as Dagster partitions"),
    ("lag_sensor_second", "lag sensor tick that observes every mirror, evaluated"),
    ("lag_sensor_second_recorded", "  then its observations stored as events"),
    ("auto_create_sensor", "auto-create sensor tick, evaluated"),
    ("health_sensor", "health sensor tick, evaluated"),
]
