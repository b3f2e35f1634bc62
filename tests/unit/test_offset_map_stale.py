"""Segments a reader keeps after their writers replaced them (`offset_map.without_stale`).

The shapes are those a follow-mode task read on a map cleaned as eagerly as
Kafka allows (tombstones dropped 100 ms after they were written): the task
before had merged its epoch into one segment and deleted the parts, but the
reader had already read the open reservation it replaced, and the deletion
was gone when it read on. Merged with the rest, that reservation mapped the
mirror's records to the wrong source offsets.
"""

from __future__ import annotations

from mirror_pipeline.link.state_store import live_segments
from mirror_pipeline.model.offset_map import Segment, consolidate, pack, resolve, without_stale

ROOM = 20_000  # a reservation's room: a chunk of source offsets


def closed(dest_start: int, count: int) -> Segment:
    return Segment(dest_start, ((dest_start, count),), dest_start + count)


def reservation(dest_start: int) -> Segment:
    return Segment(dest_start, ((dest_start, ROOM),), dest_start + ROOM, open=True)


MERGED = closed(104, 229)  # the epoch before, packed: mirror 104..333
STALE_RESERVATION = reservation(252)  # one of its parts, read before the merge deleted it
AFTER = [closed(333, 32), closed(365, 2), closed(367, 2)]


def test_an_open_reservation_with_a_segment_after_it_is_dropped():
    assert without_stale([MERGED, STALE_RESERVATION, *AFTER]) == [MERGED, *AFTER]


def test_an_open_reservation_a_later_segment_starts_inside_is_cut_there():
    # Its closing and the merge after it were both missed; the next segment says where it ended.
    assert without_stale([closed(104, 148), reservation(252), *AFTER]) == [closed(104, 148), closed(252, 81), *AFTER]


def test_a_reservation_that_landed_whole_before_the_next_segment_stays():
    # Filled to its room, it was never closed: a plan took it as landed and copied on from its end.
    whole = Segment(14742, ((14742, 2000),), 16742, open=True)
    after = closed(16742, 2000)
    assert without_stale([whole, after]) == [whole, after]
    res = resolve([closed(0, 14742), whole, after], mirror_log_end=18742)
    assert res.offset_map.dest_end == 18742 and res.offset_map.dest_of(15000) == 15000 and res.in_doubt == ()


def test_a_segment_a_merge_covers_is_dropped():
    assert without_stale([closed(252, 80), MERGED, *AFTER]) == [MERGED, *AFTER]


def test_the_last_open_reservation_and_an_empty_segment_at_the_end_stay():
    empty = Segment(367, (), 372)  # a chunk that read only markers: it moves the source on
    assert without_stale([MERGED, closed(333, 34), empty]) == [MERGED, closed(333, 34), empty]
    current = reservation(367)
    assert without_stale([current, MERGED, closed(333, 34)]) == [MERGED, closed(333, 34), current]


def test_a_task_reading_the_map_from_its_plan_gets_only_current_segments():
    writes = [(("orders", 2), s.dest_start, s.to_json()) for s in [STALE_RESERVATION, MERGED, *AFTER]]
    assert live_segments(writes) == {("orders", 2): [MERGED, *AFTER]}


def test_packing_never_merges_segments_that_do_not_follow_each_other():
    first, later = closed(0, 104), closed(1420, 40)  # a gap: mirror 104..1420 is another segment's
    assert consolidate([first, later]) == [first, later]
    packed, stale = pack([MERGED, STALE_RESERVATION, *AFTER])
    assert packed[0] == MERGED and STALE_RESERVATION in packed, "kept as it is, not merged in or closed"
    assert packed[-1] == Segment(333, ((333, 36),), 369) and stale == [365, 367]


def test_the_planner_ignores_a_stale_reservation():
    res = resolve([MERGED, STALE_RESERVATION, *AFTER], mirror_log_end=369)
    assert res.in_doubt == () and res.foreign_records == 0
    assert res.offset_map.dest_end == 369 and res.offset_map.next_source_offset == 369
