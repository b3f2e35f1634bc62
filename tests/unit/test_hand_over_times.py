"""When a follow-mode task fences, packs and stops around its hand-over (`hand_over`)."""

from __future__ import annotations

import time

import pytest

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as SLOTS
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.hand_over import (
    ANNOUNCEMENTS_KEPT,
    HAND_OVER_SKEW_S,
    MIN_STOP_BEFORE_HAND_OVER_S,
    PACK_BEFORE_HAND_OVER_S,
    STOP_BEFORE_HAND_OVER_S,
    FollowTimes,
    late_margin_s,
    note_take_over,
    wait_for_start,
)

HAND_OVER = 1_000_000.0


def unit(partition: int = 0, starts_at: float = 0.0, follow_s: float = 0.0) -> WorkUnit:
    return WorkUnit(
        "l",
        "src",
        "mirror",
        partition,
        0,
        2**63 - 1,
        0,
        0,
        1 << 20,
        100,
        1 << 20,
        follow_s,
        starts_at,
        writer_slots=SLOTS,
    )


def member(u: WorkUnit) -> Member:
    return Member(u, UnitResult(u.mirror_topic, u.partition, 0, 0, 0, 0), 0, 0)


def times(stop_before: float = STOP_BEFORE_HAND_OVER_S) -> FollowTimes:
    return FollowTimes(HAND_OVER - stop_before, HAND_OVER, 120.0)


def test_quick_announcements_move_the_stop_close_to_the_hand_over():
    t = times()
    for seconds in (0.004, 0.006, 0.005):
        t.note_announcement(seconds)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - MIN_STOP_BEFORE_HAND_OVER_S)


def test_the_stop_leaves_twice_the_median_announcement_and_10_ms():
    t = times()
    for seconds in (0.03, 0.04, 0.01):
        t.note_announcement(seconds)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - 0.07)


def test_one_slow_announcement_does_not_widen_every_hand_over():
    # The next task waits for a last transaction slower than the margin (`await_quiet_map`).
    t = times()
    for seconds in (0.005, 0.3, 0.006, 0.004, 0.005):
        t.note_announcement(seconds)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - MIN_STOP_BEFORE_HAND_OVER_S)


def test_slow_or_unknown_announcements_keep_the_widest_margin():
    unknown = times()
    unknown.settle_stop()
    assert unknown.follow_until == pytest.approx(HAND_OVER - STOP_BEFORE_HAND_OVER_S)
    slow = times()
    slow.note_announcement(0.3)
    slow.settle_stop()
    assert slow.follow_until == pytest.approx(HAND_OVER - STOP_BEFORE_HAND_OVER_S)


def test_only_the_latest_announcements_count():
    t = times()
    t.note_announcement(0.3)
    for _ in range(ANNOUNCEMENTS_KEPT):
        t.note_announcement(0.005)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - MIN_STOP_BEFORE_HAND_OVER_S)


def test_a_task_ready_late_still_stops_before_its_hand_over():
    now = time.time()
    late = FollowTimes.from_now([unit(starts_at=now - 5.0, follow_s=6.0)])
    assert late.hand_over_at == pytest.approx(now + 1.0)
    assert late.follow_until == pytest.approx(now + 1.0 - STOP_BEFORE_HAND_OVER_S)


@pytest.mark.parametrize(
    ("ready_after_start_s", "fences"),
    [(-0.05, True), (1.0, True), (6.0 - late_margin_s(6.0) - 0.2, True), (6.0 - late_margin_s(6.0) + 0.2, False)],
)
def test_a_task_fences_unless_ready_too_close_to_its_hand_over(ready_after_start_s, fences):
    parts = [member(unit(starts_at=time.time() - ready_after_start_s, follow_s=6.0)), member(unit(partition=1))]
    before = time.time()
    assert wait_for_start(parts) is fences
    # A task that does not fence says so in each of its partitions' results, for the epoch's line.
    assert [p.result.left_to_next_epoch for p in parts] == [not fences] * 2
    # When it was ready, before any wait for its start: the driver paces the epochs from it.
    assert [p.result.ready_at for p in parts] == [pytest.approx(before, abs=0.02)] * 2


def test_a_task_that_took_over_notes_when_it_had_fenced_and_was_ready():
    hand_over_at = time.time() - 1.0
    parts = [member(unit(starts_at=hand_over_at, follow_s=6.0)), member(unit(partition=1, starts_at=hand_over_at))]
    note_take_over(parts, {"fenced": hand_over_at + 0.0604, "ready": hand_over_at + 0.1204})
    assert [(p.result.fenced_after_hand_over_ms, p.result.ready_after_hand_over_ms) for p in parts] == [(60, 120)] * 2


def test_a_slow_take_over_is_logged_with_the_step_that_held_it_up(caplog):
    hand_over_at = time.time() - 2.0
    parts = [member(unit(starts_at=hand_over_at, follow_s=6.0)), member(unit(partition=1, starts_at=hand_over_at))]
    quick = {"fenced": hand_over_at + 0.04, "ready": hand_over_at + 0.2}
    note_take_over(parts, quick)
    assert not caplog.records
    slow = {"map quiet": hand_over_at + 0.01, "fenced": hand_over_at + 0.037}
    note_take_over(parts, {**slow, "checked": hand_over_at + 1.05, "ready": hand_over_at + 1.083})
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert caplog.records[0].getMessage() == (
        "a copy task took over 2 partition(s) (mirror[0], mirror[1]) 1083 ms after the hand-over time; each step "
        "ended at (ms): map quiet 10, fenced 37, checked 1050, ready 1083"
    )


def test_a_cycle_task_always_fences():
    part = member(unit())
    assert wait_for_start([part]) is True
    assert part.result.left_to_next_epoch is False
    assert part.result.ready_at == 0.0


def test_the_late_margin_is_the_clock_skew_or_a_quarter_of_a_short_epoch():
    assert late_margin_s(120.0) == HAND_OVER_SKEW_S
    assert late_margin_s(3.0) == pytest.approx(0.75)


def test_a_task_with_no_hand_over_keeps_its_stop():
    alone = FollowTimes(HAND_OVER, 0.0, 120.0)
    alone.note_announcement(0.001)
    alone.settle_stop()
    assert alone.follow_until == HAND_OVER


def test_packing_is_due_once_shortly_before_the_hand_over():
    now = time.time()
    t = FollowTimes(now + 10, now + PACK_BEFORE_HAND_OVER_S + 0.5, 120.0)
    assert not t.pack_due()
    t.hand_over_at = now + PACK_BEFORE_HAND_OVER_S - 0.01
    assert t.pack_due() and t.packed
    assert not t.pack_due()
