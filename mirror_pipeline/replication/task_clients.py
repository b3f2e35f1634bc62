"""A group copy's clients (see `group_copy`): its consumer, producers, admin client and slot writers.

A task opens them before it fences (they write nothing until then): the next
epoch's task of follow mode opens them while the epoch before still copies.
A wide task opens its producers after its checks instead (`producers_first`).

Each client is threads of librdkafka's (2.16, measured): its main one, one
per bootstrap server and one per broker it learned, and one more for a
transactional producer's coordinator, a consumer's group coordinator (an
assign-only consumer has a group id too) and an admin client's background
queue. On a one-broker cluster a slot writer is 4 threads, a producer 3, the
consumer and the admin client 4 each; the task adds its main thread and
`SLOT_THREADS`. A task keeps within `TASK_THREADS` by opening fewer producers
(`producer_count`); its writer slots are the link's (`mirror.writer.slots`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, wait

from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka import topic_shares
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.replication.chunks import ProducerSet, producers_for
from mirror_pipeline.replication.copier import CopyContext, writer_settings
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.split_reader import Reader, SplitReader
from mirror_pipeline.replication.task_memory import MemoryPlan
from mirror_pipeline.replication.throttling import ThrottleWatch

# Slot writers that fence or commit at once (threads of a task beside its copy loop).
SLOT_THREADS = 8
# librdkafka's threads of each kind of client on a one-broker cluster (see the module).
WRITER_THREADS, PRODUCER_THREADS, READER_THREADS, ADMIN_THREADS = 4, 3, 4, 4
# The threads a copy task keeps within when its slots allow: a 2-core machine's
# two tasks of 8 writer slots each (a link's 16 by default) on 10,000 partitions.
TASK_THREADS = 64

# By a failed record's (topic, partition), which confluent-kafka types Optional.
Failures = dict[tuple[str | None, int | None], KafkaError]


# Follow mode, a task reading more partitions than this and at most WAITING_FETCH_PARTITIONS: its
# fetches wait on the source broker until a MiB has come, or for half a millisecond per partition,
# up to librdkafka's default 500 ms (librdkafka's defaults: one byte, or 500 ms).
WIDE_FOLLOW_PARTITIONS = 64
PARTITIONS_FETCHED_PER_S = 2_000
MAX_FETCH_WAIT_MS = 500
# Wider than this, a task fetches with the defaults (measured: see `follow_fetch_settings`).
WAITING_FETCH_PARTITIONS = 2_000


def follow_fetch_settings(parts: Sequence[Member], cluster_properties: Mapping[str, str]) -> dict[str, object]:
    """The fetch settings of a wide follow-mode task's consumer; none the source cluster's own
    properties set, and none for a bounded copy or a task of few partitions or of very many
    (librdkafka's defaults).

    librdkafka has no incremental fetch sessions: every fetch names all of the consumer's
    partitions, and the broker reads each. With the defaults a fetch is answered as soon as a
    record arrives in any of them, so a wide consumer fetched about as often as records came:
    at 2,000 records/s over 1,000 partitions (two tasks of 500) the source broker acknowledged
    the load's own records p50 94-105 ms after sending (7 ms while MirrorMaker 2 read the same
    load), and follow mode's p50 was 458-626 ms. A fetch that waits for a MiB or a time is cheap
    under load but costs the broker the same while nothing comes: 50 ms gave p50 142-198 ms,
    and 0.40 of a core on the source broker for the same 1,000 partitions idle (the defaults:
    0.07). The wait is set so the broker reads about PARTITIONS_FETCHED_PER_S partitions a
    second for a task whatever its width: 250 ms at 500 partitions, p50 244-257 ms under that
    load, acknowledgements p50 6-7 ms, and 0.08 of a core idle (`benchmarks/latency.py`; benchmarks/README).
    A fetch of a few partitions costs the broker little, and there a record should leave at once.

    A waiting fetch has a price of its own: while it waits, every record written to any of its
    partitions makes the broker check all of them again (`DelayedFetch.tryComplete`, a third of
    the source broker's CPU in a profile). Past WAITING_FETCH_PARTITIONS that outweighs what
    the wait saves. At 2,000 records/s round robin over topics of 10 partitions, two tasks, one
    run each way (source broker CPU-s, follow mode's p99 from sending):
    - 1,500 partitions a task: waiting 67.7 CPU-s, p99 12.9 s; the defaults 51.2, 26.4 s;
    - 2,500: waiting 86.5, 47.4 s; the defaults 55.3, 35.6 s;
    - 5,000: waiting 151.7, 108 s; the defaults 60.2, 35 s.
    """
    wide = WIDE_FOLLOW_PARTITIONS < len(parts) <= WAITING_FETCH_PARTITIONS
    if not wide or not any(p.unit.follow_s for p in parts):
        return {}
    wait_ms = min(MAX_FETCH_WAIT_MS, len(parts) * 1000 // PARTITIONS_FETCHED_PER_S)
    waiting = {"fetch.wait.max.ms": wait_ms, "fetch.min.bytes": 1 << 20}
    return {key: value for key, value in waiting.items() if key not in cluster_properties}


def open_admin(ctx: CopyContext, link: str) -> AdminClient:
    """The destination's admin client, its cluster learned."""
    admin = kc.admin_client(kc.client_config(ctx.dest_properties, link, "admin"))
    kc.learn_cluster(admin, ctx.offset_map_topic)
    return admin


def reader_count(parts: Sequence[Member]) -> int:
    """The consumers a task reads the source through: for a bounded copy, as many as share its
    topics (`topic_shares.consumers_for`, read through `split_reader`); for follow mode, one."""
    if any(p.unit.follows for p in parts):
        return 1
    return topic_shares.consumers_for(len({p.unit.source_topic for p in parts}))


def open_reader(ctx: CopyContext, link: str, parts: Sequence[Member], memory: MemoryPlan) -> Reader:
    """The task's reader of the source, its cluster learned: a consumer, or `reader_count` of them
    sharing the consumer's memory."""
    count = reader_count(parts)
    reading = memory.reader_settings(count) | follow_fetch_settings(parts, ctx.source_properties)
    readers: list[Consumer] = []
    try:
        for _ in range(count):
            readers.append(reader := kc.consumer(kc.client_config(ctx.source_properties, link, "reader", **reading)))
            kc.learn_cluster(reader)
    except BaseException:
        for reader in readers:
            reader.close()
        raise
    return readers[0] if count == 1 else SplitReader(readers)


def producers_first(parts: Sequence[Member]) -> bool:
    """Whether the task opens its producers before fencing, or else after its checks.

    A narrow task's single producer is ready for its first round: after a
    follow-mode hand-over that round would otherwise wait for the producer's
    metadata and producer id. A wide task's producers (up to `MAX_TASK_PRODUCERS`)
    wait for the checks to end: the checks' two consumers and those producers
    are then never open at once, which on 1,000 partitions (8 slot writers and
    4 producers a task) kept a task at 61 threads instead of 70 while it started.
    """
    return producers_for(len(parts)) == 1


def copying_threads(parts: Sequence[Member], producers: int) -> int:
    """The most threads a task of `parts` holds while it copies through `producers` producers.

    Beside the producers: its main thread, `SLOT_THREADS`, a writer per slot,
    its consumers (`reader_count`) and admin client and, in follow mode, the consumer that reads
    a held partition's landed records while it settles (`left_open`, one at a
    time). A wide task's checks (two consumers) end before its producers open
    (`producers_first`).
    """
    slots = len({p.slot for p in parts})
    settling = READER_THREADS if any(p.unit.follows for p in parts) else 0
    readers = READER_THREADS * reader_count(parts)
    others = 1 + SLOT_THREADS + WRITER_THREADS * slots + readers + ADMIN_THREADS + settling
    return others + PRODUCER_THREADS * producers


def producer_count(parts: Sequence[Member]) -> int:
    """How many producers the task writes through: `producers_for` its width, fewer where more
    would take it past `TASK_THREADS` (`copying_threads`), one at least. On 9,900 partitions a
    follow task of 8 slots had 4 producers and reached 66 threads; with 3, 63."""
    room = (TASK_THREADS - copying_threads(parts, 0)) // PRODUCER_THREADS
    return max(1, min(producers_for(len(parts)), room))


def open_producers(
    ctx: CopyContext,
    link: str,
    parts: Sequence[Member],
    memory: MemoryPlan,
    failures: Failures,
    throttles: ThrottleWatch,
) -> ProducerSet:
    """The task's idempotent producers to the mirrors; a record that fails is noted in `failures`."""

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.setdefault((msg.topic(), msg.partition()), err)

    # Each producer may queue a whole round: a round is one chunk however it is spread over
    # them, so together they hold no more than one producer did.
    max_message_bytes = min(p.unit.max_message_bytes for p in parts)
    settings = throttles.watching(writer_settings(ctx, link, max_message_bytes, memory.writer_settings(), on_delivery))
    mirror_partitions = [(p.unit.mirror_topic, p.unit.partition) for p in parts]
    return ProducerSet(lambda: kc.producer(settings), producer_count(parts), mirror_partitions)


def open_writers(pool: Executor, ctx: CopyContext, link: str, slots: Iterable[int]) -> dict[int, SlotWriter]:
    """The slots' writers, their cluster learned in `pool`: at the fence, only its round trips are left."""
    writers = {slot: SlotWriter(ctx.dest_properties, link, slot, ctx.offset_map_topic) for slot in sorted(slots)}
    learning = [pool.submit(w.learn_cluster) for w in writers.values()]
    wait(learning)  # all of them, before any writer is closed
    try:
        for done in learning:
            done.result()
    except BaseException:
        for writer in writers.values():
            writer.close()
        raise
    return writers
