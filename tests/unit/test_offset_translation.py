"""The pure offset-sync rules: where a group lands, what is committed (R-OFS-2/3/6/7)."""

from __future__ import annotations

import pytest

from mirror_pipeline.model.offset_map import Segment, resolve
from mirror_pipeline.sync.offset_translation import (
    CLAMPED,
    COMMITTED,
    KEPT_AHEAD,
    REALIGNED,
    UNCHANGED,
    MirrorPartition,
    behind,
    plan_commit,
    translate,
    translate_by_timestamp,
    translate_exact,
)


def partition(segments, log_end, log_start=0) -> MirrorPartition:
    return MirrorPartition("m", "s", 0, resolve(segments, log_end).offset_map, log_start, log_end)


def gap_free(n: int) -> MirrorPartition:
    return partition([Segment(0, ((0, n),), n)], n)


# Source 0..9 kept, 10..12 aborted + marker, 13..19 kept, 20 marker; then 21..24 compacted away, 25..29 kept.
GAPPED = [Segment(0, ((0, 10), (13, 7)), 21), Segment(17, ((25, 5),), 30)]


@pytest.mark.parametrize("position", [0, 1, 50, 99, 100])
def test_gap_free_positions_are_kept(position):
    assert translate_exact(gap_free(100), position) == position


@pytest.mark.parametrize(
    "position, landing",
    [
        (0, 0),
        (9, 9),  # inside the first run
        (10, 10),
        (12, 10),  # on aborted data: the next kept record (source 13 -> mirror 10)
        (13, 10),
        (19, 16),  # inside the second run
        (20, 17),
        (24, 17),  # marker, compacted hole: the next kept record (source 25 -> mirror 17)
        (25, 17),
        (29, 21),
        (30, 22),  # everything read: the log end
    ],
)
def test_gapped_positions_land_on_the_next_mirrored_record(position, landing):
    assert translate_exact(partition(GAPPED, 22), position) == landing


def test_positions_past_what_is_mirrored_land_on_the_log_end():
    mp = partition(GAPPED, 22)
    assert mp.is_ahead(31) and not mp.is_ahead(30)
    assert translate_exact(mp, 1000) == 22


def test_only_the_landed_part_of_the_map_counts():
    # The second segment is in doubt (the mirror ends at 17): positions past 21 land on 17.
    mp = partition(GAPPED, 17)
    assert translate_exact(mp, 27) == 17 and mp.mirrored_until == 21


def test_positions_below_the_first_mapped_record_land_on_the_mirror_log_start():
    # Aligned mirror: 100 placeholders (deleted, log start 100), then source 100.. at 100..
    aligned = partition([Segment(0, ((100, 50),), 150, padding=100)], 150, log_start=100)
    assert translate_exact(aligned, 3) == 100
    # Past the alignment budget: source 5000.. landed at 0..; retention removed the mirror's head up to 10.
    translated = partition([Segment(0, ((5000, 50),), 5050)], 50, log_start=10)
    assert translate_exact(translated, 4000) == 10
    assert translate_exact(translated, 5020) == 20


def test_nothing_mirrored_yet_lands_on_the_empty_log():
    mp = partition([], 0)
    assert mp.is_ahead(0) and translate_exact(mp, 0) == 0 and translate_exact(mp, 7) == 0


def test_timestamp_mode_uses_the_mirror_answer_within_the_log():
    mp = partition(GAPPED, 22)
    assert translate_by_timestamp(mp, 13, 10) == 10
    assert translate_by_timestamp(mp, 13, None) == 22  # no mirror record that late: the log end
    assert translate_by_timestamp(mp, 13, -1) == 22
    assert translate_by_timestamp(mp, 30, 3) == 22  # everything mirrored was read
    assert translate_by_timestamp(mp, 99, None) == 22
    assert translate(mp, 13, "timestamp", 12) == 12
    with pytest.raises(ValueError):
        translate(mp, 13, "nearest")


def test_commit_plan_moves_forward_only():
    assert plan_commit(40, None, 50) == (40, COMMITTED)
    assert plan_commit(40, 30, 50) == (40, COMMITTED)
    assert plan_commit(40, 40, 50) == (None, UNCHANGED)
    assert plan_commit(40, 45, 50) == (None, KEPT_AHEAD)
    assert plan_commit(50, 30, 50, source_ahead=True) == (50, CLAMPED)
    # Above the log end: kept by a normal sync, clamped by the final one (R-OFS-7).
    assert plan_commit(40, 70, 50) == (None, KEPT_AHEAD)
    assert plan_commit(40, 70, 50, final=True) == (50, CLAMPED)
    assert plan_commit(40, 45, 50, final=True) == (None, KEPT_AHEAD)


def test_a_reverse_may_realign_stale_groups_backwards_when_asked():
    assert plan_commit(40, 45, 50, realign=True) == (40, REALIGNED)
    assert plan_commit(40, 30, 50, realign=True) == (40, COMMITTED)
    assert plan_commit(40, 40, 50, realign=True) == (None, UNCHANGED)


def test_lag_counts_groups_behind_their_translation():
    assert behind(10, None) and behind(10, 9)
    assert not behind(10, 10) and not behind(10, 11)
