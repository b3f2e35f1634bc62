"""Follow mode's reservations without Kafka: which rounds go under one, how one is closed, and what
readers of the offset map make of an open one (`replication.reservations`, `model.offset_map`)."""

from __future__ import annotations

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.model.offset_map import Segment, resolve
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_reading import Member

CHUNK = 100


def member(dest_end: int = 50, position: int = 1050) -> Member:
    unit = WorkUnit(
        "l", "src", "m", 0, position, 2**62, dest_end, 0, 2**40, CHUNK, 1 << 20, follow_s=30.0, writer_slots=SLOTS
    )
    return Member(unit, UnitResult("m", 0, position, position, dest_end, dest_end), position, dest_end)


def reserve(part: Member, runs: tuple[tuple[int, int], ...], now: float = 0.0) -> Segment:
    new = reservations.announcement(part, runs, 1.0, reserving=True)
    reservations.announced(part, None, new, now, 1.0, now + 8.0)
    return new


def landed(part: Member, count: int) -> None:
    part.dest_end += count
    part.position += count


def test_a_reservation_holds_a_chunk_of_consecutive_offsets_from_the_mirror_end():
    part = member()
    new = reserve(part, ((1050, 10),))
    assert new == Segment(50, ((1050, CHUNK),), 1050 + CHUNK, written_at=1.0, open=True)
    assert (part.reserved_until, part.reservation_deadline) == (1.0, 8.0)
    assert new.sure_end() == (50, 1050)  # how much landed is the log end's to tell


def test_rounds_that_continue_it_go_under_it_until_full_or_its_window_ends():
    part = member()
    reserve(part, ((1050, 10),))
    landed(part, 10)
    assert reservations.fits(part, ((1060, 90),), now=0.5)
    assert not reservations.fits(part, ((1060, 91),), now=0.5)  # past its room
    assert not reservations.fits(part, ((1061, 5),), now=0.5)  # a gap in the source offsets
    assert not reservations.fits(part, ((1060, 2), (1063, 2)), now=0.5)
    assert not reservations.fits(part, ((1060, 5),), now=1.0)  # its window is over


def test_records_with_a_gap_are_announced_exactly_and_close_nothing_new():
    part = member()
    exact = reservations.announcement(part, ((1050, 2), (1053, 3)), 1.0, reserving=True)
    assert not exact.open and exact.runs == ((1050, 2), (1053, 3))
    assert not reservations.announcement(part, ((1050, 5),), 1.0, reserving=False).open


def test_closing_cuts_the_reservation_where_its_records_ended():
    part = member()
    opened = reserve(part, ((1050, 10),))
    landed(part, 30)
    closed = reservations.closing(part)
    assert closed == Segment(50, ((1050, 30),), 1080, written_at=1.0)
    reservations.closed(part, closed)
    assert part.reservation is None and part.announced == [closed]
    assert opened.dest_start == closed.dest_start  # the same key: the closed one replaces it


def test_a_fenced_writer_and_a_stalled_task_send_nothing_after_the_deadline():
    part = member()
    reserve(part, ((1050, 10),), now=100.0)
    assert reservations.deadline(part, round_deadline=200.0) == 108.0
    part.reserved_until = 0.0  # taken back after a fence: the next round announces anew
    landed(part, 10)
    assert not reservations.fits(part, ((1060, 1),), now=100.1)
    assert reservations.due([part], now=100.1) == [part]


def test_only_parts_with_an_open_reservation_are_due_and_the_earliest_decides_the_next_check():
    early, late, none = member(), member(), member()
    reserve(early, ((1050, 1),), now=1.0)
    reserve(late, ((1050, 1),), now=5.0)
    assert reservations.next_due([early, late, none]) == 2.0
    assert reservations.due([early, late, none], now=3.0) == [early]


def test_a_round_closes_the_due_reservations_of_partitions_it_has_no_records_for():
    quiet, busy, open_still = member(), member(), member()
    for part in (quiet, busy):
        reserve(part, ((1050, 1),), now=1.0)
    reserve(open_still, ((1050, 1),), now=5.0)
    # `busy` has records in the round: its own announcement closes its reservation.
    assert reservations.due_beside([quiet, busy, open_still], [busy], now=3.0) == [quiet]
    assert reservations.due_beside([quiet, busy, open_still], [quiet, busy], now=3.0) == []


def test_the_window_leaves_half_the_delivery_timeout_to_land():
    assert reservations.window_s(8000) == reservations.RESERVATION_S
    assert reservations.window_s(1000) == 0.5


def test_an_open_segment_round_trips_and_is_closed_by_a_repair_cut():
    seg = Segment(50, ((1050, CHUNK),), 1150, written_at=2.5, open=True)
    assert Segment.from_json(seg.to_json()) == seg
    assert not Segment.from_json(Segment(0, ((0, 1),), 1).to_json()).open
    assert seg.truncated(70) == Segment(50, ((1050, 20),), 1070, written_at=2.5)
    assert seg.truncated(50 + CHUNK) == seg.closed() and not seg.closed().open
    assert seg.truncated(50) is None


def test_readers_that_resolve_at_the_log_end_see_its_landed_part_as_in_doubt():
    before = Segment(0, ((1000, 50),), 1050)
    opened = Segment(50, ((1050, CHUNK),), 1150, open=True)
    res = resolve([before, opened], mirror_log_end=70)
    assert res.offset_map.dest_end == 50 and res.in_doubt == (opened,)
    assert res.foreign_records == 0
