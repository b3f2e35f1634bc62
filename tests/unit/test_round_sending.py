"""A round's records sent and landed (`replication.round_sending`).

A producer that records what it was given and says how many records it could
not deliver stands in for the task's producers (the real ones are exercised
in the group-copy integration and fault tests); here, the bookkeeping: which
parts are sent, which do not land (and whether their records are in doubt),
and what a landed part moves on to.
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


def sending(out: RecordingProducer, land_by: float) -> RoundSending:
    return RoundSending(ProducerSet(lambda: out, 1), 8000, land_by)  # type: ignore[arg-type]


def test_a_part_is_sent_and_lands_where_its_records_end():
    out = RecordingProducer()
    part = with_round(member(dest_end=50, position=1050), 3)
    round_ = sending(out, land_by=time.monotonic() + 8)
    round_.send([part])
    assert round_.land({id(part): chunk_runs(part.chunk)}, {}, ThrottleWatch()) == []
    assert [(t, p) for t, p, _ in out.sent] == [("m", 0)] * 3
    assert (part.dest_end, part.result.records, part.result.source_until) == (53, 3, 1053)


def test_a_part_past_its_reservations_deadline_sends_nothing_and_is_missed_while_the_others_go():
    out = RecordingProducer()
    late, on_time = with_round(member(), 2), with_round(member(), 2)
    reserve(late, chunk_runs(late.chunk), now=time.monotonic() - 9)  # its deadline (8 s on) has passed
    round_ = sending(out, land_by=time.monotonic() + 8)
    round_.send([late, on_time])
    assert len(out.sent) == 2 and round_.produced == [on_time]
    missed = round_.land({id(p): chunk_runs(p.chunk) for p in (late, on_time)}, {}, ThrottleWatch())
    # In doubt: the round before it, under the same reservation, may not have landed yet.
    assert [(p, in_doubt) for p, _, in_doubt in missed] == [(late, True)]
    assert "not sent within 8000 ms" in missed[0][1]
    assert on_time.result.records == 2


def test_the_round_waits_until_the_earliest_deadline_of_what_it_sent():
    out = RecordingProducer()
    now = time.monotonic()
    reserved, plain = with_round(member(), 1), with_round(member(), 1)
    reserve(reserved, chunk_runs(reserved.chunk), now=now - 6)  # its records must be sent 2 s from now
    round_ = sending(out, land_by=now + 8)
    round_.send([reserved])
    round_.send([plain])
    assert round_.flush_by == reserved.reservation_deadline < now + 8
    round_.land({id(p): chunk_runs(p.chunk) for p in (reserved, plain)}, {}, ThrottleWatch())
    assert out.flushed_with and out.flushed_with[0] <= 2


def test_records_not_acknowledged_in_time_miss_every_part_of_the_round_and_a_failed_one_its_own():
    out = RecordingProducer(undelivered=1)
    first, second = with_round(member(), 1), with_round(member(), 1)
    round_ = sending(out, land_by=time.monotonic() + 8)
    round_.send([first, second])
    missed = round_.land({id(p): chunk_runs(p.chunk) for p in (first, second)}, {}, ThrottleWatch())
    assert [(p, in_doubt) for p, _, in_doubt in missed] == [(first, True), (second, True)]
    assert all("writing failed: 1 records not acknowledged within 8000 ms" in m for _, m, _ in missed)

    out = RecordingProducer()
    failing, timed_out, fine = (with_round(member(), 1) for _ in range(3))
    timed_out.unit, fine.unit = replace(timed_out.unit, partition=1), replace(fine.unit, partition=2)
    round_ = sending(out, land_by=time.monotonic() + 8)
    round_.send([failing, timed_out, fine])
    failures = {("m", 0): KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), ("m", 1): KafkaError(KafkaError._MSG_TIMED_OUT)}
    missed = round_.land({id(p): chunk_runs(p.chunk) for p in (failing, timed_out, fine)}, failures, ThrottleWatch())
    # Refused: it would be again. Timed out: it may have landed, and a later try may get through.
    assert [(p, in_doubt) for p, _, in_doubt in missed] == [(failing, False), (timed_out, True)]
    assert fine.result.records == 1
