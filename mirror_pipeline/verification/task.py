"""One Spark task of a verify: compare some checksum ranges of one mirror partition.

Runs inside a Spark task, so it takes only plain picklable values and builds
its own consumers (`read_committed` on both sides, as the copier reads the
source). Per range it folds each side's checksum while streaming; only when
they differ does it read the range again and walk both sides together to name
the first differing source offset (`compare.first_difference`). The task stops
at its partition's first real difference: that is what the operator needs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from itertools import chain

from confluent_kafka import KafkaException

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.verification.checksum import SideChecksum
from mirror_pipeline.verification.compare import first_difference
from mirror_pipeline.verification.ranges import RunIndex
from mirror_pipeline.verification.reader import RangeReader
from mirror_pipeline.verification.throttle import bucket


@dataclass(frozen=True)
class VerifyTask:
    link: str
    mirror_topic: str
    source_topic: str
    partition: int
    # Ranges to compare, in order: source offsets [from, until) and the same records' mirror offsets.
    blocks: tuple[tuple[int, int, int, int], ...]
    runs: tuple[tuple[int, int, int], ...]  # the map's runs over those blocks: (source, mirror, length)
    source_end: int  # where the task's runs end on the source ...
    mirror_end: int  # ... and on the mirror
    compacted: bool  # the source is compacted: one-sided absences are the cleaners', not the copy's
    bytes_per_second: float | None  # this task's share of the read throttle


@dataclass(frozen=True)
class VerifyContext:
    """Client settings shared by every task of a verify (never part of a result)."""

    source_alias: str
    dest_alias: str
    source_properties: dict
    dest_properties: dict


@dataclass
class TaskResult:
    mirror_topic: str
    partition: int
    ranges_checked: int = 0
    source_records: int = 0
    mirror_records: int = 0
    bytes_read: int = 0
    compacted_away: int = 0
    throttled_ms: int = 0
    mismatch: str = ""  # Mismatch.to_dict() as JSON; "" when none
    error: str = ""

    def to_row(self) -> dict:
        return asdict(self)


def verify_task(task: VerifyTask, ctx: VerifyContext) -> TaskResult:
    """Compare the task's ranges; expected failures come back in the result, not as exceptions."""
    result = TaskResult(task.mirror_topic, task.partition)
    try:
        _verify(task, ctx, result)
    except MirrorError as exc:
        result.error = str(exc)
    except KafkaException as exc:
        result.error = kc.describe_error(exc, {**ctx.source_properties, **ctx.dest_properties})
    return result


def _reader_conf(properties: dict, link: str, rate: float | None) -> dict:
    if not rate:
        return kc.client_config(properties, link, "reader")
    # Throttled: keep librdkafka's prefetch near one second's worth, or it would
    # read far ahead of the throttle (up to 256 MB per consumer).
    return kc.client_config(
        properties,
        link,
        "reader",
        **{
            "queued.max.messages.kbytes": int(min(262144, max(1024, rate // 1024))),
            "fetch.max.bytes": int(min(52428800, max(1048576, rate // 2))),
            "max.partition.fetch.bytes": int(min(16777216, max(1048576, rate // 2))),
        },
    )


def _verify(task: VerifyTask, ctx: VerifyContext, result: TaskResult) -> None:
    index = RunIndex(task.runs, task.source_end, task.mirror_end)
    throttle = bucket(task.bytes_per_second)
    source = RangeReader(
        _reader_conf(ctx.source_properties, task.link, task.bytes_per_second),
        task.source_topic,
        task.partition,
        f"source topic '{task.source_topic}' on cluster '{ctx.source_alias}'",
        throttle,
    )
    mirror = RangeReader(
        _reader_conf(ctx.dest_properties, task.link, task.bytes_per_second),
        task.mirror_topic,
        task.partition,
        f"mirror topic '{task.mirror_topic}' on cluster '{ctx.dest_alias}'",
        throttle,
    )
    try:
        for start, end, mirror_start, mirror_end in task.blocks:
            runs = index.clipped(start, end)
            source_sum, mirror_sum = SideChecksum(runs, on_source=True), SideChecksum(runs, on_source=False)
            for batch in source.records(start, end):
                source_sum.update(batch)
            for batch in mirror.records(mirror_start, mirror_end):
                mirror_sum.update(batch)
            result.ranges_checked += 1
            result.source_records += source_sum.records
            result.mirror_records += mirror_sum.records
            if source_sum.hexdigest() == mirror_sum.hexdigest():
                continue
            # Narrow: read the range again, both sides together, up to the first difference.
            narrowed = first_difference(
                chain.from_iterable(source.records(start, end)),
                chain.from_iterable(mirror.records(mirror_start, mirror_end)),
                index,
                task.compacted,
            )
            result.compacted_away += narrowed.compacted_away
            if narrowed.mismatch is not None:
                result.mismatch = json.dumps(narrowed.mismatch.to_dict())
                return
    finally:
        result.bytes_read = source.bytes + mirror.bytes
        result.throttled_ms = int(throttle.slept * 1000)
        source.close()
        mirror.close()
