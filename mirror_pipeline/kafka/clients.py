"""confluent-kafka clients, built in layers: cluster settings, then the role.

Every client carries a role-tagged `client.id` (`mirror-pipeline.<link>.<role>`)
so broker logs and quotas can tell the pipeline's clients apart. Kafka errors
are mapped to the engine's error hierarchy here, in one place (`kafka_errors`,
`produce_all`, and the predicates the few callers that decide on an error's
code use). Messages name the Kafka error (`error_name`), never quote
librdkafka's text: it can quote client settings, secrets among them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Container, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_pipeline.config.redaction import is_secret_key, scrub
from mirror_pipeline.kafka import leader_lookups
from mirror_pipeline.kafka.client_logs import quiet_logger
from mirror_pipeline.kafka.client_settings import ROLE_SETTINGS, client_config
from mirror_pipeline.kafka.handshake import UNREACHABLE_WORDS, HandshakeFailures, explain
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError, TopicNotFound

log = logging.getLogger(__name__)

# Built in `client_settings`; callers know them as `kc.client_config` and `kc.ROLE_SETTINGS`.
__all__ = ["ROLE_SETTINGS", "client_config"]

REQUEST_TIMEOUT_S = 15.0
# Partitions per ListOffsets call: librdkafka's leader lookup for a call grows with the square of its
# partitions (10,000 in one call: 0.96 s of CPU; in calls of 500: 0.19 s, side by side or one at a time).
LIST_OFFSETS_BATCH = 500


class LinkAdminClient(AdminClient):
    """An AdminClient that remembers its last handshake failure, and the settings that explain one."""

    handshake_failures: HandshakeFailures
    handshake_conf: dict[str, Any]


def admin_client(conf: dict[str, Any]) -> LinkAdminClient:
    """An AdminClient that remembers its last handshake failure (`admin.handshake_failures`)."""
    failures = HandshakeFailures()
    # A logger and a callback among the settings: confluent-kafka takes them, its hints say str | int | float.
    settings: dict[str, Any] = {**conf, "logger": quiet_logger(), "error_cb": failures}
    admin = LinkAdminClient(settings)
    admin.handshake_failures = failures
    admin.handshake_conf = {
        k: v for k, v in conf.items() if k in ("sasl.mechanism", "sasl.mechanisms", "sasl.username")
    }
    return admin


# How long `learn_cluster` waits: past that, the request it prepares would not be quick anyway.
LEARN_TIMEOUT_S = 2.0


def learn_cluster(client, topic: str | None = None, timeout: float = LEARN_TIMEOUT_S) -> None:
    """Two metadata requests, so a new client knows the brokers and leaders, and holds a
    connection to a broker it learned, before a request that would otherwise wait on one of
    librdkafka's retry timers.

    The first request goes to a bootstrap server. librdkafka (2.16) lets go of that
    connection once the answer names the brokers, and connects to a named broker only when a
    request needs one: a request made in between (a transactional producer's coordinator
    lookup, a consumer's first fetch) found no broker up and waited for its 500 ms query
    timer. Measured on the local pair: a new transactional producer's `init_transactions`
    took 0.5 s instead of 4 ms in 6 of 12 tries after one metadata request, in none of 12
    after two (the second takes about 50 ms: librdkafka holds a new connection back that
    long); the cycle's read probe, a new consumer, took 0.6 s to its first answer, 30 ms
    after these two requests. Earlier, a new AdminClient's first `list_offsets` had taken
    3.0 s instead of 3 ms about one time in three with no metadata request before it.

    A client whose cluster does not answer is left to the request that follows, which says
    so. Name a `topic` only for a consumer or a client built by `client_config` (which sets
    `allow.auto.create.topics` false): another producer asking for a named topic may create
    it where the broker auto-creates topics.

    Used where a new client's first request is on a latency path (a copy task's start, a
    cycle's plan), not for every client. A task's writers and admin client name a topic that
    exists (their own, or the link's offset map): without one the request is for every topic
    of the cluster, and a task of 16 writer slots on a cluster of 10,000 partitions spent 2 s
    of CPU building the answers. Its consumer asks for every topic: it reads many.
    """
    try:
        client.list_topics(topic, timeout=timeout)
        leader_lookups.learned(client, client.list_topics(topic, timeout=timeout))  # over a learned broker's connection
    except KafkaException:
        pass


def producer(conf: dict) -> Producer:
    return Producer({**conf, "logger": quiet_logger()})


def consumer(conf: dict) -> Consumer:
    return Consumer({**conf, "logger": quiet_logger()})


def secrets_of(conf: Mapping[str, object]) -> list[str]:
    return [str(v) for k, v in conf.items() if is_secret_key(k) and v]


def describe_error(exc: BaseException, conf: Mapping[str, object]) -> str:
    return scrub(str(exc), secrets_of(conf))


# --- Kafka errors into the engine's errors ------------------------------------------------------

# Another writer with the same transactional id took over (fenced this one).
FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
# The topic does not exist (as the broker or the client reports it).
UNKNOWN_TOPIC = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID, KafkaError._UNKNOWN_TOPIC})


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError a KafkaException carries (None when it carries none)."""
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def error_code(exc: BaseException) -> int | None:
    err = kafka_error(exc)
    return None if err is None else err.code()


def error_name(exc: BaseException) -> str:
    """The Kafka error's name (e.g. `TOPIC_AUTHORIZATION_FAILED`), never librdkafka's text."""
    err = kafka_error(exc)
    return type(exc).__name__ if err is None else err.name()


def error_reason(exc: BaseException) -> str:
    """What went wrong, for an operator: a broker's own explanation when the broker
    answered with an error (it never holds client settings), else only the error's
    name (librdkafka's local errors may quote client settings, secrets included)."""
    err = kafka_error(exc)
    if err is None:
        return type(exc).__name__
    text = err.str()
    if err.code() in UNREACHABLE_WORDS:
        return f"{UNREACHABLE_WORDS[err.code()]} ({err.name()})"
    if err.code() < 0 or not text or text == err.name():
        return err.name()
    return f"{err.name()}: {text}"


def is_fenced(exc: BaseException) -> bool:
    return error_code(exc) in FENCED


def is_retriable(exc: BaseException) -> bool:
    err = kafka_error(exc)
    return err is not None and err.retriable()


@contextmanager
def kafka_errors(what: str, error: type[MirrorError] = MirrorError, ignore: Container[int] = ()) -> Iterator[None]:
    """Turn a KafkaException raised inside into `error(f"{what}: {reason}")` (see `error_reason`).

    `what` says who failed at what, e.g. "cluster 'east': listing consumer
    groups failed". Errors whose code is in `ignore` are swallowed.
    """
    try:
        yield
    except KafkaException as exc:
        if error_code(exc) in ignore:
            return
        raise error(f"{what}: {error_reason(exc)}") from None


def produce_all(
    conf: dict,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    what: str,
    *,
    partition: int | None = None,
    timeout: float = REQUEST_TIMEOUT_S,
) -> None:
    """Produce (key, value) records to `topic` with one producer and wait for every delivery.

    Raises MirrorError(f"{what}: <why>"), why being the failed deliveries'
    Kafka error names, or "timed out" when some were not delivered in `timeout`.
    """
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err:
            failures.append(err)

    with kafka_errors(what):
        prod = producer(conf)
        for key, value in records:
            # -1 is librdkafka's "any partition", produce's own default.
            prod.produce(
                topic, key=key, value=value, on_delivery=on_delivery, partition=-1 if partition is None else partition
            )
            prod.poll(0)
        remaining = prod.flush(timeout)
    if failures:
        raise MirrorError(f"{what}: {', '.join(sorted({err.name() for err in failures}))}")
    if remaining:
        raise MirrorError(f"{what}: timed out")


# --- cluster and topic metadata -------------------------------------------------------------------


def check_reachable(admin: AdminClient, alias: str, bootstrap: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
    """Fail with ClusterUnreachable unless the cluster answers a metadata request.

    Asked in short rounds, so that a refused login or a failed TLS handshake
    (which no retry mends) is reported at once and by name, not as a timeout.
    """
    failures: HandshakeFailures | None = getattr(admin, "handshake_failures", None)
    if failures is not None:
        failures.clear()
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = admin.list_topics(timeout=max(0.1, min(_PROBE_ROUND_S, deadline - time.monotonic())))
            leader_lookups.learned(admin, metadata)
            return
        except KafkaException as exc:
            admin.poll(0)  # serves the error callback, which hears of handshake failures
            if failures is not None and failures.last is not None:
                raise ClusterUnreachable(
                    f"cluster '{alias}' ({bootstrap}): {explain(failures.last, getattr(admin, 'handshake_conf', {}))}"
                ) from None
            if time.monotonic() >= deadline:
                raise ClusterUnreachable(
                    f"cluster '{alias}' ({bootstrap}) did not answer within {timeout:.0f}s: {error_reason(exc)}"
                ) from None


# A metadata request is retried this often while a cluster is probed.
_PROBE_ROUND_S = 1.0


def cluster_id(admin: AdminClient, alias: str, timeout: float = REQUEST_TIMEOUT_S) -> str:
    """The cluster's id: tells the cluster a mirror was created from from another one at the same address."""
    with kafka_errors(f"cluster '{alias}' did not describe itself", ClusterUnreachable):
        return admin.describe_cluster(request_timeout=timeout).result().cluster_id or ""


def topic_partitions(admin: AdminClient, topic: str, alias: str, timeout: float = REQUEST_TIMEOUT_S) -> int | None:
    """Partition count of `topic`, or None when it does not exist."""
    with kafka_errors(f"cluster '{alias}' did not answer within {timeout:.0f}s", ClusterUnreachable):
        md = admin.list_topics(topic=topic, timeout=timeout)
    leader_lookups.learned(admin, md)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return None
    if meta.error is not None and meta.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise MirrorError(
            f"cluster '{alias}': the link's principal may not see topic '{topic}' "
            f"(TOPIC_AUTHORIZATION_FAILED: it needs DESCRIBE on it; `mirror-pipeline link acls` "
            f"lists every right the link needs)"
        )
    if meta.error is not None:
        raise MirrorError(f"cluster '{alias}': topic '{topic}': {meta.error.str()}")
    return len(meta.partitions)


def partition_counts(admin: AdminClient, alias: str, timeout: float = REQUEST_TIMEOUT_S) -> dict[str, int]:
    """Every readable topic of the cluster and its partition count, in one request."""
    with kafka_errors(f"cluster '{alias}' did not answer within {timeout:.0f}s", ClusterUnreachable):
        md = admin.list_topics(timeout=timeout)
    leader_lookups.learned(admin, md)
    return {name: len(meta.partitions) for name, meta in md.topics.items() if meta.error is None}


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
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    offset_spec = OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest()
    wanted = {TopicPartition(t, p): offset_spec for t, p in partitions}
    if not wanted:
        return {}
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    # Leadership of a just-created topic or partition takes a moment to
    # propagate; retriable errors are retried until the deadline.
    started = time.monotonic()
    deadline = started + timeout
    while True:
        futures = leader_lookups.ask_offsets(admin, wanted, isolation, timeout, LIST_OFFSETS_BATCH)
        result: dict[tuple[str, int], int] = {}
        retry = None
        leaderless: set[str] = set()
        failed: set[str] = set()
        for tp, fut in futures.items():
            try:
                offset = fut.result().offset
                if offset < 0:  # a request that timed out can come back without an error, as -1001
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no offset in the answer"))
                result[(tp.topic, tp.partition)] = offset
            except KafkaException as exc:
                failed.add(tp.topic)
                leader_lookups.forget(admin, failed)  # before any raise below
                err = exc.args[0]
                unknown = err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
                if unknown and time.monotonic() - started > UNKNOWN_GRACE_S:
                    raise TopicNotFound(
                        f"cluster '{alias}': topic '{tp.topic}' partition {tp.partition} does not exist"
                    ) from None
                if not unknown and (err.fatal() or err.code() in _FINAL):
                    raise ClusterUnreachable(
                        f"cluster '{alias}': listing offsets of '{tp.topic}' failed: {err.name()}"
                    ) from None
                if err.code() in _ASK_FOR_LEADERS:
                    leaderless.add(tp.topic)
                retry = (tp, err)
        leader_lookups.answered(admin, (tp for tp in result if tp[0] not in failed))
        if retry is None:
            return result
        if time.monotonic() > deadline:
            tp, err = retry
            hint = _LEADERLESS_HINT.format(timeout=timeout) if err.code() in _LEADERLESS else ""
            raise ClusterUnreachable(f"cluster '{alias}': listing offsets of '{tp.topic}' failed: {err.name()}{hint}")
        _refresh_leaders(admin, leaderless, deadline)
        time.sleep(0.2)


def _refresh_leaders(admin: AdminClient, topics: set[str], deadline: float) -> None:
    """Ask again for the leaders of `topics`, which the client's metadata did not name (`_NOENT`) or
    named at an old leader epoch (`_ASK_FOR_LEADERS`).

    librdkafka looks a partition's leader up in its cached metadata first: a topic created moments
    before stayed without one until the deadline (`benchmarks/scale.py`), and an old epoch stayed old."""
    for topic in sorted(topics):
        try:
            metadata = admin.list_topics(topic=topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            leader_lookups.learned(admin, metadata)
        except KafkaException:
            pass  # the retry will tell


# A partition just added is unknown to a client until its metadata refreshes.
UNKNOWN_GRACE_S = 5.0

# No leader answered for a partition: a single broker made the 9,900 partitions of a new topic live over
# tens of seconds, so the operator is told that waiting and trying again is the remedy.
_LEADERLESS = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._NOENT)
# Mended by asking for metadata: no leader known, or an epoch the leader moved past (a broker fenced by a stall).
_ASK_FOR_LEADERS = (KafkaError._NOENT, KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH)
_LEADERLESS_HINT = (
    " (no leader answered within {timeout:.0f}s; the partitions of a topic created moments ago can take"
    " a minute to come up on a busy broker: try again shortly)"
)

# Errors no retry can mend; anything else (leaders moving, a topic settling) is retried until the deadline.
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
                raise MirrorError(
                    f"'{topic}' partition {partition}: reading its offsets failed: {err.name()}"
                ) from None
            if err.code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
                # A partition added moments ago: the client's cached metadata, which
                # the offset request is routed by, predates it until asked again.
                with suppress(KafkaException):
                    cons.list_topics(topic=topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            time.sleep(0.2)
