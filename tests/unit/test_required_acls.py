"""The least-privilege list of a link's principals (R-ACL-3), without Kafka."""

from __future__ import annotations

from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from mirror_pipeline.config.replication_policy import DefaultReplicationPolicy, LinkNaming
from mirror_pipeline.link.required_acls import bindings, grants_from_dicts, link_acls, mirror_patterns, pattern_of

READ_ONLY = {"DESCRIBE", "READ", "DESCRIBE_CONFIGS"}


def test_patterns_name_prefix_and_everything():
    assert pattern_of("orders") == ("orders", "literal")
    assert pattern_of("pay.*") == ("pay.", "prefixed")
    assert pattern_of("*") == ("*", "literal")


def test_mirror_patterns_follow_the_links_naming():
    prefixed = LinkNaming("us-west", "us-east", ".", prefix="west.")
    assert mirror_patterns(prefixed, ["orders", "pay.*", "*"]) == ["west.orders", "west.pay.*", "west.*"]
    default = DefaultReplicationPolicy("us-west", "us-east", ".")
    assert mirror_patterns(default, ["orders", "*"]) == ["us-west.orders", "us-west.*"]
    identity = LinkNaming("us-west", "us-east", ".")
    assert mirror_patterns(identity, ["orders", "pay.*", "*"]) == ["orders", "pay.*", "*"]


def test_the_source_principal_only_reads():
    acls = link_acls("l", LinkNaming("a", "b", "."), ["orders", "pay.*"], ["billing"], ["billing"])
    ops = {op for grant in acls["source"] for op in grant["operations"]}
    assert ops <= READ_ONLY
    assert {(g["resource"], g["name"], g["pattern"]) for g in acls["source"]} == {
        ("topic", "orders", "literal"),
        ("topic", "pay.", "prefixed"),
        ("group", "billing", "literal"),
        ("group", "mirror-pipeline.l.", "prefixed"),
    }  # the link's own consumers' group ids, never joined


def test_the_destination_principal_owns_mirrors_internal_topics_and_its_writer_ids():
    acls = link_acls("l", LinkNaming("a", "b", ".", prefix="w.", link="l"), ["orders"], ["g"], ["w.g"])
    by_name = {(g["resource"], g["name"]): g for g in acls["destination"]}
    assert "WRITE" in by_name[("topic", "w.orders")]["operations"]
    assert {
        ("topic", "_mirror-pipeline.state"),
        ("topic", "_mirror-pipeline.l.offset-map"),
        ("topic", "_mirror-pipeline.l.checkpoints"),
    } <= set(by_name)
    assert by_name[("transactional_id", "mirror-pipeline/l/")]["pattern"] == "prefixed"
    assert by_name[("group", "w.g")]["operations"] == ["DESCRIBE", "READ"]
    assert set(by_name[("cluster", "kafka-cluster")]["operations"]) == {"DESCRIBE", "ALTER"}


def test_bindings_are_allows_from_any_host_one_per_operation():
    grants = grants_from_dicts(link_acls("l", LinkNaming("a", "b", "."), ["pay.*"], [], [])["source"])
    made = [b for b in bindings(grants, "User:src") if b.restype == ResourceType.TOPIC]
    assert len(made) == 3
    assert all(b.name == "pay." for b in made)
    assert all(b.resource_pattern_type == ResourcePatternType.PREFIXED for b in made)
    assert all(b.permission_type == AclPermissionType.ALLOW and b.host == "*" for b in made)
    assert {b.operation for b in made} == {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.DESCRIBE_CONFIGS}
    cluster = bindings(
        grants_from_dicts(link_acls("l", LinkNaming("a", "b", "."), [], [], [])["destination"]), "User:d"
    )
    assert {b.restype for b in cluster if b.name == "kafka-cluster"} == {ResourceType.BROKER}


def test_acl_sync_adds_only_describe_on_the_source_cluster():
    plain = link_acls("l", LinkNaming("a", "b", "."), ["t"], [], [])
    synced = link_acls("l", LinkNaming("a", "b", "."), ["t"], [], [], acl_sync=True)
    added = [g for g in synced["source"] if g not in plain["source"]]
    assert [(g["resource"], g["operations"]) for g in added] == [("cluster", ["DESCRIBE"])]
    assert synced["destination"] == plain["destination"]


def test_a_reverse_link_may_save_what_a_rebuild_drops_next_to_its_literal_mirrors():
    plain = link_acls("l", LinkNaming("a", "b", "."), ["orders", "pay.*", "*"], [], [])
    back = link_acls("l", LinkNaming("a", "b", "."), ["orders", "pay.*", "*"], [], [], saved_suffix=".diverged")
    added = [g for g in back["destination"] if g not in plain["destination"]]
    # `pay.` and `*` already cover `pay.x.diverged` and every name: only the literal mirror needs its own.
    assert [(g["resource"], g["name"], g["pattern"], g["operations"]) for g in added] == [
        ("topic", "orders.diverged", "literal", ["CREATE", "DESCRIBE", "READ", "WRITE"])
    ]
    assert back["source"] == plain["source"]
