"""Reading one partition's committed records by offset range (Kafka I/O).

A `RangeReader` hands out the records of [start, end) in the consumer's own
batches, keeping what a batch held past `end` for the next range, so
consecutive ranges are read in one pass without seeking. Like the copier, it
reads `read_committed` and learns that a range is over from the consumer's
position, which moves past aborted records and transaction markers that it
never hands out.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import MirrorError

# Records per consume() call: large batches keep the per-call cost low.
BATCH_RECORDS = 10000
# consume() waits out its whole timeout unless the batch fills up, so it is kept short.
POLL_S = 0.05
# A range that makes no progress this long is an error (the data went away under the reader).
IDLE_TIMEOUT_S = 60.0


class RangeReader:
    """Committed records of one partition, range after range.

    `what` names the side in messages (e.g. "source topic 'orders' on cluster
    'us-west'"); `throttle.take(bytes)` is called after each batch.
    """

    def __init__(self, conf: dict, topic: str, partition: int, what: str, throttle):
        self.topic, self.partition, self.what = topic, partition, what
        self._throttle = throttle
        self._consumer = kc.consumer(conf)
        self._tp = TopicPartition(topic, partition)
        self._pending: list = []  # records read past the previous range's end
        self._position: int | None = None  # where the next contiguous range starts
        self._next = 0  # records below this were handed out already (or lie before the seek)
        self.bytes = 0

    def close(self) -> None:
        self._consumer.close()

    def records(self, start: int, end: int) -> Iterator[list]:
        """The records with offsets in [start, end), as lists in offset order."""
        if start >= end:
            return
        if self._position != start:
            self._seek(start)
        # Set again only when the range is read to its end: a caller that stops
        # early (narrowing found its difference) leaves the consumer mid-range.
        self._position = None
        if self._pending:
            batch, self._pending = _split(self._pending, end)
            if batch:
                yield batch
            if self._pending:  # a record at or past `end` was already read: the range is complete
                self._position = end
                return
        idle_since = time.monotonic()
        while True:
            # Never ask for more records than the range has offsets left: consume()
            # returns as soon as it has that many, instead of waiting out its timeout.
            msgs = self._consume(start, max(1, min(BATCH_RECORDS, end - self._next)))
            if msgs:
                idle_since = time.monotonic()
                batch, self._pending = _split(msgs, end)
                if batch:
                    yield batch
                if self._pending:
                    self._position = end
                    return
            if self._consumer.position([self._tp])[0].offset >= end:
                self._position = end
                return
            if msgs:
                continue
            if time.monotonic() - idle_since > IDLE_TIMEOUT_S:
                raise MirrorError(
                    f"{self.what} partition {self.partition}: no records arrived for "
                    f"{IDLE_TIMEOUT_S:.0f}s while reading offsets {start}..{end - 1}"
                )

    def _seek(self, offset: int) -> None:
        self._pending = []
        self._next = offset
        with kc.kafka_errors(f"{self.what} partition {self.partition}: reading from offset {offset} failed"):
            self._consumer.assign([TopicPartition(self.topic, self.partition, offset)])

    def _consume(self, start: int, wanted: int) -> list:
        try:
            msgs = self._consumer.consume(wanted, POLL_S)
        except KafkaException as exc:
            raise MirrorError(
                f"{self.what} partition {self.partition}: reading failed: {kc.error_reason(exc)}"
            ) from None
        if any(m.error() is not None for m in msgs):
            msgs = self._without_errors(msgs, start)
        if msgs:
            msgs = self._in_order(msgs)
        size = sum(map(len, msgs))
        self.bytes += size
        self._throttle.take(size)
        return msgs

    def _in_order(self, msgs: list) -> list:
        """Only records past the last one handed out, in offset order.

        After a seek, records fetched for the old position can still arrive
        (stale, before or overlapping the new one): they are dropped, or a
        record would be counted twice. A dense batch in order is the common
        case and is checked from its ends alone.
        """
        first, last = msgs[0].offset(), msgs[-1].offset()
        if first >= self._next and last - first + 1 == len(msgs):
            self._next = last + 1
            return msgs
        out = []
        for m in msgs:
            if m.offset() >= self._next:
                out.append(m)
                self._next = m.offset() + 1
        return out

    def _without_errors(self, msgs: list, start: int) -> list:
        out = []
        for m in msgs:
            err = m.error()
            if err is None:
                out.append(m)
            elif err.code() != KafkaError._PARTITION_EOF:
                gone = err.code() == KafkaError._AUTO_OFFSET_RESET
                why = (
                    f"offset {start} is no longer on the cluster (retention or compaction removed it since the "
                    f"verify planned); run verify again"
                    if gone
                    else err.name()
                )
                raise MirrorError(f"{self.what} partition {self.partition}: reading failed: {why}")
        return out


def _split(msgs: list, end: int) -> tuple[list, list]:
    """(records before `end`, records at or past it); records come in offset order."""
    if msgs[-1].offset() < end:
        return msgs, []
    cut = bisect.bisect_left(msgs, end, key=lambda m: m.offset())
    return msgs[:cut], msgs[cut:]
