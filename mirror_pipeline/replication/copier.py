"""The task side of a cycle: copy one work unit (one mirror partition's range) alone.

A task copies a large unit this way (the throughput path); its small units,
and follow mode's partitions, are copied together by `group_copy`, which
keeps this protocol per partition.

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

Memory: a task's buffers are bounded by a budget (`CopyContext.task_memory_bytes`,
see `MemoryPlan`), whatever the size of the partition or of its records.

Cost: the per-record work is done by C code (confluent-kafka's methods driven
by `map`/`zip`/`starmap`), not by a Python loop, and the producer reports only
failed deliveries (a successful one costs no Python object); see
`chunks.produce_chunk`. The protocol above is unchanged by either.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirror_pipeline.config.setting_values import DEFAULT_TASK_MEMORY_BYTES
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.closing import close_producer
from mirror_pipeline.link.state_store import SegmentWriter, StateStore, newest_starts, segment_writes_since
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorDiverged, MirrorError, StateChanged
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.states import may_copy
from mirror_pipeline.replication.chunks import (
    ChunkReader,
    Latency,
    chunk_runs,
    chunk_timestamps,
    land_by_deadline,
    produce_chunk,
    timestamp_of,
    writer_request_timeout_ms,
)
from mirror_pipeline.replication.task_memory import (
    free_what_the_task_left,
    memory_plan,
    return_free_memory,
    rss,
    use_allocator_settings,
)
from mirror_pipeline.replication.throttling import ThrottleWatch

# A follow-mode unit's `source_until`: no upper offset (Kafka's offsets are signed 64-bit).
FOLLOW_END = 2**63 - 1


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
    # Follow mode (always-on): copy records as they arrive, with no upper source offset (`source_until`
    # is FOLLOW_END), until the next epoch's task takes over this many seconds after `starts_at` (with
    # no `starts_at`, after the task is ready); 0 for a cycle's unit, which copies its planned range and
    # ends. A task ready too close to its hand-over copies nothing (`hand_over.wait_for_start`).
    follow_s: float = 0.0
    # Follow mode's hand-over (`operations.follow`): the wall-clock time at which the unit's task
    # fences, the end of the epoch before; its epoch then ends `follow_s` later, when the next
    # epoch's task fences in turn. 0: fence at once and follow for `follow_s` from then.
    starts_at: float = 0.0
    # Planned while the epoch before still copied the partition: the task starts where the offset
    # map says after fencing, once what it says has landed, not at `source_from`/`dest_start`.
    continues: bool = False
    # A continuing unit planned at an open reservation (the epoch before's task still copying under
    # it), that reservation: unless that task closes it before the hand-over, its records may still
    # be landing (`left_open`).
    continues_open: Segment | None = None
    # The link's writer slot count (`LinkContext.writer_slots`): which slot's writer announces the unit.
    # No default: a unit under another count than its link's would not be fenced by the link's writers.
    writer_slots: int = field(kw_only=True)

    @property
    def follows(self) -> bool:
        return self.follow_s > 0


@dataclass(frozen=True)
class CopyContext:
    """Client settings and names shared by every unit of a cycle."""

    source_alias: str
    dest_alias: str
    source_properties: dict[str, Any]
    dest_properties: dict[str, Any]
    offset_map_topic: str
    # How long a chunk's records have to land, counted from before its segment is
    # written (see `chunk_delivery_timeout_ms`).
    writer_delivery_timeout_ms: int
    state_topic: str
    # The link's `mirror.task.memory.bytes`: what one copy task's buffers may hold (see MemoryPlan).
    task_memory_bytes: int = DEFAULT_TASK_MEMORY_BYTES


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
    # Replication latency of the records copied (ms): when the record's chunk was
    # acknowledged (its flush returned) minus the record's source timestamp.
    # Records without a timestamp are left out (`latency_records` counts the
    # others); -1, -1, 0 when none was timed. A source timestamp ahead of this
    # worker's clock gives a negative latency: it is kept as it is.
    latency_min_ms: int = -1
    latency_max_ms: int = -1
    latency_sum_ms: int = 0
    latency_records: int = 0
    # The task process's resident memory when the unit started and its peak while
    # copying (bytes; -1 where /proc cannot tell). See `_rss`.
    rss_start_bytes: int = -1
    rss_peak_bytes: int = -1
    # Follow mode: the task was ready too late to take over this epoch (`hand_over.wait_for_start`),
    # so nothing was copied here; the next epoch copies the partition.
    left_to_next_epoch: bool = False
    # Follow mode: rounds not acknowledged in time that held the partition in this task, until none
    # of their records could land (`left_open.hold_after_timeout`).
    rounds_held: int = 0
    # Follow mode: when the task had opened its clients, before it waited for its start (time.time;
    # 0: a cycle's task). The driver lengthens epochs that its tasks cannot start within (`epoch_pace`).
    ready_at: float = 0.0
    # Follow mode, a task that took over from the epoch before: when it had fenced, and when it was
    # ready to copy, in ms after the hand-over time (`hand_over.note_take_over`); -1 otherwise.
    fenced_after_hand_over_ms: int = -1
    ready_after_hand_over_ms: int = -1

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def copy_unit(unit: WorkUnit, ctx: CopyContext) -> UnitResult:
    """Copy one unit; expected failures come back in the result, not as exceptions.

    Returning errors lets the other units of the Spark job finish; the driver
    fails the cycle afterwards, naming every unit that failed.
    """
    result = UnitResult(
        unit.mirror_topic, unit.partition, unit.source_from, unit.source_from, unit.dest_start, unit.dest_start
    )
    return_free_memory()
    result.rss_start_bytes = rss(reset_peak=True)[0]
    # The copy loop makes no reference cycles; the collector would only walk the
    # chunk's many objects again and again (about a tenth of the task's CPU).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _copy(unit, ctx, result)
    except MirrorError as exc:
        result.error_kind, result.error = type(exc).__name__, str(exc)
    except KafkaException as exc:
        if kc.is_fenced(exc):
            result.error_kind = "ConcurrentWriter"
            result.error = (
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: another cycle took over "
                f"this partition; this writer stopped"
            )
        else:
            result.error_kind = "KafkaException"
            result.error = kc.describe_error(exc, {**ctx.source_properties, **ctx.dest_properties})
    finally:
        if gc_was_enabled:
            gc.enable()
    result.rss_peak_bytes = rss()[1]
    # A reused Spark worker keeps no copy buffers or clients while it waits for its next task.
    free_what_the_task_left()
    return result


class InTurn(list[WorkUnit]):
    """A task's units to copy one after another, each with the task's whole memory budget
    (`group_copy.copy_units`); a plain list's units are copied together (`group_copy`)."""


def _copy(unit: WorkUnit, ctx: CopyContext, result: UnitResult) -> None:
    writer = SegmentWriter(
        ctx.dest_properties, unit.link, unit.mirror_topic, unit.partition, ctx.offset_map_topic, unit.writer_slots
    )
    try:
        writer.fence(learn_cluster=True)
        _check_still_copying(unit, ctx)
        _check_no_writer_since_plan(unit, ctx)
    except BaseException:
        writer.close()
        raise
    memory = memory_plan(ctx.task_memory_bytes, unit.max_message_bytes, unit.chunk_records)
    use_allocator_settings(memory)
    reader = kc.consumer(kc.client_config(ctx.source_properties, unit.link, "reader", **memory.reader_settings()))
    # Asks the destination for the mirror's log end; never reads records.
    mirror_probe = kc.consumer(kc.client_config(ctx.dest_properties, unit.link, "state-reader"))
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        # Called for failed deliveries only (`delivery.report.only.error`).
        if err is not None:
            failures.append(err)

    throttles = ThrottleWatch()
    settings = writer_settings(ctx, unit.link, unit.max_message_bytes, memory.writer_settings(), on_delivery)
    out = kc.producer(throttles.watching(settings))

    try:
        dest_end = _mirror_log_end(mirror_probe, unit.mirror_topic, unit.partition)
        if dest_end != unit.dest_start:
            raise ConcurrentWriter(
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end is {dest_end}, the plan expected "
                f"{unit.dest_start}; another writer is active or wrote since the plan"
            )
        # A new consumer otherwise finds the partition's leader on its next
        # one-second scan: its first fetch came ~0.95 s after assign one time in four.
        kc.learn_cluster(reader, unit.source_topic)
        reader.assign([TopicPartition(unit.source_topic, unit.partition, unit.source_from)])
        position = unit.source_from
        copied_bytes = 0
        chunks = ChunkReader(reader, unit, memory.chunk_bytes)
        latency = Latency()
        while position < unit.source_until and copied_bytes < unit.max_bytes:
            chunk, position = chunks.next_chunk(position)
            segment = Segment(dest_end, chunk_runs(chunk), position, written_at=time.time())
            land_by = time.monotonic() + ctx.writer_delivery_timeout_ms / 1000
            writer.write(puts=[segment])
            stamps = list(map(timestamp_of, chunk))
            produce_ts, valid_ts = chunk_timestamps(stamps)
            if time.monotonic() >= land_by:
                raise MirrorError(
                    f"mirror '{unit.mirror_topic}' partition {unit.partition}: announcing a chunk took "
                    f"over {ctx.writer_delivery_timeout_ms} ms; its records were not sent"
                )
            produce_chunk(out, unit.mirror_topic, unit.partition, chunk, produce_ts)
            chunk_bytes = chunks.payload_bytes(chunk)
            n = len(chunk)
            if n:
                if result.first_timestamp < 0 and valid_ts:
                    result.first_timestamp = valid_ts[0]
                result.last_timestamp = stamps[-1][1]
            # The producer holds its own copies now: the chunk's memory goes back
            # before the next chunk is read.
            del chunk, stamps, produce_ts
            # Invariant: a chunk is announced only once every record of the one
            # before is acknowledged, so that at most the last segment is in
            # doubt after a crash and a lost batch cannot hide under a later one.
            remaining = land_by_deadline(out, land_by)
            acked_ms = int(time.time() * 1000)
            if failures or remaining:
                reason = (
                    f"{remaining} records not acknowledged within {ctx.writer_delivery_timeout_ms} ms"
                    if remaining
                    else failures[0].str()
                )
                raise MirrorError(
                    f"mirror '{unit.mirror_topic}' partition {unit.partition}: writing failed: {reason}"
                    f"{throttles.why_late()}"
                )
            latency.add(valid_ts, acked_ms)
            del valid_ts
            dest_end = segment.dest_end
            copied_bytes += chunk_bytes
            result.records += n
            result.bytes = copied_bytes
            result.source_until = position
            result.dest_until = dest_end
            (result.latency_min_ms, result.latency_max_ms, result.latency_sum_ms, result.latency_records) = (
                latency.figures()
            )
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
        close_producer(out)


def writer_settings(
    ctx: CopyContext,
    link: str,
    max_message_bytes: int,
    memory_settings: dict[str, Any],
    on_delivery: Callable[[KafkaError | None, Message], None],
) -> dict[str, Any]:
    """The settings of a copy task's mirror writers: `memory_settings` from its `MemoryPlan`, and
    `on_delivery` called for failed records only (the `writer` role's settings)."""
    request_timeout_ms = writer_request_timeout_ms(ctx.writer_delivery_timeout_ms)
    return kc.client_config(
        ctx.dest_properties,
        link,
        "writer",
        **{
            "delivery.timeout.ms": ctx.writer_delivery_timeout_ms,
            # Bounds how long a sent request can still land (librdkafka gives up on it
            # and closes the connection): see `chunk_delivery_timeout_ms`.
            "request.timeout.ms": request_timeout_ms,
            "socket.timeout.ms": request_timeout_ms,
            # A batch must fit the mirror's own limit (librdkafka does not split batches).
            "batch.size": max(16384, min(1000000, max_message_bytes - 512)),
            "on_delivery": on_delivery,
            **memory_settings,
        },
    )


def _mirror_log_end(cons: Consumer, topic: str, partition: int) -> int:
    return kc.watermark(cons, topic, partition)[1]


def _check_still_copying(unit: WorkUnit, ctx: CopyContext) -> None:
    """After fencing: the mirror's state must still allow copying (a stop marks it before it fences)."""
    store = StateStore(unit.link, ctx.dest_alias, ctx.dest_properties, ctx.state_topic, ctx.offset_map_topic)
    info = store.read_mirrors().get(unit.mirror_topic)
    if not may_copy(info):
        what = "deleted" if info is None else f"{info.state}{''.join(' ' + f for f in info.flags)}"
        raise StateChanged(
            f"mirror '{unit.mirror_topic}' is {what} since this cycle planned; partition "
            f"{unit.partition} was not copied to"
        )


def _check_no_writer_since_plan(unit: WorkUnit, ctx: CopyContext) -> None:
    """After fencing, a segment of this partition newer than the plan means a concurrent cycle."""
    conf = kc.client_config(ctx.dest_properties, unit.link, "state-reader")
    admin = kc.admin_client(kc.client_config(ctx.dest_properties, unit.link, "admin"))
    kc.learn_cluster(admin, ctx.offset_map_topic)
    newer = newest_starts(
        segment_writes_since(conf, admin, ctx.offset_map_topic, ctx.dest_alias, unit.link, unit.map_snapshot_end)
    )
    if newer.get((unit.mirror_topic, unit.partition), -1) >= unit.dest_start:
        raise ConcurrentWriter(
            f"mirror '{unit.mirror_topic}' partition {unit.partition}: another cycle wrote to it after this "
            f"cycle planned; this unit stopped without writing"
        )
