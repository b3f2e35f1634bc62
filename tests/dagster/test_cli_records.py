"""The CLI's copies, offset syncs and new mirrors, recorded in the Dagster instance the UI reads (issue #13).

Against the local Kafka pair, through the real command line in a subprocess
with a throwaway `DAGSTER_HOME`: after `mirror create` the mirror is a
partition of the link's assets; after `run --link` each mirror has a
`mirror_data` materialization with its lineage, and the copy asset's checks
(`lag_under_threshold`, `no_foreign_writes`) an outcome; after `offsets sync` each has a
`consumer_offsets` one and the `offsets_in_sync` check has an outcome; after `link
sync-configs` each has a `mirror_config` one and `config_in_sync` an outcome; and an
instance that cannot be written costs one warning line, never the command.
"""

from __future__ import annotations

import json
import uuid

import dagster as dg

from mirror_pipeline import engine
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.config.loader import load_config
from mirror_pipeline_dagster.naming import LinkNames
from tests.cli_process import run_cli
from tests.dagster.cli_link import produce, write_config
from tests.kafka_records import commit

# A link of its own per run (the test clusters may be kept between runs): its registry holds only this test's mirrors.
LINK = f"cli-records-{uuid.uuid4().hex[:8]}"
NAMES = LinkNames(LINK)
MIRROR_DATA, CONSUMER_OFFSETS, PARTITIONS = NAMES.mirror_data_key, NAMES.consumer_offsets_key, NAMES.mirrors_partitions


def test_cli_cycles_are_dagster_events(tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name):
    group = unique_name("billing")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, group, LINK)
    config = load_config(path)
    orders = create_topic(source_bootstrap, unique_name("orders"), partitions=2)
    refunds = create_topic(source_bootstrap, unique_name("refunds"), partitions=1)
    produce(source_bootstrap, orders, {0: 7, 1: 3})
    produce(source_bootstrap, refunds, {0: 5})
    home = ensure_dagster_home(tmp_path / "dagster-home")  # the project's instance settings, as the CLI makes it

    # `mirror create` makes the mirror a partition at once; one made without the CLI is not yet one.
    created = run_cli(home, "mirror", "create", orders, "--link", LINK, "--config", str(path))
    assert created.returncode == 0 and created.stderr == "", created.stderr[-2000:]
    engine.create_mirror(config, LINK, refunds)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert list(instance.get_dynamic_partitions(PARTITIONS)) == [orders]

    # `run --link`: one materialization per mirror, with the lineage a Dagster run records.
    ran = run_cli(home, "run", "--link", LINK, "--config", str(path), "--json")
    assert ran.returncode == 0 and "not recorded" not in ran.stderr, ran.stderr[-2000:]  # (Spark's JVM talks on stderr)
    printed = json.loads(ran.stdout)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert sorted(instance.get_dynamic_partitions(PARTITIONS)) == sorted([orders, refunds])
        records = instance.fetch_materializations(MIRROR_DATA, limit=10).records
        by_mirror = {r.asset_materialization.partition: r for r in records}
        assert sorted(by_mirror) == sorted([orders, refunds]) and len(records) == 2
        for mirror, counts in ((orders, {0: 7, 1: 3}), (refunds, {0: 5})):
            record = by_mirror[mirror]
            assert record.run_id == ""  # runless: recorded by the CLI, not by a Dagster run
            metadata = record.asset_materialization.metadata
            assert metadata["records"].value == sum(counts.values())
            assert metadata["bytes"].value > 0 and metadata["lag_after"].value == 0
            assert metadata["source_topic"].value == mirror
            assert metadata["cycle_records"].value == 15 == printed["records"]
            assert metadata["cycle_duration_s"].value >= 0
            lineage = {p["partition"]: p for p in metadata["lineage_json"].value}
            assert lineage == {int(p["partition"]): p for p in printed["mirrors"][mirror]["partitions"]}
            for partition, count in counts.items():  # R-OBS-4: source range read, mirror range written
                assert (lineage[partition]["source_from"], lineage[partition]["source_until"]) == (0, count)
                assert (lineage[partition]["dest_from"], lineage[partition]["dest_until"]) == (0, count)
            assert f"[0, {counts[0]})" in metadata["lineage"].value
            assert f"mirror-pipeline run --link {LINK}" in record.asset_materialization.description
        # The copy asset's checks have the outcome a Dagster run would record (no longer "Not Evaluated").
        for name, passed in (("lag_under_threshold", True), ("no_foreign_writes", True)):
            check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(MIRROR_DATA, name))
            assert check is not None, f"{name} was not recorded"
            evaluation = check.event.dagster_event.event_specific_data
            assert evaluation.passed is passed and evaluation.metadata, name

    # `run --mirror`: only the mirror named.
    produce(source_bootstrap, refunds, {0: 2})
    ran = run_cli(home, "run", "--link", LINK, "--mirror", refunds, "--config", str(path))
    assert ran.returncode == 0 and "not recorded" not in ran.stderr, ran.stderr[-2000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        latest = instance.fetch_materializations(MIRROR_DATA, limit=10).records
        assert [r.asset_materialization.partition for r in latest[:1]] == [refunds] and len(latest) == 3
        (partition,) = latest[0].asset_materialization.metadata["lineage_json"].value
        assert (partition["source_from"], partition["source_until"], partition["dest_until"]) == (5, 7, 7)

    # `offsets sync`: one `consumer_offsets` materialization per mirror, and the check's outcome.
    commit(source_bootstrap, group, orders, {0: 4, 1: 3})
    synced = run_cli(home, "offsets", "sync", "--link", LINK, "--config", str(path))
    assert synced.returncode == 0 and synced.stderr == "", synced.stderr[-2000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(CONSUMER_OFFSETS, limit=10).records
        by_mirror = {r.asset_materialization.partition: r.asset_materialization.metadata for r in records}
        assert sorted(by_mirror) == sorted([orders, refunds])
        assert by_mirror[orders]["offsets_committed"].value == 2
        assert by_mirror[orders]["offset-sync-lag"].value == 0
        (row,) = by_mirror[orders]["groups_json"].value
        assert row["source_group"] == group and sorted(p["destination_offset"] for p in row["partitions"]) == [3, 4]
        check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(CONSUMER_OFFSETS, "offsets_in_sync"))
        assert check is not None and check.event.dagster_event.event_specific_data.passed

    # `link sync-configs`: one `mirror_config` materialization per mirror, and the `config_in_sync` outcome.
    synced = run_cli(home, "link", "sync-configs", LINK, "--config", str(path))
    assert synced.returncode == 0 and "not recorded" not in synced.stderr, synced.stderr[-2000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(NAMES.mirror_config_key, limit=10).records
        assert sorted(r.asset_materialization.partition for r in records) == sorted([orders, refunds])
        check = instance.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(NAMES.mirror_config_key, "config_in_sync")
        )
        assert check is not None, "config_in_sync was not recorded"
        evaluation = check.event.dagster_event.event_specific_data
        assert evaluation.passed and evaluation.metadata["mirrors_checked"].value == 2


def test_an_instance_that_cannot_be_written_is_one_warning(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    link = f"{LINK}-unwritable"
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, unique_name("group"), link)
    topic = create_topic(source_bootstrap, unique_name("orders"))
    engine.create_mirror(load_config(path), link, topic)
    not_a_directory = tmp_path / "dagster-home"
    not_a_directory.write_text("")

    synced = run_cli(not_a_directory, "offsets", "sync", "--link", link, "--config", str(path))

    assert synced.returncode == 0, synced.stderr[-2000:]  # the sync was done: its exit code
    assert synced.stdout.startswith(f"link '{link}'")
    lines = synced.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: not recorded in the Dagster instance"), synced.stderr
    assert "is not a directory" in lines[0] and "Traceback" not in synced.stderr
