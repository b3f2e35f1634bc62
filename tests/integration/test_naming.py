"""Naming on the real local pair: policies, renamed internal topics, and the refusal of a naming
change on a link that has mirrors (R-MT-2, R-TP-2..4, R-CFG-4).

Each test gives its link its own state and offset-map topics (R-TP-4), so the naming it records
never meets another test's link of the same name on the shared clusters.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.errors import ConfigError, MirrorRefused
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_partition, read_topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0


def topics(admin, bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


def test_renamed_internal_topics_hold_the_link_state(
    write_config, own_state, spark, admin, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config(own_state))
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, 50)

    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert {own_state["mirror.state.topic"], own_state["mirror.offset.map.topic"]} <= topics(
        admin, destination_bootstrap
    )
    state = read_partition(destination_bootstrap, own_state["mirror.state.topic"], 0)
    assert f"mirror/{LINK}/{topic}".encode() in {r.key for r in state}
    assert_identical(read_topic(source_bootstrap, topic, 2), read_topic(destination_bootstrap, topic, 2))
    # The default registry knows nothing of this link's mirror.
    default_config = load_config(write_config())
    assert topic not in {m.mirror_topic for m in engine.list_mirrors(default_config, LINK)}


def test_default_policy_names_a_hand_created_mirror(
    write_config, own_state, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({**own_state, "replication.policy.class": "DefaultReplicationPolicy"}))
    topic = create_topic(source_bootstrap, unique_name())
    produce(source_bootstrap, topic, 20)

    with pytest.raises(MirrorRefused, match="cannot be chosen by hand"):
        engine.create_mirror(config, LINK, topic, mirror_topic=topic)
    info = engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[info.mirror_topic])

    assert info.mirror_topic == f"us-west.{topic}"
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, info.mirror_topic, 1))


def test_prefix_change_on_a_link_with_mirrors_is_refused_and_changes_nothing(
    write_config, own_state, admin, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    first = load_config(write_config({**own_state, "cluster.link.prefix": "p1."}))
    topic = create_topic(source_bootstrap, unique_name())
    other = create_topic(source_bootstrap, unique_name("other"))
    engine.create_mirror(first, LINK, topic)
    changed = load_config(write_config({**own_state, "cluster.link.prefix": "p2."}))

    with pytest.raises(ConfigError) as refused:
        engine.create_mirror(changed, LINK, other)
    message = str(refused.value)
    assert f"links.{LINK}.cluster.link.prefix: cannot change from 'p1.' to 'p2.'" in message
    assert f"p1.{topic}" in message and "cluster 'us-east'" in message
    with pytest.raises(ConfigError, match="cannot change from 'p1.'"):
        engine.list_mirrors(changed, LINK)
    assert f"p2.{other}" not in topics(admin, destination_bootstrap)
    assert [m.mirror_topic for m in engine.list_mirrors(first, LINK)] == [f"p1.{topic}"]

    # Removing the prefix is a change too; once the mirror is failed over the link has no state.
    unprefixed = load_config(write_config(own_state))
    with pytest.raises(ConfigError, match="cannot change from 'p1.' to ''"):
        engine.list_mirrors(unprefixed, LINK)
    engine.failover(first, LINK, [f"p1.{topic}"])
    assert engine.create_mirror(changed, LINK, other).mirror_topic == f"p2.{other}"
