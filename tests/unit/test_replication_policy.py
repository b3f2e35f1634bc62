"""Naming of every replication policy, chains, loop detection, internal topics (R-MT-2, R-TP-2..4)."""

from __future__ import annotations

import logging

import pytest

from mirror_pipeline.config.loader import parse_config
from mirror_pipeline.config.replication_policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    LinkNaming,
    is_internal_topic,
    loop_warnings,
    naming_record,
    policy_for,
    reserved_names,
)
from mirror_pipeline.model.errors import ConfigError

CLUSTERS = {
    alias: {"bootstrap.servers": f"127.0.0.1:{port}"}
    for alias, port in (("us-west", 1), ("us-east", 2), ("eu-west", 3))
}


def links(**links) -> dict:
    return {name: {"source": s, "destination": d, **settings} for name, (s, d, settings) in links.items()}


def config(**link_defs):
    return parse_config({"clusters": CLUSTERS, "links": links(**link_defs)}, "mirror.yaml", {})


def policy(source="us-west", destination="us-east", **settings):
    return policy_for(config(l=(source, destination, settings)).link("l"))


# --- link naming (the default) ------------------------------------------------------------


def test_link_naming_keeps_names():
    p = policy()
    assert isinstance(p, LinkNaming)
    assert p.mirror_topic("orders") == "orders"
    assert p.mirror_topic("us-east.orders") == "us-east.orders"
    p.check_mirror_name("orders", "orders-copy")  # renaming by hand is allowed without a prefix


def test_link_prefix_names_mirrors_and_binds_hand_picked_names():
    p = policy(**{"cluster.link.prefix": "west."})
    assert p.mirror_topic("orders") == "west.orders"
    p.check_mirror_name("orders", "west.orders-v2")
    with pytest.raises(ConfigError, match="must start with the link prefix 'west.'"):
        p.check_mirror_name("orders", "orders")


def test_link_naming_detects_no_loops_by_name():
    # Loops on link naming are refused from the source cluster's registry, not names (R-AC-3).
    assert not policy().would_loop("us-east.orders")


# --- DefaultReplicationPolicy -----------------------------------------------------------------


def test_default_policy_prefixes_the_source_alias():
    p = policy(**{"replication.policy.class": "DefaultReplicationPolicy"})
    assert isinstance(p, DefaultReplicationPolicy)
    assert p.mirror_topic("orders") == "us-west.orders"


def test_default_policy_stacks_names_along_a_chain():
    west_to_east = policy("us-west", "us-east", **{"replication.policy.class": "DefaultReplicationPolicy"})
    east_to_eu = policy("us-east", "eu-west", **{"replication.policy.class": "DefaultReplicationPolicy"})
    on_east = west_to_east.mirror_topic("topic1")
    on_eu = east_to_eu.mirror_topic(on_east)
    assert (on_east, on_eu) == ("us-west.topic1", "us-east.us-west.topic1")
    assert east_to_eu.origin_path(on_eu) == ["us-east", "us-west"]
    assert not east_to_eu.would_loop(on_east)


@pytest.mark.parametrize(
    "topic, loops",
    [
        ("orders", False),
        ("us-east.orders", True),  # came from the destination: back-flow
        ("eu-west.us-east.orders", True),  # came through the destination two hops ago
        ("eu-west.orders", False),
        ("orders.v1", False),  # a dot in a local name is not an alias
        ("us-east", False),
        ("us-east.", False),
    ],
)
def test_default_policy_never_sends_a_topic_back(topic, loops):
    p = policy("us-west", "us-east", **{"replication.policy.class": "DefaultReplicationPolicy"})
    assert p.would_loop(topic) is loops


def test_default_policy_with_another_separator():
    p = policy(**{"replication.policy.class": "DefaultReplicationPolicy", "replication.policy.separator": "_"})
    assert p.mirror_topic("orders.v1") == "us-west_orders.v1"
    assert p.would_loop("us-east_orders") and not p.would_loop("us-east.orders")
    assert p.internal_topic("checkpoints") == "_mirror-pipeline_l_checkpoints"
    assert p.shared_internal_topic("checkpoints") == "_mirror-pipeline_checkpoints"


def test_default_policy_owns_mirror_names():
    p = policy(**{"replication.policy.class": "DefaultReplicationPolicy"})
    p.check_mirror_name("orders", "us-west.orders")
    with pytest.raises(ConfigError, match="names the mirror of 'orders' 'us-west.orders'"):
        p.check_mirror_name("orders", "orders")


def test_mirrormaker_class_names_are_accepted():
    p = policy(**{"replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"})
    assert isinstance(p, DefaultReplicationPolicy)
    assert (
        naming_record(
            config(
                l=(
                    "us-west",
                    "us-east",
                    {"replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"},
                )
            ).link("l")
        )["replication.policy.class"]
        == "DefaultReplicationPolicy"
    )


# --- IdentityReplicationPolicy ----------------------------------------------------------------


def test_identity_policy_keeps_names_and_detects_no_loops():
    p = policy(**{"replication.policy.class": "IdentityReplicationPolicy"})
    assert isinstance(p, IdentityReplicationPolicy)
    assert p.mirror_topic("us-east.orders") == "us-east.orders"
    assert not p.would_loop("us-east.orders")
    with pytest.raises(ConfigError):
        p.check_mirror_name("orders", "orders2")


def test_identity_links_forming_a_loop_are_warned_about(caplog):
    identity = {"replication.policy.class": "IdentityReplicationPolicy"}
    with caplog.at_level(logging.WARNING, logger="mirror_pipeline.config.loader"):
        cfg = config(
            a=("us-west", "us-east", identity),
            b=("us-east", "eu-west", identity),
            c=("eu-west", "us-west", identity),
            d=("us-west", "eu-west", {}),
        )
    warnings = loop_warnings(cfg.links.values())
    assert warnings == [
        "links 'a' -> 'b' -> 'c' form a loop under IdentityReplicationPolicy, which does not detect loops: "
        "filters must keep a mirror from being mirrored back"
    ]
    assert warnings[0] in caplog.text


def test_no_warning_without_a_loop_or_when_a_link_detects_loops():
    identity = {"replication.policy.class": "IdentityReplicationPolicy"}
    default = {"replication.policy.class": "DefaultReplicationPolicy"}
    assert (
        loop_warnings(config(a=("us-west", "us-east", identity), b=("us-east", "eu-west", identity)).links.values())
        == []
    )
    assert (
        loop_warnings(config(a=("us-west", "us-east", identity), b=("us-east", "us-west", default)).links.values())
        == []
    )
    assert (
        len(
            loop_warnings(config(a=("us-west", "us-east", identity), b=("us-east", "us-west", identity)).links.values())
        )
        == 1
    )


# --- user policy class ------------------------------------------------------------------------


def test_user_policy_class_by_dotted_path():
    p = policy(**{"replication.policy.class": "tests.unit.custom_policy.UpperCaseAliasPolicy"})
    assert p.mirror_topic("orders") == "US-WEST_orders"
    assert p.internal_topic("state") == "ops.mirror-state"
    assert p.is_internal("ops.mirror-offset-map")
    assert not p.would_loop("US-EAST_orders")  # the class does not parse origins


# --- internal topics --------------------------------------------------------------------------


def test_internal_topic_names_come_from_the_policy_and_settings():
    p = policy()
    # Offset maps and checkpoints are the link's own; the registry is the destination's.
    assert [p.internal_topic(k) for k in ("state", "offset-map", "checkpoints", "heartbeats")] == [
        "_mirror-pipeline.state",
        "_mirror-pipeline.l.offset-map",
        "_mirror-pipeline.l.checkpoints",
        "_mirror-pipeline.heartbeats",
    ]
    assert [p.shared_internal_topic(k) for k in ("offset-map", "checkpoints")] == [
        "_mirror-pipeline.offset-map",
        "_mirror-pipeline.checkpoints",
    ]
    renamed = policy(
        **{
            "mirror.state.topic": "ops.state",
            "mirror.offset.map.topic": "ops.omap",
            "mirror.checkpoints.topic": "ops.cp",
            "mirror.heartbeats.topic": "ops.hb",
        }
    )
    assert [renamed.internal_topic(k) for k in ("state", "offset-map", "checkpoints", "heartbeats")] == [
        "ops.state",
        "ops.omap",
        "ops.cp",
        "ops.hb",
    ]
    assert renamed.is_internal("ops.cp")
    with pytest.raises(ValueError):
        renamed.internal_topic("nonsense")


def test_a_link_name_too_long_for_its_own_internal_topics_must_name_them():
    long_name = "l" * 230
    with pytest.raises(ConfigError, match=r"mirror\.offset\.map\.topic: must be set: the default name"):
        parse_config(
            {"clusters": CLUSTERS, "links": links(**{long_name: ("us-west", "us-east", {})})}, "mirror.yaml", {}
        )
    named = {"mirror.offset.map.topic": "ops.omap", "mirror.checkpoints.topic": "ops.cp"}
    parse_config(
        {"clusters": CLUSTERS, "links": links(**{long_name: ("us-west", "us-east", named)})}, "mirror.yaml", {}
    )


@pytest.mark.parametrize(
    "name",
    [
        "__consumer_offsets",
        "__transaction_state",
        "__anything",
        "_schemas",
        "_mirror-pipeline.state",
        "_mirror-pipeline_checkpoints",
        "heartbeats",
        "mm2-configs",
        "mm2-offsets.us-west.internal",
        "mm2-status",
        "us-west.checkpoints.internal",
        "mm2-offset-syncs.us-east.internal",
        "connect-offsets",
    ],
)
def test_internal_topics_are_never_mirrored(name):
    assert is_internal_topic(name)
    assert policy().is_internal(name)


@pytest.mark.parametrize("name", ["orders", "schemas", "_orders", "heartbeat", "internal.orders"])
def test_ordinary_topics_are_not_internal(name):
    assert not is_internal_topic(name)


def test_mirrored_copies_of_internal_topics_are_internal_under_the_default_policy():
    p = policy(**{"replication.policy.class": "DefaultReplicationPolicy"})
    assert p.is_internal("us-east.heartbeats") and p.is_internal("eu-west.us-east.heartbeats")
    assert not p.is_internal("us-east.orders")


def test_other_links_renamed_internal_topics_are_reserved():
    cfg = config(a=("us-west", "us-east", {}), b=("us-east", "us-west", {"mirror.state.topic": "ops.state-b"}))
    assert reserved_names(cfg) == {"ops.state-b"}
    assert policy_for(cfg.link("a"), reserved=reserved_names(cfg)).is_internal("ops.state-b")
    assert not policy_for(cfg.link("a")).is_internal("ops.state-b")
