"""ACL sync's decisions, from bindings alone (pure: no I/O), and its result (R-ACL-1).

Given the source's bindings, the destination's, the bindings this link
created earlier (its record) and the link's filters and naming, decide:

- **create**: source bindings the filters select, with topic names mapped to
  the mirrors' names, that the destination does not hold yet;
- **delete**: bindings this link created that no longer come from the source
  (gone there, or no longer selected) and are still on the destination;
- **forget**: record entries that are on neither side any more;
- **foreign**: destination bindings this link did not create. They are never
  touched, even when the source dictates the same binding: a binding that was
  on the destination before the link wanted it is never recorded as the
  link's, so never deleted.

Naming: group, cluster and transactional-id names are unchanged. A topic name
is mapped by the link's replication policy: LITERAL `orders` to the policy's
`mirror_topic("orders")`, PREFIXED `orders-` to the mapped prefix, and the
LITERAL wildcard `*` (every topic) to the prefix every mirror name starts with
(`us-west.` under DefaultReplicationPolicy; `*` itself when names are kept).
A prefix is mapped only when the policy maps names by prefix (the mirror of
`p + x` is the mirror of `p`, plus `x`); otherwise the binding is skipped,
with the reason. Bindings on this project's and Kafka's internal topics are
skipped: the destination's own internal topics are not the source's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mirror_pipeline.config.acl_filters import WILDCARD, AclFilters, BindingKey
from mirror_pipeline.config.replication_policy import ReplicationPolicy
from mirror_pipeline.model.errors import MirrorError

# Suffixes that check a policy maps names by prefix (see `_maps_by_prefix`).
_PROBES = ("x", "orders.eu-1", "A_b")


@dataclass(frozen=True)
class AclPlan:
    """What one sync does; every set holds destination bindings (mapped names)."""

    wanted: frozenset[BindingKey]  # what the source dictates on the destination
    to_create: tuple[BindingKey, ...]
    to_delete: tuple[BindingKey, ...]
    to_forget: tuple[BindingKey, ...]
    foreign: tuple[BindingKey, ...]
    skipped: tuple[tuple[BindingKey, str], ...] = ()  # selected source bindings not synced, and why
    selected: int = 0  # source bindings the filters select

    @property
    def in_sync(self) -> bool:
        return not (self.to_create or self.to_delete)

    def record_after(self, recorded: Iterable[BindingKey]) -> set[BindingKey]:
        """The link's record once the plan is carried out."""
        return (set(recorded) | set(self.to_create)) - set(self.to_delete) - set(self.to_forget)


def plan_acls(
    source: Iterable[BindingKey],
    destination: Iterable[BindingKey],
    recorded: Iterable[BindingKey],
    filters: AclFilters,
    naming: ReplicationPolicy,
) -> AclPlan:
    """Decide what an ACL sync creates, deletes and forgets (pure: bindings in, plan out)."""
    dest, mine = set(destination), set(recorded)
    wanted: set[BindingKey] = set()
    skipped: list[tuple[BindingKey, str]] = []
    selected = 0
    for binding in sorted(set(source)):
        if not filters.selects(binding):
            continue
        selected += 1
        mapped = map_binding(binding, naming)
        if isinstance(mapped, str):
            skipped.append((binding, mapped))
        else:
            wanted.add(mapped)
    return AclPlan(
        wanted=frozenset(wanted),
        to_create=tuple(sorted(wanted - dest)),
        to_delete=tuple(sorted((mine & dest) - wanted)),
        to_forget=tuple(sorted(mine - dest - wanted)),
        foreign=tuple(sorted(dest - mine)),
        skipped=tuple(skipped),
        selected=selected,
    )


def map_binding(binding: BindingKey, naming: ReplicationPolicy) -> BindingKey | str:
    """The destination's binding for a source binding, or why there is none."""
    if binding.resource_type != "topic":
        return binding
    name, pattern = binding.name, binding.pattern_type
    if pattern == "literal" and name == WILDCARD:
        if _keeps_names(naming):
            return binding
        if not _maps_by_prefix(naming, ""):
            return f"the replication policy {naming.name} gives mirror names no common prefix to grant '*' on"
        return binding._replace(name=naming.mirror_topic(""), pattern_type="prefixed")
    if naming.is_internal(name):
        return f"'{name}' is an internal topic, never mirrored"
    if pattern == "prefixed" and not _maps_by_prefix(naming, name):
        return f"the replication policy {naming.name} does not map topic names by prefix"
    try:
        mapped = naming.mirror_topic(name)
    except (MirrorError, ValueError) as exc:  # a user policy's refusal skips the binding, not the sync
        return f"the replication policy {naming.name} gives no mirror name: {exc}"
    return binding._replace(name=mapped)


def _keeps_names(naming: ReplicationPolicy) -> bool:
    return all(_mirror(naming, probe) == probe for probe in _PROBES)


def _maps_by_prefix(naming: ReplicationPolicy, prefix: str) -> bool:
    base = _mirror(naming, prefix)
    return base is not None and all(_mirror(naming, prefix + probe) == base + probe for probe in _PROBES)


def _mirror(naming: ReplicationPolicy, topic: str) -> str | None:
    try:
        return naming.mirror_topic(topic)
    except (MirrorError, ValueError):
        return None


# --- the result ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AclSyncResult:
    """One ACL sync of one link (or its dry run). Bindings in their JSON form; never a secret."""

    link: str
    enabled: bool
    dry_run: bool
    started_at: float
    duration_s: float = 0.0
    message: str = ""  # why nothing was done, when it was not
    source_bindings: int = 0
    selected: int = 0
    created: tuple[dict, ...] = ()  # in a dry run: what would be created
    deleted: tuple[dict, ...] = ()  # in a dry run: what would be deleted
    forgotten: int = 0
    in_sync_bindings: int = 0  # selected bindings already on the destination
    foreign: int = 0  # destination bindings the link did not create (never touched)
    skipped: tuple[dict, ...] = ()  # {"binding": ..., "reason": ...}
    error: str = ""

    @property
    def in_sync(self) -> bool:
        return self.enabled and not self.error and not self.created and not self.deleted

    def to_dict(self) -> dict:
        return {
            "link": self.link,
            "enabled": self.enabled,
            "dry_run": self.dry_run,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "message": self.message,
            "source_bindings": self.source_bindings,
            "selected": self.selected,
            "created": [dict(b) for b in self.created],
            "deleted": [dict(b) for b in self.deleted],
            "forgotten": self.forgotten,
            "in_sync_bindings": self.in_sync_bindings,
            "foreign": self.foreign,
            "skipped": [dict(s) for s in self.skipped],
            "error": self.error,
        }


class AclSyncFailed(MirrorError):
    """An ACL sync stopped part-way; what it did is in `result` (and in the link's record)."""

    def __init__(self, message: str, result: AclSyncResult):
        super().__init__(message)
        self.result = result
