"""A wide bounded copy task's source reader: several consumers, each reading the partitions of its share of the topics.

librdkafka (2.16) keeps a partition object for every partition of every topic
a consumer reads any partition of, all on the broker thread of the partition's
leader, and that thread walks them all each time it wakes. Each partition the
consumer starts fetching wakes it once. A task of a link's 10,000 partitions
holds four of its 16 writer slots, and a topic's partitions take consecutive
slots (`state_keys.writer_slot`): its 2,500 partitions are spread over all
1,000 topics. Its one consumer knew all 10,000 partitions and walked them 2,500
times: 1.0 CPU-s of its broker thread after the last record had been read
(0.2 CPU-s for the reading itself). Four consumers, each given the partitions
of a quarter of the topics, know 2,500 between them and walk their own 625 at
most 625 times each: 0.25-0.29 CPU-s for all of it (benchmarks/README,
"A wide task's readers").

Each partition is read by one consumer, so its records come in order as they
did. Only bounded copies are split: follow mode waits for its first record of
a round on one consumer (`group_reading.RoundReader._first_of_round`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from confluent_kafka import Consumer, Message, TopicPartition


class SplitReader:
    """The calls `group_reading.RoundReader` makes on its consumer, each partition's sent to the
    consumer of its topic (`reader_of`); `consume` takes from all of them."""

    def __init__(self, consumers: Sequence[Consumer]) -> None:
        self.consumers = list(consumers)
        self._next = 0  # the consumer `consume` asks first, in turn, so none waits behind the others

    def reader_of(self, topic: str | None) -> int:
        """The consumer that reads `topic`'s partitions: a stable share of the topics."""
        return zlib.crc32((topic or "").encode()) % len(self.consumers)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._each(partitions, "assign", every=True)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._each(partitions, "incremental_assign")

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._each(partitions, "incremental_unassign")

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._each(partitions, "pause")

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._each(partitions, "resume")

    def seek(self, partition: TopicPartition) -> None:
        self.consumers[self.reader_of(partition.topic)].seek(partition)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Each partition's position, in the order asked."""
        found: dict[tuple[str | None, int | None], TopicPartition] = {}
        for index, share in self._shares(partitions).items():
            for tp in self.consumers[index].position(share):
                found[(tp.topic, tp.partition)] = tp
        return [found[(tp.topic, tp.partition)] for tp in partitions]

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        """Up to `num_messages` records the consumers hold now; when none holds any, waits up to
        `timeout` in all, a share on each in turn, and returns with the first that come."""
        out: list[Message] = []
        for consumer in self._in_turn():
            out += consumer.consume(num_messages - len(out), 0)
            if len(out) >= num_messages:
                return out
        if out or timeout <= 0:
            return out
        share = timeout / len(self.consumers)
        for consumer in self._in_turn():
            if out := consumer.consume(num_messages, share):
                return out
        return out

    def poll(self, timeout: float) -> Message | None:
        """`consume` of one record (follow mode, which reads through one consumer, does not call it)."""
        out = self.consume(1, timeout)
        return out[0] if out else None

    def close(self) -> None:
        """Close every consumer, all of them even when one fails (the first failure is raised)."""
        failure: BaseException | None = None
        for consumer in self.consumers:
            try:
                consumer.close()
            except BaseException as exc:  # the others still hold threads and connections
                failure = failure or exc
        if failure is not None:
            raise failure

    def _in_turn(self) -> list[Consumer]:
        start, self._next = self._next, (self._next + 1) % len(self.consumers)
        return self.consumers[start:] + self.consumers[:start]

    def _shares(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        shares: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            shares.setdefault(self.reader_of(tp.topic), []).append(tp)
        return shares

    def _each(self, partitions: list[TopicPartition], call: str, every: bool = False) -> None:
        """The consumers' method `call`, each with its share of `partitions` (`every`: an empty share too)."""
        shares = self._shares(partitions)
        for index, consumer in enumerate(self.consumers):
            if index in shares or every:
                getattr(consumer, call)(shares.get(index, []))


# What a copy task reads the source through.
Reader = Consumer | SplitReader
