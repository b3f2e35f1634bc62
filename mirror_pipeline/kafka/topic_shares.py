"""How many consumers share the reading of many topics.

librdkafka keeps a partition object for every partition of every topic a
consumer reads any partition of, on the broker thread of that partition's
leader, and the thread walks all of them each time one of them starts
fetching. A consumer given partitions from all 1,000 topics of a link of
10,000 partitions walked 10,000 partitions for every partition it started.
A consumer per TOPICS_PER_CONSUMER topics, MAX_CONSUMERS at most, keeps that
walk short: the copy tasks' readers (`replication.split_reader`) and the read
probe of a plan (`link.read_probe`) split their topics this way.
"""

from __future__ import annotations

TOPICS_PER_CONSUMER = 250
MAX_CONSUMERS = 4


def consumers_for(topics: int) -> int:
    """The consumers that read `topics` distinct topics: one per TOPICS_PER_CONSUMER, MAX_CONSUMERS at most."""
    return max(1, min(MAX_CONSUMERS, -(-topics // TOPICS_PER_CONSUMER)))
