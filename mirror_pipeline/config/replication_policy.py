"""Names of mirror topics and of this project's internal topics (R-MT-2, R-TP-2..4).

Every naming question is answered here, by the link's policy object, so that the
engine never builds a topic name by hand. Three policies ship, and a user may
add one by dotted class path:

- link naming (the default, Cluster Linking's): names kept, plus the link's
  optional `cluster.link.prefix`;
- `DefaultReplicationPolicy` (MirrorMaker 2's): `<source alias><sep><topic>`,
  stacking along chains, and a topic never flows back to a cluster already in
  its name;
- `IdentityReplicationPolicy`: names kept, no loop detection (the config must
  avoid loops; `loop_warnings` names the links that would form one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from mirror_pipeline.config.user_modules import import_user_module
from mirror_pipeline.model.errors import ConfigError

INTERNAL_PREFIX = "_mirror-pipeline"
INTERNAL_KINDS = ("state", "offset-map", "checkpoints", "heartbeats")
# Link settings that rename one internal topic (R-TP-4): a cluster that forbids
# auto-created topics or enforces a naming rule gets names it accepts.
INTERNAL_TOPIC_SETTINGS = {
    "state": "state_topic",
    "offset-map": "offset_map_topic",
    "checkpoints": "checkpoints_topic",
    "heartbeats": "heartbeats_topic",
}
# Internal topics each link has for itself by default (`_mirror-pipeline.<link>.offset-map`):
# a writer killed mid-transaction holds back every reader of its topic until the
# broker aborts it, and no link may wait on another's. The state topic stays one
# per destination: it is the registry every link checks mirror ownership in, and
# is written only by short state changes. Links whose state predates per-link
# names keep the shared ones (`LinkContext.registry`).
PER_LINK_KINDS = ("offset-map", "checkpoints")

LINK_NAMING = "link naming"
DEFAULT_POLICY = "DefaultReplicationPolicy"
IDENTITY_POLICY = "IdentityReplicationPolicy"
# MirrorMaker 2's class names are accepted too, so an MM2 config can be pasted.
_POLICY_ALIASES = {
    "": LINK_NAMING,
    DEFAULT_POLICY: DEFAULT_POLICY,
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DEFAULT_POLICY,
    IDENTITY_POLICY: IDENTITY_POLICY,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IDENTITY_POLICY,
}
# MirrorMaker 2's and Kafka Connect's own topics: never mirrored (R-AC-2).
_MM2_TOPICS = ("heartbeats", "mm2-configs", "mm2-offsets", "mm2-status")


def is_internal_topic(name: str) -> bool:
    """Topics no link mirrors: Kafka's, schema storage, ours, MirrorMaker's (R-AC-2)."""
    return (
        name.startswith("__")
        or name == "_schemas"
        or name.startswith(INTERNAL_PREFIX)
        or name.endswith(".internal")
        or name in _MM2_TOPICS
        or name.startswith(("mm2-", "connect-"))
    )


class ReplicationPolicy:
    """Base class of every policy; subclass it for `replication.policy.class: pkg.module.Class`.

    A policy is built per link with the link's aliases, separator and prefix.
    Override `mirror_topic`, and `topic_source` / `upstream_topic` when names
    carry their origin (that is what loop detection reads).
    """

    name = LINK_NAMING
    # Whether a hand-picked mirror name may differ from `mirror_topic(source)`.
    allows_renaming = True

    def __init__(
        self,
        source_alias: str,
        destination_alias: str,
        separator: str = ".",
        prefix: str = "",
        internal_names: dict[str, str] | None = None,
        reserved: Iterable[str] = (),
        link: str = "",
    ):
        self.source_alias = source_alias
        self.link = link
        self.destination_alias = destination_alias
        self.separator = separator
        self.prefix = prefix
        self._internal_names = dict(internal_names or {})
        # Internal topics other links of the config renamed: never mirrored either.
        self._reserved = frozenset(reserved)

    # --- mirror names ------------------------------------------------------------------
    def mirror_topic(self, source_topic: str) -> str:
        return f"{self.prefix}{source_topic}"

    def check_mirror_name(self, source_topic: str, mirror_topic: str) -> None:
        """Refuses a hand-picked mirror name the policy cannot own (R-MT-2)."""
        if not self.allows_renaming and mirror_topic != self.mirror_topic(source_topic):
            raise ConfigError(
                f"{self.name} names the mirror of '{source_topic}' '{self.mirror_topic(source_topic)}'; "
                f"'{mirror_topic}' cannot be chosen by hand"
            )
        if self.prefix and not mirror_topic.startswith(self.prefix):
            raise ConfigError(f"mirror topic '{mirror_topic}' must start with the link prefix '{self.prefix}'")

    def topic_source(self, topic: str) -> str | None:
        """The cluster alias a topic's name says it was mirrored from; None: a local topic."""
        return None

    def upstream_topic(self, topic: str) -> str | None:
        """The name the topic had one hop upstream; None: a local topic."""
        return None

    def origin_path(self, topic: str) -> list[str]:
        """Every cluster alias the name records, nearest hop first (`a.b.t` -> [a, b])."""
        path: list[str] = []
        while (alias := self.topic_source(topic)) is not None and (upstream := self.upstream_topic(topic)):
            path.append(alias)
            topic = upstream
        return path

    def would_loop(self, source_topic: str) -> bool:
        """True when copying `source_topic` sends it back to a cluster it came through (R-TP-2)."""
        return self.destination_alias in self.origin_path(source_topic)

    # --- internal topics -----------------------------------------------------------------
    def internal_topic(self, kind: str) -> str:
        if kind not in INTERNAL_KINDS:
            raise ValueError(f"unknown internal topic kind {kind!r}")
        if kind in self._internal_names:
            return self._internal_names[kind]
        if kind in PER_LINK_KINDS and self.link:
            return f"{INTERNAL_PREFIX}{self.separator}{self.link}{self.separator}{kind}"
        return self.shared_internal_topic(kind)

    def shared_internal_topic(self, kind: str) -> str:
        """The name every link of a destination used for `kind` before links had their own."""
        return f"{INTERNAL_PREFIX}{self.separator}{kind}"

    def heartbeats_mirror_topic(self) -> str:
        """The mirror of the source's heartbeats topic: `<source alias><sep><heartbeats topic>`
        under every policy (MirrorMaker 2's identity policy keeps that prefix for heartbeats too),
        so a cluster's own heartbeats and those of each of its sources never share a name."""
        return f"{self.source_alias}{self.separator}{self.internal_topic('heartbeats')}"

    def is_internal(self, name: str) -> bool:
        """Never mirrored by a filter or by hand: see `is_internal_topic`, plus renamed internal
        topics and the mirrored copies of internal topics (`us-west.heartbeats`). A link with
        heartbeats on mirrors its own heartbeats topic itself (`link.heartbeats`)."""
        if is_internal_topic(name) or name in self._reserved:
            return True
        if name in (self.internal_topic(kind) for kind in INTERNAL_KINDS):
            return True
        if name.endswith(self.separator + self.internal_topic("heartbeats")):
            return True
        upstream = self.upstream_topic(name)
        return upstream is not None and self.is_internal(upstream)


class LinkNaming(ReplicationPolicy):
    """Cluster Linking naming: names kept, with the link's optional prefix (the default)."""


class DefaultReplicationPolicy(ReplicationPolicy):
    """MirrorMaker 2's naming: `<source alias><separator><topic>`, stacked along chains."""

    name = DEFAULT_POLICY
    allows_renaming = False

    def mirror_topic(self, source_topic: str) -> str:
        return f"{self.source_alias}{self.separator}{source_topic}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, _rest = topic.partition(self.separator)
        return head if sep and head else None

    def upstream_topic(self, topic: str) -> str | None:
        head, sep, rest = topic.partition(self.separator)
        return rest if sep and head and rest else None


class IdentityReplicationPolicy(ReplicationPolicy):
    """Names unchanged and no loop detection: the config must keep links loop-free."""

    name = IDENTITY_POLICY
    allows_renaming = False


_BUILT_IN = {
    LINK_NAMING: LinkNaming,
    DEFAULT_POLICY: DefaultReplicationPolicy,
    IDENTITY_POLICY: IdentityReplicationPolicy,
}


def policy_class(spec: str) -> type[ReplicationPolicy]:
    """The class `replication.policy.class` names; a user class is imported by dotted path,
    from the user's own module only (see `user_modules`), and must subclass ReplicationPolicy."""
    if spec in _POLICY_ALIASES:
        return _BUILT_IN[_POLICY_ALIASES[spec]]
    module_name, _, class_name = spec.rpartition(".")
    if not module_name:
        raise ConfigError(
            f"unknown policy '{spec}': use {DEFAULT_POLICY}, {IDENTITY_POLICY} or a dotted path module.Class"
        )
    module = import_user_module(module_name, spec)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, ReplicationPolicy)):
        raise ConfigError(f"'{spec}' is not a subclass of mirror_pipeline.config.replication_policy.ReplicationPolicy")
    return cls


class NamingSettings(Protocol):
    """What naming reads of a link: `link_settings.LinkConfig` has it (a protocol, as that module imports this one)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def destination(self) -> str: ...
    @property
    def prefix(self) -> str | None: ...
    @property
    def group_prefix_enable(self) -> bool: ...
    @property
    def heartbeats_enabled(self) -> bool: ...
    @property
    def policy_class(self) -> str: ...
    @property
    def policy_separator(self) -> str: ...


class NamingConfig(Protocol):
    """The links of a configuration (`loader.PipelineConfig`), as naming reads them."""

    @property
    def links(self) -> Mapping[str, NamingSettings]: ...


def names_mirrors_itself(spec: str) -> bool:
    """The built-in MirrorMaker 2 policies leave no room for `cluster.link.prefix`."""
    return _POLICY_ALIASES.get(spec) in (DEFAULT_POLICY, IDENTITY_POLICY)


def configured_internal_names(link: NamingSettings) -> dict[str, str]:
    """The internal topic names the link's settings set explicitly (kind -> name)."""
    return {kind: getattr(link, attr) for kind, attr in INTERNAL_TOPIC_SETTINGS.items() if getattr(link, attr, None)}


def policy_for(link: NamingSettings, reserved: Iterable[str] = ()) -> ReplicationPolicy:
    """The link's policy object; `reserved` adds internal topic names other links chose."""
    cls = policy_class(link.policy_class)
    return cls(
        link.source,
        link.destination,
        link.policy_separator,
        link.prefix or "",
        configured_internal_names(link),
        reserved,
        link=link.name,
    )


def naming_for(link: NamingSettings) -> ReplicationPolicy:
    return policy_for(link)


def reserved_names(config: NamingConfig) -> set[str]:
    """Internal topic names any link of the config renamed, so no link mirrors them."""
    return {name for link in config.links.values() for name in configured_internal_names(link).values()}


def naming_record(link: NamingSettings) -> dict[str, Any]:
    """What fixes the names of a link's mirrors and synced groups (R-OFS-4); cannot change
    once the link has state (R-CFG-4)."""
    return {
        "cluster.link.prefix": link.prefix or "",
        "consumer.group.prefix.enable": link.group_prefix_enable,
        "replication.policy.class": _POLICY_ALIASES.get(link.policy_class, link.policy_class),
        "replication.policy.separator": link.policy_separator,
    }


def loop_warnings(links: Iterable[NamingSettings]) -> list[str]:
    """Cycles among IdentityReplicationPolicy links: nothing stops a topic going round (R-TP-3)."""
    identity = [link for link in links if _POLICY_ALIASES.get(link.policy_class) == IDENTITY_POLICY]
    edges: dict[str, list[NamingSettings]] = {}
    for link in identity:
        edges.setdefault(link.source, []).append(link)
    warnings = []
    for first in identity:
        # Depth-first search back to `first.source`; cycles are short in practice.
        stack: list[tuple[str, list[NamingSettings]]] = [(first.destination, [first])]
        while stack:
            cluster, path = stack.pop()
            if cluster == first.source:
                if first.name == min(on_path.name for on_path in path):  # report each cycle once
                    names = " -> ".join(f"'{on_path.name}'" for on_path in path)
                    warnings.append(
                        f"links {names} form a loop under {IDENTITY_POLICY}, which does not detect loops: "
                        f"filters must keep a mirror from being mirrored back"
                    )
                continue
            stack.extend((nxt.destination, path + [nxt]) for nxt in edges.get(cluster, []) if nxt not in path)
    return warnings


def heartbeat_collisions(links: Iterable[NamingSettings]) -> list[str]:
    """Links that would write the same heartbeats mirror: each would find the other's records in it
    as records it did not write, and stop copying it (R-MT-9)."""
    by_mirror: dict[tuple[str, str], list[NamingSettings]] = {}
    for link in links:
        if link.heartbeats_enabled:
            by_mirror.setdefault((link.destination, naming_for(link).heartbeats_mirror_topic()), []).append(link)
    return [
        f"links {', '.join(repr(one.name) for one in sharing)} would all mirror their heartbeats to '{mirror}' on "
        f"cluster '{destination}' (emit.heartbeats.enabled): give each but one its own mirror.heartbeats.topic"
        for (destination, mirror), sharing in sorted(by_mirror.items())
        if len(sharing) > 1
    ]


def state_topic(link: NamingSettings) -> str:
    return naming_for(link).internal_topic("state")


def default_state_topic() -> str:
    """Where a link with default settings (of any config) keeps its registry."""
    return ReplicationPolicy("", "").internal_topic("state")
