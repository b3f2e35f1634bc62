"""Everything a verb needs to act on one link: settings, clients, naming, state store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
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
from mirror_pipeline.link.state_keys import LEGACY_WRITER_SLOTS
from mirror_pipeline.link.state_store import StateStore
from mirror_pipeline.link.state_writers import SegmentWriter, fenced_batches, fenced_writers
from mirror_pipeline.model.errors import ConfigError, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.text import some_of

SegmentWriters = dict[tuple[str, int], SegmentWriter]  # (mirror, partition) -> its slot's writer, fenced

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
    # The link's writer slot count, once the registry told whether its record holds it to one.
    _writer_slots: int | None = field(default=None, repr=False)

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

    @property
    def writer_slots(self) -> int:
        """How many writer identities the link's partitions are fenced under (`state_keys.writer_slot`)."""
        if self._writer_slots is None:
            self.registry()  # tells whether the link's record holds it to a count
        assert self._writer_slots is not None
        return self._writer_slots

    def fenced_writers(self, partitions: Iterable[tuple[str, int]]) -> AbstractContextManager[SegmentWriters]:
        """`state_writers.fenced_writers` of this link's (mirror, partition)s (a context manager)."""
        return fenced_writers(
            self.store.dest_properties, self.link.name, self.store.offset_map_topic, partitions, self.writer_slots
        )

    def fenced_batches(self, partitions: Sequence[tuple[str, int]]) -> Iterator[SegmentWriters]:
        """`state_writers.fenced_batches` of this link's (mirror, partition)s."""
        return fenced_batches(
            self.store.dest_properties, self.link.name, self.store.offset_map_topic, partitions, self.writer_slots
        )

    def segment_writer(self, mirror: str, partition: int) -> SegmentWriter:
        """A writer of its own for one mirror partition's slot (fencing it fences the whole slot)."""
        return SegmentWriter(
            self.store.dest_properties,
            self.link.name,
            mirror,
            partition,
            self.store.offset_map_topic,
            self.writer_slots,
        )

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
        self._settle_writer_slots(self._recorded_naming or {}, mine)
        return mine

    def select(self, topics: list[str] | None) -> list[MirrorInfo]:
        """The named mirrors of the link (all of them when `topics` is None); unknown names are refused."""
        registry = self.registry()
        if topics is None:
            return sorted(registry.values(), key=lambda m: m.mirror_topic)
        unknown = [t for t in topics if t not in registry]
        if unknown:
            raise MirrorRefused(
                f"no mirror {', '.join(repr(u) for u in unknown)} on link '{self.link.name}' "
                f"(mirrors: {some_of(sorted(registry))})"
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
            WRITER_SLOTS_KEY: self.writer_slots,
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
        live = _live(mirrors)
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
        live = _live(mirrors)
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

    def _settle_writer_slots(self, recorded: dict[str, Any], mirrors: dict[str, MirrorInfo]) -> None:
        """The link's writer slot count: the configured one (or the default), unless the link has
        live mirrors, whose partitions stay under the count they were written under (the record's;
        LEGACY_WRITER_SLOTS for a record from before the setting). A zombie writer is fenced only by
        a writer of its own identity, so a new count would leave the old count's writers free to
        announce: a configured count that differs is refused, an unset one follows the record."""
        live = _live(mirrors)
        configured = self.link.writer_slots
        kept = recorded.get(WRITER_SLOTS_KEY, LEGACY_WRITER_SLOTS) if live else configured
        if configured != kept and "writer_slots" in self.link.model_fields_set:
            raise ConfigError(
                f"{self.config.path or 'the config'}: links.{self.link.name}.{WRITER_SLOTS_KEY}: cannot change "
                f"from {kept} to {configured}: the link's partitions are fenced under {kept} writers on cluster "
                f"'{self.dest.alias}' (mirrors {', '.join(live)}). Put the old value back, or delete, promote or "
                f"fail over those mirrors first"
            )
        self._writer_slots = kept


# The link record's key for the writer slot count: the setting's property name.
WRITER_SLOTS_KEY = str(LinkConfig.model_fields["writer_slots"].alias)


def _live(mirrors: dict[str, MirrorInfo]) -> list[str]:
    """The mirrors whose partitions a writer may still announce for (every one not STOPPED), by name."""
    return sorted(m for m, info in mirrors.items() if info.state != "STOPPED")


def _setting(link: LinkConfig, kind: str) -> str:
    """The property that names the link's internal topic of `kind` (`mirror.offset.map.topic`)."""
    attr = INTERNAL_TOPIC_SETTINGS[kind]
    return type(link).model_fields[attr].alias or attr


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else f"'{value}'"
