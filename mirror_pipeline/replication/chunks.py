"""A copy task's records chunk by chunk: reading a unit's range, producing a chunk, timing it.

Per-record work happens in C (confluent-kafka's methods driven by `map`,
`zip` and `starmap`), not in a Python loop; see `produce_chunk`.
`unit` below is a `copier.WorkUnit` (not imported: the copier imports this module).
"""

from __future__ import annotations

import heapq
import time
import zlib
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from collections.abc import Callable, Iterable
from itertools import accumulate, repeat, starmap
from operator import add, itemgetter, length_hint
from typing import Any, Protocol, cast

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message, Producer, TopicPartition

from mirror_pipeline.kafka.closing import close_producer
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import runs_of
from mirror_pipeline.replication.task_memory import RECORD_OVERHEAD_BYTES

IDLE_TIMEOUT_S = 60.0
POLL_S = 0.05
# Follow mode: the longest a task waits for a record before it looks at its deadline again.
FOLLOW_WAIT_S = 0.5
# Records asked of the consumer at once (fewer when a chunk is nearly full).
CONSUME_BATCH = 10000
FIRST_CONSUME_BATCH = 100

# A consumed record always has an offset; confluent-kafka types offset() Optional for every message.
offset_of = cast(Callable[[Message], int], Message.offset)
key_of = Message.key
value_of = Message.value
headers_of = Message.headers
timestamp_of = Message.timestamp
error_of = Message.error
_second = itemgetter(1)
_first = itemgetter(0)


class ChunkUnit(Protocol):
    """What reading a unit's chunks needs of it: a `copier.WorkUnit` (the copier imports this module)."""

    @property
    def source_topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def source_until(self) -> int: ...
    @property
    def chunk_records(self) -> int: ...
    @property
    def max_message_bytes(self) -> int: ...


def chunk_runs(chunk: list[Message]) -> tuple[tuple[int, int], ...]:
    """The offset runs of a chunk's records (`runs_of` their offsets), as a tuple.

    A chunk without a gap, the usual case, is told by its first and last
    offsets alone: no list of offsets, no step per record.
    """
    n = len(chunk)
    if n and offset_of(chunk[-1]) - offset_of(chunk[0]) == n - 1:  # strictly increasing, so consecutive
        return ((offset_of(chunk[0]), n),)
    return tuple(runs_of(list(map(offset_of, chunk))))


def chunk_timestamps(stamps: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """(timestamps to produce with, timestamps that count for latency) of a chunk's `(type, ts)` pairs.

    A record without a timestamp (TIMESTAMP_NOT_AVAILABLE) is produced with 0,
    which lets the producer stamp it, and counts for no latency.
    """
    ts = list(map(_second, stamps))
    if not stamps or min(map(_first, stamps)) != TIMESTAMP_NOT_AVAILABLE:
        return ts, ts
    return (
        [t if kind != TIMESTAMP_NOT_AVAILABLE else 0 for kind, t in stamps],
        [t for kind, t in stamps if kind != TIMESTAMP_NOT_AVAILABLE],
    )


class Latency:
    """Min, max and sum of (ack time - record timestamp) over records, kept per chunk in O(1)."""

    def __init__(self) -> None:
        self.count = 0
        self.low = self.high = -1
        self.total = 0

    def add(self, timestamps: list[int], acked_ms: int) -> None:
        if not timestamps:
            return
        low, high = acked_ms - max(timestamps), acked_ms - min(timestamps)
        self.low = low if not self.count else min(self.low, low)
        self.high = high if not self.count else max(self.high, high)
        self.count += len(timestamps)
        self.total += len(timestamps) * acked_ms - sum(timestamps)

    def figures(self) -> tuple[int, int, int, int]:
        """(min, max, sum, records timed); -1, -1, 0, 0 when no record was."""
        return (self.low, self.high, self.total, self.count) if self.count else (-1, -1, 0, 0)


def produce_chunk(out: Producer, topic: str, partition: int, chunk: list[Message], timestamps: list[int]) -> None:
    """Produce every record of `chunk` to `topic`/`partition`, in order, with its key, value,
    headers and timestamp.

    The records go through `Producer.produce` positionally (topic, value, key,
    partition, callback, on_delivery, timestamp, headers), driven by `starmap`
    so no Python code runs per record. The queue has room for a whole chunk
    (MemoryPlan); should it be full anyway, the rest of the chunk is produced
    one by one, waiting for room (never dropping a record).
    """
    values = iter(chunk)
    calls = zip(
        repeat(topic),
        map(value_of, values),
        map(key_of, chunk),
        repeat(partition),
        repeat(None),
        repeat(None),
        timestamps,
        map(headers_of, chunk),
    )
    try:
        deque(starmap(out.produce, calls), maxlen=0)
    except BufferError:
        # `values` moved once per call made, the failed one included.
        failed = len(chunk) - length_hint(values) - 1
        for msg, ts in zip(chunk[failed:], timestamps[failed:], strict=True):
            _produce(out, topic, msg.value(), msg.key(), partition, None, None, ts, msg.headers())


def _produce(out: Producer, topic: str, *record: Any) -> None:
    """Produce, waiting for room when the local queue is full (never dropping the record)."""
    while True:
        try:
            out.produce(topic, *record)
            return
        except BufferError:
            out.poll(0.1)


class ChunkReader:
    """Reads a unit's source range chunk by chunk: committed records below `source_until`,
    at most `chunk_records` of them and `max_bytes` of memory a chunk (key + value
    + RECORD_OVERHEAD_BYTES each; one record at least, however big).

    Records read past the end of a chunk (the consumer hands out whole batches)
    are kept and start the next chunk; the consumer is asked for about as many
    records as the chunk has room for, by the sizes seen so far, so they are few.
    """

    def __init__(self, reader: Consumer, unit: ChunkUnit, max_bytes: int) -> None:
        self.reader, self.unit, self.max_bytes = reader, unit, max_bytes
        self.tp = TopicPartition(unit.source_topic, unit.partition)
        self.pending: list[Message] = []
        self.record_bytes = 0  # memory per record in the last batch read (0: none yet)
        self.held = 0  # memory the chunk being read holds (see `_take`)

    def payload_bytes(self, chunk: list[Message]) -> int:
        """Key and value bytes of the chunk just read, from the memory `_take` counted for it."""
        return self.held - len(chunk) * RECORD_OVERHEAD_BYTES

    def next_chunk(self, position: int) -> tuple[list[Message], int]:
        """The next chunk and the new read position (past its last record, and past any
        gap the consumer crossed when the chunk ends where the consumer stands)."""
        unit, max_bytes = self.unit, self.max_bytes
        chunk: list[Message] = []
        size = self.held = 0
        idle_since = time.monotonic()
        while True:
            room = unit.chunk_records - len(chunk)
            if self.pending:
                msgs, self.pending = self.pending, []
            else:
                # consume() waits out its whole timeout unless the batch fills up, so
                # it is kept short; the position check below notices the end of the range.
                msgs = self._checked(self.reader.consume(self._want(room, size), POLL_S), position)
            end_reached = False
            if msgs:
                idle_since = time.monotonic()
                if offset_of(msgs[-1]) >= unit.source_until:
                    msgs = msgs[: bisect_left(list(map(offset_of, msgs)), unit.source_until)]
                    end_reached = True
            if msgs:
                size, position = self._take(msgs, chunk, size, room, position)
                if self.pending:
                    return chunk, position
            if end_reached:
                return chunk, unit.source_until
            # The consumer's position moves past aborted records and transaction
            # markers that it never hands out; that is how a trailing gap is crossed.
            # (Every record the consumer handed out is in the chunk at this point.)
            consumer_position = self.reader.position([self.tp])[0].offset
            if consumer_position >= unit.source_until:
                return chunk, unit.source_until
            position = max(position, consumer_position)
            if (not msgs and chunk) or len(chunk) >= unit.chunk_records or size >= max_bytes:
                return chunk, position
            if time.monotonic() - idle_since > IDLE_TIMEOUT_S:
                raise MirrorError(
                    f"source topic '{unit.source_topic}' partition {unit.partition}: no progress at offset {position} "
                    f"for {IDLE_TIMEOUT_S:.0f}s (the plan expected records up to {unit.source_until})"
                )

    def _want(self, room: int, size: int) -> int:
        """Records to ask the consumer for: about what the chunk has room for, by the sizes seen so far."""
        if self.record_bytes:
            return max(1, min(CONSUME_BATCH, room, (self.max_bytes - size) // self.record_bytes + 1))
        # The first batch tells the size of the records. Until then a record may be as large as
        # the mirror takes, and every record the consumer hands out while `consume` collects its
        # batch comes out of its gated queue: asked for 100 records of 1 MB, a task took 40 at
        # once, 40 MiB of a 64 MiB budget on top of its chunk.
        return max(1, min(FIRST_CONSUME_BATCH, room, self.max_bytes // max(1, self.unit.max_message_bytes)))

    def _checked(self, msgs: list[Message], position: int) -> list[Message]:
        return without_errors(msgs, self.unit, position) if msgs and any(map(error_of, msgs)) else msgs

    def _take(self, msgs: list[Message], chunk: list[Message], size: int, room: int, position: int) -> tuple[int, int]:
        """Move into `chunk` as many of `msgs` as fit (the rest wait in `pending`); the chunk's new
        size and the read position past its last record."""
        # Memory the chunk holds after each record of the batch, and so how many fit.
        held = list(
            accumulate(
                map(add, map(add, map(len, msgs), map(length_hint, map(key_of, msgs))), repeat(RECORD_OVERHEAD_BYTES)),
                initial=size,
            )
        )
        self.record_bytes = max(1, (held[-1] - size) // len(msgs))
        take = min(len(msgs), room, bisect_right(held, self.max_bytes) - 1)
        if take == 0 and not chunk:
            take = 1  # a record bigger than a whole chunk still goes, alone
        if take < len(msgs):
            self.pending = msgs[take:]
            del msgs[take:]
        if msgs:
            chunk += msgs
            size = held[take]
            position = offset_of(msgs[-1]) + 1
        self.held = size
        return size, position


def without_errors(msgs: list[Message], unit: ChunkUnit, position: int) -> list[Message]:
    """The records of a consumed batch; raises on any error other than a partition EOF."""
    records = []
    for msg in msgs:
        err = msg.error()
        if err is None:
            records.append(msg)
            continue
        if err.code() == KafkaError._PARTITION_EOF:
            continue
        if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise MirrorError(
                f"source topic '{unit.source_topic}' partition {unit.partition}: the link's source principal "
                f"may not read it (TOPIC_AUTHORIZATION_FAILED: it needs READ on the topic)"
            )
        raise MirrorError(
            f"source topic '{unit.source_topic}' partition {unit.partition}: read failed at offset "
            f"{position}: {err.str()}"
        )
    return records


def chunk_delivery_timeout_ms(fence_wait_ms: int) -> int:
    """How long a copy task's writer gives a chunk's records, from the link's fence wait (its
    request timeout is half of that: `writer_request_timeout_ms`).

    Invariant a repair relies on (`repair`): a fenced writer's records land
    within its fence wait. Every record of a chunk is sent before the chunk's
    deadline, counted from *before* its segment was written, so before any
    repair could read that segment and fence: what is still queued then is
    purged, and a request already sent is given up after the request timeout.
    Half and a quarter of the fence wait leave a quarter of it to spare, for
    a broker still reading a request its writer has given up on. Below 2 s
    of fence wait the floors win and the spare is gone: a late record is then
    found by the next cycle as one the link did not write, and the mirror is
    flagged (nothing is lost).
    """
    return max(1000, fence_wait_ms // 2)


def writer_request_timeout_ms(chunk_timeout_ms: int) -> int:
    return max(500, chunk_timeout_ms // 2)


def land_by_deadline(out: Producer, deadline: float) -> int:
    """Wait for the chunk's records until `deadline`; those still queued then are purged, never
    sent (see `chunk_delivery_timeout_ms`). Returns how many were not acknowledged."""
    remaining = out.flush(max(0.0, deadline - time.monotonic()))
    if remaining:
        out.purge(in_queue=True, in_flight=False)
        out.poll(0)
    return remaining


# Producers a task writes through at most, and the partitions that justify one more (see ProducerSet).
MAX_TASK_PRODUCERS = 4
PARTITIONS_PER_PRODUCER = 64


def producers_for(partitions: int) -> int:
    """How many producers a task of `partitions` partitions writes through."""
    return max(1, min(MAX_TASK_PRODUCERS, -(-partitions // PARTITIONS_PER_PRODUCER)))


class ProducerSet:
    """A task's idempotent producers, a partition always written through the same one.

    librdkafka sends a ProduceRequest per partition, and an idempotent
    producer keeps at most 5 in flight on its connection: a round of 2,500
    partitions of one record each waited on 500 round trips one after another
    (1.3 s per 256 partitions, most of a wide cycle). Each producer is a
    connection of its own, so their requests overlap.

    A producer writes whole topics where it can (`deal_to_producers`): it
    keeps every partition of each topic it writes to, and its broker thread
    walks all of them each time it wakes. Dealt by writer slot, each of a
    10,000-partition cycle's 16 producers wrote 625 partitions but kept about
    6,250, and walking them was a third of the copy tasks' CPU.
    """

    def __init__(self, make: Callable[[], Producer], count: int, partitions: Iterable[tuple[str, int]] = ()) -> None:
        self.producers = [make() for _ in range(count)]
        self.dealt = deal_to_producers(partitions, count)

    def close(self) -> None:
        """Destroy every producer now (`closing`); records not yet acknowledged are dropped."""
        for out in self.producers:
            close_producer(out)
        self.producers = []

    def of(self, topic: str, partition: int) -> Producer:
        """The producer of a mirror partition (one the set was not dealt goes by its topic's name)."""
        block = (topic, partition // PARTITIONS_PER_PRODUCER)
        index = self.dealt.get(block)
        if index is None:
            index = zlib.crc32(topic.encode()) + block[1]
        return self.producers[index % len(self.producers)]

    def serve_reports(self) -> None:
        """Serve the delivery reports that have come (their callbacks run here)."""
        for out in self.producers:
            out.poll(0)

    def land_by(self, deadline: float) -> int:
        """`land_by_deadline` for every producer: the records not acknowledged by `deadline`."""
        return sum(land_by_deadline(out, deadline) for out in self.producers)


def deal_to_producers(partitions: Iterable[tuple[str, int]], count: int) -> dict[tuple[str, int], int]:
    """Which of `count` producers writes each block of a topic's partitions (PARTITIONS_PER_PRODUCER
    consecutive ones): a topic no wider than a block goes through one producer, a wider one
    through several; the blocks are dealt largest first, each to the producer with the fewest
    partitions so far."""
    sizes = Counter((topic, p // PARTITIONS_PER_PRODUCER) for topic, p in partitions)
    loads = [(0, i) for i in range(max(1, count))]
    dealt = {}
    for block, size in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        load, index = heapq.heappop(loads)
        dealt[block] = index
        heapq.heappush(loads, (load + size, index))
    return dealt
