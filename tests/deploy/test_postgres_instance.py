"""The deployment's Dagster instance (deploy/dagster-postgres.yaml) on a real PostgreSQL server.

Each test gets a `$DAGSTER_HOME` whose `dagster.yaml` is the shipped file,
unchanged, and the five `DAGSTER_PG_*` variables pointing at a fresh database
of the throwaway server (`conftest.py`; without Debian's postgresql
binaries, which `make setup` installs, the tests fail saying so). Checked:

- run, event-log and schedule storage are all Postgres, behind the run queue
  and the daemon's scheduler; nothing is written as SQLite under the home;
- the password (with characters a URL or config file trips on) is read from
  the environment and appears neither in the instance's reference (what
  Dagster hands to run workers and the daemon) nor in its printed settings;
- a run of the project's replicate job (engine stubbed: no Kafka, no Spark)
  and the CLI's runless record of a copy (`dagster_events`, as `run --link`
  calls it) land in Postgres and read back, with the same metadata, from a
  second instance, as another process (the webserver) would see them;
- the run queue admits one in-progress run per `mirror-pipeline/link` value:
  the daemon's own dequeue choice, over runs stored in Postgres.
"""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster._core.scheduler import DagsterDaemonScheduler
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._serdes import serialize_value
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.local.postgres import PostgresServer
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, PartitionCopy
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.naming import LINK_TAG, LinkNames
from tests.dagster.conftest import config_file  # noqa: F401 (the fixture: mirror.yaml of the offline links)
from tests.dagster.offline_config import mirrors_answer, stub_engine

DEPLOY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "dagster-postgres.yaml"
LINK, OTHER_LINK = "west-to-east", "east.to.west"
NAMES = LinkNames(LINK)
MIRRORS = ["orders", "refunds"]
CYCLE = CycleResult(
    LINK,
    1_767_225_600.0,
    2.5,
    3,
    {
        "orders": MirrorCopyResult(
            "orders", "orders", (PartitionCopy(0, 0, 10, 0, 10, 10, 100, 2), PartitionCopy(1, 5, 9, 3, 7, 4, 40, 0))
        ),
        "refunds": MirrorCopyResult("refunds", "refunds", (PartitionCopy(0, 0, 3, 0, 3, 3, 30, 0),)),
    },
)


@pytest.fixture
def home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_server: PostgresServer, postgres_database: str
) -> Path:
    """`$DAGSTER_HOME` as docs/deploying.md ("Dagster on PostgreSQL") sets it up."""
    home = tmp_path / "dagster-home"
    home.mkdir()
    shutil.copyfile(DEPLOY_FILE, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in postgres_server.dagster_env(postgres_database).items():
        monkeypatch.setenv(name, value)
    return home


def table_count(server: PostgresServer, db: str, sql: str) -> int:
    conn = server.connect(db, user=server.user, password=server.password)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()[0]
    finally:
        conn.close()


def test_run_event_and_schedule_storage_are_postgres_and_keep_no_password(
    home: Path, postgres_server: PostgresServer
) -> None:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert instance.run_coordinator.dequeue_interval_seconds == 1  # a queued copy waits a second, not five
        assert isinstance(instance.scheduler, DagsterDaemonScheduler)
        # It really connects, as the test user with its password: a first run is stored.
        run = create_run_for_test(instance, job_name="probe")
        assert instance.get_run_by_id(run.run_id).job_name == "probe"

        shown = [serialize_value(instance.get_ref()), repr(instance.get_ref()), instance.info_str()]
    password = postgres_server.password
    assert all(password not in text and password.strip() not in text for text in shown)
    assert "DAGSTER_PG_PASSWORD" in shown[0]  # the reference carries the variable's name instead
    assert not list(home.rglob("*.db")), "no SQLite storage next to the Postgres one"


def test_a_replicate_run_and_a_cli_record_land_in_postgres(
    home: Path,
    config_file: Path,  # noqa: F811 - pytest passes the fixture imported above
    postgres_server,
    postgres_database: str,
    capsys,
) -> None:
    engine = stub_engine(
        config_file,
        list_mirrors=mirrors_answer([(m, "ACTIVE") for m in MIRRORS]),
        run_cycle=lambda link, spark, mirrors=None, progress=None: CYCLE,
        mirror_lags=lambda link: {"orders": 0, "refunds": 0},
    )
    job = build_definitions(config_file).get_repository_def().get_job(NAMES.replicate_job)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(NAMES.mirrors_partitions, MIRRORS)
        result = job.execute_in_process(
            instance=instance,
            resources={"mirror_engine": engine, "pyspark": types.SimpleNamespace(spark_session="spark")},
            tags={"dagster/asset_partition_range_start": MIRRORS[0], "dagster/asset_partition_range_end": MIRRORS[-1]},
        )
        assert result.success
        run_id = result.run_id

    # What `mirror-pipeline run --link` records after its copy, through the CLI's own door.
    capsys.readouterr()  # the run's log
    dagster_events.record_cycle(load_config(config_file), LINK, CYCLE, origin=f"run --link {LINK}")
    assert capsys.readouterr().err == ""  # a failed record is one `warning:` line there

    with dg.DagsterInstance.from_config(str(home)) as reader:  # as the webserver, another process, reads it
        run = reader.get_run_by_id(run_id)
        assert run.is_success and run.job_name == NAMES.replicate_job and run.tags[LINK_TAG] == LINK
        records = reader.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        by_run = {r.asset_materialization.partition: r for r in records if r.run_id == run_id}
        by_cli = {r.asset_materialization.partition: r for r in records if not r.run_id}
        assert sorted(by_run) == sorted(by_cli) == MIRRORS
        for mirror in MIRRORS:
            cli, dagster_run = by_cli[mirror].asset_materialization, by_run[mirror].asset_materialization
            assert cli.metadata["lineage_json"] == dagster_run.metadata["lineage_json"]
            assert cli.metadata["records"] == dagster_run.metadata["records"]
        assert "recorded by `mirror-pipeline run --link" in by_cli["orders"].asset_materialization.description
        assert sorted(reader.get_dynamic_partitions(NAMES.mirrors_partitions)) == MIRRORS
        checks = {
            e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
            for e in reader.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        }
        assert checks == {"lag_under_threshold": True, "no_foreign_writes": True}
        # The copy step took its slot in the link's pool, kept in Postgres with the limit `pools.default_limit`.
        assert reader.event_log_storage.get_concurrency_info(NAMES.pool).slot_count == 1

    # In the database itself, not in some fallback.
    assert table_count(postgres_server, postgres_database, "SELECT count(*) FROM runs") == 1
    assert (
        table_count(
            postgres_server,
            postgres_database,
            "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'",
        )
        == 4
    )


def test_the_run_queue_admits_one_run_per_link(home: Path) -> None:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        assert {
            "key": LINK_TAG,
            "value": {"applyLimitPerUniqueValue": True},
            "limit": 1,
        } in queue.tag_concurrency_limits

        # Where the webserver or the daemon says a run comes from (a queued run must say it).
        origin = RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("mirror-pipeline"), "__repository__")

        def run(link: str | None, status: dg.DagsterRunStatus):
            return create_run_for_test(
                instance,
                job_name=NAMES.replicate_job,
                tags={LINK_TAG: link} if link else {},
                status=status,
                remote_job_origin=origin.get_job_origin(NAMES.replicate_job),
            ).run_id

        copying = run(LINK, dg.DagsterRunStatus.STARTED)
        same_link = run(LINK, dg.DagsterRunStatus.QUEUED)
        other_link = run(OTHER_LINK, dg.DagsterRunStatus.QUEUED)
        other_link_next = run(OTHER_LINK, dg.DagsterRunStatus.QUEUED)
        untagged = run(None, dg.DagsterRunStatus.QUEUED)

        assert dequeued(instance) == {other_link, untagged}  # one per link at a time; the first in line first
        instance.report_run_failed(instance.get_run_by_id(copying))
        admitted = dequeued(instance)
        assert admitted == {same_link, other_link, untagged}
        assert other_link_next not in admitted  # never two runs of one link at once


def dequeued(instance: dg.DagsterInstance) -> set[str]:
    """The queued runs the daemon would launch now (the daemon's own choice, nothing launched)."""
    with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
        return {r.run_id for r in daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)}
