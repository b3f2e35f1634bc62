"""The task side of a cycle: copy one work unit (one mirror partition's range).

Runs inside a Spark task, so it takes only plain picklable values and builds
its own clients. The protocol, per unit:

1. Fence: start the partition's transactional segment writer, which cuts off
   any older writer of this partition (a zombie of an earlier cycle).
2. Check, *after* fencing, that nothing changed since the plan: the mirror may
   still be copied to (a pause, promote or failover marks it before fencing,
   so a task that fences later always sees the mark: R-LC-8), no segment of
   this partition appeared in the offset-map topic after the planner's
   snapshot, and the mirror's log end is exactly where the plan expects it.
3. For each chunk: read up to `chunk_records` committed source records, write
   the chunk's segment (transaction), then produce its records to the same
   mirror partition with an idempotent producer, and wait until every one is
   acknowledged before announcing the next chunk. The segment lands before its
   records, so after a crash the mirror's log end tells how much landed, and
   only the last segment can be in doubt (see `repair`).
4. Verify the mirror's log end is exactly where this unit's last segment
   ends: anything else means another writer interleaved (R-MT-9).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_store import SegmentWriter, StateStore, read_topic
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorDiverged, MirrorError, StateChanged
from mirror_pipeline.model.offset_map import Segment, runs_of
from mirror_pipeline.model.states import may_copy

IDLE_TIMEOUT_S = 60.0
POLL_S = 0.05
# Bounds the records a task holds in memory between reading and producing.
CHUNK_MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class WorkUnit:
    link: str
    source_topic: str
    mirror_topic: str
    partition: int
    source_from: int  # next source offset to copy
    source_until: int  # source last stable offset at plan time: stop before it
    dest_start: int  # the mirror's log end the plan saw
    map_snapshot_end: int  # offset-map topic end the plan read up to
    max_bytes: int
    chunk_records: int
    max_message_bytes: int


@dataclass(frozen=True)
class CopyContext:
    """Client settings and names shared by every unit of a cycle."""

    source_alias: str
    dest_alias: str
    source_properties: dict
    dest_properties: dict
    offset_map_topic: str
    writer_delivery_timeout_ms: int
    state_topic: str


@dataclass
class UnitResult:
    mirror_topic: str
    partition: int
    source_from: int
    source_until: int  # where reading stopped (exclusive)
    dest_from: int
    dest_until: int
    records: int = 0
    bytes: int = 0
    first_timestamp: int = -1
    last_timestamp: int = -1
    error_kind: str = ""
    error: str = ""

    def to_row(self) -> dict:
        return asdict(self)


def copy_unit(unit: WorkUnit, ctx: CopyContext) -> UnitResult:
    """Copy one unit; expected failures come back in the result, not as exceptions.

    Returning errors lets the other units of the Spark job finish; the driver
    fails the cycle afterwards, naming every unit that failed.
    """
    result = UnitResult(unit.mirror_topic, unit.partition, unit.source_from, unit.source_from, unit.dest_start, unit.dest_start)
    try:
        _copy(unit, ctx, result)
    except MirrorError as exc:
        result.error_kind, result.error = type(exc).__name__, str(exc)
    except KafkaException as exc:
        if kc.is_fenced(exc):
            result.error_kind = "ConcurrentWriter"
            result.error = (f"mirror '{unit.mirror_topic}' partition {unit.partition}: another cycle took over "
                            f"this partition; this writer stopped")
        else:
            result.error_kind = "KafkaException"
            result.error = kc.describe_error(exc, {**ctx.source_properties, **ctx.dest_properties})
    return result


def _copy(unit: WorkUnit, ctx: CopyContext, result: UnitResult) -> None:
    writer = SegmentWriter(ctx.dest_properties, unit.link, unit.mirror_topic, unit.partition, ctx.offset_map_topic)
    try:
        writer.fence()
        _check_still_copying(unit, ctx)
        _check_no_writer_since_plan(unit, ctx)
    except BaseException:
        writer.close()
        raise
    reader = kc.consumer(kc.client_config(ctx.source_properties, unit.link, "reader"))
    # Asks the destination for the mirror's log end; never reads records.
    mirror_probe = kc.consumer(kc.client_config(ctx.dest_properties, unit.link, "state-reader"))
    out = kc.producer(
        kc.client_config(
            ctx.dest_properties,
            unit.link,
            "writer",
            **{
                "delivery.timeout.ms": ctx.writer_delivery_timeout_ms,
                "request.timeout.ms": min(30000, max(1000, ctx.writer_delivery_timeout_ms // 3)),
                # A batch must fit the mirror's own limit (librdkafka does not split batches).
                "batch.size": max(16384, min(1000000, unit.max_message_bytes - 512)),
            },
        )
    )
    failures: list[KafkaError] = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    try:
        dest_end = _mirror_log_end(mirror_probe, unit.mirror_topic, unit.partition)
        if dest_end != unit.dest_start:
            raise ConcurrentWriter(
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end is {dest_end}, the plan expected "
                f"{unit.dest_start}; another writer is active or wrote since the plan"
            )
        reader.assign([TopicPartition(unit.source_topic, unit.partition, unit.source_from)])
        position = unit.source_from
        copied_bytes = 0
        while position < unit.source_until and copied_bytes < unit.max_bytes:
            chunk, position = _read_chunk(reader, unit, position)
            offsets = [m.offset() for m in chunk]
            segment = Segment(dest_end, tuple(runs_of(offsets)), position, written_at=time.time())
            writer.write(puts=[segment])
            for i, msg in enumerate(chunk):
                ts_type, ts = msg.timestamp()
                value, key = msg.value(), msg.key()
                _produce(
                    out,
                    unit.mirror_topic,
                    value=value,
                    key=key,
                    partition=unit.partition,
                    timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=msg.headers(),
                    on_delivery=on_delivery,
                )
                copied_bytes += (len(value) if value else 0) + (len(key) if key else 0)
                if result.first_timestamp < 0:
                    result.first_timestamp = ts
                result.last_timestamp = ts
                # Delivery reports need serving only now and then: polling after
                # every record cost 18 us against 8 in an isolated copy loop.
                if i % 1000 == 999:
                    out.poll(0)
            # Invariant: a chunk is announced only once every record of the one
            # before is acknowledged, so that at most the last segment is in
            # doubt after a crash and a lost batch cannot hide under a later one.
            remaining = out.flush(ctx.writer_delivery_timeout_ms / 1000 + 5)
            if failures or remaining:
                reason = failures[0].str() if failures else f"{remaining} records not acknowledged"
                raise MirrorError(f"mirror '{unit.mirror_topic}' partition {unit.partition}: writing failed: {reason}")
            dest_end = segment.dest_end
            result.records += len(chunk)
            result.bytes = copied_bytes
            result.source_until = position
            result.dest_until = dest_end
        landed = _mirror_log_end(mirror_probe, unit.mirror_topic, unit.partition)
        if landed != result.dest_until:
            raise MirrorDiverged(
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end is {landed} after copying, "
                f"expected {result.dest_until}: records not written by this link are in the mirror"
            )
    finally:
        reader.close()
        mirror_probe.close()
        writer.close()


def _produce(out, topic: str, **record) -> None:
    """Produce, waiting for room when the local queue is full (never dropping the record)."""
    while True:
        try:
            out.produce(topic, **record)
            return
        except BufferError:
            out.poll(0.1)


def _read_chunk(reader, unit: WorkUnit, position: int) -> tuple[list, int]:
    """Up to `chunk_records` committed records below `source_until`, and the new read position."""
    chunk: list = []
    chunk_bytes = 0
    tp = TopicPartition(unit.source_topic, unit.partition)
    idle_since = time.monotonic()
    while len(chunk) < unit.chunk_records and chunk_bytes < CHUNK_MAX_BYTES:
        # consume() waits out its whole timeout unless the batch fills up, so
        # it is kept short; the position check below notices the end of the range.
        msgs = reader.consume(min(10000, unit.chunk_records - len(chunk)), POLL_S)
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise MirrorError(
                        f"source topic '{unit.source_topic}' partition {unit.partition}: the link's source principal "
                        f"may not read it (TOPIC_AUTHORIZATION_FAILED: it needs READ on the topic)")
                raise MirrorError(
                    f"source topic '{unit.source_topic}' partition {unit.partition}: read failed at offset "
                    f"{position}: {err.str()}"
                )
            if msg.offset() >= unit.source_until:
                return chunk, unit.source_until
            chunk.append(msg)
            chunk_bytes += len(msg)
            position = msg.offset() + 1
        if msgs:
            idle_since = time.monotonic()
        # The consumer's position moves past aborted records and transaction
        # markers that it never hands out; that is how a trailing gap is crossed.
        consumer_position = reader.position([tp])[0].offset
        if consumer_position >= unit.source_until:
            return chunk, unit.source_until
        position = max(position, consumer_position)
        if not msgs and chunk:
            return chunk, position
        if time.monotonic() - idle_since > IDLE_TIMEOUT_S:
            raise MirrorError(
                f"source topic '{unit.source_topic}' partition {unit.partition}: no progress at offset {position} "
                f"for {IDLE_TIMEOUT_S:.0f}s (the plan expected records up to {unit.source_until})"
            )
    return chunk, position


def _mirror_log_end(cons, topic: str, partition: int) -> int:
    return kc.watermark(cons, topic, partition)[1]


def _check_still_copying(unit: WorkUnit, ctx: CopyContext) -> None:
    """After fencing: the mirror's state must still allow copying (a stop marks it before it fences)."""
    store = StateStore(unit.link, ctx.dest_alias, ctx.dest_properties, ctx.state_topic, ctx.offset_map_topic)
    info = store.read_mirrors().get(unit.mirror_topic)
    if not may_copy(info):
        what = "deleted" if info is None else f"{info.state}{''.join(' ' + f for f in info.flags)}"
        raise StateChanged(f"mirror '{unit.mirror_topic}' is {what} since this cycle planned; partition "
                           f"{unit.partition} was not copied to")


def _check_no_writer_since_plan(unit: WorkUnit, ctx: CopyContext) -> None:
    """After fencing, a segment of this partition newer than the plan means a concurrent cycle."""
    prefix = f"{unit.link}/{unit.mirror_topic}/{unit.partition}/"
    conf = kc.client_config(ctx.dest_properties, unit.link, "state-reader")
    admin = kc.admin_client(kc.client_config(ctx.dest_properties, unit.link, "admin"))
    for key, value, _ in read_topic(conf, admin, ctx.offset_map_topic, ctx.dest_alias, start=unit.map_snapshot_end):
        if key.startswith(prefix) and value is not None and int(key.rsplit("/", 1)[1]) >= unit.dest_start:
            raise ConcurrentWriter(
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: another cycle wrote to it after this "
                f"cycle planned; this unit stopped without writing"
            )
