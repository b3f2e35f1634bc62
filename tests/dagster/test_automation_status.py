"""`dagster.automation.running` starts a link's replicate schedule and its three sensors; nothing else moves."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from mirror_pipeline_dagster.definitions import build_definitions
from tests.dagster.offline_config import VALID_CONFIG

RUNNING = {
    "west_to_east_replicate_schedule",
    "west_to_east_lag_sensor",
    "west_to_east_health_sensor",
    "west_to_east_auto_create_sensor",
}


def _statuses(tmp_path: Path, **west_to_east) -> dict[str, str]:
    data = yaml.safe_load(VALID_CONFIG)
    data["links"]["west-to-east"].update(west_to_east)
    path = tmp_path / "mirror.yaml"
    path.write_text(yaml.safe_dump(data))
    repo = build_definitions(path).get_repository_def()
    statuses = {s.name: s.default_status.value for s in repo.schedule_defs}
    statuses.update({s.name: s.default_status.value for s in repo.sensor_defs})
    return statuses


def test_everything_ships_stopped_by_default(tmp_path: Path) -> None:
    statuses = _statuses(tmp_path)
    assert statuses and set(statuses.values()) == {dg.DefaultScheduleStatus.STOPPED.value}


def test_the_setting_starts_the_links_schedule_and_sensors_only(tmp_path: Path) -> None:
    statuses = _statuses(tmp_path, **{"dagster.automation.running": True})
    assert {name for name, status in statuses.items() if status == "RUNNING"} == RUNNING
    # The other link, and the sync and verify schedules of this one, stay as they were.
    assert statuses["east_to_west_replicate_schedule"] == "STOPPED"
    assert statuses["west_to_east_config_sync_schedule"] == "STOPPED"
