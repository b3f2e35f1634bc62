"""The auto-create scan: mirrors for the source topics a link's filters select (R-AC-1..3).

One scan lists the source cluster's topics and decides, for each, whether the
link should mirror it. A topic is mirrored when an INCLUDE filter matches it
and no EXCLUDE does, unless it is an internal topic (R-AC-2), already this
link's mirror, would flow back to a cluster it came from (R-TP-2), has a
destination topic of the mirror's name that is not this link's (R-AC-3: a
normal topic is never taken over), cannot be read with the link's
credentials, or -- on a prefixed link -- is itself a mirror on the source
cluster (R-AC-3: no chains by auto-create on prefixed links).

The scan is idempotent: a second scan creates nothing the first created.
One failing create does not stop the others; failures are collected.
`mirror-pipeline run` and the Dagster auto-create job scan and create; the
auto-create sensor scans with `dry_run` (it writes nothing) and requests a
run of that job when there is something to create.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from mirror_pipeline.config.replication_policy import default_state_topic, state_topic
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka import leader_lookups
from mirror_pipeline.kafka.controller_requests import held_by_controller
from mirror_pipeline.link import read_probe
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_store import StateStore
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import ACTIVE, STOPPED
from mirror_pipeline.operations.bulk_create import create_mirrors

log = logging.getLogger(__name__)

CREATED = "created"
EXISTING = "existing"
SKIPPED = "skipped"
FAILED = "failed"
TO_CREATE = "to create"  # a dry run's verdict: the scan would create it


@dataclass(frozen=True)
class TopicOutcome:
    """What the scan did with one source topic the filters select."""

    source_topic: str
    mirror_topic: str
    outcome: str  # created | existing | skipped | failed | to create
    reason: str = ""

    def to_dict(self) -> dict:
        return {
            "source_topic": self.source_topic,
            "mirror_topic": self.mirror_topic,
            "outcome": self.outcome,
            "reason": self.reason,
        }


@dataclass
class AutoCreateResult:
    """One scan of one link: an outcome per selected source topic.

    Topics the filters do not select are only counted (a shared cluster has
    many); `mirrors` is every mirror of the link after the scan, with its state.
    """

    link: str
    enabled: bool
    outcomes: dict[str, TopicOutcome] = field(default_factory=dict)  # by source topic
    not_selected: int = 0
    mirrors: dict[str, str] = field(default_factory=dict)  # mirror topic -> state

    def _with(self, outcome: str) -> list[TopicOutcome]:
        return [o for _, o in sorted(self.outcomes.items()) if o.outcome == outcome]

    @property
    def created(self) -> list[str]:
        """Mirror topics this scan created."""
        return [o.mirror_topic for o in self._with(CREATED)]

    @property
    def existing(self) -> list[str]:
        return [o.mirror_topic for o in self._with(EXISTING)]

    @property
    def to_create(self) -> list[str]:
        """Source topics a dry run found that the scan would mirror."""
        return [o.source_topic for o in self._with(TO_CREATE)]

    @property
    def skipped(self) -> dict[str, str]:
        """Source topic -> why it was not mirrored."""
        return {o.source_topic: o.reason for o in self._with(SKIPPED)}

    @property
    def errors(self) -> dict[str, str]:
        """Source topic -> why creating its mirror failed."""
        return {o.source_topic: o.reason for o in self._with(FAILED)}

    def to_dict(self) -> dict:
        return {
            "link": self.link,
            "enabled": self.enabled,
            "created": [o.to_dict() for o in self._with(CREATED)],
            "existing": [o.to_dict() for o in self._with(EXISTING)],
            "skipped": [o.to_dict() for o in self._with(SKIPPED)],
            "failed": [o.to_dict() for o in self._with(FAILED)],
            "to_create": [o.to_dict() for o in self._with(TO_CREATE)],
            "not_selected": self.not_selected,
            "mirrors": dict(sorted(self.mirrors.items())),
        }


def scan(ctx: LinkContext, dry_run: bool = False) -> AutoCreateResult:
    """Create the mirrors the link's auto-create filters call for (R-AC-1..3).

    With `dry_run`, only decide: those it would create are TO_CREATE. Does nothing
    (and asks no cluster anything) when auto-create is off.
    Raises `ClusterUnreachable` when the source or destination does not answer,
    and `ConfigError` when the destination's registry refuses the link (R-LC-6).
    """
    link = ctx.link
    result = AutoCreateResult(link.name, link.auto_create_enable)
    if not link.auto_create_enable:
        return result
    ctx.check_destination()
    ctx.check_source()
    source_topics, source_counts = _list_topics(ctx.source_admin, ctx.source.alias)
    dest_topics = set(_list_topics(ctx.dest_admin, ctx.dest.alias)[0])
    registry = ctx.registry()
    by_source = {info.source_topic: info for info in registry.values()}
    source_mirrors: set[str] | None = None  # read on first need, prefixed links only
    source_registry_error = ""

    def outcome(topic: str, mirror: str, what: str, reason: str = "") -> None:
        result.outcomes[topic] = TopicOutcome(topic, mirror, what, reason)

    wanted = [
        t
        for t, error in source_topics.items()
        if not error and link.auto_create_filters.selects(t) and not ctx.naming.is_internal(t)
    ]
    # A mirror whose topic the destination does not list was created moments ago (the controller holds
    # its topic: nothing to do) or by a create that stopped half-way (its topic is created below).
    unlisted = {
        by_source[t].mirror_topic
        for t in wanted
        if t in by_source and by_source[t].state == ACTIVE and by_source[t].mirror_topic not in dest_topics
    }
    pending = held_by_controller(ctx.dest_admin, sorted(unlisted)) if unlisted else set()
    half_way = unlisted - pending
    # Whether the link may read a topic is asked once for all the topics that may need a mirror.
    selected = [t for t in wanted if t not in by_source or by_source[t].mirror_topic in half_way]
    unreadable_of = _unreadable_all(ctx, selected, source_counts)
    to_create: list[tuple[str, str]] = []
    for topic, error in sorted(source_topics.items()):
        if not link.auto_create_filters.selects(topic):
            result.not_selected += 1
            continue
        mirror = ctx.naming.mirror_topic(topic)
        if ctx.naming.is_internal(topic):
            outcome(topic, mirror, SKIPPED, "internal topic: never mirrored")
            continue
        known = by_source.get(topic)
        if known is not None and (known.mirror_topic in dest_topics or known.state != ACTIVE):
            outcome(topic, known.mirror_topic, EXISTING, f"mirror '{known.mirror_topic}' of this link ({known.state})")
            continue
        if known is not None and known.mirror_topic in pending:
            outcome(
                topic,
                known.mirror_topic,
                EXISTING,
                f"mirror '{known.mirror_topic}' of this link ({known.state}; created moments ago, "
                f"cluster '{ctx.dest.alias}' does not list its topic yet)",
            )
            continue
        if ctx.naming.would_loop(topic):
            outcome(
                topic, mirror, SKIPPED, f"it came from cluster '{ctx.dest.alias}': mirroring it there again would loop"
            )
            continue
        if known is None and mirror in dest_topics:
            outcome(
                topic,
                mirror,
                SKIPPED,
                f"a topic named '{mirror}' already exists on cluster '{ctx.dest.alias}' and is not a "
                f"mirror of this link; a normal topic is never taken over",
            )
            continue
        unreadable = error or unreadable_of.get(topic, "")
        if unreadable:
            outcome(topic, mirror, SKIPPED, f"the link cannot read it on cluster '{ctx.source.alias}': {unreadable}")
            continue
        if link.prefix:
            if source_mirrors is None:
                try:
                    source_mirrors = _mirrors_on_source(ctx)
                except ClusterUnreachable:
                    raise
                except MirrorError as exc:
                    source_mirrors, source_registry_error = set(), str(exc)
            if source_registry_error:
                # Chains must not happen by accident: nothing is created on a guess.
                outcome(
                    topic,
                    mirror,
                    SKIPPED,
                    f"cannot tell whether it is a mirror on cluster '{ctx.source.alias}': {source_registry_error}",
                )
                continue
            if topic in source_mirrors:
                outcome(
                    topic,
                    mirror,
                    SKIPPED,
                    f"it is itself a mirror on cluster '{ctx.source.alias}'; "
                    f"a prefixed link never chains mirrors by auto-create",
                )
                continue
        if dry_run:
            outcome(topic, known.mirror_topic if known else mirror, TO_CREATE)
            continue
        to_create.append((topic, known.mirror_topic if known else mirror))
    for topic, made in create_mirrors(ctx, to_create).items():
        if isinstance(made, MirrorError):
            log.warning("link %s: auto-create of a mirror of '%s' failed: %s", link.name, topic, made)
            outcome(topic, ctx.naming.mirror_topic(topic), FAILED, str(made))
            continue
        info, created = made
        registry[info.mirror_topic] = info
        outcome(
            topic,
            info.mirror_topic,
            CREATED if created else EXISTING,
            "" if created else f"mirror '{info.mirror_topic}' of this link ({info.state})",
        )
        if created:
            log.info("link %s: auto-created mirror '%s' of '%s'", link.name, info.mirror_topic, topic)
    result.mirrors = {name: info.state for name, info in registry.items()}
    return result


def _list_topics(admin, alias: str) -> tuple[dict[str, str], dict[str, int]]:
    """(topic name -> its metadata error, "" when none; topic name -> partitions) of one cluster, in one request."""
    with kc.kafka_errors(f"cluster '{alias}' did not list its topics", ClusterUnreachable):
        metadata = admin.list_topics(timeout=kc.REQUEST_TIMEOUT_S)
    leader_lookups.learned(admin, metadata)
    return (
        {name: (meta.error.str() if meta.error is not None else "") for name, meta in metadata.topics.items()},
        {name: len(meta.partitions) for name, meta in metadata.topics.items()},
    )


def _unreadable_all(ctx: LinkContext, topics: list[str], partitions: dict[str, int]) -> dict[str, str]:
    """Why the link cannot read each of `topics` on the source ("" when it can), as `create_mirror` would
    find: one offsets request for all when the link can describe every one (the usual case), else each
    alone, to say which cannot be and why; then one READ probe (one consumer) for all the others."""
    try:
        kc.list_offsets(
            ctx.source_admin, [(t, p) for t in topics for p in range(partitions[t])], "latest", ctx.source.alias
        )
        found = {}
    except MirrorError:  # an unreadable topic fails the whole request (as TOPIC_AUTHORIZATION_FAILED, say)
        found = {t: why for t in topics if (why := _not_described(ctx, t))}
    return {**found, **_not_fetched(ctx, [t for t in topics if t not in found])}


def _not_described(ctx: LinkContext, topic: str) -> str:
    """Why the link cannot list `topic`'s offsets ("" when it can): DESCRIBE is all that needs."""
    try:
        partitions = kc.topic_partitions(ctx.source_admin, topic, ctx.source.alias)
        if partitions is None:
            return "it no longer exists"
        kc.list_offsets(ctx.source_admin, [(topic, p) for p in range(partitions)], "latest", ctx.source.alias)
    except MirrorError as exc:
        return str(exc)
    return ""


def _not_fetched(ctx: LinkContext, topics: list[str]) -> dict[str, str]:
    """Why the link may not READ each of `topics` (one Fetch each, from one consumer): DESCRIBE is not enough."""
    found = read_probe.probe(ctx, topics)
    return {
        **found.denied,
        **{
            t: f"no Fetch answer within {read_probe.READ_PROBE_S:.0f}s (the next scan asks again)"
            for t in found.unanswered
        },
    }


def _source_state_topics(ctx: LinkContext) -> list[str]:
    """Where the source cluster's own registry may be: the state topics of the links into it.

    The default name is always asked too: the source cluster may be the
    destination of a link in some other config.
    """
    topics = {state_topic(other) for other in ctx.config.links.values() if other.destination == ctx.source.alias}
    topics.add(default_state_topic())
    return sorted(topics)


def _mirrors_on_source(ctx: LinkContext) -> set[str]:
    """Topics of the source cluster that are live mirrors there (of any link, from any config)."""
    found: set[str] = set()
    for topic in _source_state_topics(ctx):
        store = StateStore(ctx.link.name, ctx.source.alias, dict(ctx.source.properties), topic, topic)
        for mirrors in store.read_all_mirrors().values():
            found.update(name for name, info in mirrors.items() if _is_live(info))
    return found


def _is_live(info: MirrorInfo) -> bool:
    # A STOPPED mirror was promoted or failed over: a normal topic now.
    return info.state != STOPPED
