"""A group copy's rounds without Kafka: one consumer's records sorted into many partitions' chunks.

`group_reading.RoundReader` reads for every unit of a task at once. These
tests feed it real `Message` objects of several partitions, interleaved as a
consumer hands them out, and check that every record of every unit's range
is in exactly one round, in order, that no round passes its record or memory
limit, and that a unit ends where its range does (also past trailing
transaction markers, which the consumer never hands out).
"""

from __future__ import annotations

import random

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message, TopicPartition

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.replication import group_reading, task_clients
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_reading import ROUND_PARTITIONS, Member, RoundReader
from mirror_pipeline.replication.task_memory import RECORD_OVERHEAD_BYTES

SIZE = 100


def record(partition: int, offset: int) -> Message:
    return Message(
        topic="src",
        partition=partition,
        offset=offset,
        key=b"k",
        value=bytes([offset % 251]) * SIZE,
        timestamp=(TIMESTAMP_CREATE_TIME, 1_000 + offset),
    )


class InterleavingConsumer:
    """Hands out the assigned partitions' records interleaved at random, at most `n` at a time,
    never those of a paused partition; a partition's position may sit past its last record."""

    def __init__(self, records: dict[int, list[Message]], ends: dict[int, int], seed: int):
        self.records, self.ends = records, ends
        self.next = {p: 0 for p in records}
        self.paused: set[int] = set()
        self.rng = random.Random(seed)

    def assign(self, tps):
        assert {tp.partition for tp in tps} == set(self.records)

    def pause(self, tps):
        self.paused |= {tp.partition for tp in tps}

    def consume(self, n: int, timeout: float) -> list[Message]:
        out = []
        while len(out) < n:
            open_ = [p for p in self.records if p not in self.paused and self.next[p] < len(self.records[p])]
            if not open_:
                break
            p = self.rng.choice(open_)
            out.append(self.records[p][self.next[p]])
            self.next[p] += 1
        return out

    def poll(self, timeout: float) -> Message | None:
        out = self.consume(1, timeout)
        return out[0] if out else None

    def position(self, tps):
        def pos(p: int) -> int:
            if self.next[p] < len(self.records[p]):
                return self.records[p][self.next[p] - 1].offset() + 1 if self.next[p] else -1001
            return self.ends[p]

        return [TopicPartition(tp.topic, tp.partition, pos(tp.partition)) for tp in tps]


def members(ranges: dict[int, tuple[int, int]], chunk_records: int) -> list[Member]:
    out = []
    for p, (start, until) in ranges.items():
        unit = WorkUnit(
            "l", "src", "mirror", p, start, until, 0, 0, 1 << 40, chunk_records, 1048588, writer_slots=SLOTS
        )
        out.append(Member(unit, UnitResult("mirror", p, start, start, 0, 0), start, 0))
    return out


def following(group: list[Member], follow_s: float = 120.0) -> list[Member]:
    """The same members as follow mode's, in epochs of `follow_s`."""
    return [Member(WorkUnit(**{**m.unit.__dict__, "follow_s": follow_s}), m.result, m.position, 0) for m in group]


def drain(reader: RoundReader) -> list[dict[int, list[int]]]:
    """Every round's offsets per partition, as the group copy would announce them."""
    rounds = []
    while reader.reading() or reader.news():
        news = reader.read_round()
        rounds.append({m.unit.partition: [r.offset() for r in m.chunk] for m in news})
        for m in news:  # what a landed round does to a member
            m.result.source_until = m.position
            m.chunk, m.held = [], 0
        assert len(rounds) < 10_000
    return rounds


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chunk_records,chunk_bytes", [(1000, 1 << 20), (7, 1 << 20), (1000, 3_000), (1, 1 << 20)])
def test_every_record_of_every_range_is_in_exactly_one_round_in_order(seed, chunk_records, chunk_bytes):
    rng = random.Random(seed)
    ranges = {p: (s, s + rng.randint(0, 40)) for p, s in enumerate(rng.randint(0, 100) for _ in range(6))}
    # Records beyond a unit's end are in the topic too (written after the plan): never copied.
    records = {p: [record(p, o) for o in range(s, u + 5)] for p, (s, u) in ranges.items()}
    reader = RoundReader(
        InterleavingConsumer(records, {p: u + 5 for p, (_, u) in ranges.items()}, seed),
        members(ranges, chunk_records),
        chunk_bytes,
        chunk_records,
        1048588,
    )
    rounds = drain(reader)
    for p, (start, until) in ranges.items():
        copied = [o for r in rounds for o in r.get(p, [])]
        assert copied == list(range(start, until)), f"partition {p}"
    for r in rounds:
        count = sum(len(v) for v in r.values())
        assert count <= chunk_records and len([p for p, v in r.items() if v]) <= ROUND_PARTITIONS
        assert count * (SIZE + 1 + RECORD_OVERHEAD_BYTES) <= max(chunk_bytes, SIZE + 1 + RECORD_OVERHEAD_BYTES)
    assert all(m.position == m.unit.source_until for m in reader.members)


def test_a_range_ending_in_markers_ends_at_its_end_with_a_round_that_has_no_records():
    # Partition 0's last records are transaction markers: the consumer hands out 10..14 and stands at 17.
    ranges = {0: (10, 17), 1: (0, 3)}
    records = {0: [record(0, o) for o in range(10, 15)], 1: [record(1, o) for o in range(3)]}
    reader = RoundReader(InterleavingConsumer(records, {0: 17, 1: 3}, 0), members(ranges, 1000), 1 << 20, 1000, 1048588)
    rounds = drain(reader)
    assert [o for r in rounds for o in r.get(0, [])] == list(range(10, 15))
    assert {m.unit.partition: m.position for m in reader.members} == {0: 17, 1: 3}


def test_a_follow_round_is_what_has_arrived_and_never_ends_a_partition():
    ranges = {0: (0, 2**63 - 1), 1: (5, 2**63 - 1)}
    group = following(members(ranges, 1000), 3.0)
    records = {0: [record(0, o) for o in range(3)], 1: [record(1, o) for o in range(5, 6)]}
    reader = RoundReader(
        InterleavingConsumer(records, {0: 3, 1: 6}, 0), group, 1 << 20, 1000, 1048588, follow_until=4e9
    )
    news = reader.read_round()
    assert {m.unit.partition: [r.offset() for r in m.chunk] for m in news} == {0: [0, 1, 2], 1: [5]}
    assert len(reader.reading()) == 2


class TricklingConsumer(InterleavingConsumer):
    """Records arrive `arrive` at a time, only while the reader waits (a consume or poll with a timeout);
    a consume without one hands out only what has arrived. As librdkafka's, `consume(n, timeout)` returns
    at its timeout unless n records came: `waited_s` adds up the time the reader would have waited."""

    def __init__(self, records: dict[int, list[Message]], arrive: int):
        super().__init__(records, {p: 0 for p in records}, 0)
        self.arrive, self.arrived, self.waits, self.waited_s = arrive, 0, 0, 0.0
        self.timeouts: list[float] = []  # of every consume
        self.total = sum(len(r) for r in records.values())
        self.order = sorted((m for r in records.values() for m in r), key=lambda m: (m.offset(), m.partition()))

    def consume(self, n: int, timeout: float) -> list[Message]:
        self.timeouts.append(timeout)
        self._wait(timeout)
        out = self._hand(n)
        if len(out) < n:
            self.waited_s += timeout
        return out

    def poll(self, timeout: float) -> Message | None:
        self._wait(timeout)
        out = self._hand(1)
        if not out:
            self.waited_s += timeout
        return out[0] if out else None

    def _wait(self, timeout: float) -> None:
        if timeout > 0:
            self.waits += 1
            self.arrived = min(self.total, self.arrived + self.arrive)

    def _hand(self, n: int) -> list[Message]:
        handed = sum(self.next.values())
        out = []
        for m in self.order[handed : self.arrived][:n]:
            assert self.next[m.partition()] == self.records[m.partition()].index(m)
            self.next[m.partition()] += 1
            out.append(m)
        return out


def follow_members(starts: dict[int, int]) -> list[Member]:
    out = []
    for p, start in starts.items():
        unit = WorkUnit(
            "l", "src", "mirror", p, start, 2**63 - 1, 0, 0, 1 << 40, 1000, 1048588, follow_s=3.0, writer_slots=SLOTS
        )
        out.append(Member(unit, UnitResult("mirror", p, start, start, 0, 0), start, 0))
    return out


@pytest.mark.parametrize("arrive", [1, 5, 400])
def test_a_follow_round_takes_what_has_arrived_once_in_order_and_never_waits_to_fill(arrive, monkeypatch):
    monkeypatch.setattr(group_reading, "FOLLOW_ROUND_S", 0.0)  # rounds cut as soon as their first record came
    records = {p: [record(p, o) for o in range(p * 10, p * 10 + 300)] for p in range(3)}
    consumer = TricklingConsumer(records, arrive)
    reader = RoundReader(consumer, follow_members({p: p * 10 for p in records}), 1 << 20, 1000, 1048588, 4e9)
    got: dict[int, list[int]] = {p: [] for p in records}
    while sum(map(len, got.values())) < consumer.total:
        waits = consumer.waits
        news = reader.read_round()
        assert consumer.waits <= waits + 1, "a round waits once at most, before its first record"
        assert consumer.waited_s == 0, "a round waits for its first record only until it arrives"
        assert sum(len(m.chunk) for m in news) <= max(arrive, 1) + 1 or consumer.arrived >= consumer.total
        for m in news:
            got[m.unit.partition] += [r.offset() for r in m.chunk]
            m.result.source_until, m.chunk = m.position, []
    assert got == {p: [r.offset() for r in rs] for p, rs in records.items()}


def test_a_follow_round_gathers_what_comes_until_the_round_interval_has_passed_since_the_last_cut():
    records = {p: [record(p, o) for o in range(300)] for p in range(3)}
    consumer = TricklingConsumer(records, arrive=5)
    reader = RoundReader(consumer, follow_members({p: 0 for p in records}), 1 << 20, 1000, 1048588, 4e9)
    first = reader.read_round()
    assert max(consumer.timeouts, default=0) == 0, "no round was cut before the first: it gathers nothing"
    for m in first:
        m.result.source_until, m.chunk = m.position, []
    consumer.timeouts, consumer.waited_s = [], 0.0
    second = reader.read_round()
    gathered = [t for t in consumer.timeouts if t > 0]
    assert len(gathered) == 1 and gathered[0] <= group_reading.FOLLOW_ROUND_S
    assert consumer.waited_s <= group_reading.FOLLOW_ROUND_S, "a round never waits longer than its interval"
    assert sum(len(m.chunk) for m in second) == 10, "the first record's arrival and the gathering's"


def test_a_follow_round_past_its_deadline_returns_nothing_without_waiting():
    consumer = TricklingConsumer({0: [record(0, 0)]}, arrive=1)
    reader = RoundReader(consumer, follow_members({0: 0}), 1 << 20, 1000, 1048588, follow_until=1.0)
    assert reader.read_round() == []
    assert consumer.waits == 0, "past its deadline a task does not wait for records"


def test_a_round_writes_to_round_partitions_at_most(monkeypatch):
    monkeypatch.setattr(group_reading, "ROUND_PARTITIONS", 4)
    ranges = {p: (0, 3) for p in range(10)}
    records = {p: [record(p, o) for o in range(3)] for p in ranges}
    reader = RoundReader(
        InterleavingConsumer(records, {p: 3 for p in ranges}, 1), members(ranges, 1000), 1 << 20, 1000, 1048588
    )
    rounds = drain(reader)
    assert all(len([p for p, v in r.items() if v]) <= 4 for r in rounds)
    assert {p: [o for r in rounds for o in r.get(p, [])] for p in ranges} == {p: [0, 1, 2] for p in ranges}


def test_a_partition_whose_last_record_waits_for_a_later_round_is_paused_at_once(monkeypatch):
    # One record a partition, four partitions a round: the first consume hands out every record,
    # and the six partitions left for later rounds have nothing more to fetch.
    monkeypatch.setattr(group_reading, "ROUND_PARTITIONS", 4)
    ranges = {p: (0, 1) for p in range(10)}
    consumer = InterleavingConsumer({p: [record(p, 0)] for p in ranges}, {p: 1 for p in ranges}, 2)
    reader = RoundReader(consumer, members(ranges, 1000), 1 << 20, 1000, 1048588)
    reader.record_bytes = SIZE  # the first batch is no longer a probe of the records' size
    first = reader.read_round()
    assert len(first) == 4 and len(reader.pending) == 6
    assert consumer.paused == set(ranges), "those in the round and those waiting in `pending` alike"
    assert not any(m.ended for m in reader.members if m not in first), "their records are still to be copied"
    copied = {m.unit.partition: [r.offset() for r in m.chunk] for m in first}
    for m in first:  # landed
        m.result.source_until, m.chunk, m.held = m.position, [], 0
    for later in drain(reader):
        copied.update(later)
    assert copied == {p: [0] for p in ranges}


def test_only_a_wide_but_not_widest_follow_task_waits_on_the_broker_for_its_fetches():
    wide = {p: (0, 10) for p in range(task_clients.WIDE_FOLLOW_PARTITIONS + 1)}
    narrow = {p: (0, 10) for p in range(task_clients.WIDE_FOLLOW_PARTITIONS)}
    settings = task_clients.follow_fetch_settings(following(members(wide, 100)), {})
    assert settings == {"fetch.wait.max.ms": 32, "fetch.min.bytes": 1 << 20}
    # A bounded copy, and a task of few partitions, fetch with librdkafka's defaults.
    assert task_clients.follow_fetch_settings(members(wide, 100), {}) == {}
    assert task_clients.follow_fetch_settings(following(members(narrow, 100)), {}) == {}
    # Wider, it waits longer: the broker reads about as many partitions a second for it.
    for partitions, wait_ms in ((500, 250), (1_000, 500)):
        wider = following(members({p: (0, 10) for p in range(partitions)}, 100))
        assert task_clients.follow_fetch_settings(wider, {})["fetch.wait.max.ms"] == wait_ms
    # Wider still, re-checking a waiting fetch's partitions for every record costs the broker more than it saves.
    widest = following(members({p: (0, 10) for p in range(task_clients.WAITING_FETCH_PARTITIONS + 1)}, 100))
    assert task_clients.follow_fetch_settings(widest, {}) == {}
    # What the source cluster's own properties set stays theirs.
    chosen = task_clients.follow_fetch_settings(following(members(wide, 100)), {"fetch.wait.max.ms": "5"})
    assert chosen == {"fetch.min.bytes": 1 << 20}
