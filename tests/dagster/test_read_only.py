"""Read-only verbs, asset checks, sensors and schedules change nothing on any cluster.

One link on the local pair is set up so that every writer WOULD have work: a
mirror that lags, whose source grew a partition and changed a config, with a
source group to translate; a mirror whose source topic is gone (the health
job would fail it); and a source topic the auto-create filters select (the
auto-create job would mirror it). Then describe and every other read-only
CLI verb, each asset check, each sensor and each schedule run, and both
clusters are snapshotted before and after: topics, partitions, configs,
every partition's log start and end, and the groups' committed offsets.
The control at the end runs the jobs the sensors requested and sees the
snapshot change, so the snapshot does see writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.resources import MirrorEngine
from tests.config_files import write_pair_config
from tests.dagster.offline_config import TICK

LINK = "ro"
GROUP = "ro"  # the link's Dagster name


def test_reads_checks_sensors_and_schedules_change_no_cluster(
    tmp_path: Path, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin, spark
) -> None:
    u = unique_name()
    path = write_pair_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        LINK,
        {
            "mirror.state.topic": f"_mp.{u}.state",
            "mirror.offset.map.topic": f"_mp.{u}.offset-map",
            "mirror.checkpoints.topic": f"_mp.{u}.checkpoints",
            "auto.create.mirror.topics.enable": True,
            "auto.create.mirror.topics.filters": {
                "topicFilters": [{"name": u, "patternType": "PREFIXED", "filterType": "INCLUDE"}]
            },
            "consumer.offset.sync.enable": True,
            "consumer.offset.group.filters": {
                "groupFilters": [{"name": u, "patternType": "PREFIXED", "filterType": "INCLUDE"}]
            },
            "cluster.link.retry.timeout.ms": 1000,
            "mirror.lag.alert.records": 10,
        },
    )
    config = load_config(path)
    lagging = create_topic(source_bootstrap, f"{u}-lagging", partitions=2)
    _produce(source_bootstrap, lagging, 100)
    engine.create_mirror(config, LINK, lagging)
    engine.run_cycle(config, LINK, spark, mirrors=[lagging])
    _produce(source_bootstrap, lagging, 50)
    _commit(source_bootstrap, f"{u}-group", lagging, 30)
    src = admin(source_bootstrap)
    retention = ConfigEntry("retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET)
    for done in src.incremental_alter_configs(
        [ConfigResource("topic", lagging, incremental_configs=[retention])]
    ).values():
        done.result(timeout=30)
    src.create_partitions([NewPartitions(lagging, 3)])[lagging].result(timeout=30)
    orphan = create_topic(source_bootstrap, f"{u}-orphan")
    engine.create_mirror(config, LINK, orphan)
    src.delete_topics([orphan])[orphan].result(timeout=30)
    unmirrored = create_topic(source_bootstrap, f"{u}-new")

    before = _snapshot(admin, (source_bootstrap, destination_bootstrap), u)
    defs = build_definitions(path)
    repo = defs.get_repository_def()
    resources = {"mirror_engine": MirrorEngine(config_path=str(path))}

    # The read-only verbs, as an operator types them (export answers that there is nothing yet).
    for args, exit_code in (
        (["mirror", "describe", lagging], 0),
        (["mirror", "list"], 0),
        (["mirror", "promote", lagging, "--dry-run"], 0),
        (["mirror", "failover", "--all", "--dry-run"], 0),
        (["offsets", "export"], 1),
        (["offsets", "translate", "--topic", lagging, "--partition", "0", "--offset", "10"], 0),
    ):
        result = CliRunner().invoke(cli, [*args, "--link", LINK, "--config", str(path)])
        assert result.exit_code == exit_code, f"{args}: {result.output}"

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(f"{GROUP}_mirrors", sorted([lagging, orphan]))
        # Each asset check, on its own (no asset is materialised).
        checks = list({id(c): c for c in repo.asset_checks_defs_by_key.values()}.values())
        checked = dg.materialize(
            checks,
            selection=dg.AssetSelection.all_asset_checks(),  # resources bound already
            instance=instance,
            raise_on_error=False,
        )
        evaluations = {e.check_name: e.passed for e in checked.get_asset_check_evaluations()}
        assert {"lag_under_threshold", "no_foreign_writes", "config_in_sync", "mirror_verified"} <= set(evaluations)
        assert evaluations["lag_under_threshold"] is False and evaluations["config_in_sync"] is False

        # Each sensor and schedule: they find work, and only ask for runs.
        requested = {}
        for sensor in repo.sensor_defs:
            with dg.build_sensor_context(
                instance=instance, instance_ref=instance.get_ref(), resources=resources, definitions=defs
            ) as context:
                requested[sensor.name] = sensor.evaluate_tick(context).run_requests
        for schedule in repo.schedule_defs:
            with dg.build_schedule_context(
                instance=instance, resources=resources, repository_def=repo, scheduled_execution_time=TICK
            ) as context:
                requested[schedule.name] = schedule.evaluate_tick(context).run_requests
        assert {name for name, runs in requested.items() if runs} == {
            f"{GROUP}_lag_sensor",
            f"{GROUP}_health_sensor",
            f"{GROUP}_auto_create_sensor",
            f"{GROUP}_replicate_schedule",
            f"{GROUP}_config_sync_schedule",
            f"{GROUP}_offset_sync_schedule",
            f"{GROUP}_verify_schedule",
        }

        assert _snapshot(admin, (source_bootstrap, destination_bootstrap), u) == before

        # Control: the runs the sensors asked for do write, and the snapshot sees it.
        for job in (f"{GROUP}_health", f"{GROUP}_auto_create"):
            assert defs.get_job_def(job).execute_in_process(instance=instance).success
    after = _snapshot(admin, (source_bootstrap, destination_bootstrap), u)
    assert after != before
    assert unmirrored in after[destination_bootstrap]["topics"]
    # The health run noted the orphan's failure (FAILED follows once the retry timeout has passed).
    assert {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[orphan].failing_since > 0


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def _snapshot(admin, bootstraps, unique: str) -> dict:
    """Every topic of the test (by its unique part), its configs and log ends, and the test's groups."""
    out = {}
    for bootstrap in bootstraps:
        client = admin(bootstrap)
        topics = {name: meta for name, meta in client.list_topics(timeout=30).topics.items() if unique in name}
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{unique}-snapshot-probe"})
        ends = {
            name: {p: probe.get_watermark_offsets(TopicPartition(name, p), timeout=30) for p in meta.partitions}
            for name, meta in topics.items()
        }
        probe.close()
        configs = {}
        for name in topics:
            resource = ConfigResource("topic", name)
            described = client.describe_configs([resource])[resource].result(timeout=30)
            configs[name] = {k: v.value for k, v in described.items() if not v.is_default}
        groups = sorted(
            g.group_id
            for g in client.list_consumer_groups().result(timeout=30).valid
            if g.group_id.startswith(unique) and "snapshot-probe" not in g.group_id
        )
        committed = {}
        for group in groups:
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
            parts = [TopicPartition(t, p) for t, meta in topics.items() for p in meta.partitions]
            committed[group] = {f"{tp.topic}:{tp.partition}": tp.offset for tp in consumer.committed(parts, timeout=30)}
            consumer.close()
        out[bootstrap] = {"topics": sorted(topics), "ends": ends, "configs": configs, "groups": committed}
    return json.loads(json.dumps(out, default=str, sort_keys=True))
