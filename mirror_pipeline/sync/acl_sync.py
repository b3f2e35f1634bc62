"""ACL sync: the source's ACL bindings that `acl.filters` select are copied to the
destination and kept in sync, additions and removals (R-ACL-1).

What to do is decided in `acl_plan` (pure); here both clusters and the link's
record are read, the plan is carried out, and the sync is recorded. The record
is the state topic's `acl/<link>` key: `{"bindings": [...], "last_sync": {...}}`.

Invariant (crash safety): a binding enters the record before the link creates
it, and leaves the record only after the link deleted it. Killed at any
moment, a sync therefore leaves at most record entries whose binding is not
on the destination (the next sync creates them again or forgets them), never
a binding the link made without knowing it. A binding the link did not create
is never recorded, so never deleted.

Both clusters need an authorizer: librdkafka reads "no authorizer" and "no
ACLs" alike as an empty list, and syncing from a source read as empty would
delete everything the link created.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from mirror_pipeline.config.acl_filters import BindingKey
from mirror_pipeline.config.redaction import scrub
from mirror_pipeline.kafka import acls
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.sync.acl_plan import AclPlan, AclSyncFailed, AclSyncResult, plan_acls

log = logging.getLogger(__name__)


def sync_acls(ctx: LinkContext, dry_run: bool = False) -> AclSyncResult:
    """One ACL sync of the link; `dry_run` reads both sides and changes nothing (the result
    lists what would be created and deleted). Raises `AclSyncFailed` when applying stopped
    part-way, and MirrorError (a refusal, an unreachable cluster) when nothing was applied."""
    started = time.time()
    name = ctx.link.name
    if not ctx.link.acl_sync_enable:
        return AclSyncResult(
            name,
            False,
            dry_run,
            started,
            message=f"ACL sync is off for link '{name}' (acl.sync.enable is false): nothing done",
        )
    try:
        plan, source_count = _read_and_plan(ctx)
    except MirrorError as exc:
        if not dry_run:
            _record_last_sync(ctx, started, error=_scrubbed(ctx, exc))
        raise
    if dry_run:
        return _result(ctx, started, plan, source_count, dry_run=True)
    return _apply(ctx, started, plan, source_count)


def acl_sync_status(ctx: LinkContext) -> dict:
    """The link's last ACL sync as recorded ({} before the first): at, created, deleted, error."""
    return dict(ctx.store.read_acl_record().get("last_sync") or {})


# --- reading and planning -------------------------------------------------------------------


def _read_and_plan(ctx: LinkContext) -> tuple[AclPlan, int]:
    """The plan, and how many bindings the source holds."""
    ctx.registry()  # refuses when the link's naming changed under its mirrors (R-CFG-4)
    _require_authorizer(ctx.dest_admin, ctx.dest.alias, ctx.link.name)
    _require_authorizer(ctx.source_admin, ctx.source.alias, ctx.link.name)
    source = [acls.binding_key(b) for b in acls.describe_bindings(ctx.source_admin, ctx.source.alias)]
    dest = [acls.binding_key(b) for b in acls.describe_bindings(ctx.dest_admin, ctx.dest.alias)]
    recorded = _recorded(ctx, ctx.store.read_acl_record())
    return plan_acls(source, dest, recorded, ctx.link.acl_filters, ctx.naming), len(source)


def _require_authorizer(admin, alias: str, link: str) -> None:
    if not acls.authorizer_enabled(admin, alias):
        raise MirrorRefused(
            f"link '{link}': cluster '{alias}' has no authorizer, so it keeps no ACLs and ACL sync cannot "
            f"run (configure one, e.g. StandardAuthorizer, or set acl.sync.enable to false)"
        )


def _recorded(ctx: LinkContext, record: dict) -> set[BindingKey]:
    try:
        return {acls.key_from_dict(entry) for entry in record.get("bindings", [])}
    except MirrorError as exc:
        raise MirrorError(
            f"cluster '{ctx.dest.alias}': link '{ctx.link.name}''s ACL record in "
            f"'{ctx.store.state_topic}' is damaged ({exc}): nothing was changed"
        ) from None


# --- applying (the order is the crash-safety invariant) ---------------------------------------


def _apply(ctx: LinkContext, started: float, plan: AclPlan, source_count: int) -> AclSyncResult:
    admin, alias = ctx.dest_admin, ctx.dest.alias
    created: tuple[BindingKey, ...] = ()
    deleted: tuple[BindingKey, ...] = ()
    error = ""
    try:
        if plan.to_create:
            ctx.store.ensure_topics()
            _update_record(ctx, add=plan.to_create)  # recorded first: never a binding the link does not know
            acls.create_bindings(admin, alias, [acls.binding_from_key(k) for k in plan.to_create])
            created = plan.to_create
        if plan.to_delete:
            acls.delete_bindings(admin, alias, [acls.binding_from_key(k) for k in plan.to_delete])
            deleted = plan.to_delete  # un-recorded only now, once they are gone
    except MirrorError as exc:
        error = _scrubbed(ctx, exc)
    result = _result(ctx, started, plan, source_count, dry_run=False, created=created, deleted=deleted, error=error)
    try:
        _record_last_sync(ctx, started, result, remove=deleted + plan.to_forget, add=created, strict=True)
    except MirrorError as exc:
        error = error or _scrubbed(ctx, exc)
        result = _result(ctx, started, plan, source_count, dry_run=False, created=created, deleted=deleted, error=error)
    if error:
        raise AclSyncFailed(f"link '{ctx.link.name}': ACL sync stopped: {error}", result)
    return result


def _update_record(
    ctx: LinkContext, add: Iterable[BindingKey] = (), remove: Iterable[BindingKey] = (), last_sync: dict | None = None
) -> None:
    """Change the record from a fresh read, so a concurrent sync's entries are kept."""
    record = ctx.store.read_acl_record()
    bindings = (_recorded(ctx, record) | set(add)) - set(remove)
    record["bindings"] = [acls.binding_to_dict(k) for k in sorted(bindings)]
    if last_sync is not None:
        record["last_sync"] = last_sync
    ctx.store.put_acl_record(record)


def _record_last_sync(
    ctx: LinkContext,
    started: float,
    result: AclSyncResult | None = None,
    *,
    error: str = "",
    remove: Iterable[BindingKey] = (),
    add: Iterable[BindingKey] = (),
    strict: bool = False,
) -> None:
    """Record the sync's outcome (and the bindings it removed).

    `strict` False (a sync that failed before changing anything): best effort,
    and only into a state topic that exists, since failing to say a sync
    failed must not hide why it failed, nor create topics on a cluster that
    may be the very problem.
    """
    last = {
        "at": started,
        "finished": time.time(),
        "created": len(result.created) if result else 0,
        "deleted": len(result.deleted) if result else 0,
        "error": result.error if result else error,
    }
    try:
        if strict:
            ctx.store.ensure_topics()
        elif kc.topic_partitions(ctx.dest_admin, ctx.store.state_topic, ctx.dest.alias, timeout=5.0) is None:
            return
        _update_record(ctx, add=add, remove=remove, last_sync=last)
    except MirrorError as exc:
        if strict:
            raise
        log.warning("link '%s': recording the ACL sync failed: %s", ctx.link.name, _scrubbed(ctx, exc))


def _result(
    ctx: LinkContext,
    started: float,
    plan: AclPlan,
    source_count: int,
    *,
    dry_run: bool,
    created: Iterable[BindingKey] | None = None,
    deleted: Iterable[BindingKey] | None = None,
    error: str = "",
) -> AclSyncResult:
    """The result; a dry run reports what it would create and delete."""
    created = plan.to_create if created is None else tuple(created)
    deleted = plan.to_delete if deleted is None else tuple(deleted)
    return AclSyncResult(
        link=ctx.link.name,
        enabled=True,
        dry_run=dry_run,
        started_at=started,
        duration_s=time.time() - started,
        source_bindings=source_count,
        selected=plan.selected,
        created=tuple(acls.binding_to_dict(k) for k in created),
        deleted=tuple(acls.binding_to_dict(k) for k in deleted),
        forgotten=0 if dry_run else len(plan.to_forget),
        in_sync_bindings=len(plan.wanted) - len(plan.to_create),
        foreign=len(plan.foreign),
        skipped=tuple({"binding": acls.binding_to_dict(k), "reason": why} for k, why in plan.skipped),
        error=error,
    )


def _scrubbed(ctx: LinkContext, exc: BaseException) -> str:
    return scrub(str(exc), kc.secrets_of(ctx.source_conf("admin")) + kc.secrets_of(ctx.dest_conf("admin")))
