"""A single-partition topic's log end and last stable offset, asked in one round trip.

`link.topic_reading.topic_end` needs both before every read of the state or
the offset map; asked one after the other they cost two round trips, and a
follow-mode hand-over reads those topics three times before its first round.
"""

from __future__ import annotations

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka import leader_lookups


def end_and_stable(admin: AdminClient, topic: str, alias: str, timeout: float) -> tuple[int, int]:
    """Partition 0's log end and last stable offset, asked side by side.

    The broker may answer either first: both offsets only grow, so a stable
    offset at or past the log end still means nothing below that end is
    undecided. Anything but two answers (a leader moving, a topic just made)
    is asked again one after the other, with `list_offsets`' retries and errors,
    and so is a partition whose leader the client may not hold: two requests that
    look a leader up side by side can crash librdkafka (`leader_lookups`).
    """
    if leader_lookups.all_held(admin, [(topic, 0)]):
        tp = TopicPartition(topic, 0)
        try:
            end, stable = (
                admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level, request_timeout=timeout)[tp]
                for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
            )
            return end.result().offset, stable.result().offset
        except KafkaException:
            leader_lookups.forget(admin, [topic])
    ends = kc.list_offsets(admin, [(topic, 0)], "latest", alias, read_committed=False, timeout=timeout)
    stables = kc.list_offsets(admin, [(topic, 0)], "latest", alias, timeout=timeout)
    return ends[(topic, 0)], stables[(topic, 0)]
