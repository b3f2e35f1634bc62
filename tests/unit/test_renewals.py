"""Follow mode's reservations renewed while rounds go on (`replication.renewals`, `reservations.renewal_due`).

The transactions are the slot writers' (tested against Kafka in the follow-mode integration and
fault tests); here a writer that records what it was asked to write, and waits when told to,
stands in for one, to check the bookkeeping: what a renewal writes, that rounds may go on under
the old reservation until it is collected, and what the offset map says whichever of the two
reservations a crash leaves in it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from mirror_pipeline.model.errors import ConcurrentWriter
from mirror_pipeline.model.offset_map import Segment, resolve
from mirror_pipeline.replication import reservations, slot_announcing
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.renewals import Renewals
from tests.unit.test_reservations import CHUNK, landed, member, reserve

WINDOW = 1.0


class RecordingWriter:
    def __init__(self, fenced: bool = False) -> None:
        self.fenced, self.release = fenced, threading.Event()
        self.release.set()
        self.written: list[list[tuple[str, int, Segment]]] = []

    def write_segments(self, puts: Any) -> None:
        self.release.wait(10)
        if self.fenced:
            raise ConcurrentWriter("fenced")
        self.written.append(list(puts))


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


def test_a_reservation_is_renewed_in_the_last_tenth_of_its_window_once_records_landed_under_it():
    part = member()
    reserve(part, ((1050, 10),), now=0.0)
    assert not reservations.renewal_due(part, now=0.5, window=WINDOW)  # nothing landed under it yet
    landed(part, 10)
    assert not reservations.renewal_due(part, now=0.89, window=WINDOW)
    assert reservations.renewal_due(part, now=0.9, window=WINDOW)


def test_not_renewed_when_the_task_stops_reading_before_the_window_ends_or_one_is_in_flight(pool):
    part = member()
    reserve(part, ((1050, 10),), now=100.0)
    landed(part, 10)
    writer = RecordingWriter()
    renewals = Renewals(pool, {part.slot: writer}, WINDOW, 8000)
    now = 100.95  # `time.monotonic` of the round; the stop is given on `time.time`'s clock
    assert not renewals.due(part, now, follow_until=time.time() + 0.05)
    assert renewals.due(part, now, follow_until=time.time() + 5.0)
    renewals.start([part], {id(part): Segment(60, ((1060, CHUNK),), 1060 + CHUNK, open=True)}, now)
    assert not renewals.due(part, now, follow_until=time.time() + 5.0)
    renewals.end()


def test_rounds_go_on_under_the_old_reservation_until_the_renewal_is_collected(pool):
    part = member()
    old = reserve(part, ((1050, 10),), now=100.0)
    landed(part, 10)
    writer = RecordingWriter()
    writer.release.clear()
    renewals = Renewals(pool, {part.slot: writer}, WINDOW, 8000)
    new = reservations.announcement(part, ((1060, 5),), 2.0, reserving=True)
    renewals.start([part], {id(part): new}, 100.9)
    landed(part, 5)  # the renewing round, sent under the old reservation
    assert renewals.collect(False, lambda *_: None) is None  # still in flight
    assert reservations.fits(part, ((1065, 5),), now=100.95)  # the next round goes under the old one
    landed(part, 5)
    writer.release.set()
    fenced, _ = renewals.collect(True, lambda *_: None) or ([1], 0.0)
    assert fenced == []
    closed = Segment(50, ((1050, 10),), 1060, written_at=1.0)
    assert writer.written == [[("m", 0, closed), ("m", 0, new)]]  # cut where acknowledged records ended
    assert part.reservation == new and part.announced == [closed, new]
    assert (part.reserved_until, part.reservation_deadline) == (100.9 + WINDOW, 108.9)
    assert reservations.fits(part, ((1070, 5),), now=101.5)  # past the old window, under the new one
    assert old.dest_start != new.dest_start  # two keys of the offset map


def test_whichever_reservation_a_crash_leaves_the_landed_records_map_the_same():
    old = Segment(50, ((1050, CHUNK),), 1050 + CHUNK, open=True)
    closed, new = old.truncated(60), Segment(60, ((1060, CHUNK),), 1060 + CHUNK, open=True)
    assert closed is not None
    for log_end in (60, 63, 70):  # the renewing round's records and the next round's, landed or not
        before = resolve([old], mirror_log_end=log_end)
        after = resolve([closed, new], mirror_log_end=log_end)
        assert before.foreign_records == after.foreign_records == 0
        settled_before = [old.truncated(log_end)]
        settled_after = [closed, new.truncated(log_end)]  # None: nothing of the new one landed
        assert flat(settled_before) == flat(settled_after)  # source offset of every landed mirror offset


def flat(segments: list[Segment | None]) -> list[tuple[int, int]]:
    mapped = []
    for seg in segments:
        if seg is not None:
            dest = seg.dest_start + seg.padding
            for start, count in seg.runs:
                mapped += [(dest + i, start + i) for i in range(count)]
                dest += count
    return mapped


def test_a_renewal_whose_writer_was_fenced_leaves_the_old_reservation_and_names_the_slot(pool):
    part = member()
    old = reserve(part, ((1050, 10),), now=100.0)
    landed(part, 10)
    renewals = Renewals(pool, {part.slot: RecordingWriter(fenced=True)}, WINDOW, 8000)
    renewals.start([part], {id(part): reservations.announcement(part, ((1060, 5),), 2.0, reserving=True)}, 100.9)
    assert renewals.collect(True, lambda *_: None) == ([part.slot], 0.0)
    assert part.reservation == old and renewals.in_flight is None


def test_the_round_renews_its_own_parts_together_and_leaves_quiet_ones_to_be_closed(pool):
    in_round, also, quiet, fresh_one = member(), member(), member(), member()
    for part, at in ((in_round, 100.0), (also, 100.05), (quiet, 100.0), (fresh_one, 100.5)):
        reserve(part, ((1050, 10),), now=at)
        landed(part, 10)
    renewals = Renewals(pool, {}, WINDOW, 8000)
    news, later = [in_round, also, fresh_one], time.time() + 5.0
    sent = {id(p) for p in news}
    assert renewals.choose(news, sent, 100.85, later, next_due=101.0) == []  # too early
    # `quiet` has no records in the round: renewed, it would leave an empty reservation open.
    # `fresh_one` has most of its window left.
    assert renewals.choose(news, sent, 100.96, later, next_due=100.0) == [in_round, also]
    # A part of the round that did not go under its reservation is announced anew, not renewed.
    assert renewals.choose(news, {id(also)}, 100.96, later, next_due=100.0) == [also]


def test_a_failure_is_raised_once_every_slot_transaction_has_ended(pool):
    broken, slow = member(), member()
    # Another writer slot, after the broken one's: `finish` comes to the failure first.
    units = (replace(slow.unit, mirror_topic=f"m{i}") for i in range(100))
    slow.unit = next(u for u in units if Member(u, slow.result, 0, 0).slot > broken.slot)
    slow_writer = RecordingWriter()
    slow_writer.release.clear()

    class BrokenWriter(RecordingWriter):
        def write_segments(self, puts: Any) -> None:
            raise RuntimeError("broken")

    announcing = slot_announcing.start(
        pool, {broken.slot: BrokenWriter(), slow.slot: slow_writer}, [broken, slow], lambda p: None
    )
    threading.Timer(0.2, slow_writer.release.set).start()
    with pytest.raises(RuntimeError):
        slot_announcing.finish(announcing, lambda *_: None, lambda *_: None)
    assert announcing.done()  # the slow slot's transaction had ended: its writer may be closed
