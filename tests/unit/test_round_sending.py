"""A round's records sent and landed (`replication.round_sending`).

A producer that records what it was given and says how many records it could
not deliver stands in for the task's producers (the real ones are exercised
in the group-copy integration and fault tests); here, the bookkeeping: which
parts are sent, which stop, and what a landed part moves on to.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, Message

from mirror_pipeline.replication.chunks import ProducerSet, chunk_runs
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.round_sending import RoundSending
from mirror_pipeline.replication.throttling import ThrottleWatch
from tests.unit.test_reservations import member, reserve


class RecordingProducer:
    def __init__(self, undelivered: int = 0) -> None:
        self.undelivered = undelivered
        self.sent: list[tuple[str, int, bytes]] = []
        self.flushed_with: list[float] = []

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, *_: Any) -> None:
        self.sent.append((topic, partition, value))

    def flush(self, timeout: float) -> int:
        self.flushed_with.append(timeout)
        return self.undelivered

    def purge(self, **_: Any) -> None:
        pass

    def poll(self, _timeout: float) -> int:
        return 0


class Stops:
    def __init__(self) -> None:
        self.stopped: list[tuple[Member, str, str]] = []

    def stop(self, part: Member, kind: str, message: str) -> None:
        self.stopped.append((part, kind, message))
        part.fail(kind, message)


def with_round(part: Member, records: int) -> Member:
    part.chunk = [
        Message(
            topic="src",
            partition=0,
            offset=part.position + i,
            value=b"v%d" % i,
            timestamp=(TIMESTAMP_CREATE_TIME, 1_000 + i),
        )
        for i in range(records)
    ]
    part.position += records
    return part


def sending(out: RecordingProducer, stops: Stops, land_by: float) -> RoundSending:
    return RoundSending(ProducerSet(lambda: out, 1), stops, 8000, land_by)  # type: ignore[arg-type]


def test_a_part_is_sent_and_lands_where_its_records_end():
    out, stops = RecordingProducer(), Stops()
    part = with_round(member(dest_end=50, position=1050), 3)
    round_ = sending(out, stops, land_by=time.monotonic() + 8)
    round_.send([part])
    round_.land({id(part): chunk_runs(part.chunk)}, {}, ThrottleWatch())
    assert [(t, p) for t, p, _ in out.sent] == [("m", 0)] * 3
    assert (part.dest_end, part.result.records, part.result.source_until) == (53, 3, 1053)
    assert not stops.stopped


def test_a_part_past_its_reservations_deadline_sends_nothing_and_stops_while_the_others_go():
    out, stops = RecordingProducer(), Stops()
    late, on_time = with_round(member(), 2), with_round(member(), 2)
    reserve(late, chunk_runs(late.chunk), now=time.monotonic() - 9)  # its deadline (8 s on) has passed
    round_ = sending(out, stops, land_by=time.monotonic() + 8)
    round_.send([late, on_time])
    assert len(out.sent) == 2 and round_.produced == [on_time]
    assert [(p, kind) for p, kind, _ in stops.stopped] == [(late, "MirrorError")]
    assert "not sent within 8000 ms" in stops.stopped[0][2]


def test_the_round_waits_until_the_earliest_deadline_of_what_it_sent():
    out, stops = RecordingProducer(), Stops()
    now = time.monotonic()
    reserved, plain = with_round(member(), 1), with_round(member(), 1)
    reserve(reserved, chunk_runs(reserved.chunk), now=now - 6)  # its records must be sent 2 s from now
    round_ = sending(out, stops, land_by=now + 8)
    round_.send([reserved])
    round_.send([plain])
    assert round_.flush_by == reserved.reservation_deadline < now + 8
    round_.land({id(p): chunk_runs(p.chunk) for p in (reserved, plain)}, {}, ThrottleWatch())
    assert out.flushed_with and out.flushed_with[0] <= 2


def test_records_not_acknowledged_in_time_stop_every_part_of_the_round_and_a_failed_one_its_own():
    out, stops = RecordingProducer(undelivered=1), Stops()
    first, second = with_round(member(), 1), with_round(member(), 1)
    round_ = sending(out, stops, land_by=time.monotonic() + 8)
    round_.send([first, second])
    round_.land({id(p): chunk_runs(p.chunk) for p in (first, second)}, {}, ThrottleWatch())
    assert [p for p, _, _ in stops.stopped] == [first, second]
    assert all("1 records not acknowledged within 8000 ms" in m for _, _, m in stops.stopped)

    out, stops = RecordingProducer(), Stops()
    failing, fine = with_round(member(), 1), with_round(member(), 1)
    round_ = sending(out, stops, land_by=time.monotonic() + 8)
    round_.send([failing, fine])
    failures = {("m", 0): KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)}
    fine.unit = replace(fine.unit, partition=1)
    round_.land({id(p): chunk_runs(p.chunk) for p in (failing, fine)}, failures, ThrottleWatch())
    assert [p for p, _, _ in stops.stopped] == [failing]
    assert fine.result.records == 1
