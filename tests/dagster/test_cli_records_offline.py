"""The CLI's runless records carry exactly what a Dagster run's materializations carry (issue #13).

Offline: the results are built by hand, the instance is a throwaway `DAGSTER_HOME`.
"""

from __future__ import annotations

import time
import types
from pathlib import Path

import dagster as dg
import pytest

import mirror_pipeline.cli.dagster_events as dagster_events
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
