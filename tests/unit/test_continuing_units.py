"""Where a follow-mode unit that continues the epoch before's copy starts (`group_checks._continue_from_map`).

The task before closes its reservations before the hand-over. One it left open (the task was
killed, or fenced before it could close it) may still have records in flight that land after
the check: the unit holds the partition until the task has settled that reservation (`left_open`).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import group_checks, left_open
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_checks import _continue_from_map
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.hand_over import HAND_OVER_SKEW_S

TP = ("mirror", 0)
DELIVERY_TIMEOUT_MS = 8000


def part(dest_start: int = 100, source_from: int = 200, continues_open: Segment | None = None) -> Member:
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
    _continue_from_map([p], {TP: [closed]}, DELIVERY_TIMEOUT_MS)
    assert not p.failed
    assert (p.dest_end, p.position) == (110, 210)
    assert p.announced == [closed]


def test_a_reservation_left_open_since_the_plan_holds_the_unit_at_its_start():
    p = part()
    closed, left = reservation(100, 200, open_=False), reservation(110, 210)
    _continue_from_map([p], {TP: [closed, left]}, DELIVERY_TIMEOUT_MS)
    assert not p.failed and p.ended, "held: not read until settled"
    assert p.left_open == left
    assert (p.dest_end, p.position) == (110, 210)
    assert (p.result.source_from, p.result.dest_from) == (210, 110)
    assert p.announced == [closed], "an open reservation is never merged with the closed segments"


def test_a_reservation_open_at_the_plan_and_never_closed_holds_the_unit():
    left = reservation(100, 200)
    p = part(continues_open=left)
    _continue_from_map([p], {}, DELIVERY_TIMEOUT_MS)
    assert not p.failed and p.left_open == left and (p.dest_end, p.position) == (100, 200)


def test_a_unit_planned_after_closed_segments_with_nothing_new_goes_on_from_its_plan():
    p = part()
    _continue_from_map([p], {}, DELIVERY_TIMEOUT_MS)
    assert not p.failed and (p.dest_end, p.position) == (100, 200)


def test_a_held_unit_is_settled_once_none_of_the_reservations_records_can_land():
    """Records under a reservation are sent before its round's deadline (the delivery timeout
    after it was written) and land within as long again; another host's clock may be ahead."""
    p = part()
    left_open.hold(p, replace(reservation(100, 200), written_at=1000.0), DELIVERY_TIMEOUT_MS)
    settle_at = 1000.0 + 2 * DELIVERY_TIMEOUT_MS / 1000 + HAND_OVER_SKEW_S
    assert left_open.next_settling([p]) == settle_at
    assert left_open.due([p], settle_at - 0.1) == []
    assert left_open.due([p], settle_at) == [p]


def test_a_held_unit_whose_slot_was_fenced_is_let_go_and_one_held_to_the_end_is_left_to_the_next_epoch():
    fenced, to_the_end = part(), part()
    for p in (fenced, to_the_end):
        left_open.hold(p, reservation(100, 200), DELIVERY_TIMEOUT_MS)
    left_open.release([fenced])
    assert left_open.held([fenced, to_the_end]) == [to_the_end]
    left_open.leave([fenced, to_the_end])
    assert (fenced.result.left_to_next_epoch, to_the_end.result.left_to_next_epoch) == (False, True)


def test_a_long_wait_for_the_epoch_befores_last_round_to_land_is_logged(monkeypatch, caplog):
    landing = part(dest_start=100)
    landing.dest_end = 110  # the newest segment ends there; the mirror's log end reaches it at the third look
    looks = iter([100, 105, 110])
    monkeypatch.setattr(group_checks, "_log_ends", lambda ctx, admin, parts: {TP: next(looks)})
    monkeypatch.setattr(group_checks, "LANDED_POLL_S", 0.001)
    ctx = SimpleNamespace(writer_delivery_timeout_ms=DELIVERY_TIMEOUT_MS)

    monkeypatch.setattr(group_checks, "SLOW_LANDING_S", 10.0)
    assert group_checks._landed_ends(ctx, None, [landing]) == {TP: 110}
    assert not caplog.records

    looks = iter([100, 110])
    monkeypatch.setattr(group_checks, "SLOW_LANDING_S", 0.0)
    assert group_checks._landed_ends(ctx, None, [landing]) == {TP: 110}
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert caplog.records[0].getMessage().endswith("for the epoch before's last round to land on 1 partition(s)")
