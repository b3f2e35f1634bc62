"""Where a follow-mode unit that continues the epoch before's copy starts (`group_checks._continue_from_map`).

The task before closes its reservations before the hand-over. One it left open (the task was
killed, or fenced before it could close it) may still have records in flight that land after
the check: the unit writes nothing, and the next plan repairs the partition.
"""

from __future__ import annotations

from dataclasses import replace

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_checks import _continue_from_map
from mirror_pipeline.replication.group_reading import Member

TP = ("mirror", 0)


def part(dest_start: int = 100, source_from: int = 200, continues_open: bool = False) -> Member:
    unit = WorkUnit(
        "l", "src", "mirror", 0, source_from, 2**63 - 1, dest_start, 0, 1 << 20, 100, 1 << 20, 3.0, writer_slots=SLOTS
    )
    unit = replace(unit, continues=True, continues_open=continues_open)
    return Member(
        unit, UnitResult("mirror", 0, source_from, source_from, dest_start, dest_start), source_from, dest_start
    )


def reservation(dest_start: int, source_start: int, room: int = 50, open_: bool = True) -> Segment:
    seg = Segment(dest_start, ((source_start, room),), source_start + room, open=True)
    return seg if open_ else seg.truncated(dest_start + 10)


def test_a_reservation_closed_by_the_task_before_is_where_the_unit_starts():
    p = part()
    closed = reservation(100, 200, open_=False)
    _continue_from_map([p], {TP: [closed]})
    assert not p.failed
    assert (p.dest_end, p.position) == (110, 210)
    assert p.announced == [closed]


def test_a_reservation_left_open_since_the_plan_fails_the_unit():
    p = part()
    _continue_from_map([p], {TP: [reservation(100, 200, open_=False), reservation(110, 210)]})
    assert p.failed and p.result.error_kind == "ConcurrentWriter"
    assert "left its reservation at mirror offset 110 open" in p.result.error


def test_a_reservation_open_at_the_plan_and_never_closed_fails_the_unit():
    p = part(continues_open=True)
    _continue_from_map([p], {})
    assert p.failed and "reservation at mirror offset 100 open" in p.result.error


def test_a_unit_planned_after_closed_segments_with_nothing_new_goes_on_from_its_plan():
    p = part()
    _continue_from_map([p], {})
    assert not p.failed and (p.dest_end, p.position) == (100, 200)
