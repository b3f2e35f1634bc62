"""confluent-kafka clients, built in layers: cluster settings, then the role.

Every client carries a role-tagged `client.id` (`mirror-pipeline.<link>.<role>`)
so broker logs and quotas can tell the pipeline's clients apart. Kafka errors
are mapped to the engine's error hierarchy here, in one place, with secret
values scrubbed from librdkafka's messages.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_pipeline.errors import ClusterUnreachable, MirrorError, TopicNotFound
from mirror_pipeline.redaction import is_secret_key, scrub

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 15.0

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
    },
    # Reads internal state topics: only what committed transactions wrote.
    "state-reader": {
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    },
    "state-writer": {"enable.idempotence": True, "acks": "all", "linger.ms": 0},
}


def client_config(cluster_properties: Mapping[str, str], link: str, role: str, **overrides: object) -> dict:
    """librdkafka settings for one client: the cluster's, then the role's, then overrides."""
    conf: dict[str, object] = dict(cluster_properties)
    conf.update(ROLE_SETTINGS[role])
    conf["client.id"] = f"mirror-pipeline.{link}.{role}"
    if role in ("reader", "state-reader"):
        # A group id is required by librdkafka even for assign-only consumers;
        # nothing is ever committed under it.
        conf.setdefault("group.id", f"mirror-pipeline.{link}.{role}")
    conf.update(overrides)
    return conf


def quiet_logger() -> logging.Logger:
    """librdkafka's own log lines go through Python logging (not straight to stderr).

    Its warnings are mostly retries it recovers from by itself (a coordinator
    loading, a broker reconnecting); failures reach us as errors anyway.
    """
    logger = logging.getLogger("mirror_pipeline.librdkafka")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)
    return logger


def admin_client(conf: dict) -> AdminClient:
    return AdminClient({**conf, "logger": quiet_logger()})


def producer(conf: dict) -> Producer:
    return Producer({**conf, "logger": quiet_logger()})


def consumer(conf: dict) -> Consumer:
    return Consumer({**conf, "logger": quiet_logger()})


def secrets_of(conf: Mapping[str, object]) -> list[str]:
    return [str(v) for k, v in conf.items() if is_secret_key(k) and v]


def describe_error(exc: BaseException, conf: Mapping[str, object]) -> str:
    return scrub(str(exc), secrets_of(conf))


def check_reachable(admin: AdminClient, alias: str, bootstrap: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
    """Fail with ClusterUnreachable unless the cluster answers a metadata request."""
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnreachable(
            f"cluster '{alias}' ({bootstrap}) did not answer within {timeout:.0f}s: {_code_name(exc)}"
        ) from None


def cluster_id(admin: AdminClient, alias: str, timeout: float = REQUEST_TIMEOUT_S) -> str:
    """The cluster's id: tells the cluster a mirror was created from from another one at the same address."""
    try:
        return admin.describe_cluster(request_timeout=timeout).result().cluster_id or ""
    except KafkaException as exc:
        raise ClusterUnreachable(f"cluster '{alias}' did not describe itself: {_code_name(exc)}") from None


def topic_partitions(admin: AdminClient, topic: str, alias: str, timeout: float = REQUEST_TIMEOUT_S) -> int | None:
    """Partition count of `topic`, or None when it does not exist."""
    try:
        md = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnreachable(f"cluster '{alias}' did not answer within {timeout:.0f}s: {_code_name(exc)}") from None
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return None
    if meta.error is not None:
        raise MirrorError(f"cluster '{alias}': topic '{topic}': {meta.error.str()}")
    return len(meta.partitions)


def list_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    spec: str,
    alias: str,
    read_committed: bool = True,
    timeout: float = REQUEST_TIMEOUT_S,
) -> dict[tuple[str, int], int]:
    """Earliest or latest offsets (`spec` = "earliest" | "latest").

    "latest" under read_committed is the last stable offset: the end of what a
    read_committed consumer can see (R-MT-8).
    """
    from confluent_kafka import IsolationLevel, TopicPartition as TP
    from confluent_kafka.admin import OffsetSpec

    wanted = {TP(t, p): (OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest()) for t, p in partitions}
    if not wanted:
        return {}
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    # Leadership of a just-created topic or partition takes a moment to
    # propagate; retriable errors are retried until the deadline.
    started = time.monotonic()
    deadline = started + timeout
    while True:
        futures = admin.list_offsets(wanted, isolation_level=isolation, request_timeout=timeout)
        result: dict[tuple[str, int], int] = {}
        retry = None
        for tp, fut in futures.items():
            try:
                result[(tp.topic, tp.partition)] = fut.result().offset
            except KafkaException as exc:
                err = exc.args[0]
                unknown = err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
                if unknown and time.monotonic() - started > UNKNOWN_GRACE_S:
                    raise TopicNotFound(f"cluster '{alias}': topic '{tp.topic}' partition {tp.partition} does not exist") from None
                if not unknown and (err.fatal() or err.code() in _FINAL):
                    raise ClusterUnreachable(f"cluster '{alias}': listing offsets of '{tp.topic}' failed: {err.str()}") from None
                retry = (tp, err)
        if retry is None:
            return result
        if time.monotonic() > deadline:
            tp, err = retry
            raise ClusterUnreachable(f"cluster '{alias}': listing offsets of '{tp.topic}' failed: {err.str()}")
        time.sleep(0.2)


# A partition just added is unknown to a client until its metadata refreshes.
UNKNOWN_GRACE_S = 5.0

# Errors no retry can mend; anything else (leaders moving, a topic settling)
# is retried until the deadline.
_FINAL = (
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION,
)


def watermark(cons: Consumer, topic: str, partition: int, timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, int]:
    """(log start, log end) of one partition, asked of the broker (never cached).

    Leadership moves (a new topic, a restarted broker) are retried until the timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal() or err.code() in _FINAL or time.monotonic() > deadline:
                raise MirrorError(f"'{topic}' partition {partition}: reading its offsets failed: {err.str()}") from None
            time.sleep(0.2)


def _code_name(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return err.name()
    return type(exc).__name__
