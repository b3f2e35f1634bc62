"""Records past a partition's offset map that are the link's own: a chunk that landed late.

A destination broker that throttles a writer (a produce quota) answers at
once and then reads nothing more from that connection for the throttle time.
A request the writer had already sent is appended when the broker reads it,
which can be after the repair that settled its chunk without it (after the
fence wait). Its records then lie past everything the offset map accounts
for, at the very offsets where they would have been mapped, and they are the
source records that follow the map's end.

The plan settles such a tail as it settles a chunk in doubt: it fences the
partition's writer and waits out the fence wait (`repair.settle_in_doubt`),
then compares the tail record by record with the source records that follow
the map. When every one is its source record (key, value, headers,
timestamp), a segment maps them and the copy goes on after them. Anything
else (a record another writer wrote, a hole, older records written again) is
a write the link did not make, and the mirror is flagged as before (R-MT-9):
before, the link's own late records were flagged too, and the mirror stopped
for good although nothing on it was wrong.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Sequence
from itertools import islice
from typing import Any

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.partition_reading import committed_records, record_content
from mirror_pipeline.model.errors import MirrorDiverged, MirrorError
from mirror_pipeline.model.offset_map import OffsetMap, Segment, runs_of
from mirror_pipeline.replication.chunks import offset_of

log = logging.getLogger(__name__)

# Source offsets read past the map's end beyond the tail's length, for the gaps (transaction
# markers, aborted records) the late chunk's reader went through.
GAP_ALLOWANCE = 1000


def foreign_records_problem(mirror_topic: str, partition: int, records: int, log_end: int) -> str:
    """Why a partition with records past its map is not copied to (the mirror is flagged)."""
    return str(
        MirrorDiverged(
            f"mirror '{mirror_topic}' partition {partition} holds {records} records "
            f"the link did not write (log end {log_end}); it was not copied to"
        )
    )


def late_chunk(
    first: int, mirror: Sequence[tuple[int, Hashable]], source: Sequence[tuple[int, Hashable]]
) -> Segment | None:
    """The segment that maps `mirror` (offset, content) pairs, every record from mirror offset `first`
    on, to the first of `source` (the records that follow the map, in order); None unless each is
    its source record, the mirror's offsets without a hole."""
    if not mirror or len(source) < len(mirror):
        return None
    for i, ((offset, content), (_, expected)) in enumerate(zip(mirror, source, strict=False)):
        if offset != first + i or content != expected:
            return None
    offsets = [offset for offset, _ in source[: len(mirror)]]
    return Segment(first, tuple(runs_of(offsets)), offsets[-1] + 1, written_at=time.time())


def adopt(
    dest_conf: dict[str, Any],
    source_conf: dict[str, Any],
    mirror_topic: str,
    source_topic: str,
    partition: int,
    mapped: OffsetMap,
    log_end: int,
) -> Segment | None:
    """The segment for the records from `mapped`'s end to `log_end` when they are the source records
    that follow it, else None. A source that does not answer cannot tell: None."""
    if mapped.next_source_offset is None:
        return None  # nothing was mapped yet: where a chunk of the link would have started is unknown
    first, count = mapped.dest_end, log_end - mapped.dest_end
    try:
        mirror = _contents(dest_conf, mirror_topic, partition, first, log_end, count)
        until = min(_log_end(source_conf, source_topic, partition), mapped.next_source_offset + count + GAP_ALLOWANCE)
        source = _contents(source_conf, source_topic, partition, mapped.next_source_offset, until, count)
    except MirrorError as exc:
        log.warning("%s[%d]: records past the offset map could not be compared: %s", mirror_topic, partition, exc)
        return None
    adopted = late_chunk(first, mirror, source)
    if adopted is not None:
        log.warning(
            "%s[%d]: %d records past the offset map (mirror offsets %d..%d) are the source's next ones, "
            "a chunk that landed after its repair (a destination throttle?): mapped, not flagged",
            mirror_topic,
            partition,
            count,
            first,
            log_end - 1,
        )
    return adopted


def _contents(
    conf: dict[str, Any], topic: str, partition: int, start: int, end: int, limit: int
) -> list[tuple[int, Hashable]]:
    """(offset, content) of the first `limit` committed records in [start, end)."""
    records = committed_records(conf, topic, partition, start, end)
    try:
        return [(offset_of(msg), record_content(msg)) for msg in islice(records, limit)]
    finally:
        records.close()  # its consumer, when `limit` came first


def _log_end(conf: dict[str, Any], topic: str, partition: int) -> int:
    cons = kc.consumer(conf)
    try:
        return kc.watermark(cons, topic, partition)[1]
    finally:
        cons.close()
