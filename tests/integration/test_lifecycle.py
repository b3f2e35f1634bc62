"""Mirror lifecycle on the real local pair: every transition of SPEC section 7 (R-LC-1..6)."""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, ResourceType

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.errors import ConfigError, MirrorError, MirrorRefused, TopicNotFound
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_topic

DEAD_SOURCE = "127.0.0.1:1"  # nothing listens there: an unreachable source cluster


def produce(bootstrap: str, topic: str, count: int, partitions: int = 2) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def state(config, topic: str):
    return {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}[topic]


def with_source(config_path, bootstrap: str):
    """The same config with the source cluster somewhere else (e.g. unreachable)."""
    data = yaml.safe_load(config_path.read_text())
    data["clusters"]["us-west"]["bootstrap.servers"] = bootstrap
    other = config_path.with_name("other.yaml")
    other.write_text(yaml.safe_dump(data))
    return load_config(other)


@pytest.fixture
def mirror(config, spark, source_bootstrap, create_topic, unique_name):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, 100)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    return topic


def test_paused_mirror_copies_nothing_and_shows_growing_lag_until_resumed(
    config, spark, mirror, source_bootstrap, destination_bootstrap
):
    assert engine.pause(config, LINK, [mirror]).mirrors[mirror]["after"] == "PAUSED"
    assert engine.pause(config, LINK, [mirror]).mirrors[mirror]["said"] == "already paused"
    produce(source_bootstrap, mirror, 40)

    paused = engine.run_cycle(config, LINK, spark, mirrors=[mirror])

    assert paused.records == 0
    assert engine.describe_mirror(config, LINK, mirror).lag == 40
    engine.resume(config, LINK, [mirror])
    assert engine.run_cycle(config, LINK, spark, mirrors=[mirror]).records == 40
    assert_identical(read_topic(source_bootstrap, mirror, 2), read_topic(destination_bootstrap, mirror, 2))
    transitions = [(h[1], h[2]) for h in state(config, mirror).history]
    assert transitions[-2:] == [("ACTIVE", "PAUSED"), ("PAUSED", "ACTIVE")]


def test_promote_waits_for_zero_lag_then_the_topic_is_writable(
    config, spark, mirror, source_bootstrap, destination_bootstrap
):
    stop_producing = threading.Event()

    def keep_producing():  # the source keeps moving while promote runs
        while not stop_producing.is_set():
            produce(source_bootstrap, mirror, 20)
            time.sleep(0.2)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    threading.Timer(8, stop_producing.set).start()
    try:
        result = engine.promote(config, LINK, spark, [mirror], timeout_s=120)
    finally:
        stop_producing.set()
        producer.join()

    assert result.mirrors[mirror]["after"] == "STOPPED"
    info = state(config, mirror)
    assert [h[2] for h in info.history][-2:] == ["PENDING_STOPPED", "STOPPED"]
    # Completed only at zero lag: everything the source had is on the mirror.
    assert_identical(read_topic(source_bootstrap, mirror, 2), read_topic(destination_bootstrap, mirror, 2))
    assert info.last_source_offsets == {p: len(r) for p, r in read_topic(source_bootstrap, mirror, 2).items()}
    # A normal topic now: applications write to it and cycles leave it alone.
    produce(destination_bootstrap, mirror, 5)
    produce(source_bootstrap, mirror, 5)
    assert engine.run_cycle(config, LINK, spark, mirrors=[mirror]).mirrors.get(mirror) is None
    assert engine.promote(config, LINK, spark, [mirror]).mirrors[mirror]["said"] == "already stopped"


def test_promote_refuses_when_the_source_is_unreachable(write_config, config, mirror):
    down = with_source(write_config(), DEAD_SOURCE)
    with pytest.raises(MirrorRefused, match="promote needs the source"):
        engine.promote(down, LINK, None, [mirror], timeout_s=5)
    assert state(config, mirror).state == "ACTIVE"


def test_failover_with_lag_and_source_down_stops_at_once(
    write_config, config, spark, mirror, source_bootstrap, destination_bootstrap, admin
):
    produce(source_bootstrap, mirror, 50)  # lag the failover leaves behind
    down = with_source(write_config(), DEAD_SOURCE)

    with pytest.raises(Exception, match="did not answer"):
        engine.run_cycle(down, LINK, spark, mirrors=[mirror])
    assert state(config, mirror).state == "SOURCE_UNAVAILABLE"
    result = engine.failover(down, LINK, [mirror])

    assert result.mirrors[mirror]["after"] == "STOPPED"
    info = state(config, mirror)
    assert info.last_source_offsets == {0: 50, 1: 50} and info.stopped_at > 0
    produce(destination_bootstrap, mirror, 3)  # writable
    # The source's timestamp bounds replace the mirror's wide-open ones (R-CS-5).
    res = ConfigResource(ResourceType.TOPIC, mirror)
    configs = admin(destination_bootstrap).describe_configs([res])[res].result()
    assert configs["message.timestamp.after.max.ms"].value != "9223372036854775807"


def test_describe_answers_with_what_the_destination_knows_when_the_source_is_down(write_config, config, mirror):
    down = with_source(write_config(), DEAD_SOURCE)
    described = engine.describe_mirror(down, LINK, mirror)
    assert described.mirror.state == "ACTIVE"
    assert "did not answer" in described.source_unknown and "us-west" in described.source_unknown
    assert described.lag is None and described.source_partitions is None
    assert [p.mirror_log_end for p in described.partitions] == [50, 50]
    assert described.to_dict()["lag"] is None


def test_unreachable_source_recovers_to_active_by_itself(write_config, config, spark, mirror):
    down = with_source(write_config(), DEAD_SOURCE)
    engine.check_health(down, LINK)
    assert state(config, mirror).state == "SOURCE_UNAVAILABLE"

    assert engine.check_health(config, LINK)[mirror] == "ACTIVE"
    assert state(config, mirror).reason.endswith("answers again")


def test_failover_cancels_a_pending_promote(config, spark, mirror, source_bootstrap):
    stop_producing = threading.Event()

    def keep_producing():  # lag never reaches zero: promote waits
        while not stop_producing.is_set():
            produce(source_bootstrap, mirror, 50)
            time.sleep(0.05)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    outcome = {}
    promoting = threading.Thread(
        target=lambda: outcome.update(r=engine.promote(config, LINK, spark, [mirror], timeout_s=120))
    )
    promoting.start()
    try:
        deadline = time.monotonic() + 60
        while state(config, mirror).state != "PENDING_STOPPED" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state(config, mirror).state == "PENDING_STOPPED"
        engine.failover(config, LINK, [mirror])
        promoting.join(120)
    finally:
        stop_producing.set()
        producer.join()

    assert state(config, mirror).state == "STOPPED"
    assert "cancelled" in state(config, mirror).reason
    assert "cancelled" in outcome["r"].mirrors[mirror]["said"]


def test_deleted_source_topic_fails_the_mirror_after_the_retry_timeout(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    config = load_config(write_config({"cluster.link.retry.timeout.ms": 2000}))
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, 10, partitions=1)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    admin(source_bootstrap).delete_topics([topic])[topic].result()
    time.sleep(1)

    with pytest.raises(engine.CycleFailed, match="no longer exists"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert state(config, topic).state == "ACTIVE" and state(config, topic).failing_since > 0
    time.sleep(2.5)
    assert engine.check_health(config, LINK)[topic] == "FAILED"

    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).records == 0  # copies nothing more
    failed = engine.describe_mirror(config, LINK, topic)  # answers with what the destination knows
    assert failed.mirror.state == "FAILED" and "no longer exists" in failed.mirror.reason
    assert failed.source_unknown.endswith("no longer exists on cluster 'us-west'")
    assert failed.lag is None and failed.partitions[0].mirror_log_end == 10
    engine.failover(config, LINK, [topic])
    assert state(config, topic).state == "STOPPED"
    produce(destination_bootstrap, topic, 1, partitions=1)


def test_foreign_write_flags_the_mirror(config, spark, mirror, source_bootstrap, destination_bootstrap):
    produce(destination_bootstrap, mirror, 1)
    with pytest.raises(engine.CycleFailed, match="did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[mirror])
    assert "FOREIGN_WRITE" in state(config, mirror).flags
    with pytest.raises(MirrorRefused, match="did not write"):
        engine.promote(config, LINK, spark, [mirror], timeout_s=5)


def test_delete_removes_the_mirror_topic_and_never_the_source(
    config, mirror, source_bootstrap, destination_bootstrap, admin
):
    engine.delete_mirrors(config, LINK, [mirror])

    assert mirror not in {m.mirror_topic for m in engine.list_mirrors(config, LINK)}
    assert mirror not in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert mirror in admin(source_bootstrap).list_topics(timeout=10).topics


def test_a_link_with_mirrors_cannot_leave_the_config(write_config, config, mirror):
    path = write_config()  # the same file, edited: the link is dropped, another one added
    data = yaml.safe_load(path.read_text())
    data["links"] = {"other": {"source": "us-west", "destination": "us-east"}}
    path.write_text(yaml.safe_dump(data))

    with pytest.raises(ConfigError, match=f"^{path}: link '{LINK}' still has mirrors .*{mirror}"):
        engine.list_mirrors(load_config(path), "other")


def test_config_files_sharing_a_destination_never_block_each_other(
    config, mirror, tmp_path, create_topic, source_bootstrap, unique_name
):
    """Another team's file, with the same cluster names and a link of its own, on the same destination."""
    data = yaml.safe_load(config.path.read_text())
    data["links"] = {"their-link": {"source": "us-west", "destination": "us-east", "cluster.link.prefix": "theirs."}}
    theirs = tmp_path / "theirs" / "mirror.yaml"
    theirs.parent.mkdir()
    theirs.write_text(yaml.safe_dump(data))
    topic = create_topic(source_bootstrap, unique_name())

    info = engine.create_mirror(load_config(theirs), "their-link", topic)
    assert info.mirror_topic == f"theirs.{topic}"
    assert mirror in {m.mirror_topic for m in engine.list_mirrors(config, LINK)}  # ours still answers
    engine.delete_mirrors(load_config(theirs), "their-link", [info.mirror_topic])


def test_a_different_cluster_behind_the_source_address_fails_the_link_until_it_is_back(
    write_config, config, spark, mirror, third_bootstrap, destination_bootstrap
):
    elsewhere = with_source(write_config(), third_bootstrap)  # answers, but is not the cluster the mirror came from

    result = engine.run_cycle(elsewhere, LINK, spark, mirrors=[mirror])
    assert result.mirrors.get(mirror) is None  # nothing copied from the wrong cluster
    assert state(config, mirror).state == "LINK_FAILED"
    assert "cluster id" in state(config, mirror).reason

    assert engine.check_health(config, LINK)[mirror] == "ACTIVE"


def test_config_sync_grows_the_mirror_with_the_source(config, mirror, source_bootstrap, destination_bootstrap, admin):
    from confluent_kafka.admin import NewPartitions

    admin(source_bootstrap).create_partitions([NewPartitions(mirror, 3)])[mirror].result()
    time.sleep(1)

    engine.sync_configs(config, LINK, [mirror])

    assert len(admin(destination_bootstrap).list_topics(topic=mirror, timeout=10).topics[mirror].partitions) == 3


def test_creating_a_mirror_of_a_missing_topic_writes_nothing(write_config, unique_name, admin, destination_bootstrap):
    u = unique_name()
    config = load_config(
        write_config({"mirror.state.topic": f"_mp.{u}.state", "mirror.offset.map.topic": f"_mp.{u}.map"})
    )
    with pytest.raises(TopicNotFound, match="does not exist on cluster 'us-west'"):
        engine.create_mirror(config, LINK, f"{u}-missing")
    # Not even the link's internal topics: a refusal changes nothing.
    assert not [t for t in admin(destination_bootstrap).list_topics(timeout=10).topics if u in t]


def test_a_precreated_internal_topic_that_is_not_compacted_is_refused(
    write_config, unique_name, create_topic, source_bootstrap, destination_bootstrap
):
    u = unique_name()
    create_topic(destination_bootstrap, f"_mp.{u}.state")  # cleanup.policy=delete: would lose the registry
    config = load_config(
        write_config({"mirror.state.topic": f"_mp.{u}.state", "mirror.offset.map.topic": f"_mp.{u}.map"})
    )
    topic = create_topic(source_bootstrap, f"{u}-src")
    with pytest.raises(MirrorError, match=rf"internal topic '_mp\.{u}\.state' exists with cleanup.policy=delete"):
        engine.create_mirror(config, LINK, topic)
    assert engine.list_mirrors(config, LINK) == []
