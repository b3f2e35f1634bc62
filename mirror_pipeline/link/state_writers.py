"""Fenced transactional writers of a link's internal topics.

Segment writes are transactional under a transactional id per mirror
partition, mirror records under one per link (see `state_keys`): starting a
new writer fences the old one, which is how two overlapping cycles are kept
from both writing a partition, and how a state change is a compare-and-set.
"""

from __future__ import annotations

import time
from typing import Iterable, Iterator, Sequence

from confluent_kafka import KafkaException

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_keys import segment_key, transactional_id
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment

# Our writers' transactions time out after this; the broker aborts a timed-out
# one at its next check (every 10 s by default), so readers settle within
# `topic_reading.SETTLE_TIMEOUT_S`.
TRANSACTION_TIMEOUT_MS = 10000
# Segment writers held at once by `fenced_batches` (each is a transactional producer).
FENCE_BATCH = 64


class TransactionalWriter:
    """A fenced transactional producer of one internal topic.

    `fence()` (init_transactions) aborts whatever an older writer with the same
    transactional id left open and makes its further commits fail; every write
    after that is one transaction, so its records land whole or not at all.
    """

    def __init__(self, dest_properties: dict, link: str, txn_id: str, topic: str, where: str = ""):
        self.topic = topic
        self.where = where or f"link '{link}' state"
        self._producer = kc.producer(
            kc.client_config(dest_properties, link, "state-writer",
                             **{"transactional.id": txn_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
        )

    def fence(self, timeout: float = 30.0, learn_cluster: bool = False) -> None:
        """Take over as the writer; with `learn_cluster`, first one metadata request (see
        `clients.learn_cluster`), for a writer whose start is on a latency path."""
        deadline = time.monotonic() + timeout
        if learn_cluster:
            kc.learn_cluster(self._producer)
        while True:
            try:
                self._producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                # e.g. CONCURRENT_TRANSACTIONS while the old writer's transaction is aborted
                if not kc.is_retriable(exc) or time.monotonic() > deadline:
                    raise self._error(exc, "taking over as its writer") from None
                time.sleep(0.2)

    def write(self, records: Iterable[tuple[str, bytes | None]], doing: str = "recording progress") -> None:
        """Write (key, value) records in one transaction; a None value deletes the key."""
        p = self._producer
        try:
            p.begin_transaction()
            for key, value in records:
                p.produce(self.topic, key=key.encode(), value=value)
            p.commit_transaction(30.0)
        except KafkaException as exc:
            raise self._error(exc, doing) from None

    def _error(self, exc: KafkaException, doing: str) -> MirrorError:
        if kc.is_fenced(exc):
            return ConcurrentWriter(f"{self.where}: another writer took over while {doing}; this writer stopped")
        return MirrorError(f"{self.where}: {doing} failed: {kc.error_name(exc)}")

    def close(self) -> None:
        self._producer.flush(5)


class SegmentWriter(TransactionalWriter):
    """The fenced writer of one mirror partition's segments (see `TransactionalWriter`).

    Fencing it is also how a stop cuts off every copy task of the partition:
    a task can announce no chunk after another writer fenced it.
    """

    def __init__(self, dest_properties: dict, link: str, mirror: str, partition: int, offset_map_topic: str):
        super().__init__(dest_properties, link, transactional_id(link, mirror, partition), offset_map_topic,
                         where=f"mirror '{mirror}' partition {partition}")
        self.link, self.mirror, self.partition = link, mirror, partition

    def write(self, puts: Iterable[Segment] = (), deletes: Iterable[str] = ()) -> None:
        """Write segments and delete segment keys, in one transaction."""
        records = [(segment_key(self.link, self.mirror, self.partition, seg.dest_start), seg.to_json()) for seg in puts]
        super().write(records + [(key, None) for key in deletes])


def fenced_batches(dest_properties: dict, link: str, offset_map_topic: str,
                   partitions: Sequence[tuple[str, int]]) -> Iterator[dict[tuple[str, int], SegmentWriter]]:
    """The segment writers of (mirror, partition)s, fenced, FENCE_BATCH at a time; a batch's
    writers are closed before the next batch is fenced.

    Invariant for the caller: whatever it writes with a batch's writers is
    decided from segments (and state) read *after* the batch was yielded. A
    read from before the fence may miss a segment another writer wrote until
    then, and a write decided from it would leave that segment behind or
    overwrite a newer one under the same key.
    """
    for i in range(0, len(partitions), FENCE_BATCH):
        writers: dict[tuple[str, int], SegmentWriter] = {}
        try:
            for mirror, p in partitions[i:i + FENCE_BATCH]:
                writers[(mirror, p)] = SegmentWriter(dest_properties, link, mirror, p, offset_map_topic)
                writers[(mirror, p)].fence()
            yield writers
        finally:
            for writer in writers.values():
                writer.close()
