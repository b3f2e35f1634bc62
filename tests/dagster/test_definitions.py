"""The whole Dagster code location, loaded from a config file; no Kafka needed.

The clusters in these configs point at loopback ports where nothing listens:
loading definitions must not talk to Kafka. Sensor, schedule and asset bodies
are exercised with the engine's verbs replaced by stubs.
"""

from __future__ import annotations

import importlib
import json
import time
import types
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.config.spark_requirements import default_local_master
from mirror_pipeline.model.errors import ClusterUnreachable, ConfigError
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, PartitionCopy
from tests.dagster.offline_config import TICK, VALID_CONFIG, mirrors_answer, stub_engine, tick_schedule

REPO = Path(__file__).resolve().parents[2]


# link name -> Dagster name
LINKS = {"west-to-east": "west_to_east", "east.to.west": "east_to_west"}


@pytest.fixture(scope="module")
def definitions() -> types.ModuleType:
    """The code location's module; importing it reads no file (Dagster calls `defs()` at load)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MIRROR_PIPELINE_CONFIG", "/nonexistent/mirror.yaml")
        return importlib.import_module("mirror_pipeline_dagster.definitions")


@pytest.fixture
def defs(definitions, config_file: Path) -> dg.Definitions:
    return definitions.build_definitions(config_file)


def test_each_link_has_asset_partitions_job_schedule_and_sensor(defs: dg.Definitions) -> None:
    repo = defs.get_repository_def()
    for link, name in LINKS.items():
        key = dg.AssetKey([name, "mirror_data"])
        asset = defs.get_assets_def(key)
        assert asset.group_names_by_key[key] == name
        partitions = asset.partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == f"{name}_mirrors"
        assert asset.backfill_policy == dg.BackfillPolicy.single_run()
        assert {"mirror_engine", "pyspark"} <= asset.required_resource_keys

        job = repo.get_job(f"{name}_replicate")
        assert job.tags["mirror-pipeline/link"] == link
        assert job.asset_layer.selected_asset_keys == {key}
        assert job.executor_def.name == "in_process"

        schedule = repo.get_schedule_def(f"{name}_replicate_schedule")
        assert schedule.job_name == job.name
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED

        sensor = repo.get_sensor_def(f"{name}_lag_sensor")
        assert sensor.job_name == job.name
        assert sensor.minimum_interval_seconds == 30


def test_each_links_copy_asset_has_a_freshness_policy_from_its_target(definitions, tmp_path: Path) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        VALID_CONFIG.replace(
            "destination: us-east\n", "destination: us-east\n    mirror.freshness.target.ms: 600000\n", 1
        )
    )
    graph = definitions.build_definitions(path).get_repository_def().asset_graph
    policies = {link: graph.get(dg.AssetKey([name, "mirror_data"])).freshness_policy for link, name in LINKS.items()}
    assert policies["west-to-east"].fail_window.to_timedelta() == timedelta(minutes=10)
    assert policies["west-to-east"].warn_window.to_timedelta() == timedelta(minutes=5)
    assert policies["east.to.west"].fail_window.to_timedelta() == timedelta(minutes=5)  # the default target


def test_each_links_lag_sensor_looks_as_often_as_its_setting_says(definitions, tmp_path: Path) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        VALID_CONFIG.replace(
            "destination: us-east\n", "destination: us-east\n    dagster.lag.sensor.interval.seconds: 5\n", 1
        )
    )
    repo = definitions.build_definitions(path).get_repository_def()
    intervals = {
        link: repo.get_sensor_def(f"{name}_lag_sensor").minimum_interval_seconds for link, name in LINKS.items()
    }
    assert intervals == {"west-to-east": 5, "east.to.west": 30}


def test_resources_point_at_the_loaded_file(defs: dg.Definitions, config_file: Path) -> None:
    resources = defs.resources
    assert resources["mirror_engine"].config_path == str(config_file.resolve())
    spark_config = resources["pyspark"].spark_config
    assert spark_config["spark.master"] == default_local_master()
    assert spark_config["spark.speculation"] == "false"


def test_missing_config_file_is_a_load_error_naming_it(definitions, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        definitions.build_definitions(tmp_path / "absent.yaml")
    assert f"{tmp_path / 'absent.yaml'}: configuration file not found" in str(err.value)


def test_the_location_finds_the_projects_file_whatever_the_working_directory(
    definitions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MIRROR_PIPELINE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert definitions.code_location_config_path() == REPO / "mirror.yaml"
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", "relative.yaml")
    assert definitions.code_location_config_path() == tmp_path / "relative.yaml"


def test_env_var_selects_the_file(definitions, config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", str(config_file))
    defs = definitions.build_definitions()
    keys = set(defs.get_repository_def().asset_graph.get_all_asset_keys())
    assert keys == {
        dg.AssetKey([name, kind])
        for name in LINKS.values()
        for kind in ("source_topics", "mirror_data", "mirror_config", "consumer_offsets")
    }


def test_invalid_config_fails_with_the_problem_named(definitions, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(VALID_CONFIG.replace("destination: us-east", "destination: us-north"))
    with pytest.raises(ConfigError) as err:
        definitions.build_definitions(path)
    message = str(err.value)
    assert str(path) in message
    assert "links.west-to-east.destination" in message and "us-north" in message


def test_links_whose_dagster_names_clash_are_refused(definitions, tmp_path: Path) -> None:
    path = tmp_path / "clash.yaml"
    path.write_text(VALID_CONFIG + "  west.to.east:\n    source: us-west\n    destination: us-east\n")
    with pytest.raises(ConfigError, match="'west-to-east' and 'west.to.east'"):
        definitions.build_definitions(path)


# --- sensor, schedule and asset bodies, with the engine stubbed ------------------------------


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        yield instance


def _resources(config_file: Path, **answers) -> dict:
    """The engine resource, with the named verbs answered by stubs."""
    return {"mirror_engine": stub_engine(config_file, **answers)}


def overview(states, lags):
    """`mirror_overview` answering the registry `states` gives and the lags `lags` gives."""
    return lambda link: (states(link), lags(link))


def test_lag_sensor_registers_new_mirrors_and_requests_one_run(defs, config_file, instance, monkeypatch) -> None:

    instance.add_dynamic_partitions("west_to_east_mirrors", ["a", "b", "c"])
    lags = lambda link: {"a": 0, "b": 7, "c": 0, "d": 2}  # noqa: E731
    states = mirrors_answer([("a", "ACTIVE"), ("b", "ACTIVE"), ("c", "PAUSED"), ("d", "ACTIVE")])
    sensor = defs.get_repository_def().get_sensor_def("west_to_east_lag_sensor")
    with dg.build_sensor_context(
        instance=instance, resources=_resources(config_file, mirror_overview=overview(states, lags)), definitions=defs
    ) as context:
        result = sensor.evaluate_tick(context)

    # Lag history between copies, and the link's state summary, on every registered mirror.
    observed = {e.partition: e.metadata for e in result.asset_events}
    assert sorted(observed) == ["a", "b", "c"]  # d is registered by this tick, observed from the next
    assert observed["b"]["replication-records-lag"].value == 7 and observed["c"]["state"].value == "PAUSED"
    assert observed["a"]["link_mirrors"].value == "ACTIVE 3, PAUSED 1"

    assert [r.partition_keys for r in result.dynamic_partitions_requests] == [["d"]]
    (request,) = result.run_requests
    # One run over the range b..d of the partitions' order [a, b, c, d].
    assert request.tags["dagster/asset_partition_range_start"] == "b"
    assert request.tags["dagster/asset_partition_range_end"] == "d"
    assert request.tags["mirror-pipeline/link"] == "west-to-east"
    assert json.loads(result.cursor)["lags"] == {"a": 0, "b": 7, "c": 0, "d": 2}


def test_lag_sensor_observes_news_only(defs, config_file, instance, monkeypatch) -> None:
    """A tick observes what changed; an unchanged link records nothing, a steady lag change at most every 5 min."""
    import mirror_pipeline_dagster.lag_sensor as lag_sensor

    instance.add_dynamic_partitions("east_to_west_mirrors", ["a", "b", "c"])
    sensor = defs.get_repository_def().get_sensor_def("east_to_west_lag_sensor")
    clock = [1_000_000.0]
    # The sensor's clock only: Dagster's own must stay real.
    monkeypatch.setattr(lag_sensor, "time", types.SimpleNamespace(time=lambda: clock[0], time_ns=time.time_ns))

    def tick(cursor, lags, states):
        answers = overview(mirrors_answer(sorted(states.items())), lambda link: lags)
        with dg.build_sensor_context(
            instance=instance,
            cursor=cursor,
            definitions=defs,
            resources=_resources(config_file, mirror_overview=answers),
        ) as context:
            result = sensor.evaluate_tick(context)
        return result.cursor, {e.partition: e.metadata["replication-records-lag"].value for e in result.asset_events}

    active = {"a": "ACTIVE", "b": "ACTIVE", "c": "ACTIVE"}
    # east.to.west alerts above 100 records (offline_config).
    cursor, seen = tick(None, {"a": 0, "b": 5, "c": 50}, active)
    assert seen == {"a": 0, "b": 5, "c": 50}  # first sight of each
    clock[0] += 30
    cursor, seen = tick(cursor, {"a": 0, "b": 5, "c": 50}, active)
    assert seen == {}  # nothing new
    clock[0] += 30
    cursor, seen = tick(cursor, {"a": 300, "b": 6, "c": 500}, active)
    assert seen == {"a": 300, "c": 500}  # a and c crossed the threshold; b only moved
    clock[0] += lag_sensor.LAG_OBSERVATION_INTERVAL_S
    cursor, seen = tick(cursor, {"a": 300, "b": 7, "c": 500}, active)
    assert seen == {"b": 7}  # b moved, and its last observation is old enough
    cursor, seen = tick(cursor, {"a": 300, "b": 7, "c": 500}, {**active, "c": "PAUSED"})
    assert seen == {"a": 300, "b": 7, "c": 500}  # the link's summary changed: every mirror shows it
    cursor, seen = tick(cursor, {"a": 300, "b": 700}, {"a": "ACTIVE", "b": "ACTIVE"})
    assert sorted(json.loads(cursor)["observed"]) == ["a", "b"]  # a deleted mirror leaves the cursor


def test_lag_sensor_threshold_and_in_progress_run_skip(defs, config_file, instance, monkeypatch) -> None:

    instance.add_dynamic_partitions("east_to_west_mirrors", ["x"])
    sensor = defs.get_repository_def().get_sensor_def("east_to_west_lag_sensor")
    states = mirrors_answer([("x", "ACTIVE")])
    with dg.build_sensor_context(
        instance=instance,
        resources=_resources(config_file, mirror_overview=overview(states, lambda link: {"x": 100})),
        definitions=defs,
    ) as context:
        result = sensor.evaluate_tick(context)
    assert result.run_requests == []
    assert "(ACTIVE 1), none more than 100 records behind" in result.skip_message

    # Without the run queue, a second run would start at once beside the first: the sensor waits for it.
    job = defs.get_repository_def().get_job("east_to_west_replicate")
    no_queue = {"run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}}
    with dg.instance_for_test(overrides=no_queue) as unqueued:
        unqueued.add_dynamic_partitions("east_to_west_mirrors", ["x"])
        run = unqueued.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
        with dg.build_sensor_context(
            instance=unqueued,
            resources=_resources(config_file, mirror_overview=overview(states, lambda link: {"x": 101})),
            definitions=defs,
        ) as context:
            result = sensor.evaluate_tick(context)
    assert result.run_requests == []
    assert f"run {run.run_id} of east_to_west_replicate is still in progress" in result.skip_message


def test_under_the_run_queue_the_lag_sensor_queues_one_run_behind_the_one_copying(defs, config_file) -> None:
    """The next run waits in the queue, which starts it as the running one ends; never two waiting."""
    queue = {"run_coordinator": {"module": "dagster", "class": "QueuedRunCoordinator"}}
    sensor = defs.get_repository_def().get_sensor_def("east_to_west_lag_sensor")
    job = defs.get_repository_def().get_job("east_to_west_replicate")
    states = mirrors_answer([("x", "ACTIVE"), ("y", "ACTIVE")])

    def tick(instance):
        with dg.build_sensor_context(
            instance=instance,
            definitions=defs,
            resources=_resources(config_file, mirror_overview=overview(states, lambda link: {"x": 101, "y": 5000})),
        ) as context:
            return sensor.evaluate_tick(context)

    with dg.instance_for_test(overrides=queue) as instance:
        instance.add_dynamic_partitions("east_to_west_mirrors", ["x", "y"])
        instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
        (request,) = tick(instance).run_requests
        assert request.tags["dagster/asset_partition_range_start"] == "x"
        assert request.tags["dagster/asset_partition_range_end"] == "y"
        waiting = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTING)  # admitted, not yet begun
        result = tick(instance)
        assert result.run_requests == []
        assert f"run {waiting.run_id} of east_to_west_replicate is already waiting to start" in result.skip_message


def test_lag_sensor_skips_naming_the_cluster_when_kafka_is_down(defs, config_file, instance, monkeypatch) -> None:

    def unreachable(link):
        raise ClusterUnreachable("cluster 'us-west' (127.0.0.1:19999) did not answer within 10s")

    sensor = defs.get_repository_def().get_sensor_def("west_to_east_lag_sensor")
    with dg.build_sensor_context(
        instance=instance,
        resources=_resources(config_file, mirror_overview=unreachable),
        definitions=defs,
        cursor="seen",
    ) as context:
        result = sensor.evaluate_tick(context)
    assert result.run_requests == []
    assert "us-west" in result.skip_message
    assert result.cursor == "seen"


def test_schedule_requests_one_run_keyed_by_scheduled_time(defs, config_file, instance, monkeypatch) -> None:
    instance.add_dynamic_partitions("west_to_east_mirrors", ["a", "b", "c"])
    engine = stub_engine(
        config_file, list_mirrors=mirrors_answer([("a", "ACTIVE"), ("b", "ACTIVE"), ("c", "PAUSED"), ("new", "ACTIVE")])
    )
    result = tick_schedule(defs, engine, instance, "west_to_east_replicate_schedule")
    (request,) = result.run_requests
    assert request.run_key == f"west-to-east:{TICK.isoformat()}"
    assert request.tags["dagster/asset_partition_range_start"] == "a"
    assert request.tags["dagster/asset_partition_range_end"] == "b"
    assert request.tags["mirror-pipeline/link"] == "west-to-east"


def test_copy_asset_records_lineage_per_mirror_in_one_run(defs, config_file, monkeypatch) -> None:
    """A single run over three mirrors: one materialization each, with its own lineage."""

    def fake_cycle(link, spark, mirrors=None, progress=None):
        assert spark == "spark-session"
        copies = {
            m: MirrorCopyResult(m, f"src-{m}", (PartitionCopy(0, 0, 10 * n, 0, 10 * n, 10 * n, 100 * n, n - 1),))
            for n, m in enumerate(mirrors, start=1)
        }
        return CycleResult(link, time.time(), 2.5, len(copies), copies)

    engine = _engine(config_file, ["m1", "m2", "m3"], run_cycle=fake_cycle)
    result = _materialize_range(defs, engine, ["m1", "m2", "m3"])
    assert result.success
    events = {
        e.materialization.partition: e.materialization.metadata for e in result.get_asset_materialization_events()
    }
    assert sorted(events) == ["m1", "m2", "m3"]
    for n, mirror in enumerate(["m1", "m2", "m3"], start=1):
        metadata = events[mirror]
        assert metadata["records"].value == 10 * n
        assert metadata["bytes"].value == 100 * n
        assert metadata["lag_after"].value == n - 1
        assert metadata["source_topic"].value == f"src-{mirror}"
        assert f"[0, {10 * n})" in metadata["lineage"].value
        # Cycle totals ride on every mirror's materialization.
        assert metadata["cycle_records"].value == 60
        assert metadata["cycle_lag_after"].value == 3
        assert metadata["cycle_duration_s"].value == 2.5


def _engine(config_file, topics, **answers):
    """The engine with `topics` as the link's ACTIVE mirrors and `answers` for other verbs."""
    return stub_engine(config_file, list_mirrors=mirrors_answer([(t, "ACTIVE") for t in topics]), **answers)


def _materialize_range(defs, engine, keys, raise_on_error=True):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("west_to_east_mirrors", keys)
    return dg.materialize(
        [defs.get_assets_def(dg.AssetKey(["west_to_east", "mirror_data"]))],
        instance=instance,
        resources={"mirror_engine": engine, "pyspark": types.SimpleNamespace(spark_session="spark-session")},
        tags={
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[-1],
        },
        raise_on_error=raise_on_error,
    )


def test_copy_asset_skips_a_deleted_mirror_inside_the_range(defs, config_file, monkeypatch) -> None:

    asked = []

    def fake_cycle(link, spark, mirrors=None, progress=None):
        asked.append(list(mirrors))
        return CycleResult(link, time.time(), 1.0, 0, {})

    engine = _engine(config_file, ["m1", "m3"], run_cycle=fake_cycle)
    result = _materialize_range(defs, engine, ["m1", "gone", "m3"])
    assert result.success
    assert asked == [["m1", "m3"]]


def test_copy_asset_records_the_mirrors_that_copied_when_others_fail(defs, config_file, monkeypatch) -> None:
    from mirror_pipeline.engine import CycleFailed

    def failing_cycle(link, spark, mirrors=None, progress=None):
        copied = MirrorCopyResult("m1", "m1", (PartitionCopy(0, 0, 5, 0, 5, 5, 50, 0),))
        partial = CycleResult(link, time.time(), 1.0, 2, {"m1": copied})
        raise CycleFailed("mirror 'm2': source topic unreadable", partial)

    engine = _engine(config_file, ["m1", "m2"], run_cycle=failing_cycle)
    result = _materialize_range(defs, engine, ["m1", "m2"], raise_on_error=False)
    assert not result.success
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.partition == "m1"
    assert event.materialization.metadata["records"].value == 5
    (failure,) = result.get_step_failure_events()
    assert "source topic unreadable" in failure.step_failure_data.user_failure_data.description


# --- config sync: asset, check, job and schedule (R-CS) --------------------------------------


def test_each_link_has_config_sync_asset_check_job_and_schedule(defs: dg.Definitions) -> None:
    repo = defs.get_repository_def()
    for name in LINKS.values():
        key = dg.AssetKey([name, "mirror_config"])
        asset = defs.get_assets_def(key)
        assert asset.group_names_by_key[key] == name
        assert asset.partitions_def == defs.get_assets_def(dg.AssetKey([name, "mirror_data"])).partitions_def
        assert asset.backfill_policy == dg.BackfillPolicy.single_run()
        assert "mirror_engine" in asset.required_resource_keys
        assert "pyspark" not in asset.required_resource_keys  # no Spark session for a config sync
        check_key = dg.AssetCheckKey(key, "config_in_sync")
        assert check_key in repo.asset_graph.asset_check_keys

        job = repo.get_job(f"{name}_config_sync")
        assert job.asset_layer.selected_asset_keys == {key}
        assert check_key in job.asset_layer.asset_graph.asset_check_keys
        assert "mirror-pipeline/link" not in job.tags  # never queues behind a copy run

        schedule = repo.get_schedule_def(f"{name}_config_sync_schedule")
        assert schedule.job_name == job.name
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
        assert schedule.cron_schedule == "* * * * *"  # topic.config.sync.ms 5000 -> every minute


@pytest.mark.parametrize(
    ("ms", "cron"),
    [
        (1, "* * * * *"),
        (60_000, "* * * * *"),
        (60_001, "*/2 * * * *"),
        (7 * 60_000, "*/6 * * * *"),
        (10 * 60_000, "*/10 * * * *"),
        (59 * 60_000, "*/30 * * * *"),
        (60 * 60_000, "0 * * * *"),
        (5 * 3_600_000, "0 */4 * * *"),
        (24 * 3_600_000, "0 0 * * *"),
        (7 * 86_400_000, "0 0 * * *"),
    ],
)
def test_config_sync_cron_never_runs_less_often_than_the_interval(ms: int, cron: str) -> None:
    from mirror_pipeline_dagster.config_sync import config_sync_cron

    assert config_sync_cron(ms) == cron


def test_config_sync_schedule_follows_the_links_interval() -> None:
    from mirror_pipeline_dagster import link_definitions

    schedules = {s.name: s for s in link_definitions("west-to-east", config_sync_ms=600_000).schedules}
    assert schedules["west_to_east_config_sync_schedule"].cron_schedule == "*/10 * * * *"


def _stub_config_sync(config_file, topics, drifted=(), failing=()):
    from mirror_pipeline.sync.config_sync import ConfigSyncFailed, ConfigSyncResult, MirrorConfigSync

    asked = {}

    def fake_sync(link, mirrors=None):
        asked["sync"] = list(mirrors)
        synced = {
            m: MirrorConfigSync(
                m,
                f"src-{m}",
                "ACTIVE",
                changed={} if m in failing else {"retention.ms": ("604800000", str(n))},
                overridden={"flush.ms": "10"} if n == 2 else {},
                held_back={"message.timestamp.type": "LogAppendTime"},
                in_sync=m not in failing,
                synced_at=1.0,
                config_sync_lag_ms=0 if m not in failing else 9000,
                source_partitions=n,
                mirror_partitions=n,
                error="boom" if m in failing else None,
            )
            for n, m in enumerate(mirrors, start=1)
        }
        result = ConfigSyncResult(link, time.time(), 0.5, synced, {})
        if failing:
            raise ConfigSyncFailed(f"config sync of link '{link}' failed for mirror '{failing[0]}'", result)
        return result

    def fake_drift(link, mirrors=None):
        asked["drift"] = list(mirrors)
        return {
            m: {
                "in_sync": m not in drifted,
                "drift": {"retention.ms": ["1", "2"]} if m in drifted else {},
                "config_sync_lag_ms": 7000 if m in drifted else 0,
            }
            for m in mirrors
        }

    return asked, _engine(config_file, topics, sync_configs=fake_sync, link_config_drift=fake_drift)


def _run_config_sync(defs, engine, keys, raise_on_error=True):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("west_to_east_mirrors", keys)
    job = defs.get_repository_def().get_job("west_to_east_config_sync")
    return job.execute_in_process(
        instance=instance,
        resources={"mirror_engine": engine},
        tags={
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[-1],
        },
        raise_on_error=raise_on_error,
    )


def test_config_sync_records_each_mirror_and_the_check_warns_on_drift(defs, config_file, monkeypatch) -> None:
    asked, engine = _stub_config_sync(config_file, ["m1", "m2", "m3"], drifted=["m2"])
    result = _run_config_sync(defs, engine, ["m1", "gone", "m2", "m3"])
    assert result.success
    assert asked == {"sync": ["m1", "m2", "m3"], "drift": ["m1", "gone", "m2", "m3"]}
    events = {
        e.materialization.partition: e.materialization.metadata for e in result.get_asset_materialization_events()
    }
    assert sorted(events) == ["gone", "m1", "m2", "m3"]
    assert events["m2"]["changed"].value == {"retention.ms": {"old": "604800000", "new": "2"}}
    assert events["m2"]["overridden"].value == {"flush.ms": "10"}
    assert events["m1"]["held_back"].value == {"message.timestamp.type": "LogAppendTime"}
    assert events["m3"]["in_sync"].value is True
    assert events["m3"]["config_sync_lag_ms"].value == 0
    assert events["m3"]["mirror_partitions"].value == 3
    assert events["gone"]["in_sync"].value is False
    assert events["m1"]["sync_configs_changed"].value == 3

    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "config_in_sync"
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["mirrors_with_drift"].value == ["m2"]
    assert check.metadata["max_config_sync_lag_ms"].value == 7000


def test_config_sync_records_the_mirrors_that_synced_when_one_fails(defs, config_file, monkeypatch) -> None:
    _, engine = _stub_config_sync(config_file, ["m1", "m2"], failing=["m2"])
    result = _run_config_sync(defs, engine, ["m1", "m2"], raise_on_error=False)
    assert not result.success
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.partition == "m1"
    (failure,) = result.get_step_failure_events()
    assert "mirror 'm2'" in failure.step_failure_data.user_failure_data.description


def test_config_sync_schedule_requests_one_run_over_active_and_paused_mirrors(
    defs, config_file, instance, monkeypatch
) -> None:
    instance.add_dynamic_partitions("west_to_east_mirrors", ["a", "b", "c", "d"])
    engine = stub_engine(
        config_file,
        list_mirrors=mirrors_answer(
            [("a", "STOPPED"), ("b", "ACTIVE"), ("c", "PAUSED"), ("d", "FAILED"), ("new", "ACTIVE")]
        ),
    )
    result = tick_schedule(defs, engine, instance, "west_to_east_config_sync_schedule")
    (request,) = result.run_requests
    assert request.run_key == f"west-to-east:config-sync:{TICK.isoformat()}"
    assert request.tags["dagster/asset_partition_range_start"] == "b"
    assert request.tags["dagster/asset_partition_range_end"] == "c"
    assert request.tags["mirror-pipeline/config-sync"] == "west-to-east"


def test_spark_secrets_stay_out_of_the_repository_snapshot(definitions, tmp_path: Path) -> None:
    """What the UI shows of a resource is its config: secret Spark settings come from the file at run time."""
    from dagster._core.remote_representation.external_data import RepositorySnap
    from dagster_shared.serdes import serialize_value

    from mirror_pipeline_dagster.resources.spark import secret_settings

    path = tmp_path / "mirror.yaml"
    path.write_text(
        VALID_CONFIG
        + (
            "spark:\n  conf:\n"
            "    spark.hadoop.fs.s3a.secret.key: s3cr3t-value-42\n"
            "    spark.ssl.keyPassword: kp-value-99\n"
            "    spark.hadoop.fs.s3a.access.key: AKIA-visible\n"
        )
    )
    defs = definitions.build_definitions(path)
    snapshot = serialize_value(RepositorySnap.from_def(defs.get_repository_def()))
    for secret in ("s3cr3t-value-42", "kp-value-99"):
        assert secret not in snapshot
    resource = defs.resources["pyspark"]
    assert "spark.hadoop.fs.s3a.secret.key" not in resource.spark_config
    assert resource.spark_config["spark.hadoop.fs.s3a.access.key"] == "AKIA-visible"
    # The run's session still gets them, from the file.
    assert secret_settings(load_config(resource.config_path))["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-value-42"


def test_the_reverse_job_takes_an_explicit_topic_list_and_runs_the_engine_verb(defs, config_file, instance) -> None:
    from mirror_pipeline.operations.lifecycle import LifecycleResult
    from mirror_pipeline_dagster.lifecycle_jobs import reverse_run_config

    job = defs.get_job_def("reverse")
    with pytest.raises(dg.DagsterInvalidConfigError, match="topics"):
        job.execute_in_process(
            run_config={"ops": {"reverse_mirrors": {"config": {"link": "west-to-east"}}}}, instance=instance
        )
    calls = []

    def reverse(link, topics, reverse_link, start, dry_run, realign_groups):
        calls.append((link, list(topics), reverse_link, start, dry_run, realign_groups))
        return LifecycleResult(
            "reverse",
            link,
            {
                "orders": {
                    "before": "STOPPED",
                    "after": "PAUSED",
                    "said": "reversed",
                    "new_mirror": "orders",
                    "reverse_link": "east.to.west",
                }
            },
        )

    result = job.execute_in_process(
        run_config=reverse_run_config("west-to-east", ["orders"], start=False),
        instance=instance,
        resources={"mirror_engine": stub_engine(config_file, reverse=reverse)},
    )

    assert result.success
    assert calls == [("west-to-east", ["orders"], None, False, False, False)]
    assert result.output_for_node("reverse_mirrors")["mirrors"]["orders"]["after"] == "PAUSED"
    empty = job.execute_in_process(
        run_config=reverse_run_config("west-to-east", []),
        instance=instance,
        resources={"mirror_engine": stub_engine(config_file, reverse=reverse)},
        raise_on_error=False,
    )
    assert not empty.success and len(calls) == 1
