"""A wide bounded task's reader split over several consumers by topic (`split_reader`), without Kafka:
each partition's calls reach the one consumer of its topic, and `consume` takes from all of them."""

from __future__ import annotations

import pytest
from confluent_kafka import Message, TopicPartition

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.kafka import topic_shares
from mirror_pipeline.replication import task_clients
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.split_reader import SplitReader
from mirror_pipeline.replication.task_memory import MIN_FETCH_BYTES, memory_plan


class FakeConsumer:
    """Records the calls made on it; hands out the records queued on it, `n` at most."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []
        self.queued: list[Message] = []
        self.waits: list[float] = []
        self.closed = False

    def _note(self, name: str, tps: list[TopicPartition]) -> None:
        self.calls.append((name, [(tp.topic, tp.partition) for tp in tps]))

    def assign(self, tps):
        self._note("assign", tps)

    def incremental_assign(self, tps):
        self._note("incremental_assign", tps)

    def incremental_unassign(self, tps):
        self._note("incremental_unassign", tps)

    def pause(self, tps):
        self._note("pause", tps)

    def resume(self, tps):
        self._note("resume", tps)

    def seek(self, tp):
        self._note("seek", [tp])

    def position(self, tps):
        return [TopicPartition(tp.topic, tp.partition, 100 + tp.partition) for tp in tps]

    def consume(self, n: int, timeout: float) -> list[Message]:
        self.waits.append(timeout)
        out, self.queued = self.queued[:n], self.queued[n:]
        return out

    def close(self) -> None:
        self.closed = True


def split(count: int) -> tuple[SplitReader, list[FakeConsumer]]:
    consumers = [FakeConsumer() for _ in range(count)]
    return SplitReader(consumers), consumers  # type: ignore[arg-type]


TOPICS = [f"t{i}" for i in range(12)]


def test_each_partition_is_sent_to_the_one_consumer_of_its_topic():
    reader, consumers = split(3)
    tps = [TopicPartition(t, p, 5) for t in TOPICS for p in range(3)]
    reader.assign(tps)
    reader.pause(tps[:7])
    reader.seek(tps[8])
    owner = {t: reader.reader_of(t) for t in TOPICS}
    assert len(set(owner.values())) == 3, "twelve topics over three consumers: each has a share"
    for index, consumer in enumerate(consumers):
        for _, partitions in consumer.calls:
            assert all(owner[topic] == index for topic, _ in partitions)
    assigned = sorted(tp for c in consumers for name, tps_ in c.calls if name == "assign" for tp in tps_)
    assert assigned == sorted((tp.topic, tp.partition) for tp in tps), "every partition assigned once"
    assert [(n, len(p)) for c in consumers for n, p in c.calls if n == "seek"] == [("seek", 1)]


def test_an_assignment_reaches_every_consumer_even_one_with_no_partitions():
    reader, consumers = split(4)
    reader.assign([TopicPartition("t0", 0, 0)])
    assert [c.calls[0][0] for c in consumers] == ["assign"] * 4
    assert sum(len(c.calls[0][1]) for c in consumers) == 1


def test_positions_come_back_in_the_order_asked():
    reader, _ = split(3)
    tps = [TopicPartition(t, p) for p in range(2) for t in reversed(TOPICS)]
    assert [(tp.topic, tp.partition, tp.offset) for tp in reader.position(tps)] == [
        (tp.topic, tp.partition, 100 + tp.partition) for tp in tps
    ]


def _record(topic: str, offset: int) -> Message:
    return Message(topic=topic, partition=0, offset=offset, value=b"v")


def test_consume_takes_what_every_consumer_holds_without_waiting_and_in_each_partitions_order():
    reader, consumers = split(3)
    for i, consumer in enumerate(consumers):
        consumer.queued = [_record(f"c{i}", o) for o in range(4)]
    got = reader.consume(10, 1.0)
    assert len(got) == 10 and all(w == 0 for c in consumers for w in c.waits), "records were there: no wait"
    got += reader.consume(10, 1.0)
    by_topic: dict[str, list[int]] = {}
    for m in got:
        by_topic.setdefault(m.topic(), []).append(m.offset())
    assert by_topic == {f"c{i}": [0, 1, 2, 3] for i in range(3)}


def test_consume_with_nothing_held_waits_a_share_of_its_timeout_on_each_consumer():
    reader, consumers = split(4)
    assert reader.consume(5, 0.2) == []
    assert [w for c in consumers for w in c.waits if w] == [pytest.approx(0.05)] * 4
    assert reader.poll(0) is None


def test_close_closes_every_consumer_even_when_one_fails():
    reader, consumers = split(3)

    def fails() -> None:
        raise RuntimeError("broken")

    consumers[0].close = fails  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="broken"):
        reader.close()
    assert consumers[1].closed and consumers[2].closed


def members(topics: int, partitions: int, follow_s: float = 0.0) -> list[Member]:
    out = []
    for t in range(topics):
        for p in range(partitions):
            unit = WorkUnit("l", f"t{t}", f"t{t}", p, 0, 1, 0, 0, 1 << 40, 1000, 1048588, follow_s, writer_slots=SLOTS)
            out.append(Member(unit, UnitResult(f"t{t}", p, 0, 0, 0, 0), 0, 0))
    return out


def test_a_bounded_task_reads_through_a_consumer_per_share_of_its_topics_and_follow_mode_through_one():
    per = topic_shares.TOPICS_PER_CONSUMER
    assert task_clients.reader_count(members(per, 10)) == 1
    assert task_clients.reader_count(members(per + 1, 1)) == 2
    assert task_clients.reader_count(members(1000, 3)) == topic_shares.MAX_CONSUMERS == 4
    assert task_clients.reader_count(members(1000, 3, follow_s=60.0)) == 1


def test_readers_share_the_consumer_memory_of_one():
    plan = memory_plan(256 << 20, 1048588, 10_000)
    one, four = plan.reader_settings(), plan.reader_settings(4)
    assert four["queued.max.messages.kbytes"] == one["queued.max.messages.kbytes"] // 4
    assert four["queued.min.messages"] == one["queued.min.messages"] // 4
    assert four["fetch.max.bytes"] == max(MIN_FETCH_BYTES, plan.fetch_bytes // 4)
    small = memory_plan(16 << 20, 1048588, 10_000).reader_settings(4)
    assert small["fetch.max.bytes"] == MIN_FETCH_BYTES, "never below what librdkafka accepts"


def test_a_wide_task_counts_its_readers_threads_and_stays_within_the_task_threads(monkeypatch):
    # A cycle task of a 10,000-partition link of 16 writer slots on four task slots: four slots each.
    wide = [m for m in members(1000, 10) if m.slot < 4]
    readers = task_clients.reader_count(wide)
    threads = task_clients.copying_threads(wide, 0)
    with monkeypatch.context() as one:
        one.setattr(topic_shares, "MAX_CONSUMERS", 1)
        assert threads == task_clients.copying_threads(wide, 0) + task_clients.READER_THREADS * (readers - 1)
    assert readers == 4
    producers = task_clients.producer_count(wide)
    assert producers > 1 and task_clients.copying_threads(wide, producers) <= task_clients.TASK_THREADS
