"""Internal topics an earlier version created get this version's cleaning settings, once a process.

Internal topics roll their segments every 10 minutes and keep tombstones 10
minutes (`state_store.STATE_TOPIC_CONFIG`): with the broker's values (an hour,
a day), a wide link's offset map held 475,000 records after about 20 cycles of
10,000 partitions, a second to read for every command. Topics an earlier version
created keep the broker's values. So a cycle, and every command that makes sure
the internal topics exist, gives each of them the two settings where the topic
has no value of its own: an operator's own value stays. Best-effort: a cluster
that refuses (no right to alter configs) is told in the log, and nothing else
changes; it is tried once a process for each cluster and topic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import setting

log = logging.getLogger(__name__)

# The settings given, which `state_store.STATE_TOPIC_CONFIG` gives a new internal topic too.
CLEANING = {"segment.ms": "600000", "delete.retention.ms": "600000"}

_tried: set[tuple[str, str]] = set()  # (cluster, topic) this process has seen to
_tried_lock = threading.Lock()


def settle_cleaning(admin: AdminClient, alias: str, cluster: str, topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """Give `topics` the CLEANING settings they have no value of their own for: topic -> the settings given.

    `cluster` names the cluster for the once-a-process rule (its bootstrap servers). A topic that
    does not exist is left to the command that needs it.
    """
    with _tried_lock:
        todo = [t for t in dict.fromkeys(topics) if (cluster, t) not in _tried]
        _tried.update((cluster, t) for t in todo)
    if not todo:
        return {}
    try:
        described = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in todo], request_timeout=kc.REQUEST_TIMEOUT_S
        )
    except KafkaException:
        return {}
    missing: dict[str, dict[str, str]] = {}
    for resource, future in described.items():
        try:
            entries = future.result()
        except KafkaException:
            continue
        own = {name for name, entry in entries.items() if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        if wanted := {name: value for name, value in CLEANING.items() if name not in own}:
            missing[resource.name] = wanted
    return _alter(admin, alias, missing)


def _alter(admin: AdminClient, alias: str, missing: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    if not missing:
        return {}
    resources = [setting(topic, wanted) for topic, wanted in missing.items()]
    try:
        futures = admin.incremental_alter_configs(resources, request_timeout=kc.REQUEST_TIMEOUT_S)
    except KafkaException:
        return {}
    given: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        wanted = missing[resource.name]
        settings = ", ".join(f"{name}={value}" for name, value in wanted.items())
        try:
            future.result()
        except KafkaException as exc:
            log.warning(
                "cluster '%s': internal topic '%s' keeps the broker's cleaning settings (setting %s failed: %s); "
                "set them as an operator to keep what every command reads small",
                alias,
                resource.name,
                settings,
                kc.error_name(exc),
            )
            continue
        log.info(
            "cluster '%s': internal topic '%s' now has %s (made by an earlier version)", alias, resource.name, settings
        )
        given[resource.name] = wanted
    return given
