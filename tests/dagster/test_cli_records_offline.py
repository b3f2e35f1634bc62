"""The CLI's runless records carry exactly what a Dagster run's materializations carry (issue #13),
and a wide link's record, written in batches, lands whole and as one event at a time would write it.

Offline: the results are built by hand, the instance is a throwaway `DAGSTER_HOME`
(for the batches: the shipped SQLite settings, and the PostgreSQL ones on the
throwaway server of `postgres_server`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
import types
from pathlib import Path

import dagster as dg
import pytest

import mirror_pipeline.cli.dagster_events as dagster_events
import mirror_pipeline.engine as mirror_engine
from mirror_pipeline.cli import dagster_batch
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.offset_results import GroupOffsetSync, OffsetSyncResult, PartitionOffsetSync
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, PartitionCopy
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.naming import LinkNames
from tests.dagster.offline_config import mirrors_answer, stub_engine

LINK = "west-to-east"
NAMES = LinkNames(LINK)
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


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The link's registry as the cycle left it (both mirrors ACTIVE, no lag), read for the copy's checks:
    the config's clusters are not running, and asking them costs a connection timeout per record."""
    answer = mirrors_answer([("orders", "ACTIVE"), ("refunds", "ACTIVE")])
    monkeypatch.setattr(
        mirror_engine,
        "mirror_overview",
        lambda config, link, measured_lags=None: (answer(link), {"orders": 0, "refunds": 0}),
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = ensure_dagster_home(tmp_path / "dagster-home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_a_cli_cycle_records_the_metadata_a_dagster_run_records(config_file: Path, home: Path) -> None:
    engine = stub_engine(
        config_file,
        list_mirrors=mirrors_answer([("orders", "ACTIVE"), ("refunds", "ACTIVE")]),
        run_cycle=lambda link, spark, mirrors=None, progress=None: CYCLE,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(NAMES.mirrors_partitions, ["orders", "refunds"])
    by_run = dg.materialize(
        [build_definitions(config_file).get_assets_def(NAMES.mirror_data_key)],
        instance=instance,
        resources={"mirror_engine": engine, "pyspark": types.SimpleNamespace(spark_session="spark")},
        tags={"dagster/asset_partition_range_start": "orders", "dagster/asset_partition_range_end": "refunds"},
    )
    run_metadata = {
        e.materialization.partition: e.materialization.metadata for e in by_run.get_asset_materialization_events()
    }

    dagster_events.record_cycle(load_config(config_file), LINK, CYCLE, origin=f"run --link {LINK}")

    with dg.DagsterInstance.from_config(str(home)) as recorded:
        assert sorted(recorded.get_dynamic_partitions(NAMES.mirrors_partitions)) == ["orders", "refunds"]
        records = recorded.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        cli_metadata = {r.asset_materialization.partition: r.asset_materialization.metadata for r in records}
        lag_check = recorded.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(NAMES.mirror_data_key, "lag_under_threshold")
        )
        assert lag_check.event.dagster_event.event_specific_data.passed
    assert sorted(cli_metadata) == ["orders", "refunds"]
    for mirror in ("orders", "refunds"):
        assert cli_metadata[mirror] == run_metadata[mirror]
    assert cli_metadata["orders"]["lineage_json"].value[1] == {
        "partition": 1,
        "source_from": 5,
        "source_until": 9,
        "dest_from": 3,
        "dest_until": 7,
        "records": 4,
        "bytes": 40,
        "lag_after": 0,
        "latency_min_ms": -1,
        "latency_max_ms": -1,
        "latency_sum_ms": 0,
        "latency_records": 0,
        "left_to_next_epoch": False,
        "rounds_held": 0,
    }


def test_the_demo_records_its_copy_and_its_offset_sync(config_file: Path, home: Path) -> None:
    synced = OffsetSyncResult(
        LINK,
        "exact",
        committed=1,
        checkpoint_latency_ms=12.0,
        groups=[
            GroupOffsetSync(
                "billing", "billing", "synced", [PartitionOffsetSync("orders", 0, 6, 6, None, "committed", 6)]
            )
        ],
    )

    dagster_events.record_demo(load_config(config_file), LINK, CYCLE, synced, ["orders"])

    with dg.DagsterInstance.from_config(str(home)) as recorded:
        (offsets,) = recorded.fetch_materializations(NAMES.consumer_offsets_key, limit=10).records
        metadata = offsets.asset_materialization.metadata
        assert offsets.asset_materialization.partition == "orders"
        assert metadata["offsets_committed"].value == 1 and metadata["checkpoint-latency-ms"].value == 12.0
        assert metadata["groups_json"].value[0]["partitions"][0]["destination_offset"] == 6
        copies = recorded.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        assert sorted(r.asset_materialization.partition for r in copies) == ["orders", "refunds"]
        check = recorded.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(NAMES.consumer_offsets_key, "offsets_in_sync")
        )
        assert check.event.dagster_event.event_specific_data.passed


def test_a_follow_epoch_records_the_partitions_it_left_to_the_next_epoch(config_file: Path, home: Path) -> None:
    """A task ready too late copies nothing in its epoch: the mirror is still recorded, saying which partitions."""
    left, all_left = (
        PartitionCopy(1, 5, 5, 3, 3, 0, 0, 4, left_to_next_epoch=True),
        PartitionCopy(0, 3, 3, 3, 3, 0, 0, 2, left_to_next_epoch=True),
    )
    epoch = CycleResult(
        LINK,
        1_767_225_600.0,
        5.0,
        2,
        {
            "orders": MirrorCopyResult(
                "orders", "orders", (PartitionCopy(0, 0, 10, 0, 10, 10, 100, 0, rounds_held=2), left)
            ),
            "refunds": MirrorCopyResult("refunds", "refunds", (all_left,)),
        },
    )

    dagster_events.record_cycle(load_config(config_file), LINK, epoch, origin=f"run --link {LINK} --follow (epoch 7)")

    with dg.DagsterInstance.from_config(str(home)) as recorded:
        records = recorded.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        metadata = {r.asset_materialization.partition: r.asset_materialization.metadata for r in records}
    assert sorted(metadata) == ["orders", "refunds"]  # refunds copied nothing, and is recorded all the same
    orders, refunds = metadata["orders"], metadata["refunds"]
    assert orders["partitions_left_to_next_epoch"].value == 1 and refunds["partitions_left_to_next_epoch"].value == 1
    assert orders["note"].value.startswith("partition(s) 1 left to the next epoch: their task was ready too late")
    assert refunds["records"].value == 0 and refunds["note"].value.startswith("partition(s) 0 left to the next epoch")
    assert "| 1 | left to the next epoch | [3, 3) | 0 | 0 | 4 | – |" in orders["lineage"].value
    assert "| 0 | [0, 10) | [0, 10) | 10 | 100 | 0 | – |" in orders["lineage"].value
    assert orders["cycle_partitions_left_to_next_epoch"].value == 2
    # Partition 0 copied on after two rounds not acknowledged in time (`left_open`).
    assert orders["rounds_not_acknowledged_in_time"].value == 2
    assert "rounds_not_acknowledged_in_time" not in refunds
    # A cycle (no follow epoch) leaves nothing to a next one: none of these keys.
    dagster_events.record_cycle(load_config(config_file), LINK, CYCLE, origin=f"run --link {LINK}")
    with dg.DagsterInstance.from_config(str(home)) as recorded:
        (latest,) = recorded.fetch_materializations(
            dg.AssetRecordsFilter(NAMES.mirror_data_key, asset_partitions=["refunds"]), limit=1
        ).records
    metadata = latest.asset_materialization.metadata
    assert "cycle_partitions_left_to_next_epoch" not in metadata and "note" not in metadata
    assert "partitions_left_to_next_epoch" not in metadata and "rounds_not_acknowledged_in_time" not in metadata


def test_an_instance_opened_ahead_for_another_dagster_home_is_not_recorded_in(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record opens its instance on a thread beside the checks' read: one opened for a home the
    process has left since (a long-lived process, a test) must not receive the next record."""
    first = ensure_dagster_home(tmp_path / "first-home")
    monkeypatch.setenv("DAGSTER_HOME", str(first))
    dagster_events.prepare_in_background()
    second = ensure_dagster_home(tmp_path / "second-home")
    monkeypatch.setenv("DAGSTER_HOME", str(second))

    dagster_events.record_cycle(load_config(config_file), LINK, CYCLE, origin=f"run --link {LINK}")

    with dg.DagsterInstance.from_config(str(second)) as recorded:
        records = recorded.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        assert sorted(r.asset_materialization.partition for r in records) == ["orders", "refunds"]
    with dg.DagsterInstance.from_config(str(first)) as untouched:
        assert not untouched.fetch_materializations(NAMES.mirror_data_key, limit=10).records


def test_an_instance_opened_ahead_twice_for_one_home_is_opened_once_and_recorded_in(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` opens the instance beside the Spark session's start, and the record asks again: the one
    opened first is the one written to (not a second opening, with the first left open)."""
    from mirror_pipeline.cli import dagster_recording

    home = ensure_dagster_home(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dagster_events.prepare_in_background()
    dagster_events._prepared()
    first = dagster_recording._ahead
    dagster_events.prepare_in_background()
    dagster_events._prepared()
    assert first is not None and dagster_recording._ahead is first

    dagster_events.record_cycle(load_config(config_file), LINK, CYCLE, origin=f"run --link {LINK}")

    assert dagster_recording._ahead is None  # taken by the record
    with dg.DagsterInstance.from_config(str(home)) as recorded:
        records = recorded.fetch_materializations(NAMES.mirror_data_key, limit=10).records
        assert sorted(r.asset_materialization.partition for r in records) == ["orders", "refunds"]


def test_secrets_never_reach_a_warning() -> None:
    error = RuntimeError("could not open postgresql://dagster:hunter2@db:5432/dagster with s3cr3t")
    said = dagster_events.reason(error, ["s3cr3t"])
    assert "hunter2" not in said and "s3cr3t" not in said
    assert said.startswith("RuntimeError: could not open postgresql://***@db:5432/dagster")


def test_nothing_copied_nothing_recorded_and_no_dagster_home(config_file: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    dagster_events.record_cycle(
        load_config(config_file), LINK, CycleResult(LINK, time.time(), 0.1, 0, {}), origin=f"run --link {LINK}"
    )
    assert not (tmp_path / ".dagster-home").exists()


# --- a wide link's record, in batches ------------------------------------------------------------------------------

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# More mirrors than two batches hold: full batches and a part one.
WIDE = [f"mirror-{i:04d}" for i in range(2 * dagster_batch.BATCH + 7)]


def wide_sync(mirrors: list[str]) -> OffsetSyncResult:
    """An offset sync that committed group `billing` on partition 0 of each mirror, at the mirror's own offset."""
    partitions = [PartitionOffsetSync(m, 0, i, i, None, "committed", i) for i, m in enumerate(mirrors)]
    return OffsetSyncResult(
        LINK, "exact", committed=len(mirrors), groups=[GroupOffsetSync("billing", "billing", "synced", partitions)]
    )


@pytest.fixture(params=["sqlite", "postgres"])
def deployed_home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`$DAGSTER_HOME` with a shipped instance file: deploy/dagster.yaml (SQLite), or
    deploy/dagster-postgres.yaml on a fresh database of the throwaway PostgreSQL server."""
    home = tmp_path / "dagster-home"
    home.mkdir()
    if request.param == "sqlite":
        shutil.copyfile(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    else:
        server = request.getfixturevalue("postgres_server")
        database = f"t_batch_{secrets.token_hex(4)}"
        server.create_database(database)
        shutil.copyfile(DEPLOY / "dagster-postgres.yaml", home / "dagster.yaml")
        for name, value in server.dagster_env(database).items():
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def entries_by_partition(home: Path) -> dict[str, list[dg.EventLogEntry]]:
    """Every `consumer_offsets` materialization in the instance at `home`, per mirror, oldest first."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(NAMES.consumer_offsets_key, limit=10 * len(WIDE)).records
    out: dict[str, list[dg.EventLogEntry]] = {}
    for record in sorted(records, key=lambda r: r.storage_id):
        out.setdefault(record.asset_materialization.partition, []).append(record.event_log_entry)
    return out


def test_a_wide_record_lands_whole_and_the_ui_reads_it_whole(config_file: Path, deployed_home: Path, capsys) -> None:
    config, origin, key = load_config(config_file), f"offsets sync --link {LINK}", NAMES.consumer_offsets_key
    partitions_def = build_definitions(config_file).get_assets_def(key).partitions_def
    first = WIDE[:10]

    dagster_events.record_offset_sync(config, LINK, wide_sync(first), first, origin=origin)
    with dg.DagsterInstance.from_config(str(deployed_home)) as instance:  # the UI reads (and caches) the status
        status = instance.get_status_by_partition(key, WIDE, partitions_def)
        assert {m for m, s in status.items() if s == dg.AssetPartitionStatus.MATERIALIZED} == set(first)
    dagster_events.record_offset_sync(config, LINK, wide_sync(WIDE), WIDE, origin=origin)
    assert capsys.readouterr().err == ""  # no "not recorded" warning

    with dg.DagsterInstance.from_config(str(deployed_home)) as instance:  # as the webserver, another process
        assert instance.get_materialized_partitions(key) == set(WIDE)
        status = instance.get_status_by_partition(key, WIDE, partitions_def)
        assert set(status.values()) == {dg.AssetPartitionStatus.MATERIALIZED}
        latest = instance.get_latest_materialization_event(key)
        assert latest.dagster_event.partition == WIDE[-1]
        (asset,) = instance.get_asset_records([key])
        newest = instance.fetch_materializations(key, limit=1).records[0]
        assert asset.asset_entry.last_materialization_record.storage_id == newest.storage_id
        check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(key, "offsets_in_sync"))
        assert check.event.dagster_event.event_specific_data.passed
    recorded = entries_by_partition(deployed_home)
    assert sorted(recorded) == WIDE
    assert [len(recorded[m]) for m in WIDE] == [2 if m in first else 1 for m in WIDE]
    for i, mirror in enumerate(WIDE):
        materialization = recorded[mirror][-1].asset_materialization
        assert materialization.description == f"recorded by `mirror-pipeline {origin}` (the CLI, outside a Dagster run)"
        assert materialization.metadata["offsets_committed"].value == len(WIDE)
        (group,) = materialization.metadata["groups_json"].value
        assert group["partitions"] == [
            {
                "mirror_topic": mirror,
                "partition": 0,
                "source_offset": i,
                "translated_offset": i,
                "previous_offset": None,
                "action": "committed",
                "destination_offset": i,
            }
        ]


def test_batched_events_are_the_ones_written_one_at_a_time(
    config_file: Path, deployed_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    config, origin = load_config(config_file), f"offsets sync --link {LINK}"
    monkeypatch.setattr(dagster_batch, "BATCH", 4)  # 11 mirrors: two full batches and a part one
    mirrors, first = WIDE[:11], WIDE[:3]

    def record_twice() -> dict[str, list[dg.EventLogEntry]]:
        dagster_events.record_offset_sync(config, LINK, wide_sync(first), first, origin=origin)
        dagster_events.record_offset_sync(config, LINK, wide_sync(mirrors), mirrors, origin=origin)
        assert capsys.readouterr().err == ""
        return entries_by_partition(Path(os.environ["DAGSTER_HOME"]))

    batched = record_twice()
    # The same into another instance one event at a time, as `report_runless_asset_event` writes them.
    monkeypatch.setenv("DAGSTER_HOME", str(ensure_dagster_home(tmp_path / "one-by-one")))
    monkeypatch.setattr(dagster_batch, "_dagster_internals", lambda instance: None)
    one_by_one = record_twice()

    assert sorted(batched) == sorted(one_by_one) == mirrors
    for mirror in mirrors:
        assert len(batched[mirror]) == len(one_by_one[mirror]) == (2 if mirror in first else 1)
        for ours, theirs in zip(batched[mirror], one_by_one[mirror], strict=True):
            assert ours._replace(timestamp=0.0) == theirs._replace(timestamp=0.0)


def test_a_batch_of_two_assets_is_refused_and_writes_nothing() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        mixed = [
            dg.AssetMaterialization(asset_key=NAMES.mirror_data_key, partition="orders"),
            dg.AssetMaterialization(asset_key=NAMES.consumer_offsets_key, partition="orders"),
        ]
        with pytest.raises(ValueError, match="one batch records one asset") as refused:
            dagster_batch.materialize(instance, mixed)
        assert NAMES.mirror_data_key.to_user_string() in str(refused.value)
        assert instance.get_materialized_partitions(NAMES.mirror_data_key) == set()
        assert instance.get_materialized_partitions(NAMES.consumer_offsets_key) == set()
