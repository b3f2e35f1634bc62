"""The least privilege a link needs: the exact ACLs of its source and destination principals (R-ACL-3, R-REL-3).

One list, used three ways: `mirror-pipeline link acls` prints it for an
operator to grant, docs/security.md's table shows it, and the secured-cluster tests
run a link with exactly these bindings and nothing more, which is how the
suite shows the pipeline never needs a write, delete or alter right on the
source.

Each grant says why the pipeline needs it. The source side only reads:
DESCRIBE and READ on the mirrored topics, DESCRIBE_CONFIGS for config sync,
DESCRIBE on the groups whose offsets are synced. The one exception is opt-in:
a link with `emit.heartbeats.enabled` writes its heartbeats topic there.

A link that is the reverse of another declared link (it copies the other
way) is where `mirror reverse` turns old source topics into mirrors; a
rebuild first saves the records it would drop to `<topic>.diverged` on its
destination, a topic a literal mirror grant does not cover, so those are
listed too (a prefixed or `*` grant already covers them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from mirror_pipeline.config.replication_policy import ReplicationPolicy
from mirror_pipeline.kafka.acls import CLUSTER_RESOURCE_NAME

# The internal topics a link writes on the destination (heartbeats are written on the source).
INTERNAL_KINDS_USED = ("state", "offset-map", "checkpoints")
MIRROR_OPERATIONS = ("CREATE", "DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER", "DELETE")


@dataclass(frozen=True)
class Grant:
    """Operations on one resource pattern, and why the link needs them."""

    resource: str  # topic | group | transactional_id | cluster
    name: str
    pattern: str  # literal | prefixed
    operations: tuple[str, ...]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "name": self.name,
            "pattern": self.pattern,
            "operations": list(self.operations),
            "why": self.why,
        }


def pattern_of(text: str) -> tuple[str, str]:
    """`orders` is a literal name, `pay.*` the prefix `pay.`, `*` every name (a literal wildcard)."""
    if text.endswith("*") and text != "*":
        return text[:-1], "prefixed"
    return text, "literal"


def source_grants(
    link: str, topics: list[str], groups: list[str], acl_sync: bool = False, heartbeats_topic: str | None = None
) -> list[Grant]:
    """What the source principal needs: reads only, unless the link writes heartbeats there."""
    grants = [
        Grant(
            "topic",
            name,
            pattern,
            ("DESCRIBE", "READ", "DESCRIBE_CONFIGS"),
            "list offsets, read records read_committed, copy configs",
        )
        for name, pattern in map(pattern_of, topics)
    ]
    if heartbeats_topic:
        grants.append(
            Grant(
                "topic",
                heartbeats_topic,
                "literal",
                ("CREATE", "DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS"),
                "write the link's heartbeats and mirror them (emit.heartbeats.enabled)",
            )
        )
    grants += [
        Grant("group", name, pattern, ("DESCRIBE",), "read the group's committed offsets (offset sync)")
        for name, pattern in map(pattern_of, groups)
    ]
    grants.append(_own_group_ids(link))
    if acl_sync:
        grants.append(
            Grant(
                "cluster",
                CLUSTER_RESOURCE_NAME,
                "literal",
                ("DESCRIBE",),
                "read the ACL bindings that ACL sync copies (acl.sync.enable)",
            )
        )
    return grants


def _own_group_ids(link: str) -> Grant:
    # librdkafka needs a group id even for a consumer that only assigns partitions and never
    # commits, and looks its coordinator up (FindCoordinator needs DESCRIBE on the group).
    return Grant(
        "group",
        f"mirror-pipeline.{link}.",
        "prefixed",
        ("DESCRIBE",),
        "the link's consumers' group ids (they never join or commit)",
    )


def destination_grants(
    link: str,
    mirror_topics: list[str],
    internal_topics: list[str],
    groups: list[str],
    heartbeats_mirror: str | None = None,
    saved_suffix: str | None = None,
) -> list[Grant]:
    """What the destination principal needs: own the mirrors and the link's internal topics.

    `saved_suffix`: the link is a reverse link, and a reverse's rebuild saves
    divergent records to `<mirror><saved_suffix>` (literal mirror names only).
    """
    grants = [
        Grant(
            "topic",
            name,
            pattern,
            MIRROR_OPERATIONS,
            "create mirrors, copy into them, sync configs, add partitions, align log starts, delete mirrors",
        )
        for name, pattern in map(pattern_of, mirror_topics)
    ]
    if saved_suffix:
        grants += [
            Grant(
                "topic",
                name + saved_suffix,
                "literal",
                ("CREATE", "DESCRIBE", "READ", "WRITE"),
                "reverse (failback): save the records a rebuild of the old source would drop",
            )
            for name, pattern in map(pattern_of, mirror_topics)
            if pattern == "literal" and name != "*"
        ]
    if heartbeats_mirror:
        grants.append(
            Grant(
                "topic",
                heartbeats_mirror,
                "literal",
                MIRROR_OPERATIONS,
                "the mirror of the link's heartbeats (emit.heartbeats.enabled)",
            )
        )
    grants += [
        Grant(
            "topic",
            name,
            "literal",
            ("CREATE", "DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS"),
            "the link's state, offset maps and checkpoints",
        )
        for name in internal_topics
    ]
    grants.append(
        Grant(
            "transactional_id",
            f"mirror-pipeline/{link}/",
            "prefixed",
            ("DESCRIBE", "WRITE"),
            "one fenced writer per mirror partition and for the link's state",
        )
    )
    grants += [
        Grant("group", name, pattern, ("DESCRIBE", "READ"), "commit translated offsets (offset sync)")
        for name, pattern in map(pattern_of, groups)
    ]
    grants.append(_own_group_ids(link))
    grants.append(
        Grant(
            "cluster",
            CLUSTER_RESOURCE_NAME,
            "literal",
            ("DESCRIBE", "ALTER"),
            "keep mirrors read-only: read and write the ACLs of mirror topics (R-ACL-3)",
        )
    )
    return grants


def bindings(grants: list[Grant], principal: str) -> list[AclBinding]:
    """The ALLOW bindings that grant `grants` to `principal`, from any host."""
    out = []
    for grant in grants:
        restype = ResourceType.BROKER if grant.resource == "cluster" else ResourceType[grant.resource.upper()]
        pattern = ResourcePatternType[grant.pattern.upper()]
        for operation in grant.operations:
            out.append(
                AclBinding(
                    restype, grant.name, pattern, principal, "*", AclOperation[operation], AclPermissionType.ALLOW
                )
            )
    return out


def mirror_patterns(naming: ReplicationPolicy, topics: list[str]) -> list[str]:
    """The destination names (or name prefixes) the link's naming gives the source `topics` patterns."""
    out = []
    for text in topics:
        name, pattern = pattern_of(text)
        if pattern == "literal" and name != "*":
            out.append(naming.mirror_topic(name))
            continue
        # A prefix keeps being a prefix under every prefix-style naming: name a probe, cut the probe off.
        probe = "x"
        mapped = naming.mirror_topic((name if name != "*" else "") + probe)[: -len(probe)]
        out.append(mapped + "*" if mapped else "*")
    return out


def link_acls(
    link: str,
    naming: ReplicationPolicy,
    topics: list[str],
    groups: list[str],
    dest_groups: list[str],
    acl_sync: bool = False,
    heartbeats: bool = False,
    saved_suffix: str | None = None,
) -> dict[str, Any]:
    """Both principals' grants for a link mirroring `topics` and syncing `groups` (as `dest_groups` there).

    `saved_suffix`: the link is the reverse of another link (see `destination_grants`).
    """
    internal = [naming.internal_topic(kind) for kind in INTERNAL_KINDS_USED]
    source_heartbeats = naming.internal_topic("heartbeats") if heartbeats else None
    mirror_heartbeats = naming.heartbeats_mirror_topic() if heartbeats else None
    return {
        "source": [g.to_dict() for g in source_grants(link, topics, groups, acl_sync, source_heartbeats)],
        "destination": [
            g.to_dict()
            for g in destination_grants(
                link, mirror_patterns(naming, topics), internal, dest_groups, mirror_heartbeats, saved_suffix
            )
        ],
    }


def grants_from_dicts(rows: list[dict[str, Any]]) -> list[Grant]:
    return [Grant(r["resource"], r["name"], r["pattern"], tuple(r["operations"]), r["why"]) for r in rows]
