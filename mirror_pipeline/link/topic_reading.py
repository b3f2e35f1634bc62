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

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.stable_end import end_and_stable
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError

# How long a reader waits for transactions open on an internal topic to end:
# past the writers' transaction timeout (`state_writers.TRANSACTION_TIMEOUT_MS`)
# and the broker's next check for timed-out transactions.
SETTLE_TIMEOUT_S = 30.0
SETTLE_POLL_S = 0.05
# How long `read_topic` waits in one consume call before it looks whether it reached the end.
READ_WAIT_S = 0.01
# How long the broker may hold a `TopicTail`'s fetch for records yet to come (see there).
TAIL_FETCH_WAIT_MS = 10


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

    high, stable = end_and_stable(admin, topic, alias, left())
    while True:
        if stable >= high:
            return high
        if time.monotonic() > deadline:
            raise MirrorError(
                f"cluster '{alias}': internal topic '{topic}' has had a transaction open for over {timeout:g}s "
                f"(a writer killed mid-write; the broker aborts it after its timeout): its state cannot be read "
                f"completely yet, so nothing was decided from it. Retry in a minute"
            )
        time.sleep(poll_s)
        stable = kc.list_offsets(admin, [(topic, 0)], "latest", alias, timeout=left())[(topic, 0)]


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
        yield from _read_range(cons, topic, alias, start, end, timeout)
    finally:
        cons.close()


class TopicTail:
    """A single-partition topic read on from `start`, a read at a time, through one consumer kept
    open and connected between reads: each read returns the records between where the last one
    ended and the topic's settled end at that time (`topic_end`).

    For a read that must come after a fence and be quick: what was there before is read ahead,
    and the read after costs no new client (a new consumer's connections and leader lookup were
    the slowest part of a follow-mode task's checks when it took over). Between reads the
    consumer fetches nothing: a fetch left waiting at the broker for new records (librdkafka's
    `fetch.wait.max.ms`, 500 ms by default) held the next read's fetch behind it on the same
    connection, and a follow-mode task's checks took 0.4 s instead of 0.05."""

    def __init__(self, conf: dict[str, Any], admin: AdminClient, topic: str, alias: str, start: int) -> None:
        self.admin, self.topic, self.alias, self.end = admin, topic, alias, start
        self.cons = kc.consumer({**conf, "fetch.wait.max.ms": TAIL_FETCH_WAIT_MS})
        try:
            kc.learn_cluster(self.cons, topic)
        except BaseException:
            self.cons.close()
            raise

    def read(
        self, timeout: float = 30.0, settle_timeout: float = SETTLE_TIMEOUT_S
    ) -> list[tuple[str, bytes | None, int]]:
        """What was written since the last read; `settle_timeout` bounds the wait for transactions
        open on the topic (`topic_end`), past which it raises and reads nothing."""
        end = topic_end(self.admin, self.topic, self.alias, timeout=settle_timeout)
        if end <= self.end:
            return []
        try:
            records = list(_read_range(self.cons, self.topic, self.alias, self.end, end, timeout))
        finally:
            self.cons.unassign()
        self.end = end
        return records

    def close(self) -> None:
        self.cons.close()


def _read_range(
    cons: Consumer, topic: str, alias: str, start: int, end: int, timeout: float
) -> Iterator[tuple[str, bytes | None, int]]:
    """The committed records of [start, end) of the topic's partition 0, read by `cons`."""
    cons.assign([TopicPartition(topic, 0, start)])
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
            raise MirrorError(f"cluster '{alias}': reading '{topic}' did not reach offset {end} within {timeout:.0f}s")


def topic_identity(admin: AdminClient, topic: str, alias: str, timeout: float = kc.REQUEST_TIMEOUT_S) -> str | None:
    """The topic's id (a new one each time a topic of that name is created), "" when the
    cluster does not tell it, or None when no such topic exists."""
    deadline = time.monotonic() + timeout
    while True:
        asking_s = max(MIN_ASK_S, deadline - time.monotonic())  # the tries share `timeout`
        try:
            description = admin.describe_topics(TopicCollection([topic]), request_timeout=asking_s)[topic].result()
            break
        except KafkaException as exc:
            code = kc.error_code(exc)
            if code in kc.UNKNOWN_TOPIC:
                return None
            if code not in _ASK_AGAIN or time.monotonic() > deadline:
                raise _not_described(exc, topic, alias) from None
            time.sleep(ASK_AGAIN_S)
    topic_id = description.topic_id
    # Clusters that predate topic ids answer the all-zero id: only an end going back tells a recreation then.
    return "" if topic_id is None or str(topic_id) in ("", "AAAAAAAAAAAAAAAAAAAAAA") else str(topic_id)


# A failure a new request gets past: the broker handle the request went on was retired under it (seen
# in the fault suite on the first describe after a destination broker came back from a stall). A
# cluster that refuses connections (_TRANSPORT) is not asked again: its error is told at once.
_ASK_AGAIN = frozenset({KafkaError._DESTROY_BROKER})
ASK_AGAIN_S = 0.2
# The shortest request a try makes, however little of the timeout is left.
MIN_ASK_S = 0.5


def _not_described(exc: KafkaException, topic: str, alias: str) -> MirrorError:
    """What describing `topic` failing with `exc` means for the operator."""
    if kc.error_code(exc) == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return MirrorError(
            f"cluster '{alias}': the link's principal may not see topic '{topic}' "
            f"(TOPIC_AUTHORIZATION_FAILED: it needs DESCRIBE on it; `mirror-pipeline link acls` "
            f"lists every right the link needs)"
        )
    return ClusterUnreachable(f"cluster '{alias}': describing topic '{topic}' failed: {kc.error_reason(exc)}")
