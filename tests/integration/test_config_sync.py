"""Config sync on the real local pair (R-CS-1..5).

Every sync names its mirrors: the link's registry is shared with the other
integration tests.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, ResourceType

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka.topic_configs import LONG_MAX, describe_topic_configs
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.sync.config_records import checked_key
from mirror_pipeline.sync.config_sync import (
    ConfigSyncFailed,
    config_drift,
    config_sync_key,
    link_config_drift,
    read_sync_records,
    sync_configs,
)
from tests.integration.conftest import LINK


def set_configs(client, topic: str, **configs: str) -> None:
    """SET `configs` (underscores in names stand for dots) and wait until the broker shows them."""
    wanted = {k.replace("_", "."): v for k, v in configs.items()}
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in wanted.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    for fut in client.incremental_alter_configs([resource]).values():
        fut.result(timeout=30)
    wait_for(client, topic, wanted)


def wait_for(client, topic: str, wanted: dict[str, str], timeout: float = 15.0) -> dict[str, str]:
    """The topic's configs once they hold `wanted` (config changes reach the broker asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        configs = describe_topic_configs(client, topic, "test")
        if all(configs.get(k) == v for k, v in wanted.items()):
            return configs
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: wanted {wanted}, have { {k: configs.get(k) for k in wanted} }")
        time.sleep(0.1)


@pytest.fixture
def mirror(config, source_bootstrap, create_topic, unique_name):
    """Factory: a source topic and its mirror (same name); returns the name."""

    def make(label: str = "t", partitions: int = 1) -> str:
        topic = create_topic(source_bootstrap, unique_name(label), partitions=partitions)
        engine.create_mirror(config, LINK, topic)
        return topic

    return make


def test_always_synced_configs_follow_the_source(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    topic = mirror("orders", partitions=2)
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)
    before = describe_topic_configs(dst, topic, "us-east")
    set_configs(
        src,
        topic,
        retention_ms="123456789",
        cleanup_policy="compact",
        max_message_bytes="2000000",
        compression_type="gzip",
    )

    result = sync_configs(config, LINK, mirrors=[topic])

    synced = result.mirrors[topic]
    assert synced.changed == {
        "retention.ms": (before["retention.ms"], "123456789"),
        "cleanup.policy": ("delete", "compact"),
        "max.message.bytes": (before["max.message.bytes"], "2000000"),
        "compression.type": ("producer", "gzip"),
    }
    assert synced.in_sync and synced.config_sync_lag_ms == 0 and synced.error is None
    assert (synced.source_partitions, synced.mirror_partitions) == (2, 2)
    after = wait_for(
        dst,
        topic,
        {
            "retention.ms": "123456789",
            "cleanup.policy": "compact",
            "max.message.bytes": "2000000",
            "compression.type": "gzip",
        },
    )
    # R-CS-3: nothing else moved.
    assert {k: v for k, v in after.items() if k not in synced.changed} == {
        k: v for k, v in before.items() if k not in synced.changed
    }
    # The link remembers what it applied, in the destination's state topic.
    record = read_sync_records(LinkContext.open(config, LINK))[topic]
    assert record["applied"]["retention.ms"] == "123456789"
    assert record["synced_at"] == synced.synced_at
    assert record["source"]["cleanup.policy"] == "compact"
    assert result.to_dict()["mirrors"][topic]["changed"]["cleanup.policy"] == ["delete", "compact"]

    # A second sync finds nothing to do.
    again = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]
    assert again.changed == {} and again.in_sync


def test_overridable_configs_follow_the_source_unless_overridden_on_the_mirror(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    topic = mirror("overridable")
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)

    set_configs(src, topic, flush_messages="5000")
    first = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]
    assert first.changed == {"flush.messages": (LONG_MAX, "5000")}
    wait_for(dst, topic, {"flush.messages": "5000"})

    # An operator tunes the mirror: kept on later syncs, and reported.
    set_configs(dst, topic, min_cleanable_dirty_ratio="0.9")
    second = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]
    assert second.changed == {}
    assert second.overridden == {"min.cleanable.dirty.ratio": "0.9"}
    assert second.in_sync

    # The source moves both: the untouched one follows, the override stays.
    set_configs(src, topic, min_cleanable_dirty_ratio="0.3", flush_messages="6000")
    third = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]
    assert third.changed == {"flush.messages": ("5000", "6000")}
    assert third.overridden == {"min.cleanable.dirty.ratio": "0.9"}
    configs = wait_for(dst, topic, {"flush.messages": "6000"})
    assert configs["min.cleanable.dirty.ratio"] == "0.9"


def test_never_synced_configs_are_not_applied(config, mirror, admin, source_bootstrap, destination_bootstrap) -> None:
    topic = mirror("never")
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)
    before = describe_topic_configs(dst, topic, "us-east")
    set_configs(src, topic, min_insync_replicas="2", segment_ms="3600000", retention_ms="7200000")

    synced = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]

    assert set(synced.changed) == {"retention.ms"}
    after = wait_for(dst, topic, {"retention.ms": "7200000"})
    assert after["min.insync.replicas"] == before["min.insync.replicas"] == "1"
    assert after["segment.ms"] == before["segment.ms"] != "3600000"


def test_log_append_time_and_timestamp_bounds_are_held_back(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    topic = mirror("timestamps")
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)
    set_configs(src, topic, message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms="86400000")

    synced = sync_configs(config, LINK, mirrors=[topic]).mirrors[topic]

    assert synced.changed == {}
    assert synced.in_sync
    assert synced.held_back["message.timestamp.type"] == "LogAppendTime"
    assert synced.held_back["message.timestamp.before.max.ms"] == "86400000"
    configs = describe_topic_configs(dst, topic, "us-east")
    assert configs["message.timestamp.type"] == "CreateTime"
    assert configs["message.timestamp.before.max.ms"] == LONG_MAX
    assert configs["message.timestamp.after.max.ms"] == LONG_MAX
    # describe shows the same thing.
    description = engine.describe_mirror(config, LINK, topic)
    assert description.source_timestamp_type == "LogAppendTime"
    assert description.held_back_configs["message.timestamp.type"] == "LogAppendTime"


def test_drift_is_visible_before_a_sync_and_zero_after(config, mirror, admin, source_bootstrap) -> None:
    topic = mirror("drift")
    ctx = LinkContext.open(config, LINK)
    assert config_drift(ctx, topic)["in_sync"] is True
    assert config_drift(ctx, topic)["config_sync_lag_ms"] == 0

    set_configs(admin(source_bootstrap), topic, retention_ms="3600000", flush_ms="1000")
    time.sleep(0.05)
    drift = config_drift(ctx, topic)
    assert drift["drift"]["retention.ms"][1] == "3600000"
    assert drift["drift"]["flush.ms"][1] == "1000"
    assert drift["in_sync"] is False
    assert drift["config_sync_lag_ms"] > 0
    # Read-only: asking changed nothing.
    assert config_drift(ctx, topic)["drift"] == drift["drift"]

    sync_configs(config, LINK, mirrors=[topic])

    deadline = time.monotonic() + 15
    while (after := link_config_drift(config, LINK, [topic])[topic])["drift"] and time.monotonic() < deadline:
        time.sleep(0.1)  # the alter reaches the broker's view asynchronously
    assert after["drift"] == {} and after["in_sync"] is True
    assert after["config_sync_lag_ms"] == 0


def test_a_mirror_that_fails_is_named_and_the_others_are_still_synced(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    good, bad = mirror("good"), mirror("bad")
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)
    for topic in (good, bad):
        set_configs(src, topic, retention_ms="5400000")
    dst.delete_topics([bad])[bad].result(timeout=30)
    ctx = LinkContext.open(config, LINK)
    try:
        with pytest.raises(ConfigSyncFailed) as err:
            sync_configs(config, LINK, mirrors=[good, bad])
        assert isinstance(err.value, MirrorError)
        assert f"mirror '{bad}'" in str(err.value) and good not in str(err.value)
        result = err.value.result
        assert result.mirrors[good].in_sync and result.mirrors[good].changed
        assert not result.mirrors[bad].in_sync and result.mirrors[bad].error
        assert result.mirrors[bad].config_sync_lag_ms > 0
        wait_for(dst, good, {"retention.ms": "5400000"})
    finally:
        # Leave no registered mirror without its topic for other tests' whole-link cycles.
        ctx.store.delete_mirror(bad)
        ctx.store._write_plain(ctx.store.state_topic, config_sync_key(LINK, bad), None)


def test_mirrors_checked_together_and_one_that_grew_are_synced_in_one_pass(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    # Mirrors whose partition counts match are checked from one request per cluster; one whose
    # source gained partitions is checked on its own, and grows.
    settled, grown = mirror("settled", partitions=2), mirror("grown")
    src, dst = admin(source_bootstrap), admin(destination_bootstrap)
    for topic in (settled, grown):
        set_configs(src, topic, retention_ms="4700000")
    src.create_partitions([NewPartitions(grown, 3)])[grown].result(timeout=30)

    drift = link_config_drift(config, LINK, mirrors=[settled, grown])
    assert drift[settled]["drift"] == {"retention.ms": ["604800000", "4700000"]}
    assert (drift[settled]["source_partitions"], drift[settled]["mirror_partitions"]) == (2, 2)
    assert drift[grown]["drift"] == {"retention.ms": ["604800000", "4700000"]}
    assert (drift[grown]["source_partitions"], drift[grown]["mirror_partitions"]) == (3, 1)

    result = sync_configs(config, LINK, mirrors=[settled, grown])
    for topic in (settled, grown):
        assert result.mirrors[topic].changed == {"retention.ms": ("604800000", "4700000")}
        wait_for(dst, topic, {"retention.ms": "4700000"})
    assert (result.mirrors[grown].source_partitions, result.mirrors[grown].mirror_partitions) == (3, 3)
    assert all(d["in_sync"] for d in link_config_drift(config, LINK, mirrors=[settled, grown]).values())


def test_a_sync_of_every_mirror_rewrites_only_the_records_that_changed(
    write_config, own_state, create_topic, unique_name, admin, source_bootstrap, destination_bootstrap
) -> None:
    # A link of its own (its own state topic), so that a sync of all its mirrors touches only this test's.
    config = load_config(write_config(own_state))
    quiet, changing = (create_topic(source_bootstrap, unique_name(label)) for label in ("quiet", "changing"))
    for topic in (quiet, changing):
        engine.create_mirror(config, LINK, topic)
    sync_configs(config, LINK)
    store = LinkContext.open(config, LINK).store
    end = store.read_latest(store.state_topic)[1]
    set_configs(admin(source_bootstrap), changing, retention_ms="4800000")

    synced = sync_configs(config, LINK)

    assert synced.mirrors[changing].changed == {"retention.ms": ("604800000", "4800000")}
    assert synced.mirrors[quiet].in_sync and not synced.mirrors[quiet].changed
    written = keys_written(destination_bootstrap, store.state_topic, end)
    # The changing mirror's intent (before its alter) and its record, then the link's checked record.
    assert written == [config_sync_key(LINK, changing)] * 2 + [checked_key(LINK)]
    records = read_sync_records(LinkContext.open(config, LINK))
    assert records[quiet]["synced_at"] == records[changing]["synced_at"] == synced.mirrors[quiet].synced_at
    drift = link_config_drift(config, LINK)
    assert all(d["in_sync"] and d["config_sync_lag_ms"] == 0 for d in drift.values())


def keys_written(bootstrap: str, topic: str, since: int) -> list[str]:
    """The keys of the records of single-partition `topic` from offset `since` to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[1]
        consumer.assign([TopicPartition(topic, 0, since)])
        keys: list[str] = []
        deadline = time.monotonic() + 30
        while since + len(keys) < end and time.monotonic() < deadline:
            keys += [m.key().decode() for m in consumer.consume(100, 1.0) if m.error() is None]
        return keys
    finally:
        consumer.close()


def test_only_active_and_paused_mirrors_are_synced(
    config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    topic = mirror("paused")
    src = admin(source_bootstrap)
    set_configs(src, topic, retention_ms="4200000")
    engine.pause(config, LINK, [topic])
    synced = sync_configs(config, LINK, mirrors=[topic, "not-a-mirror-of-the-link"])
    assert synced.mirrors[topic].changed == {"retention.ms": ("604800000", "4200000")}
    assert list(synced.mirrors) == [topic]

    engine.failover(config, LINK, [topic])
    set_configs(src, topic, retention_ms="4300000")
    after = sync_configs(config, LINK, mirrors=[topic])
    assert after.mirrors == {} and after.skipped == {topic: "STOPPED"}
    assert config_drift(LinkContext.open(config, LINK), topic)["in_sync"] is None
    configs = describe_topic_configs(admin(destination_bootstrap), topic, "us-east")
    assert configs["retention.ms"] == "4200000"


def test_the_dagster_asset_syncs_and_its_check_passes(
    config, write_config, mirror, admin, source_bootstrap, destination_bootstrap
) -> None:
    import dagster as dg

    from mirror_pipeline_dagster.config_sync import build_config_in_sync_check, build_mirror_config_asset
    from mirror_pipeline_dagster.naming import LinkNames
    from mirror_pipeline_dagster.resources import MirrorEngine

    topic = mirror("dagster")
    set_configs(admin(source_bootstrap), topic, retention_ms="3900000")
    names = LinkNames(LINK)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(names.mirrors_partitions, [topic])
    result = dg.materialize(
        [build_mirror_config_asset(names), build_config_in_sync_check(names)],
        instance=instance,
        partition_key=topic,
        resources={"mirror_engine": MirrorEngine(config_path=str(write_config()))},
    )
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["changed"].value == {"retention.ms": {"old": "604800000", "new": "3900000"}}
    assert metadata["in_sync"].value is True
    assert metadata["config_sync_lag_ms"].value == 0
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.description
    assert check.metadata["mirrors_checked"].value == 1
    assert describe_topic_configs(admin(destination_bootstrap), topic, "us-east")["retention.ms"] == "3900000"

    # Run on its own (no partition: it checks every ACTIVE and PAUSED mirror of the
    # link, other tests' too), the check warns about drift.
    set_configs(admin(source_bootstrap), topic, retention_ms="3800000")
    defs = dg.Definitions(
        assets=[build_mirror_config_asset(names)],
        asset_checks=[build_config_in_sync_check(names)],
        jobs=[
            dg.define_asset_job("check_only", selection=dg.AssetSelection.checks_for_assets(names.mirror_config_key))
        ],
        resources={"mirror_engine": MirrorEngine(config_path=str(write_config()))},
    )
    checked = defs.resolve_job_def("check_only").execute_in_process(instance=instance)
    (check,) = checked.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert topic in check.metadata["mirrors_with_drift"].value


def test_many_changes_are_set_in_requests_the_controller_takes(
    config, mirror, admin, source_bootstrap, destination_bootstrap, monkeypatch
) -> None:
    """Kafka 4's controller refuses, whole, a request that sets more than 10,000 configs: a sync of
    every mirror of a wide link after a source-wide change would fail every time. With the bound at
    2 records here, three mirrors of two changes each take three requests, and all are applied."""
    from confluent_kafka.admin import AdminClient

    from mirror_pipeline.kafka import controller_requests

    topics = [mirror(f"wide-{i}") for i in range(3)]
    src = admin(source_bootstrap)
    for topic in topics:
        set_configs(src, topic, retention_ms="7654321", max_message_bytes="1500000")
    monkeypatch.setattr(controller_requests, "RECORDS_PER_REQUEST", 2)
    sizes: list[int] = []
    alter = AdminClient.incremental_alter_configs

    def counted(self, resources, **kwargs):
        sizes.append(sum(len(r.incremental_configs) for r in resources))
        return alter(self, resources, **kwargs)

    monkeypatch.setattr(AdminClient, "incremental_alter_configs", counted)
    result = sync_configs(config, LINK, mirrors=topics)

    assert all(result.mirrors[t].error is None and result.mirrors[t].in_sync for t in topics), result.to_dict()
    assert sizes == [2, 2, 2]
    dst = admin(destination_bootstrap)
    for topic in topics:
        wait_for(dst, topic, {"retention.ms": "7654321", "max.message.bytes": "1500000"})
