"""Reading a single-partition internal topic, up to an end where nothing is left undecided.

Every decision taken from a link's state (fencing checks, compare-and-set of
mirror records, where a unit starts) relies on one guarantee: a read covers
everything written before it started. `topic_end` gives that end and
`read_topic` reads up to it; `topic_identity` tells one incarnation of a topic
from another of the same name, for readers that remember what they read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError

# How long a reader waits for transactions open on an internal topic to end:
# past the writers' transaction timeout (`state_writers.TRANSACTION_TIMEOUT_MS`)
# and the broker's next check for timed-out transactions.
SETTLE_TIMEOUT_S = 30.0
SETTLE_POLL_S = 0.05
# How long `read_topic` waits in one consume call before it looks whether it reached the end.
READ_WAIT_S = 0.01


def topic_end(
    admin: AdminClient, topic: str, alias: str, timeout: float = SETTLE_TIMEOUT_S, poll_s: float = SETTLE_POLL_S
) -> int:
    """The end of everything written to `topic` so far, once every transaction in it has ended.

    Invariant: whatever was written (and acknowledged) before this call is
    below the returned offset and readable by a read_committed reader. The last
    stable offset alone does not give that: a transaction still open (or a
    commit whose markers are not written yet) holds it back, and anything
    committed after that point would be silently missing from the read.
    """
    deadline = time.monotonic() + timeout

    def left() -> float:  # each read within what is left of `timeout` (a request needs a moment)
        return min(kc.REQUEST_TIMEOUT_S, max(poll_s, deadline - time.monotonic()))

    high = kc.list_offsets(admin, [(topic, 0)], "latest", alias, read_committed=False, timeout=left())[(topic, 0)]
    while True:
        stable = kc.list_offsets(admin, [(topic, 0)], "latest", alias, timeout=left())[(topic, 0)]
        if stable >= high:
            return high
        if time.monotonic() > deadline:
            raise MirrorError(
                f"cluster '{alias}': internal topic '{topic}' has had a transaction open for over {timeout:.0f}s "
                f"(a writer killed mid-write; the broker aborts it after its timeout): its state cannot be read "
                f"completely yet, so nothing was decided from it. Retry in a minute"
            )
        time.sleep(poll_s)


def read_topic(
    conf: dict[str, Any],
    admin: AdminClient,
    topic: str,
    alias: str,
    start: int = 0,
    timeout: float = 30.0,
    end: int | None = None,
) -> Iterator[tuple[str, bytes | None, int]]:
    """Every committed (key, value, offset) of a single-partition topic from `start` to `end`
    (default: its settled end, see `topic_end`)."""
    end = topic_end(admin, topic, alias) if end is None else end
    if end <= start:
        return
    cons = kc.consumer(conf)
    try:
        tp = TopicPartition(topic, 0, start)
        cons.assign([tp])
        deadline = time.monotonic() + timeout
        while True:
            # consume(n, timeout) returns at n records or its timeout, and the end is only seen
            # after it returns: every read of a few records waited the whole timeout (0.05 s was
            # 55-85 ms a read of the state or the offset map, on every plan and copy task's start).
            for msg in cons.consume(10000, READ_WAIT_S):
                if (err := msg.error()) is not None:
                    raise MirrorError(f"cluster '{alias}': reading '{topic}' failed: {err.str()}")
                offset, key = msg.offset(), msg.key()
                if offset is None or key is None:  # a consumed record has an offset; the link writes keys
                    raise MirrorError(f"cluster '{alias}': '{topic}' holds a record without a key")
                if offset >= end:
                    return
                yield key.decode(), msg.value(), offset
            if cons.position([TopicPartition(topic, 0)])[0].offset >= end:
                return
            if time.monotonic() > deadline:
                raise MirrorError(
                    f"cluster '{alias}': reading '{topic}' did not reach offset {end} within {timeout:.0f}s"
                )
    finally:
        cons.close()


def topic_identity(admin: AdminClient, topic: str, alias: str, timeout: float = kc.REQUEST_TIMEOUT_S) -> str | None:
    """The topic's id (a new one each time a topic of that name is created), "" when the
    cluster does not tell it, or None when no such topic exists."""
    try:
        description = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result()
    except KafkaException as exc:
        code = kc.error_code(exc)
        if code in kc.UNKNOWN_TOPIC:
            return None
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise MirrorError(
                f"cluster '{alias}': the link's principal may not see topic '{topic}' "
                f"(TOPIC_AUTHORIZATION_FAILED: it needs DESCRIBE on it; `mirror-pipeline link acls` "
                f"lists every right the link needs)"
            ) from None
        raise ClusterUnreachable(
            f"cluster '{alias}': describing topic '{topic}' failed: {kc.error_reason(exc)}"
        ) from None
    topic_id = description.topic_id
    # Clusters that predate topic ids answer the all-zero id: only an end going back tells a recreation then.
    return "" if topic_id is None or str(topic_id) in ("", "AAAAAAAAAAAAAAAAAAAAAA") else str(topic_id)
