"""librdkafka settings for the pipeline's clients: speed defaults, then the cluster's, then each role's."""

from __future__ import annotations

from collections.abc import Mapping

# Speed settings for every client, which the cluster's own properties may change.
# - `reconnect.backoff.ms`: a new client's first request to a broker it learned
#   from the bootstrap answer waited librdkafka's connection pacing, half of this
#   (100 ms by default): 50 ms, once per client, and a copy task starts five
#   clients. With 10 ms it waits ~12 ms. A broker that is down still gets
#   exponentially fewer attempts, up to `reconnect.backoff.max.ms`.
CLIENT_DEFAULTS: dict[str, object] = {"reconnect.backoff.ms": 10}
# - `fetch.queue.backoff.ms`, consumers only: once a consumer's prefetch queue
#   is full (`queued.min.messages` or `queued.max.messages.kbytes`) librdkafka
#   postpones the partition's next fetch by it, 1 s by default, however soon the
#   queue drains. A copy task drains its queue in tens of milliseconds and then
#   waited out the rest of that second: on the local pair a task reading 125,000
#   records of 1 KiB spent 1.95 s of its 2.35 s in `consume`; with 10 ms it read
#   them in 0.24 s. The timer only wakes a broker thread to look again.
CONSUMER_DEFAULTS: dict[str, object] = {**CLIENT_DEFAULTS, "fetch.queue.backoff.ms": 10}
CONSUMER_ROLES = ("reader", "state-reader")

# Role settings the pipeline depends on for correctness; they override the
# cluster's own settings.
ROLE_SETTINGS: dict[str, dict[str, object]] = {
    "admin": {},
    # Reads the source; never commits offsets, so it never creates a group.
    "reader": {
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 16777216,
        "queued.max.messages.kbytes": 262144,
    },
    # Writes mirror partitions: idempotent so one attempt's records land once
    # and in order; `acks=all` so a landed record survives a broker failover.
    "writer": {
        "enable.idempotence": True,
        # Any failure that could leave a hole between landed records stops the
        # producer instead (timeouts excepted: `repair` verifies those).
        "enable.gapless.guarantee": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 10,
        "compression.type": "none",
        "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576,
        "message.max.bytes": 104857600,
        # Delivery callbacks for failures only: a success costs no Python object
        # (confluent-kafka implements this itself; a bool, not a string).
        "delivery.report.only.error": True,
    },
    # Reads internal state topics: only what committed transactions wrote.
    "state-reader": {
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    },
    "state-writer": {"enable.idempotence": True, "acks": "all", "linger.ms": 0},
    # Writes the link's heartbeats on the source (`emit.heartbeats.enabled`), one at a time.
    "heartbeats": {"enable.idempotence": True, "acks": "all", "linger.ms": 0},
}


def client_config(cluster_properties: Mapping[str, str], link: str, role: str, **overrides: object) -> dict:
    """librdkafka settings for one client: speed defaults, the cluster's, then the role's, then overrides."""
    conf: dict[str, object] = dict(CONSUMER_DEFAULTS if role in CONSUMER_ROLES else CLIENT_DEFAULTS)
    conf.update(cluster_properties)
    conf.update(ROLE_SETTINGS[role])
    # Every topic the pipeline writes is created on purpose, with the configs it
    # chose. librdkafka's producers otherwise ask the broker to create a topic
    # they produce to (their default, unlike its consumers'): a writer still
    # flushing into a mirror a delete or a reverse just removed would bring it
    # back with the broker's defaults.
    conf["allow.auto.create.topics"] = False
    conf["client.id"] = f"mirror-pipeline.{link}.{role}"
    if role in CONSUMER_ROLES:
        # A group id is required by librdkafka even for assign-only consumers;
        # nothing is ever committed under it.
        conf.setdefault("group.id", f"mirror-pipeline.{link}.{role}")
    conf.update(overrides)
    return conf
