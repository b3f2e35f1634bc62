"""The read-only guard's decisions (R-ACL-3), without Kafka: which bindings keep a mirror read-only."""

from __future__ import annotations

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from mirror_pipeline.link.write_guard import _recorded, grants_write, plan_guard
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import ACTIVE, DELETING

LINK = "User:mirror"


def grant(
    principal: str,
    name: str = "orders",
    pattern=ResourcePatternType.LITERAL,
    operation=AclOperation.WRITE,
    permission=AclPermissionType.ALLOW,
    restype=ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def test_grants_write_covers_literal_prefixed_wildcard_and_all():
    assert grants_write(grant("User:a"), "orders")
    assert grants_write(grant("User:a", "*"), "orders")
    assert grants_write(grant("User:a", "ord", ResourcePatternType.PREFIXED), "orders")
    assert grants_write(grant("User:a", operation=AclOperation.ALL), "orders")


def test_grants_write_ignores_reads_denies_other_topics_and_groups():
    assert not grants_write(grant("User:a", operation=AclOperation.READ), "orders")
    assert not grants_write(grant("User:a", permission=AclPermissionType.DENY), "orders")
    assert not grants_write(grant("User:a", "order"), "orders")
    assert not grants_write(grant("User:a", "pay", ResourcePatternType.PREFIXED), "orders")
    assert not grants_write(grant("User:a", restype=ResourceType.GROUP), "orders")


def test_plan_allows_the_link_and_denies_every_other_writer():
    existing = [
        grant("User:app", "", ResourcePatternType.PREFIXED),
        grant("User:etl", "*"),
        grant(LINK),
        grant("User:reader", operation=AclOperation.READ),
    ]
    plan = plan_guard("orders", LINK, existing)
    assert plan.unenforced == ""
    shown = {(b.principal, b.permission_type, b.name, b.resource_pattern_type, b.operation) for b in plan.wanted}
    assert shown == {
        (LINK, AclPermissionType.ALLOW, "orders", ResourcePatternType.LITERAL, AclOperation.WRITE),
        ("User:app", AclPermissionType.DENY, "orders", ResourcePatternType.LITERAL, AclOperation.WRITE),
        ("User:etl", AclPermissionType.DENY, "orders", ResourcePatternType.LITERAL, AclOperation.WRITE),
    }
    assert all(b.host == "*" for b in plan.wanted)


def test_plan_with_no_other_writer_only_allows_the_link():
    plan = plan_guard("orders", LINK, [])
    assert [(b.principal, b.permission_type) for b in plan.wanted] == [(LINK, AclPermissionType.ALLOW)]


def test_a_grant_to_every_principal_cannot_be_countered_and_says_so():
    plan = plan_guard("orders", LINK, [grant("User:*", "", ResourcePatternType.PREFIXED), grant("User:app")])
    assert "User:*" in plan.unenforced and "deny the link too" in plan.unenforced
    assert "User:*" not in {b.principal for b in plan.wanted}
    assert "User:app" in {b.principal for b in plan.wanted}


def test_no_binding_is_listed_for_a_mirror_being_deleted():
    # `_recorded` is the pure half of `guard`'s record: a racing guard pass lists nothing, so creates nothing.
    deleting = MirrorInfo("l", "orders", "orders", ACTIVE, 0.0, "", 0.0, flags=(DELETING,))
    assert _recorded(deleting, [{"name": "orders"}], "") is deleting
