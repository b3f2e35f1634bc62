"""When a follow-mode task packs and stops before its hand-over (`hand_over.FollowTimes`)."""

from __future__ import annotations

import time

import pytest

from mirror_pipeline.replication.hand_over import (
    ANNOUNCEMENTS_KEPT,
    MIN_STOP_BEFORE_HAND_OVER_S,
    PACK_BEFORE_HAND_OVER_S,
    STOP_BEFORE_HAND_OVER_S,
    FollowTimes,
)

HAND_OVER = 1_000_000.0


def times(stop_before: float = STOP_BEFORE_HAND_OVER_S) -> FollowTimes:
    return FollowTimes(HAND_OVER - stop_before, HAND_OVER, 120.0)


def test_quick_announcements_move_the_stop_close_to_the_hand_over():
    t = times()
    for seconds in (0.004, 0.006, 0.005):
        t.note_announcement(seconds)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - MIN_STOP_BEFORE_HAND_OVER_S)


def test_the_stop_leaves_twice_the_slowest_announcement_and_10_ms():
    t = times()
    for seconds in (0.005, 0.04, 0.01):
        t.note_announcement(seconds)
    t.settle_stop()
    assert t.follow_until == pytest.approx(HAND_OVER - 0.09)


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


def test_a_task_ready_late_keeps_its_later_stop():
    late = times(stop_before=-5.0)  # `from_now` let it follow past the hand-over
    late.note_announcement(0.001)
    late.settle_stop()
    assert late.follow_until == HAND_OVER + 5.0


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
