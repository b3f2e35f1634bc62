"""Reading the committed records of one partition in an offset range, as a stream.

Used where a few records, or a partition's tail, must be read record by record:
checking what landed of an in-doubt chunk (`repair`), saving a divergent tail
(`divergence`), and a mirror's newest heartbeat. Internal state topics have a
reader of their own (`link.topic_reading`), which first settles their end.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from confluent_kafka import Message, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import MirrorError

# A read that moves no further for this long fails: a read_committed reader
# waits at a transaction still open, and the writers' transactions time out well before.
READ_IDLE_S = 30.0


def committed_records(
    conf: dict, topic: str, partition: int, start: int, end: int, idle_timeout: float = READ_IDLE_S
) -> Generator[Message, None, None]:
    """The committed records of `topic[partition]` with offsets in [start, end), in order.

    Aborted records and transaction markers are not records: the consumer's
    position moves past them, which is how a range that ends in them ends.
    Raises MirrorError naming the partition when reading fails or makes no
    progress for `idle_timeout` seconds.
    """
    if end <= start:
        return
    cons = kc.consumer(conf)
    try:
        with kc.kafka_errors(f"'{topic}' partition {partition}: reading from offset {start} failed"):
            cons.assign([TopicPartition(topic, partition, start)])
            idle_since = time.monotonic()
            reached = start
            while True:
                # No more than the range can still hold: consume() returns once it has that many,
                # instead of waiting out its timeout for records a short range never gets.
                msgs = cons.consume(max(1, min(10000, end - reached)), 0.2)
                for msg in msgs:
                    if (err := msg.error()) is not None:
                        raise MirrorError(
                            f"'{topic}' partition {partition}: reading from offset {start} failed: {err.str()}"
                        )
                    offset = msg.offset()
                    if offset is not None and offset >= end:  # a consumed record has an offset
                        return
                    reached = max(reached, (offset or 0) + 1)
                    yield msg
                if msgs:
                    idle_since = time.monotonic()
                if cons.position([TopicPartition(topic, partition)])[0].offset >= end:
                    return
                if time.monotonic() - idle_since > idle_timeout:
                    raise MirrorError(
                        f"'{topic}' partition {partition}: no progress reading towards offset {end} "
                        f"for {idle_timeout:.0f}s (a transaction still open?)"
                    )
    finally:
        cons.close()


def record_content(msg: Message) -> tuple[Any, ...]:
    """What a mirror must copy of a record, to compare it with its source: key, value, headers, timestamp."""
    headers = msg.headers()
    return msg.key(), msg.value(), tuple(headers) if headers else None, msg.timestamp()[1]
