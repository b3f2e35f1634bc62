"""Which topic configs a mirror takes from its source (R-CS-1..3, R-CS-5)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import ClusterUnreachable, TopicNotFound

# R-CS-1: always synced, source value wins.
ALWAYS_SYNCED = (
    "max.message.bytes",
    "cleanup.policy",
    "retention.bytes",
    "retention.ms",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "message.timestamp.type",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "compression.type",
)

# R-CS-2: taken from the source at creation, then an override on the mirror is kept.
OVERRIDABLE = (
    "segment.jitter.ms",
    "segment.index.bytes",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "min.cleanable.dirty.ratio",
    "file.delete.delay.ms",
    "preallocate",
)

# R-CS-5: these would make the mirror's broker rewrite or reject copied
# records, so they wait until the topic stops being a mirror.
TIMESTAMP_BOUNDS = (
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
)


# While a topic is a mirror its timestamp bounds are wide open, so that a
# catch-up of old records is never rejected; the removed (Kafka 4) difference
# setting is left unset.
LONG_MAX = "9223372036854775807"
MIRROR_TIMESTAMP_BOUNDS = {"message.timestamp.before.max.ms": LONG_MAX, "message.timestamp.after.max.ms": LONG_MAX}


def split_for_mirror(source: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(configs the mirror gets now, configs held back until promote/failover)."""
    now: dict[str, str] = {}
    held: dict[str, str] = {}
    for name in ALWAYS_SYNCED + OVERRIDABLE:
        if name not in source:
            continue
        value = source[name]
        if name in TIMESTAMP_BOUNDS:
            held[name] = value
            if name in MIRROR_TIMESTAMP_BOUNDS:
                now[name] = MIRROR_TIMESTAMP_BOUNDS[name]
        elif name == "message.timestamp.type" and value == "LogAppendTime":
            held[name] = value
            now[name] = "CreateTime"  # keep the source's timestamps as copied
        else:
            now[name] = value
    return now, held


def describe_topic_configs(admin: AdminClient, topic: str, alias: str, timeout: float = 15.0) -> dict[str, str]:
    """Effective configs of a topic (explicit and default values alike)."""
    return describe_topics_configs(admin, [topic], alias, timeout)[topic]


def describe_topics_configs(
    admin: AdminClient, topics: list[str], alias: str, timeout: float = 15.0
) -> dict[str, dict[str, str]]:
    """Effective configs of several topics, asked in one request: topic -> configs."""
    out: dict[str, dict[str, str]] = {}
    for topic, answer in _asked(admin, topics, timeout).items():
        try:
            entries = answer.result()
        except KafkaException as exc:
            if kc.error_code(exc) in kc.UNKNOWN_TOPIC:
                raise TopicNotFound(f"cluster '{alias}': topic '{topic}' does not exist") from None
            raise ClusterUnreachable(
                f"cluster '{alias}': describing configs of '{topic}' failed: {kc.error_name(exc)}"
            ) from None
        out[topic] = _values(entries)
    return out


def described_topics_configs(admin: AdminClient, topics: list[str], timeout: float = 15.0) -> dict[str, dict[str, str]]:
    """Effective configs of several topics, asked in one request: those answered, topic -> configs. A topic
    whose configs did not come back (gone, not allowed, no answer) is left out, for the caller to ask
    alone (`describe_topic_configs`), which says why."""
    out: dict[str, dict[str, str]] = {}
    for topic, answer in _asked(admin, topics, timeout).items():
        try:
            out[topic] = _values(answer.result())
        except KafkaException:
            continue
    return out


def _asked(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, Future]:
    """One describe-configs request for `topics` (each once): topic -> its answer."""
    resources = {topic: ConfigResource(ResourceType.TOPIC, topic) for topic in dict.fromkeys(topics)}
    if not resources:
        return {}
    futures = admin.describe_configs(list(resources.values()), request_timeout=timeout)
    return {topic: futures[resource] for topic, resource in resources.items()}


def _values(entries: Mapping[str, ConfigEntry]) -> dict[str, str]:
    return {name: entry.value for name, entry in entries.items() if entry.value is not None}


def setting(topic: str, configs: Mapping[str, str]) -> ConfigResource:
    """An incremental alter of `topic` that SETs each of `configs` (names in order)."""
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    return ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
