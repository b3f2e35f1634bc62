"""Everything a verb needs to act on one link: settings, clients, naming, state store."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from mirror_pipeline.config.link_settings import LinkConfig
from mirror_pipeline.config.loader import ClusterConfig, PipelineConfig
from mirror_pipeline.config.replication_policy import (
    INTERNAL_TOPIC_SETTINGS,
    PER_LINK_KINDS,
    ReplicationPolicy,
    configured_internal_names,
    naming_record,
    policy_for,
    reserved_names,
)
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_store import StateStore
from mirror_pipeline.model.errors import ConfigError, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo

# Read-only verbs ask a cluster this long whether it answers before they say
# what they know without it: an operator facing a dead cluster wants an answer in seconds.
READ_ONLY_PROBE_S = 3.0


@dataclass
class LinkContext:
    config: PipelineConfig
    link: LinkConfig
    source: ClusterConfig
    dest: ClusterConfig
    naming: ReplicationPolicy
    store: StateStore = field(repr=False)
    # The link's per-link internal topics (kind -> name): configured ones at once,
    # the others once the registry tells which names the link's state is under.
    _internal: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, config: PipelineConfig, link_name: str) -> LinkContext:
        link = config.link(link_name)
        source, dest = config.cluster(link.source), config.cluster(link.destination)
        naming = policy_for(link, reserved=reserved_names(config))
        configured = configured_internal_names(link)
        store = StateStore(
            link.name, dest.alias, dict(dest.properties), naming.internal_topic("state"), configured.get("offset-map")
        )
        ctx = cls(
            config,
            link,
            source,
            dest,
            naming,
            store,
            {kind: name for kind, name in configured.items() if kind in PER_LINK_KINDS},
        )
        store.find_offset_map = lambda: ctx._settle("offset-map")
        return ctx

    @property
    def checkpoints_topic(self) -> str:
        self._settle("checkpoints")
        return self._internal["checkpoints"]

    def _settle(self, kind: str) -> None:
        if kind not in self._internal:
            self.registry()  # tells which names the link's state is under

    def source_conf(self, role: str, **overrides: Any) -> dict[str, Any]:
        return kc.client_config(self.source.properties, self.link.name, role, **overrides)

    def dest_conf(self, role: str, **overrides: Any) -> dict[str, Any]:
        return kc.client_config(self.dest.properties, self.link.name, role, **overrides)

    @cached_property
    def source_admin(self) -> AdminClient:
        return kc.admin_client(self.source_conf("admin"))

    @property
    def dest_admin(self) -> AdminClient:
        return self.store.admin

    def check_source(self, timeout: float = kc.REQUEST_TIMEOUT_S) -> None:
        kc.check_reachable(self.source_admin, self.source.alias, self.source.bootstrap_servers, timeout)

    def check_destination(self, timeout: float = kc.REQUEST_TIMEOUT_S) -> None:
        kc.check_reachable(self.dest_admin, self.dest.alias, self.dest.bootstrap_servers, timeout)

    def registry(self) -> dict[str, MirrorInfo]:
        """This link's mirrors; refuses when the config dropped a link that still has
        mirrors (R-LC-6) or renamed what names its mirrors (R-CFG-4).

        Other config files may share the destination: a link missing from this
        config counts as dropped from it only when it was declared here (see
        `_was_declared_here`) and its mirrors come from one of its clusters.
        """
        state = self.store.read_registry()
        everything = state.mirrors
        orphaned = {
            link: sorted(
                m
                for m, info in mirrors.items()
                if info.state != "STOPPED" and info.source_cluster in self.config.clusters
            )
            for link, mirrors in everything.items()
            if link not in self.config.links and self._was_declared_here(state.links.get(link))
        }
        orphaned = {link: names for link, names in orphaned.items() if names}
        if orphaned:
            where = self.config.path or "the config"
            details = "; ".join(
                f"link '{name}' still has mirrors {', '.join(n)}" for name, n in sorted(orphaned.items())
            )
            raise ConfigError(
                f"{where}: {details} on cluster '{self.dest.alias}'. A link with mirrors attached cannot be removed: "
                f"put it back, then delete, promote or fail over its mirrors first"
            )
        mine = everything.get(self.link.name, {})
        self._recorded_naming = state.links.get(self.link.name)
        self._check_naming(self._recorded_naming, mine)
        self._settle_internal_topics(self._recorded_naming or {}, mine)
        return mine

    def select(self, topics: list[str] | None) -> list[MirrorInfo]:
        """The named mirrors of the link (all of them when `topics` is None); unknown names are refused."""
        registry = self.registry()
        if topics is None:
            return sorted(registry.values(), key=lambda m: m.mirror_topic)
        unknown = [t for t in topics if t not in registry]
        if unknown:
            known = ", ".join(sorted(registry)) or "none"
            raise MirrorRefused(
                f"no mirror {', '.join(repr(u) for u in unknown)} on link '{self.link.name}' (mirrors: {known})"
            )
        return [registry[t] for t in topics]

    def record_naming(self) -> None:
        """Remember the naming this link's mirrors are created under, which config declared
        it (its file and its links) and the internal topics its state is in."""
        for kind in PER_LINK_KINDS:
            self._settle(kind)
        record = {
            **naming_record(self.link),
            **self._declared_by(),
            **{_setting(self.link, kind): name for kind, name in self._internal.items()},
        }
        if getattr(self, "_recorded_naming", None) != record:
            self.store.put_link_record(record)
            self._recorded_naming = record

    def _declared_by(self) -> dict[str, Any]:
        path = str(Path(self.config.path).resolve()) if self.config.path else ""
        return {"declared.in": path, "declared.with": sorted(self.config.links)}

    def _was_declared_here(self, record: dict[str, Any] | None) -> bool:
        """Whether a link this config lacks was declared by this config: the same file, or a
        file that held one of this config's links alongside it. Records written before the
        link's origin was kept cannot tell: they count as this config's (the safe side)."""
        if not record or "declared.with" not in record:
            return True
        here = self._declared_by()
        return record.get("declared.in") == here["declared.in"] or bool(
            set(record["declared.with"]) & set(here["declared.with"])
        )

    def _check_naming(self, recorded: dict[str, Any] | None, mirrors: dict[str, MirrorInfo]) -> None:
        """A prefix or policy change on a link that has mirrors would orphan them (R-CFG-4)."""
        live = sorted(m for m, info in mirrors.items() if info.state != "STOPPED")
        if recorded is None or not live:
            return
        current = naming_record(self.link)
        # Keys a record predates are not compared: the record is refreshed at the next create.
        changed = [key for key in current if key in recorded and recorded[key] != current[key]]
        if changed:
            where = self.config.path or "the config"
            key = changed[0]
            raise ConfigError(
                f"{where}: links.{self.link.name}.{key}: cannot change from {_shown(recorded[key])} to "
                f"{_shown(current[key])}: the link has state on cluster '{self.dest.alias}' "
                f"(mirrors {', '.join(live)}). Put the old value back, or delete, promote or fail over "
                f"those mirrors first"
            )

    def _settle_internal_topics(self, recorded: dict[str, Any], mirrors: dict[str, MirrorInfo]) -> None:
        """Which offset-map and checkpoints topics hold this link's state.

        A configured name is used, and may not move a link with live mirrors off the
        name its record keeps (its offset maps would be left behind). Unconfigured:
        the recorded name; for a link with mirrors but no recorded name (state
        written before links had topics of their own) the shared name it used then;
        otherwise the link's own default.
        """
        live = sorted(m for m, info in mirrors.items() if info.state != "STOPPED")
        for kind in PER_LINK_KINDS:
            key = _setting(self.link, kind)
            configured, kept = configured_internal_names(self.link).get(kind), recorded.get(key)
            if configured and kept and configured != kept and live:
                raise ConfigError(
                    f"{self.config.path or 'the config'}: links.{self.link.name}.{key}: cannot change from "
                    f"'{kept}' to '{configured}': the link's state is in '{kept}' on cluster '{self.dest.alias}' "
                    f"(mirrors {', '.join(live)}). Put the old value back, or delete, promote or fail over "
                    f"those mirrors first"
                )
            if configured:
                self._internal[kind] = configured
            elif mirrors:
                self._internal[kind] = kept or self.naming.shared_internal_topic(kind)
            else:
                self._internal[kind] = self.naming.internal_topic(kind)
        self.store.offset_map_topic = self._internal["offset-map"]


def _setting(link: LinkConfig, kind: str) -> str:
    """The property that names the link's internal topic of `kind` (`mirror.offset.map.topic`)."""
    attr = INTERNAL_TOPIC_SETTINGS[kind]
    return type(link).model_fields[attr].alias or attr


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else f"'{value}'"
