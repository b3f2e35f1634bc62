"""Read-only mirrors, enforced by the destination's authorizer (R-MT-9, R-ACL-3).

Kafka's ACLs cannot say "deny everyone but the link": a DENY always beats an
ALLOW, and a DENY for `User:*` would also shut out the link itself. So the
guard works from the grants that exist on the destination, per mirror topic:

- an ALLOW WRITE (LITERAL, the mirror's name) for the link's own principal, so
  that a broker with `allow.everyone.if.no.acl.found=true` no longer lets
  anybody write to a topic that had no ACL;
- a DENY WRITE (LITERAL, the mirror's name, any host) for every other principal
  that some ALLOW binding lets write to the mirror (WRITE or ALL, by a literal,
  prefixed or wildcard topic pattern).

What it cannot counter is said, never hidden: a grant to the wildcard
principal `User:*` (denying it would deny the link too), super users (they
bypass every ACL), a destination without an authorizer, or a link whose
principal the guard cannot tell. For those the mirror is "not enforced", with
the reason, and detection of foreign writes within one cycle stays (R-MT-9).

Invariants: the mirror's record lists every binding the guard created, and
lists it *before* the binding is created, so a crash in between never leaves a
binding nobody will lift; only listed bindings are ever deleted, so a binding
an operator made is never touched. Promote and failover lift the guard (delete
the listed bindings) after marking the mirror STOPPING and before recording it
STOPPED, and delete after marking it DELETING and before forgetting it; a
guard pass never lists a binding for a stopping or deleting mirror, and one
that raced the lift deletes what it created once it sees the mark (R-LC-8).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline.kafka import acls
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import CONFIG_SYNCED_STATES, DELETING, STOPPED, STOPPING

log = logging.getLogger(__name__)

WILDCARD_PRINCIPAL = "User:*"
_WRITE_OPERATIONS = (AclOperation.WRITE, AclOperation.ALL)
# SASL mechanisms whose principal is `User:<sasl.username>` under Kafka's default principal builder.
_USERNAME_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class GuardPlan:
    """The bindings that make one mirror read-only, and what they cannot stop (empty: nothing)."""

    wanted: tuple[AclBinding, ...]
    unenforced: str = ""


def grants_write(binding: AclBinding, topic: str) -> bool:
    """Whether an existing binding lets its principal write to `topic`."""
    if binding.restype != ResourceType.TOPIC or binding.permission_type != AclPermissionType.ALLOW:
        return False
    if binding.operation not in _WRITE_OPERATIONS:
        return False
    if binding.resource_pattern_type == ResourcePatternType.LITERAL:
        return binding.name in (topic, "*")
    if binding.resource_pattern_type == ResourcePatternType.PREFIXED:
        return topic.startswith(binding.name)
    return False


def plan_guard(topic: str, principal: str, existing: list[AclBinding]) -> GuardPlan:
    """Pure: the guard bindings for `topic` given the destination's bindings that match it."""
    wanted = [_binding(topic, principal, AclPermissionType.ALLOW)]
    writers = sorted({b.principal for b in existing if grants_write(b, topic) and b.principal != principal})
    unenforced = ""
    if WILDCARD_PRINCIPAL in writers:
        unenforced = (
            f"every principal ({WILDCARD_PRINCIPAL}) is allowed to write to '{topic}'; "
            f"a DENY for it would deny the link too"
        )
    wanted += [_binding(topic, p, AclPermissionType.DENY) for p in writers if p != WILDCARD_PRINCIPAL]
    return GuardPlan(tuple(wanted), unenforced)


def _binding(topic: str, principal: str, permission: AclPermissionType) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", AclOperation.WRITE, permission
    )


def link_principal(ctx: LinkContext) -> str | None:
    """The principal the link's clients have on the destination, when it can be told from the config.

    `mirror.link.principal` says it outright; SASL PLAIN/SCRAM users are
    `User:<name>`; unauthenticated listeners give `User:ANONYMOUS`. A TLS
    client certificate, Kerberos or OAuth principal needs the setting.
    """
    if ctx.link.link_principal:
        return ctx.link.link_principal
    props = ctx.dest.properties
    protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        mechanism = str(props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI"))).upper()
        username = props.get("sasl.username")
        return f"User:{username}" if mechanism in _USERNAME_MECHANISMS and username else None
    if protocol == "SSL" and (props.get("ssl.certificate.location") or props.get("ssl.certificate.pem")):
        return None
    return "User:ANONYMOUS"


def guard(ctx: LinkContext, mirror_topic: str) -> MirrorInfo | None:
    """Make (or keep) one mirror read-only; record what was done or why it cannot be.

    Never raises for an authorizer that refuses or is missing: the mirror is
    then recorded "not enforced" with the reason, and copying goes on.
    """
    reason = _not_possible(ctx)
    if reason is not None:
        return _record(ctx, mirror_topic, (), reason)
    principal = link_principal(ctx)
    assert principal is not None  # `_not_possible` found it known, from the same config
    try:
        existing = acls.describe_bindings(ctx.dest_admin, ctx.dest.alias, _matching(mirror_topic))
        plan = plan_guard(mirror_topic, principal, existing)
        have = {acls.binding_key(b) for b in existing}
        new = [b for b in plan.wanted if acls.binding_key(b) not in have]
        # Listed first, created second: a crash in between leaves a listed binding
        # that may not exist (deleting it later is harmless), never the reverse.
        info = _record(ctx, mirror_topic, new, plan.unenforced)
        if not new or info is None or _stopping(info):
            return info
        acls.create_bindings(ctx.dest_admin, ctx.dest.alias, new)
        # A promote or failover that lifted the guard between our record and our
        # create must not find its topic locked again (R-LC-8): look, and undo.
        now = ctx.store.read_mirrors().get(mirror_topic)
        if now is None or _stopping(now):
            acls.delete_bindings(ctx.dest_admin, ctx.dest.alias, new)
        return now
    except MirrorError as exc:  # refused by the authorizer, or no answer: said, and tried again at the next pass
        log.warning("mirror '%s': write guard not applied: %s", mirror_topic, exc)
        return _record(ctx, mirror_topic, (), str(exc))


def guard_all(ctx: LinkContext, mirror_topics: list[str]) -> dict[str, MirrorInfo | None]:
    """`guard` for many new mirrors: where no mirror of the link can be guarded (no authorizer,
    an unknown principal), the reason is recorded for all of them in one state change."""
    reason = _not_possible(ctx)
    if reason is not None:
        wanted = set(mirror_topics)

        def decide(current: dict[str, MirrorInfo]) -> list[tuple[str, MirrorInfo | None]]:
            return [
                (m, after)
                for m in sorted(wanted)
                if (after := _recorded(current.get(m), [], reason)) is not current.get(m)
            ]

        after = ctx.store.update_mirrors(decide)
        return {m: after.get(m) for m in mirror_topics}
    return {m: guard(ctx, m) for m in mirror_topics}


def refresh(ctx: LinkContext, infos: list[MirrorInfo]) -> dict[str, str]:
    """The periodic pass (config sync): guard mirrors that still copy, lift stopped ones.

    Grants made after a mirror was created get their DENY here, within one
    config-sync interval. Returns the mirrors whose guard failed, with why.
    """
    problems: dict[str, str] = {}
    guarded = [i for i in infos if i.state in CONFIG_SYNCED_STATES]
    to_lift = [i for i in infos if i.state == STOPPED and i.write_guard.get("bindings")]
    if guarded:
        reason = _not_possible(ctx)
        for info in guarded:
            if reason is not None:
                # Written only when it changes: most passes find it as it was.
                if info.write_guard != {"bindings": info.write_guard.get("bindings", []), "unenforced": reason}:
                    _record(ctx, info.mirror_topic, (), reason)
                continue
            after = guard(ctx, info.mirror_topic)
            if after is not None and after.write_guard.get("unenforced"):
                problems[info.mirror_topic] = after.write_guard["unenforced"]
    for info in to_lift:
        try:
            lift(ctx, info.mirror_topic)
        except MirrorError as exc:
            problems[info.mirror_topic] = str(exc)
    return problems


def _not_possible(ctx: LinkContext) -> str | None:
    """Why no mirror of the link can be guarded (None: it can be tried)."""
    if link_principal(ctx) is None:
        return f"the link's principal on cluster '{ctx.dest.alias}' is unknown: set mirror.link.principal"
    try:
        if not acls.authorizer_enabled(ctx.dest_admin, ctx.dest.alias):
            return f"cluster '{ctx.dest.alias}' has no authorizer"
    except MirrorError as exc:
        return str(exc)
    return None


def lift(ctx: LinkContext, mirror_topic: str) -> MirrorInfo | None:
    """Delete the bindings the guard created for this mirror (it becomes a normal topic).

    Raises `MirrorError` when the destination refuses: a stopped topic that
    its applications cannot write to is not a finished promote or failover.
    """
    current = ctx.store.read_mirrors().get(mirror_topic)
    if current is None or not current.write_guard.get("bindings"):
        return current
    listed = [acls.binding_from_dict(d) for d in current.write_guard["bindings"]]
    acls.delete_bindings(ctx.dest_admin, ctx.dest.alias, listed)

    def clear(info: MirrorInfo | None) -> MirrorInfo | None:
        if info is None:
            return None
        return replace(info, write_guard={"bindings": [], "unenforced": "", "lifted": True})

    return ctx.store.update_mirror(mirror_topic, clear)


def _matching(topic: str) -> AclBindingFilter:
    """Every binding that applies to `topic`: literal, prefixed and wildcard patterns alike."""
    # None matches any principal and any host (confluent-kafka's documented wildcard), though its
    # type hints say str.
    return AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.MATCH,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _record(ctx: LinkContext, mirror_topic: str, created: Sequence[AclBinding], unenforced: str) -> MirrorInfo | None:
    """Add `created` to the mirror's list of guard bindings and set why it is not enforced."""
    new = [acls.binding_to_dict(b) for b in created]
    return ctx.store.update_mirror(mirror_topic, lambda info: _recorded(info, new, unenforced))


def _recorded(info: MirrorInfo | None, new: list[dict[str, Any]], unenforced: str) -> MirrorInfo | None:
    """Pure: the mirror's record with `new` bindings listed and `unenforced` said (itself when unchanged)."""
    if info is None:
        return None
    if _stopping(info) and new:
        return info  # never guard a topic that is becoming a normal one
    listed = list(info.write_guard.get("bindings", []))
    listed += [d for d in new if d not in listed]
    after = {"bindings": listed, "unenforced": unenforced}
    return info if after == info.write_guard else replace(info, write_guard=after)


def _stopping(info: MirrorInfo) -> bool:
    """Becoming a normal topic, or going away: no binding is added for it any more."""
    return info.state == STOPPED or STOPPING in info.flags or DELETING in info.flags


def describe_guard(info: MirrorInfo) -> str:
    """One line for `describe`: whether only the link can write to the mirror, and if not, why."""
    guard_state = info.write_guard
    if not guard_state:
        return "not checked yet (the next config sync checks it)"
    if guard_state.get("lifted"):
        return "lifted (the topic is no longer a mirror)"
    if guard_state.get("unenforced"):
        return f"not enforced: {guard_state['unenforced']}; foreign writes are detected within one cycle"
    denied = [b["principal"] for b in guard_state.get("bindings", []) if b.get("permissionType") == "deny"]
    return "enforced by the broker" + (f" (denied: {', '.join(denied)})" if denied else "")
