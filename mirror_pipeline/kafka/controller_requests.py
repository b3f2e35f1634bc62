"""Requests to the controller within its bound on metadata records: topics created and grown,
configs altered.

Kafka 4's controller refuses, whole, a request that would write more than
10,000 metadata records (POLICY_VIOLATION, "Unable to perform excessively
large batch operation"). Creating a topic writes one record for the topic,
one per partition and one per config; adding partitions, one per partition;
altering configs, one per config set. A wide source (100 topics of 100
partitions, or one topic of 10,000) asked for at once would never be
mirrored, and a scan that asked again would be refused again. So requests
carry a bounded number of records, a topic too wide for one request is
created with the partitions that fit, and the rest are added in steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import MirrorError

# Metadata records asked of the controller per request: half its bound
# (QuorumController's MAX_RECORDS_PER_USER_OP, 10,000), so each request also
# completes well within the request timeout.
RECORDS_PER_REQUEST = 5_000

T = TypeVar("T")


def creation_records(partitions: int, configs: int) -> int:
    """The metadata records creating a topic writes: the topic, each partition, each config."""
    return 1 + partitions + configs


def initial_partitions(partitions: int, configs: int) -> int:
    """The partitions a topic is created with: all of them when they fit one request."""
    return max(1, min(partitions, RECORDS_PER_REQUEST - creation_records(0, configs)))


def request_batches(items: Sequence[T], records: Callable[[T], int], at_most: int | None = None) -> list[list[T]]:
    """`items` in consecutive groups (of at most `at_most`, if given), each writing at most
    RECORDS_PER_REQUEST records (`records` of an item); an item above the bound alone is a group
    of its own."""
    batches: list[list[T]] = []
    size = 0
    for item in items:
        n = records(item)
        if not batches or len(batches[-1]) == at_most or size + n > RECORDS_PER_REQUEST:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += n
    return batches


def partition_steps(current: int, wanted: int) -> list[int]:
    """The partition counts to ask for in turn, from `current` to `wanted`, each adding at most
    RECORDS_PER_REQUEST partitions."""
    steps = []
    while current < wanted:
        current = min(wanted, current + RECORDS_PER_REQUEST)
        steps.append(current)
    return steps


def add_partitions(admin: AdminClient, topic: str, current: int, wanted: int, what: str) -> None:
    """Grow `topic` from `current` to `wanted` partitions, in steps (`partition_steps`); an error
    names `what` was being done. A step that failed leaves the steps before it in place: the
    planner grows a mirror short of its source's partitions every cycle."""
    for count in partition_steps(current, wanted):
        futures = admin.create_partitions([NewPartitions(topic, count)], request_timeout=kc.REQUEST_TIMEOUT_S)
        with kc.kafka_errors(what):
            futures[topic].result()
    if wanted > current:
        _await_listed(admin, topic, wanted, what)


def _await_listed(admin: AdminClient, topic: str, wanted: int, what: str) -> None:
    """Return once the cluster's metadata lists `wanted` partitions of `topic`.

    The controller has taken the new partitions when create_partitions returns,
    but brokers answer metadata from their own caches, which catch up a moment
    later: a client asking in between is told a new partition does not exist
    (_UNKNOWN_PARTITION) and keeps that answer in its cache. Whoever grew the
    topic uses its new partitions next, so growing ends once they are listed.
    Asking for the topic's metadata also refreshes this client's cache.
    """
    deadline = time.monotonic() + kc.REQUEST_TIMEOUT_S
    while True:
        try:
            meta = admin.list_topics(topic=topic, timeout=kc.REQUEST_TIMEOUT_S).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) >= wanted:
                return
        except KafkaException:
            pass  # the deadline tells
        if time.monotonic() > deadline:
            raise MirrorError(
                f"{what}: the new partitions of '{topic}' were not listed within {kc.REQUEST_TIMEOUT_S:.0f}s"
            )
        time.sleep(0.1)


def create_topic(
    admin: AdminClient,
    alias: str,
    topic: str,
    partitions: int,
    config: dict[str, str],
    what: str,
    error: type[MirrorError] = MirrorError,
    exists_ok: bool = False,
) -> None:
    """Create `topic` with `partitions` partitions: those that fit one request (`initial_partitions`),
    then the rest in steps. With `exists_ok`, a topic of that name already there (an earlier attempt's,
    which may have ended between its steps) is grown to `partitions` instead. A failed creation raises
    `error`, a failed step MirrorError; both name `what` was being done."""
    first = initial_partitions(partitions, len(config))
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=first, replication_factor=-1, config=config)],
        request_timeout=kc.REQUEST_TIMEOUT_S,
    )[topic]
    try:
        future.result()
        current = first
    except KafkaException as exc:
        if not (exists_ok and kc.error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS):
            raise error(f"{what}: {kc.error_reason(exc)}") from None
        found = kc.topic_partitions(admin, topic, alias)
        if found is None:  # created, not yet in the metadata the broker answers with
            raise error(f"{what}: '{topic}' exists but the cluster does not list it yet; retry shortly") from None
        current = found
    add_partitions(admin, topic, current, partitions, what)


# Topics named per validate-only CreateTopics of `held_by_controller`.
TOPICS_PER_CHECK = 500


def held_by_controller(admin: AdminClient, topics: Sequence[str]) -> set[str]:
    """Those of `topics` the controller holds, though the broker asked for metadata may not list them yet.

    A broker learns of a new topic from the metadata log a moment after the
    controller created it, and a broker creating thousands of partitions takes
    long moments: after auto-create made 1,000 mirrors of 10 partitions, the
    destination's one broker still did not list 600 of them 40 s later. A
    validate-only CreateTopics creates nothing; the controller answers
    TOPIC_ALREADY_EXISTS for a topic it holds. Any other answer (no CREATE
    right, a timeout) tells nothing: that topic is left out.
    """
    held: set[str] = set()
    for i in range(0, len(topics), TOPICS_PER_CHECK):
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=-1) for t in topics[i : i + TOPICS_PER_CHECK]],
            validate_only=True,
            request_timeout=kc.REQUEST_TIMEOUT_S,
        )
        for topic, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if kc.error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS:
                    held.add(topic)
    return held
