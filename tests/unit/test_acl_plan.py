"""ACL sync's plan: what to create, delete, forget and leave alone, from bindings alone."""

import pytest

from mirror_pipeline.config.acl_filters import AclFilter, AclFilters, BindingKey
from mirror_pipeline.config.filters import FilterType
from mirror_pipeline.config.replication_policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    LinkNaming,
    ReplicationPolicy,
)
from mirror_pipeline.sync.acl_plan import AclSyncResult, map_binding, plan_acls

LINK = LinkNaming("us-west", "us-east")
MM2 = DefaultReplicationPolicy("us-west", "us-east")
EVERYTHING = AclFilters([AclFilter()])


def b(
    name="orders",
    rtype="topic",
    pattern="literal",
    principal="User:app",
    operation="read",
    permission="allow",
    host="*",
) -> BindingKey:
    return BindingKey(rtype, name, pattern, principal, host, operation, permission)


def plan(source=(), dest=(), recorded=(), filters=EVERYTHING, naming=LINK):
    return plan_acls(source, dest, recorded, filters, naming)


class TestDecisions:
    def test_new_source_bindings_are_created(self):
        p = plan(source=[b("a"), b("b")], dest=[b("b")])
        assert p.to_create == (b("a"),) and not p.to_delete and not p.to_forget
        assert p.selected == 2 and p.wanted == {b("a"), b("b")}

    def test_in_sync_does_nothing(self):
        p = plan(source=[b("a")], dest=[b("a")], recorded=[b("a")])
        assert p.in_sync and not p.to_create and not p.to_delete and not p.foreign

    def test_a_binding_gone_from_the_source_is_deleted_when_the_link_created_it(self):
        p = plan(source=[], dest=[b("a")], recorded=[b("a")])
        assert p.to_delete == (b("a"),)
        assert p.record_after([b("a")]) == set()

    def test_a_binding_no_longer_selected_is_deleted_too(self):
        only_writes = AclFilters([AclFilter(operation="write")])
        p = plan(source=[b("a")], dest=[b("a")], recorded=[b("a")], filters=only_writes)
        assert p.to_delete == (b("a"),)

    def test_foreign_destination_bindings_are_never_touched(self):
        foreign = b("theirs", principal="User:ops")
        p = plan(source=[], dest=[foreign], recorded=[])
        assert p.foreign == (foreign,) and not p.to_delete and not p.to_create

    def test_a_binding_already_on_the_destination_is_not_recorded_so_never_deleted(self):
        # The source wants it, the destination had it: not created, not the link's.
        p = plan(source=[b("a")], dest=[b("a")], recorded=[])
        assert not p.to_create and p.foreign == (b("a"),)
        assert p.record_after([]) == set()
        # Later the source drops it: still not deleted.
        later = plan(source=[], dest=[b("a")], recorded=p.record_after([]))
        assert not later.to_delete and later.foreign == (b("a"),)

    def test_record_entries_on_neither_side_are_forgotten(self):
        # e.g. a crash after recording an intended creation, then the source dropped it
        p = plan(source=[], dest=[], recorded=[b("a")])
        assert p.to_forget == (b("a"),) and not p.to_delete
        assert p.record_after([b("a")]) == set()

    def test_a_recorded_binding_deleted_on_the_destination_is_created_again(self):
        # Source wins: someone removed it on the destination, the source still has it.
        p = plan(source=[b("a")], dest=[], recorded=[b("a")])
        assert p.to_create == (b("a"),) and p.record_after([b("a")]) == {b("a")}

    def test_record_after_adds_creations_and_keeps_what_stays(self):
        p = plan(source=[b("a"), b("c")], dest=[b("b"), b("c")], recorded=[b("b"), b("c"), b("d")])
        assert p.to_create == (b("a"),) and p.to_delete == (b("b"),) and p.to_forget == (b("d"),)
        assert p.record_after([b("b"), b("c"), b("d")]) == {b("a"), b("c")}

    def test_unselected_source_bindings_are_ignored(self):
        groups_only = AclFilters([AclFilter(resource_type="group")])
        p = plan(source=[b("a"), b("g", rtype="group")], filters=groups_only)
        assert p.to_create == (b("g", rtype="group"),) and p.selected == 1

    def test_exclude_wins(self):
        fs = AclFilters(
            [AclFilter(resource_type="topic"), AclFilter(principal="User:admin", filter_type=FilterType.EXCLUDE)]
        )
        p = plan(source=[b("a"), b("a", principal="User:admin")], filters=fs)
        assert p.to_create == (b("a"),)

    def test_outputs_are_sorted_and_deterministic(self):
        source = [b(n) for n in "dcba"]
        assert plan(source=source).to_create == tuple(sorted(source))


class TestNaming:
    def test_link_naming_keeps_names(self):
        assert map_binding(b("orders"), LINK) == b("orders")
        assert map_binding(b("ord", pattern="prefixed"), LINK) == b("ord", pattern="prefixed")
        assert map_binding(b("*"), LINK) == b("*")

    def test_identity_keeps_names(self):
        assert map_binding(b("orders"), IdentityReplicationPolicy("us-west", "us-east")) == b("orders")

    def test_default_policy_maps_literal_prefixed_and_wildcard(self):
        assert map_binding(b("orders"), MM2) == b("us-west.orders")
        assert map_binding(b("ord", pattern="prefixed"), MM2) == b("us-west.ord", pattern="prefixed")
        # Every topic on the source: every mirror of this source on the destination.
        assert map_binding(b("*"), MM2) == b("us-west.", pattern="prefixed")

    def test_separator_is_the_policys(self):
        policy = DefaultReplicationPolicy("us-west", "us-east", separator="_")
        assert map_binding(b("orders"), policy) == b("us-west_orders")

    @pytest.mark.parametrize(
        "rtype, name", [("group", "orders"), ("transactional_id", "orders-tx"), ("cluster", "kafka-cluster")]
    )
    def test_other_resources_keep_their_names(self, rtype, name):
        assert map_binding(b(name, rtype=rtype), MM2) == b(name, rtype=rtype)
        assert map_binding(b(name, rtype=rtype, pattern="prefixed"), MM2) == b(name, rtype=rtype, pattern="prefixed")

    def test_the_plan_maps_before_comparing(self):
        p = plan(source=[b("orders")], dest=[b("orders")], naming=MM2)
        assert p.to_create == (b("us-west.orders"),) and p.foreign == (b("orders"),)
        p = plan(source=[b("orders")], dest=[b("us-west.orders")], recorded=[b("us-west.orders")], naming=MM2)
        assert p.in_sync

    def test_filters_match_source_names(self):
        only_orders = AclFilters([AclFilter(name="orders", pattern_type="literal")])
        p = plan(source=[b("orders"), b("other")], filters=only_orders, naming=MM2)
        assert p.to_create == (b("us-west.orders"),)

    @pytest.mark.parametrize(
        "name, pattern", [("__consumer_offsets", "literal"), ("_mirror-pipeline.state", "literal"), ("__", "prefixed")]
    )
    def test_internal_topics_are_skipped(self, name, pattern):
        p = plan(source=[b(name, pattern=pattern)])
        assert not p.to_create and p.skipped[0][0] == b(name, pattern=pattern)
        assert "internal topic" in p.skipped[0][1]

    def test_a_policy_that_does_not_map_by_prefix_skips_prefixed_bindings(self):
        class Upper(ReplicationPolicy):
            name = "Upper"

            def mirror_topic(self, source_topic: str) -> str:
                return source_topic.upper()

        policy = Upper("us-west", "us-east")
        p = plan(source=[b("ord", pattern="prefixed"), b("orders"), b("*")], naming=policy)
        assert p.to_create == (b("ORDERS"),)
        reasons = dict(p.skipped)
        assert "does not map topic names by prefix" in reasons[b("ord", pattern="prefixed")]
        assert "no common prefix" in reasons[b("*")]

    def test_a_policy_that_refuses_a_name_skips_that_binding(self):
        class Picky(ReplicationPolicy):
            name = "Picky"

            def mirror_topic(self, source_topic: str) -> str:
                if source_topic == "bad":
                    raise ValueError("not this one")
                return source_topic

        p = plan(source=[b("bad"), b("good")], naming=Picky("us-west", "us-east"))
        assert p.to_create == (b("good"),) and "not this one" in p.skipped[0][1]


def test_result_to_dict_is_json_ready():
    r = AclSyncResult(
        "l",
        True,
        False,
        1.0,
        duration_s=0.12345,
        created=({"name": "a"},),
        skipped=({"binding": {"name": "x"}, "reason": "why"},),
    )
    d = r.to_dict()
    assert d["created"] == [{"name": "a"}] and d["duration_s"] == 0.123 and d["skipped"][0]["reason"] == "why"
    assert not r.in_sync and AclSyncResult("l", True, False, 1.0).in_sync
    assert not AclSyncResult("l", False, False, 1.0).in_sync
