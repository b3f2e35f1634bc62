"""Settling what a crashed, killed or fenced writer left behind in a mirror partition (R-REL-1, R-REL-2).

A copy task announces each chunk with a segment before producing its records,
and announces the next chunk only once every record of the previous one is
acknowledged. So after any crash only a partition's *last* segment can reach
past the mirror's log end (be *in doubt*), and settling it is:

1. fence the partition's writer (the caller does: the planner, or a stop), so
   no further chunk can be announced;
2. wait out the fenced writer's delivery timeout, so every record it still had
   in flight has landed or never will;
3. verify record by record that what landed of the last chunk is what it
   announced (a producer that lost a batch to a timeout can land later
   batches after a hole), and cut the segment at the log end.

A landed part that differs from the source is never mapped as if it were
right: it is reported, and the caller flags the mirror (R-MT-9). Records
past everything mapped are settled the same way, and mapped only when they
are the source records that follow the map (`late_landing`).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import wait
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from confluent_kafka import Message, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka import leader_lookups
from mirror_pipeline.kafka.partition_reading import committed_records, record_content
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_store import SegmentWriter, segment_key
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import Segment, resolve_keyed
from mirror_pipeline.replication import late_landing
from mirror_pipeline.replication.chunks import offset_of

log = logging.getLogger(__name__)

PADDING_KEY = b"\x00mirror-pipeline-log-start-alignment"


@dataclass(frozen=True)
class InDoubt:
    """One partition whose segments reach past its log end."""

    mirror_topic: str
    source_topic: str
    partition: int
    segments: tuple[tuple[str, Segment], ...]  # (key, segment) as read


@dataclass(frozen=True)
class Settled:
    log_end: int
    problem: str = ""  # the landed records are not the announced ones: the mirror must be flagged


def settle_in_doubt(
    ctx: LinkContext, items: list[InDoubt], writers: dict[tuple[str, int], SegmentWriter]
) -> dict[tuple[str, int], Settled]:
    """Steps 2 and 3 above for partitions whose writers `writers` holds, fenced."""
    if not items:
        return {}
    log.info("waiting %.1fs for fenced writers of %d partitions", ctx.link.fence_wait_ms / 1000, len(items))
    time.sleep(ctx.link.fence_wait_ms / 1000)
    cons = kc.consumer(ctx.dest_conf("state-reader"))
    out: dict[tuple[str, int], Settled] = {}
    try:
        for item in items:
            leo = kc.watermark(cons, item.mirror_topic, item.partition)[1]
            puts, deletes, problem = [], [], ""
            resolution = resolve_keyed(item.segments, leo)
            if resolution.foreign_records and not resolution.in_doubt:
                adopted = late_landing.adopt(
                    ctx.dest_conf("reader"),
                    ctx.source_conf("reader"),
                    item.mirror_topic,
                    item.source_topic,
                    item.partition,
                    resolution.offset_map,
                    leo,
                )
                if adopted is None:
                    problem = late_landing.foreign_records_problem(
                        item.mirror_topic, item.partition, resolution.foreign_records, leo
                    )
                else:
                    puts.append(adopted)
            for seg in resolution.in_doubt:
                kept = seg.truncated(leo)
                key = segment_key(ctx.link.name, item.mirror_topic, item.partition, seg.dest_start)
                if kept is None:
                    deletes.append(key)
                    continue
                if kept.padding and kept.dest_end > leo:
                    leo = finish_padding(ctx, item.mirror_topic, item.partition, kept, leo)
                    continue
                problem = problem or verify_landed(ctx, item, kept)
                if kept != seg:
                    puts.append(kept)
            if not problem:
                writers[(item.mirror_topic, item.partition)].write(puts=puts, deletes=deletes)
                log.info(
                    "%s[%d]: repaired in-doubt segments at mirror offset %d", item.mirror_topic, item.partition, leo
                )
            out[(item.mirror_topic, item.partition)] = Settled(leo, problem)
    finally:
        cons.close()
    return out


def verify_landed(ctx: LinkContext, item: InDoubt, kept: Segment) -> str:
    """'' when the records that landed of `kept` are the source records it maps, else what differs."""
    return landed_problem(
        ctx.dest_conf("reader"), ctx.source_conf("reader"), item.mirror_topic, item.source_topic, item.partition, kept
    )


def landed_problem(
    dest_conf: dict[str, Any],
    source_conf: dict[str, Any],
    mirror_topic: str,
    source_topic: str,
    partition: int,
    kept: Segment,
) -> str:
    """'' when the records that landed of `kept` (a segment cut at the log end) are the source
    records it maps, else what differs.

    When the source does not answer (a failover in a disaster), nothing can be
    compared: the cut is kept as it is, and the log says so.
    """
    first = kept.dest_start + kept.padding
    sources = [start + i for start, count in kept.runs for i in range(count)]
    if not sources:
        return ""
    try:
        mirror = _read_range(dest_conf, mirror_topic, partition, first, first + len(sources) - 1)
        source = _read_range(source_conf, source_topic, partition, sources[0], sources[-1])
    except MirrorError as exc:
        log.warning("%s[%d]: the last chunk's landed records could not be verified: %s", mirror_topic, partition, exc)
        return ""
    for offset, source_offset in zip(range(first, first + len(sources)), sources, strict=True):
        m, s = mirror.get(offset), source.get(source_offset)
        if s is None:
            continue  # compacted away on the source since it was copied: nothing to compare
        if m is None or record_content(m) != record_content(s):
            return (
                f"mirror '{mirror_topic}' partition {partition}: the record at mirror offset {offset} is "
                f"not source offset {source_offset} (records of the last chunk went missing while it was written); "
                f"the mirror is no longer identical to its source"
            )
    return ""


def _read_range(
    conf: dict[str, Any], topic: str, partition: int, first: int, last: int, timeout: float = 30.0
) -> dict[int, Message]:
    """offset -> message for the committed records of `topic[partition]` in [first, last]."""
    return {offset_of(msg): msg for msg in committed_records(conf, topic, partition, first, last + 1, timeout)}


def finish_padding(ctx: LinkContext, mirror_topic: str, partition: int, segment: Segment, leo: int) -> int:
    """Write the placeholders an alignment announced and did not finish, then delete them all."""
    kc.produce_all(
        ctx.dest_conf("writer"),
        mirror_topic,
        repeat((PADDING_KEY, None), segment.dest_end - leo),
        f"mirror '{mirror_topic}' partition {partition}: log start alignment failed",
        partition=partition,
        timeout=60,
    )
    delete_placeholders(ctx, mirror_topic, partition, segment.dest_end)
    return segment.dest_end


def delete_placeholders(ctx: LinkContext, mirror_topic: str, partition: int, before: int) -> None:
    with leader_lookups.one_at_a_time(ctx.dest_admin):  # DeleteRecords looks leaders up as ListOffsets does
        futures = ctx.dest_admin.delete_records(
            [TopicPartition(mirror_topic, partition, before)], request_timeout=kc.REQUEST_TIMEOUT_S
        )
        wait(futures.values())
    for fut in futures.values():
        with kc.kafka_errors(f"mirror '{mirror_topic}' partition {partition}: removing alignment placeholders failed"):
            fut.result()
