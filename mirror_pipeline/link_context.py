"""Everything a verb needs to act on one link: settings, clients, naming, state store."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from confluent_kafka.admin import AdminClient

from mirror_pipeline import kafka_clients as kc
from mirror_pipeline.config import ClusterConfig, LinkConfig, PipelineConfig
from mirror_pipeline.replication_policy import LinkNaming, naming_for, offset_map_topic, state_topic
from mirror_pipeline.state_store import StateStore


@dataclass
class LinkContext:
    config: PipelineConfig
    link: LinkConfig
    source: ClusterConfig
    dest: ClusterConfig
    naming: LinkNaming
    store: StateStore = field(repr=False)

    @classmethod
    def open(cls, config: PipelineConfig, link_name: str) -> "LinkContext":
        link = config.link(link_name)
        source, dest = config.cluster(link.source), config.cluster(link.destination)
        store = StateStore(link.name, dest.alias, dict(dest.properties), state_topic(link), offset_map_topic(link))
        return cls(config, link, source, dest, naming_for(link), store)

    def source_conf(self, role: str, **overrides) -> dict:
        return kc.client_config(self.source.properties, self.link.name, role, **overrides)

    def dest_conf(self, role: str, **overrides) -> dict:
        return kc.client_config(self.dest.properties, self.link.name, role, **overrides)

    @cached_property
    def source_admin(self) -> AdminClient:
        return kc.admin_client(self.source_conf("admin"))

    @property
    def dest_admin(self) -> AdminClient:
        return self.store.admin

    def check_source(self) -> None:
        kc.check_reachable(self.source_admin, self.source.alias, self.source.bootstrap_servers)

    def check_destination(self) -> None:
        kc.check_reachable(self.dest_admin, self.dest.alias, self.dest.bootstrap_servers)
