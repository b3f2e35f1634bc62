"""The copy task's record handling without Kafka: chunks, memory plan, produce calls, latency.

`chunks.ChunkReader` and `chunks.produce_chunk` drive confluent-kafka's
methods through `map`/`starmap`; these tests feed them real `Message` objects
and fake clients so that every record is accounted for: nothing dropped,
repeated or reordered, whatever the limits.
"""

from __future__ import annotations

import ctypes
import time
from collections import Counter

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, Message, TopicPartition

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.model.offset_map import runs_of
from mirror_pipeline.replication import task_memory
from mirror_pipeline.replication.chunks import (
    FIRST_CONSUME_BATCH,
    ChunkReader,
    Latency,
    ProducerSet,
    chunk_runs,
    chunk_timestamps,
    deal_to_producers,
    produce_chunk,
    producers_for,
)
from mirror_pipeline.replication.copier import WorkUnit
from mirror_pipeline.replication.task_memory import MIN_TASK_MEMORY_BYTES, RECORD_OVERHEAD_BYTES, memory_plan

MiB = 1024 * 1024
GiB = 1024 * MiB


def record(offset: int, size: int = 100, key: bytes | None = b"k", ts: int | None = None, headers=None) -> Message:
    stamp = (
        (TIMESTAMP_NOT_AVAILABLE, -1)
        if ts is None and offset % 7 == 6
        else (TIMESTAMP_CREATE_TIME, ts or 1_000 + offset)
    )
    return Message(
        topic="src",
        partition=0,
        offset=offset,
        key=key,
        value=bytes([offset % 251]) * size,
        headers=headers,
        timestamp=stamp,
    )


class FakeConsumer:
    """Hands out `records` in order, at most `batch` at a time; its position can sit past the last
    record handed out (`end_position`: transaction markers or aborted data after it)."""

    def __init__(self, records: list[Message], batch: int = 10000, end_position: int | None = None):
        self.records, self.batch = records, batch
        self.next = 0
        self.end_position = end_position
        self.asked: list[int] = []

    def consume(self, n: int, timeout: float) -> list[Message]:
        self.asked.append(n)
        out = self.records[self.next : self.next + min(n, self.batch)]
        self.next += len(out)
        return out

    def position(self, tps):
        if self.next < len(self.records):
            pos = self.records[self.next - 1].offset() + 1 if self.next else 0
        else:
            pos = (
                self.end_position
                if self.end_position is not None
                else (self.records[-1].offset() + 1 if self.records else 0)
            )
        return [TopicPartition(tps[0].topic, tps[0].partition, pos)]


def unit(until: int, chunk_records: int = 1000) -> WorkUnit:
    return WorkUnit("l", "src", "mirror", 0, 0, until, 0, 0, 1 << 40, chunk_records, 1048588, writer_slots=SLOTS)


def read_all(reader: ChunkReader, until: int) -> list[tuple[list[Message], int]]:
    chunks, position = [], 0
    while position < until:
        chunk, position = reader.next_chunk(position)
        assert reader.payload_bytes(chunk) == payload(chunk)
        chunks.append((chunk, position))
        assert len(chunks) < 10000
    return chunks


def payload(chunk: list[Message]) -> int:
    return sum(len(m) + len(m.key() or b"") for m in chunk)


def held(chunk: list[Message]) -> int:
    return sum(len(m) + len(m.key() or b"") + RECORD_OVERHEAD_BYTES for m in chunk)


@pytest.mark.parametrize("batch", [1, 7, 10000])
@pytest.mark.parametrize("chunk_records,max_bytes", [(1000, 1 * MiB), (50, 1 * MiB), (1000, 20_000), (3, 400)])
def test_chunks_hold_every_record_once_in_order_within_their_limits(batch, chunk_records, max_bytes):
    # Sizes vary from 0 to 5,000 bytes, keys may be missing, and offsets have holes.
    records = [
        record(o, size=(o * 37) % 5000, key=None if o % 5 == 0 else b"key-%d" % o)
        for o in range(0, 3000)
        if o % 11 != 3
    ]
    reader = ChunkReader(FakeConsumer(records, batch), unit(3000, chunk_records), max_bytes)

    chunks = read_all(reader, 3000)

    assert [m.offset() for c, _ in chunks for m in c] == [m.offset() for m in records]
    previous_end = 0
    for chunk, position in chunks:
        assert 1 <= len(chunk) <= chunk_records
        assert held(chunk) <= max_bytes or len(chunk) == 1  # a record bigger than a chunk goes alone
        assert chunk[0].offset() >= previous_end and chunk[-1].offset() < position
        previous_end = position
    assert chunks[-1][1] == 3000


def test_a_chunk_ends_at_source_until_and_skips_nothing_below_it():
    records = [record(o) for o in range(100)]
    reader = ChunkReader(FakeConsumer(records), unit(60, chunk_records=25), 1 * MiB)

    chunks = read_all(reader, 60)

    assert [len(c) for c, _ in chunks] == [25, 25, 10]
    assert [p for _, p in chunks] == [25, 50, 60]


def test_a_trailing_gap_is_crossed_by_the_consumers_position():
    # Records 0..9, then a transaction's commit marker at 10: the consumer's position is 11.
    reader = ChunkReader(FakeConsumer([record(o) for o in range(10)], end_position=11), unit(11), 1 * MiB)

    chunk, position = reader.next_chunk(0)

    assert len(chunk) == 10 and position == 11


def test_an_empty_range_gives_an_empty_chunk_at_its_end():
    reader = ChunkReader(FakeConsumer([], end_position=5), unit(5), 1 * MiB)

    assert reader.next_chunk(0) == ([], 5)


def test_the_consumer_is_asked_for_about_what_fits():
    records = [record(o, size=10_000) for o in range(500)]
    consumer = FakeConsumer(records)
    reader = ChunkReader(consumer, unit(500), 100_000)

    chunks = read_all(reader, 500)

    # A small first request tells the sizes; then requests ask for what the chunk has room for.
    assert consumer.asked[0] == 1  # 100_000 bytes hold one record as large as the mirror takes
    assert max(consumer.asked[1:]) <= 100_000 // (10_000 + 1 + RECORD_OVERHEAD_BYTES) + 1
    assert sum(len(c) for c, _ in chunks) == 500


def test_the_first_request_is_for_as_many_records_as_fit_at_the_mirrors_largest():
    consumer = FakeConsumer([record(o, size=100) for o in range(500)])

    read_all(ChunkReader(consumer, unit(500), 10 * MiB), 500)  # unit: 1048588 bytes at most a record

    assert consumer.asked[0] == 10 * MiB // 1048588
    assert ChunkReader(consumer, unit(500), 1 * GiB)._want(room=1000, size=0) == FIRST_CONSUME_BATCH


def test_records_too_big_for_a_chunk_go_one_at_a_time():
    records = [record(o, size=50_000) for o in range(5)]
    reader = ChunkReader(FakeConsumer(records), unit(5), 10_000)

    assert [len(c) for c, _ in read_all(reader, 5)] == [1, 1, 1, 1, 1]


class FakeProducer:
    def __init__(self, full_at: set[int] = frozenset()):
        self.calls: list[tuple] = []
        self.full_at = set(full_at)  # call numbers that find the queue full once
        self.attempts = 0
        self.polls = 0

    def produce(self, *args):
        self.attempts += 1
        if self.attempts in self.full_at:
            raise BufferError("Local: Queue full")
        self.calls.append(args)

    def poll(self, timeout):
        self.polls += 1


@pytest.mark.parametrize("full_at", [set(), {1}, {5}, {10}, {3, 4, 8}])
def test_every_record_is_produced_once_in_order_with_its_fields(full_at):
    headers = [("trace", b"\x00\x01"), ("dup", b"a"), ("dup", b"b")]
    chunk = [
        record(o, size=o, key=None if o % 3 == 0 else b"k%d" % o, headers=headers if o % 2 else None) for o in range(10)
    ]
    produce_ts, _ = chunk_timestamps([m.timestamp() for m in chunk])
    out = FakeProducer(full_at)

    produce_chunk(out, "mirror", 4, chunk, produce_ts)

    expected = [
        ("mirror", m.value(), m.key(), 4, None, None, ts, m.headers()) for m, ts in zip(chunk, produce_ts, strict=True)
    ]
    assert out.calls == expected
    # The first full queue hands over to the one-by-one path, which waits (polls) at each later one.
    assert out.polls == max(0, len(full_at) - 1)


def test_records_without_a_timestamp_are_produced_with_0_and_not_timed():
    stamps = [(TIMESTAMP_CREATE_TIME, 5), (TIMESTAMP_NOT_AVAILABLE, -1), (2, 9)]

    assert chunk_timestamps(stamps) == ([5, 0, 9], [5, 9])
    assert chunk_timestamps([(TIMESTAMP_CREATE_TIME, 5), (2, 9)]) == ([5, 9], [5, 9])
    assert chunk_timestamps([]) == ([], [])


def test_latency_is_exact_over_chunks():
    latency = Latency()
    assert latency.figures() == (-1, -1, 0, 0)
    latency.add([100, 150, 120], acked_ms=200)  # 100, 50, 80
    latency.add([], acked_ms=300)
    latency.add([290], acked_ms=310)  # 20
    assert latency.figures() == (20, 100, 250, 4)
    # A source timestamp ahead of the worker's clock is kept as a negative latency.
    latency.add([400], acked_ms=390)
    assert latency.figures() == (-10, 100, 240, 5)


def test_runs_match_runs_of():
    for offsets in ([], [5], [5, 6, 7], [5, 7, 8], [0, 2, 4], list(range(100)) + [200]):
        assert chunk_runs([record(o) for o in offsets]) == tuple(runs_of(offsets))


@pytest.mark.parametrize("budget", [1, MIN_TASK_MEMORY_BYTES, 64 * MiB, 256 * MiB, 4096 * MiB])
def test_the_memory_plan_stays_within_its_budget(budget):
    plan = memory_plan(budget, max_message_bytes=1048588, chunk_records=20000)
    budget = max(budget, MIN_TASK_MEMORY_BYTES)

    # A record is in the consumer's queue (plus one fetch), the chunk and the producer's queue at most;
    # the allocator keeps some freed memory for reuse on top.
    held = plan.consumer_queue_bytes + 2 * plan.fetch_bytes + plan.chunk_bytes + plan.producer_queue_bytes
    assert held <= budget * 2 // 3
    assert held + plan.allocator_retain_bytes <= budget * 3 // 4
    # Fetch responses (a little over fetch.max.bytes) come from malloc's arenas, two of them kept for reuse,
    # where glibc accepts the threshold.
    assert plan.allocator_retain_bytes >= 2 * plan.fetch_bytes
    assert plan.allocator_mmap_threshold >= min(plan.fetch_bytes + MiB, task_memory.MAX_MMAP_THRESHOLD_BYTES)
    assert plan.allocator_mmap_threshold <= task_memory.MAX_MMAP_THRESHOLD_BYTES
    # One whole chunk fits the producer's queue, so producing never waits for room.
    assert plan.producer_queue_bytes >= plan.chunk_bytes
    assert plan.producer_queue_messages >= min(20000, plan.chunk_bytes // RECORD_OVERHEAD_BYTES)
    # librdkafka's own rules: fetch.max.bytes within [message.max.bytes, receive.message.max.bytes - 512].
    assert 1_000_000 <= plan.fetch_bytes <= 100_000_000 - 512
    assert plan.reader_settings()["queued.max.messages.kbytes"] >= 1
    assert 1000 <= plan.consumer_queue_messages <= 100000


def test_the_producer_queue_takes_any_record_the_mirror_accepts():
    plan = memory_plan(MIN_TASK_MEMORY_BYTES, max_message_bytes=50 * MiB, chunk_records=20000)

    assert plan.producer_queue_bytes > 50 * MiB


def test_the_client_settings_are_accepted_by_librdkafka():
    from confluent_kafka import Consumer, Producer

    plan = memory_plan(64 * MiB, 1048588, 20000)
    Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **plan.reader_settings()}).close()
    Producer({"bootstrap.servers": "127.0.0.1:1", "delivery.report.only.error": True, **plan.writer_settings()})


class RecordingLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


def test_a_task_sets_the_allocator_from_its_plan_and_hands_everything_back_after(monkeypatch):
    libc = RecordingLibc()
    monkeypatch.setattr(task_memory, "_libc", libc)
    plan = memory_plan(256 * MiB, 1048588, 20000)

    task_memory.use_allocator_settings(plan)
    task_memory.return_free_memory()

    assert libc.calls == [
        ("mallopt", task_memory.M_MMAP_THRESHOLD, plan.allocator_mmap_threshold),
        ("mallopt", task_memory.M_TRIM_THRESHOLD, plan.allocator_retain_bytes),
        # Between tasks: glibc's defaults, pinned, and everything free handed back.
        ("mallopt", task_memory.M_MMAP_THRESHOLD, 128 * 1024),
        ("mallopt", task_memory.M_TRIM_THRESHOLD, 128 * 1024),
        ("malloc_trim", 0),
    ]
    assert (plan.allocator_mmap_threshold, plan.allocator_retain_bytes) == (9 * MiB, 16 * MiB)


def test_without_glibc_the_allocator_is_left_alone_and_glibc_is_looked_for_once(monkeypatch):
    looked_for = []

    def no_glibc(name):
        looked_for.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(task_memory, "_libc", None)
    monkeypatch.setattr(ctypes, "CDLL", no_glibc)

    task_memory.use_allocator_settings(memory_plan(64 * MiB, 1048588, 20000))
    task_memory.return_free_memory()

    assert looked_for == ["libc.so.6"]
    assert task_memory._libc is False


def test_rss_reads_this_process():
    rss, peak = task_memory.rss(reset_peak=True)
    assert 0 < rss <= peak


class LandingProducer:
    """Counts what `land_by_deadline` asks of it; `unacked` records never land."""

    def __init__(self, unacked: int = 0):
        self.unacked, self.flushes, self.purged = unacked, 0, False

    def flush(self, timeout):
        self.flushes += 1
        return self.unacked

    def purge(self, in_queue, in_flight):
        self.purged = True

    def poll(self, timeout):
        return 0


def test_topics_are_dealt_whole_to_the_least_loaded_producer():
    partitions = [("big", p) for p in range(100)] + [(f"t{i}", p) for i in range(30) for p in range(3)]
    dealt = deal_to_producers(partitions, 3)
    assert dealt[("big", 0)] != dealt[("big", 1)]  # 64 and 36 partitions: two blocks, two producers
    loads = Counter()
    for topic, p in partitions:
        loads[dealt[(topic, p // 64)]] += 1
    assert sorted(loads.values()) == [63, 63, 64]
    assert deal_to_producers(partitions, 3) == dealt  # the same partitions, the same deal


def test_a_task_writes_through_one_producer_per_64_partitions_up_to_four():
    assert [producers_for(n) for n in (1, 8, 64, 65, 200, 256, 257, 10_000)] == [1, 1, 1, 2, 4, 4, 4, 4]


def test_a_partition_keeps_its_producer_and_landing_counts_every_producer():
    made = iter([LandingProducer(), LandingProducer(unacked=3), LandingProducer(), LandingProducer(unacked=2)])
    partitions = [(f"t{i}", p) for i in range(8) for p in range(10)] + [("wide", p) for p in range(256)]
    writers = ProducerSet(lambda: next(made), 4, partitions)
    assert all(writers.of(t, p) is writers.of(t, 0) for t, p in partitions if t != "wide")  # a topic, one producer
    assert {id(writers.of("wide", p)) for p in range(256)} == {id(out) for out in writers.producers}
    assert writers.of("wide", 63) is writers.of("wide", 0) is not writers.of("wide", 64)  # blocks of 64
    assert writers.of("not-dealt", 3) is writers.of("not-dealt", 3)
    assert writers.land_by(time.monotonic() + 1) == 5
    assert [p.flushes for p in writers.producers] == [1, 1, 1, 1]
    assert [p.purged for p in writers.producers] == [False, True, False, True]  # only those that did not land
