"""Fenced transactional writers of a link's internal topics.

Segment writes are transactional under the transactional id of the mirror
partition's writer slot, mirror records under one per link (see `state_keys`):
starting a new writer fences the old one, which is how two overlapping cycles
are kept from both writing a partition, and how a state change is a
compare-and-set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaException

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.closing import close_producer
from mirror_pipeline.link.state_keys import segment_key, slot_transactional_id, writer_slot
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment

# Our writers' transactions time out after this; the broker aborts a timed-out
# one at its next check (every 10 s by default), so readers settle within
# `topic_reading.SETTLE_TIMEOUT_S`.
TRANSACTION_TIMEOUT_MS = 10000
# Slot writers held at once by `fenced_batches` (each is a transactional producer).
FENCE_BATCH = 64
# Fences under way at once (each a round trip to the transaction coordinator).
FENCE_THREADS = 8
# How long a failed write waits to learn whether its writer was fenced (`_fenced_meanwhile`).
FENCE_PROBE_S = 2.0


class TransactionalWriter:
    """A fenced transactional producer of one internal topic.

    `fence()` (init_transactions) aborts whatever an older writer with the same
    transactional id left open and makes its further commits fail; every write
    after that is one transaction, so its records land whole or not at all.
    """

    def __init__(self, dest_properties: dict[str, Any], link: str, txn_id: str, topic: str, where: str = ""):
        self.topic = topic
        self.where = where or f"link '{link}' state"
        self._producer = kc.producer(
            kc.client_config(
                dest_properties,
                link,
                "state-writer",
                **{"transactional.id": txn_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS},
            )
        )
        self._closed = False

    def learn_cluster(self) -> None:
        """The metadata requests of `clients.learn_cluster`, for a writer whose fence is on a latency path."""
        kc.learn_cluster(self._producer, self.topic)

    def fence(self, timeout: float = 30.0, learn_cluster: bool = False) -> None:
        """Take over as the writer; with `learn_cluster`, after `learn_cluster()`."""
        deadline = time.monotonic() + timeout
        if learn_cluster:
            self.learn_cluster()
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
            raise self._error(exc, doing, fenced=not kc.is_fenced(exc) and self._fenced_meanwhile()) from None

    def _error(self, exc: KafkaException, doing: str, fenced: bool = False) -> MirrorError:
        if fenced or kc.is_fenced(exc):
            return ConcurrentWriter(f"{self.where}: another writer took over while {doing}; this writer stopped")
        return MirrorError(f"{self.where}: {doing} failed: {kc.error_name(exc)}")

    def _fenced_meanwhile(self) -> bool:
        """Whether this writer was fenced, though its failed transaction said otherwise.

        A fence that meets a commit in flight can fail the commit with another error
        (UNKNOWN, seen under the fault suite when a pause fenced a copy task's slot
        mid-commit) while librdkafka records the fence as the producer's fatal error,
        which the next transactional call raises. Aborting asks for it (and ends the
        failed transaction if the producer is still usable).
        """
        try:
            self._producer.abort_transaction(FENCE_PROBE_S)
        except KafkaException as exc:
            return kc.is_fenced(exc)
        return False

    def close(self) -> None:
        """Let go of the producer. Every write committed (or failed) before this, so nothing waits to be
        delivered; a producer fenced mid-commit reports its fatal error again here, and raising it would
        hide the `ConcurrentWriter` its write raised, on which the caller decides again (R-LC-8). Closed,
        not left to be freed (`closing`)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._producer.flush(5)
        except KafkaException:
            pass
        close_producer(self._producer)


class SlotWriter(TransactionalWriter):
    """The fenced writer of one writer slot: announces the segments of every mirror partition
    that maps to the slot (`state_keys.writer_slot`).

    Fencing it is also how a stop cuts off every copy task of a partition: a
    task can announce no chunk after another writer of the slot fenced it.
    Several partitions' segments go in one transaction (`write_segments`).
    """

    def __init__(self, dest_properties: dict[str, Any], link: str, slot: int, offset_map_topic: str):
        super().__init__(
            dest_properties,
            link,
            slot_transactional_id(link, slot),
            offset_map_topic,
            where=f"link '{link}' writer slot {slot}",
        )
        self.link, self.slot = link, slot

    def write_segments(
        self,
        puts: Iterable[tuple[str, int, Segment]] = (),
        deletes: Iterable[str] = (),
        doing: str = "recording progress",
    ) -> None:
        """Write (mirror, partition, segment)s and delete segment keys, in one transaction."""
        records = [(segment_key(self.link, mirror, p, seg.dest_start), seg.to_json()) for mirror, p, seg in puts]
        self.write(records + [(key, None) for key in deletes], doing)


class SegmentWriter:
    """One mirror partition's view of its slot's writer: `write` puts and deletes that partition's segments.

    Built alone it owns a writer of its slot (and fencing it fences every
    partition of the slot); built on a `SlotWriter` it shares that one.
    """

    def __init__(
        self,
        dest_properties: dict[str, Any],
        link: str,
        mirror: str,
        partition: int,
        offset_map_topic: str,
        slots: int,
        slot_writer: SlotWriter | None = None,
    ):
        self._owned = slot_writer is None
        self.slot_writer = slot_writer or SlotWriter(
            dest_properties, link, writer_slot(mirror, partition, slots), offset_map_topic
        )
        self.link, self.mirror, self.partition = link, mirror, partition
        self.where = f"mirror '{mirror}' partition {partition}"

    def fence(self, timeout: float = 30.0, learn_cluster: bool = False) -> None:
        self.slot_writer.fence(timeout, learn_cluster)

    def write(self, puts: Iterable[Segment] = (), deletes: Iterable[str] = ()) -> None:
        """Write segments and delete segment keys, in one transaction."""
        try:
            self.slot_writer.write_segments([(self.mirror, self.partition, seg) for seg in puts], deletes)
        except ConcurrentWriter:
            raise ConcurrentWriter(f"{self.where}: another writer took over; this writer stopped") from None

    def close(self) -> None:
        if self._owned:
            self.slot_writer.close()


@contextmanager
def fenced_writers(
    dest_properties: dict[str, Any],
    link: str,
    offset_map_topic: str,
    partitions: Iterable[tuple[str, int]],
    slots: int,
) -> Iterator[dict[tuple[str, int], SegmentWriter]]:
    """The writers of (mirror, partition)s on a link of `slots` writer slots, fenced: one writer
    per slot, shared by its partitions; all closed on exit (see `fenced_batches` for the
    invariant a caller keeps).

    The slots are fenced side by side: one after another, a stop of a wide link waited on 64
    round trips to the transaction coordinator (about 0.27 s each here) before it wrote anything.
    """
    fenced: dict[int, SlotWriter] = {}
    try:
        writers = {}
        for mirror, p in partitions:
            slot = writer_slot(mirror, p, slots)
            if slot not in fenced:
                fenced[slot] = SlotWriter(dest_properties, link, slot, offset_map_topic)
            writers[(mirror, p)] = SegmentWriter(
                dest_properties, link, mirror, p, offset_map_topic, slots, fenced[slot]
            )
        with ThreadPoolExecutor(min(FENCE_THREADS, max(1, len(fenced))), thread_name_prefix="fence") as pool:
            fences = [pool.submit(w.fence, learn_cluster=True) for w in fenced.values()]
        for done in fences:
            done.result()  # the first failure, once every fence has ended
        yield writers
    finally:
        for writer in fenced.values():
            writer.close()


def fenced_batches(
    dest_properties: dict[str, Any],
    link: str,
    offset_map_topic: str,
    partitions: Sequence[tuple[str, int]],
    slots: int,
) -> Iterator[dict[tuple[str, int], SegmentWriter]]:
    """The segment writers of (mirror, partition)s, fenced, FENCE_BATCH slots at a time; a batch's
    writers are closed before the next batch is fenced.

    Invariant for the caller: whatever it writes with a batch's writers is
    decided from segments (and state) read *after* the batch was yielded. A
    read from before the fence may miss a segment another writer wrote until
    then, and a write decided from it would leave that segment behind or
    overwrite a newer one under the same key.
    """
    by_slot: dict[int, list[tuple[str, int]]] = {}
    for mirror, p in partitions:
        by_slot.setdefault(writer_slot(mirror, p, slots), []).append((mirror, p))
    in_order = sorted(by_slot)
    for i in range(0, len(in_order), FENCE_BATCH):
        batch = [tp for slot in in_order[i : i + FENCE_BATCH] for tp in by_slot[slot]]
        with fenced_writers(dest_properties, link, offset_map_topic, batch, slots) as writers:
            yield writers
