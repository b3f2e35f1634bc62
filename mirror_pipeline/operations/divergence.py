"""Records a reverse would drop, counted and saved to `<topic>.diverged` on the same cluster (R-LC-7).

The saved topic has the old topic's partition count; each saved record keeps
its partition, key, value, headers and timestamp, and gains one last header,
`mirror-pipeline.origin` = `<topic>/<partition>/<offset>`, naming where it was.
It is kept forever (retention.ms=-1): only the operator deletes it.

Saving is exactly-once across crashes and concurrent reverses: one
transactional writer per reversed topic (a new one fences the old), resuming
after the last record already saved, which it finds by that header.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaException
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import create_topic
from mirror_pipeline.kafka.partition_reading import committed_records
from mirror_pipeline.kafka.topic_configs import MIRROR_TIMESTAMP_BOUNDS
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError, MirrorRefused

SUFFIX = ".diverged"
ORIGIN_HEADER = "mirror-pipeline.origin"
COMMIT_EVERY = 5000  # records per transaction of the saving writer
# A commit returns once the coordinator has logged it, before its markers reach the partitions: until
# they do, the last stable offset (the end a read_committed reader sees) stays before the records.
MARKERS_WAIT_S = 30.0


@dataclass(frozen=True)
class RangeCount:
    """Committed records in one range of a partition, and the time they span."""

    records: int = 0
    first_timestamp: int | None = None
    last_timestamp: int | None = None

    def plus(self, other: RangeCount) -> RangeCount:
        return RangeCount(
            self.records + other.records,
            self.first_timestamp if self.records else other.first_timestamp,
            other.last_timestamp if other.records else self.last_timestamp,
        )


def saved_topic_name(topic: str) -> str:
    name = topic + SUFFIX
    if len(name) > 249:
        raise MirrorRefused(
            f"topic '{topic}' is too long to add '{SUFFIX}' for the saved records (Kafka allows 249 characters)"
        )
    return name


def origin(topic: str, partition: int, offset: int) -> bytes:
    return f"{topic}/{partition}/{offset}".encode()


def origin_offset(headers) -> int | None:
    for key, value in reversed(headers or []):
        if key == ORIGIN_HEADER and value:
            return int(value.decode().rsplit("/", 1)[1])
    return None


def count_records(reader_conf: dict, topic: str, partition: int, start: int, end: int) -> RangeCount:
    """Committed records of `topic` in [start, end) (aborted data and markers are not records)."""
    total = RangeCount()
    for msg in _read_range(reader_conf, topic, partition, start, end):
        ts = msg.timestamp()[1]
        total = total.plus(RangeCount(1, ts, ts))
    return total


def _read_range(reader_conf: dict, topic: str, partition: int, start: int, end: int):
    """Committed records of one partition in [start, end), in order; from the log start when
    `start` is before it (retention may have removed the first records meanwhile)."""
    return committed_records({**reader_conf, "auto.offset.reset": "earliest"}, topic, partition, start, end)


def ensure_saved_topic(admin: AdminClient, alias: str, name: str, partitions: int, max_message_bytes: int) -> None:
    """Create the topic the saved records go to (an earlier attempt of the same reverse may have)."""
    config = {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "cleanup.policy": "delete",
        "message.timestamp.type": "CreateTime",
        **MIRROR_TIMESTAMP_BOUNDS,
        # room for the origin header on top of the largest record the topic took
        "max.message.bytes": str(max_message_bytes + 1024),
    }
    what = f"cluster '{alias}': creating '{name}' for the saved records failed"
    create_topic(admin, alias, name, partitions, config, what, MirrorRefused, exists_ok=True)


def save_ranges(
    conf: dict,
    reader_conf: dict,
    writer_id: str,
    topic: str,
    saved: str,
    ranges: dict[int, tuple[tuple[int, int], ...]],
    alias: str,
) -> dict[int, RangeCount]:
    """Copy the committed records of `topic` in `ranges` (per partition) to `saved`, exactly once.

    Returns per partition what `saved` holds from `topic` once done.
    """
    writer = kc.producer(
        {
            **conf,
            "transactional.id": writer_id,
            "transaction.timeout.ms": 60000,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
        }
    )
    try:
        _fence(writer, alias, saved)
        for partition, spans in sorted(ranges.items()):
            done = last_saved_origin(reader_conf, saved, partition)
            for start, end in spans:
                start = max(start, -1 if done is None else done + 1)
                _copy_range(writer, reader_conf, topic, saved, partition, start, end)
    finally:
        writer.flush(10)
    for partition in ranges:
        _wait_for_markers(reader_conf, saved, partition)
    return {p: saved_counts(reader_conf, saved, p) for p in ranges}


def _wait_for_markers(reader_conf: dict, saved: str, partition: int, timeout: float = MARKERS_WAIT_S) -> None:
    """Until nothing in `saved`'s partition is undecided (its last stable offset has reached its log
    end), or `timeout`: then the count may come short, and the reverse says so and deletes nothing.

    Counted at once, a reverse found "30 to save, 0 saved" for records it had just committed.
    """
    committed = kc.consumer(reader_conf)  # read_committed: its end is the last stable offset
    everything = kc.consumer({**reader_conf, "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + timeout
    try:
        while kc.watermark(committed, saved, partition)[1] < kc.watermark(everything, saved, partition)[1]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
    finally:
        committed.close()
        everything.close()


def _fence(writer, alias: str, saved: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            writer.init_transactions(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            if not kc.is_retriable(exc) or time.monotonic() > deadline:
                raise MirrorError(
                    f"cluster '{alias}': taking over as the writer of '{saved}' failed: {kc.error_name(exc)}"
                ) from None
            time.sleep(0.2)


def _copy_range(writer, reader_conf: dict, topic: str, saved: str, partition: int, start: int, end: int) -> None:
    pending = 0
    try:
        writer.begin_transaction()
        for msg in _read_range(reader_conf, topic, partition, start, end):
            ts_type, ts = msg.timestamp()
            headers = list(msg.headers() or []) + [(ORIGIN_HEADER, origin(topic, partition, msg.offset()))]
            while True:
                try:
                    writer.produce(
                        saved,
                        key=msg.key(),
                        value=msg.value(),
                        partition=partition,
                        headers=headers,
                        timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    )
                    break
                except BufferError:
                    writer.poll(0.1)
            pending += 1
            if pending == COMMIT_EVERY:
                writer.commit_transaction(60)
                writer.begin_transaction()
                pending = 0
        writer.commit_transaction(60)
    except KafkaException as exc:
        if kc.is_fenced(exc):
            raise ConcurrentWriter(
                f"saving records of '{topic}' to '{saved}': another reverse took over; this one stopped"
            ) from None
        raise MirrorError(
            f"saving records of '{topic}' partition {partition} to '{saved}' failed: {kc.error_name(exc)}"
        ) from None


def last_saved_origin(reader_conf: dict, saved: str, partition: int) -> int | None:
    """The origin offset of the last record saved in `saved`'s partition (None: nothing saved yet)."""
    probe = kc.consumer(reader_conf)
    try:
        low, high = kc.watermark(probe, saved, partition)
    finally:
        probe.close()
    step = 64
    while high > low:
        start = max(low, high - step)
        last = None
        for msg in _read_range(reader_conf, saved, partition, start, high):
            last = msg
        if last is not None:
            return origin_offset(last.headers())
        if start == low:
            return None
        step *= 8
    return None


def saved_counts(reader_conf: dict, saved: str, partition: int) -> RangeCount:
    probe = kc.consumer(reader_conf)
    try:
        low, high = kc.watermark(probe, saved, partition)
    finally:
        probe.close()
    return count_records(reader_conf, saved, partition, low, high)
