"""The two Dagster instance files in deploy/ say the same thing, but for storage.

`deploy/dagster.yaml` (embedded SQLite: `make demo`, the CLI's default home)
and `deploy/dagster-postgres.yaml` (a real deployment) must admit the same
runs: a setting changed in one and not the other would make production differ
from what the tests and the demo run. No database here, but an instance of the
local file in an empty home.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from dagster import DagsterInstance
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import TickStatus

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PG_VARIABLES = {
    "hostname": "DAGSTER_PG_HOST",
    "port": "DAGSTER_PG_PORT",
    "username": "DAGSTER_PG_USER",
    "password": "DAGSTER_PG_PASSWORD",
    "db_name": "DAGSTER_PG_DB",
}


def load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_the_postgres_file_is_the_local_file_plus_storage() -> None:
    local, postgres = load("dagster.yaml"), load("dagster-postgres.yaml")
    assert "storage" not in local, "deploy/dagster.yaml keeps Dagster's default storage (SQLite) for make demo"
    others = {key: value for key, value in postgres.items() if key != "storage"}
    assert others == local, (
        "deploy/dagster-postgres.yaml must hold the settings of deploy/dagster.yaml, unchanged, plus `storage`: "
        f"keys only in dagster.yaml {sorted(local.keys() - others.keys())}, "
        f"only in dagster-postgres.yaml {sorted(others.keys() - local.keys())}, "
        f"different {sorted(k for k in local.keys() & others.keys() if local[k] != others[k])}"
    )


def test_the_postgres_storage_reads_every_connection_setting_from_the_environment() -> None:
    storage = load("dagster-postgres.yaml")["storage"]
    assert list(storage) == ["postgres"]  # run, event-log and schedule storage, all three
    assert storage["postgres"] == {
        "postgres_db": {
            **{key: {"env": var} for key, var in PG_VARIABLES.items()},
            # SQLAlchemy 2.1 reads a bare `postgresql://` as psycopg 3; dagster-postgres brings psycopg2.
            "scheme": "postgresql+psycopg2",
        }
    }


def test_no_literal_password_in_the_postgres_file() -> None:
    text = (DEPLOY / "dagster-postgres.yaml").read_text()
    settings = [line.split("#")[0].strip() for line in text.splitlines()]
    assert [s for s in settings if s.startswith("password")] == ["password:"]  # only the `env:` reference below it


def test_a_deployed_instance_purges_old_ticks(tmp_path: Path) -> None:
    """Dagster reads the retention the two files set (a sensor's ticks keep its cursor: 60 KB a tick
    for the lag sensor of 1,000 mirrors), on an instance of its own in an empty home."""
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text())
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        sensor = instance.get_tick_retention_settings(InstigatorType.SENSOR)
        schedule = instance.get_tick_retention_settings(InstigatorType.SCHEDULE)
    assert sensor == {TickStatus.SKIPPED: 7, TickStatus.SUCCESS: 30, TickStatus.FAILURE: 30, TickStatus.STARTED: 30}
    assert set(schedule.values()) == {30}
