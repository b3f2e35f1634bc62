"""A follow-mode round not acknowledged in time holds its partition (`left_open.hold_after_timeout`).

The bookkeeping only: which parts are held and which stop, until when, and
where a held part goes on once settled. The holding itself, against a
destination broker that stalls, is exercised in
`tests/integration/test_follow_stalled_destination.py`.
"""

from __future__ import annotations

import time
from typing import Any

from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import left_open
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.hand_over import HAND_OVER_SKEW_S
from tests.unit.test_reservations import landed, member, reserve

TIMEOUT_MS = 8000


class Rounds:
    """Stands in for the task's `RoundReader`: what was held and what was stopped."""

    def __init__(self) -> None:
        self.held: list[Member] = []
        self.stopped: list[tuple[Member, str]] = []

    def hold(self, part: Member) -> None:
        self.held.append(part)
        part.ended = True

    def stop(self, part: Member, kind: str, message: str) -> None:
        self.stopped.append((part, message))
        part.fail(kind, message)


def _reserved(written_at: float) -> Member:
    part = member(dest_end=50, position=1050)
    reservation = reserve(part, ((1050, 3),), now=time.monotonic())
    part.reservation = Segment(
        reservation.dest_start, reservation.runs, reservation.source_end, written_at=written_at, open=True
    )
    part.announced = [part.reservation]
    landed(part, 3)  # a round under it was acknowledged; the next one is in doubt
    return part


def _hold(missed: list[tuple[Member, str, bool]], holding: bool = True) -> Rounds:
    rounds = Rounds()
    left_open.hold_or_stop(missed, rounds, holding, TIMEOUT_MS)  # type: ignore[arg-type]
    return rounds


def test_a_part_whose_round_timed_out_under_its_reservation_is_held_until_none_of_it_can_land():
    written_at = time.time()
    part = _reserved(written_at)
    rounds = _hold([(part, "writing failed: 1 records not acknowledged within 8000 ms", True)])
    assert rounds.held == [part] and not rounds.stopped
    assert part.left_open is not None and part.left_open.dest_start == 50
    assert part.reservation is None, "no round goes under it, and it is not closed as due"
    assert part.settle_at == written_at + 2 * TIMEOUT_MS / 1000 + HAND_OVER_SKEW_S
    assert not [s for s in part.announced if s.open], "the epoch's merge takes closed segments only"
    assert (part.dest_end, part.result.rounds_held) == (53, 1), "what was acknowledged stays copied"
    assert left_open.held([part]) == [part] and left_open.due([part], part.settle_at) == [part]


def test_refused_records_a_part_without_a_reservation_and_a_task_near_its_hand_over_stop_the_part():
    refused, unreserved, late = _reserved(time.time()), member(), _reserved(time.time())
    rounds = _hold([(refused, "writing failed: Broker: Message size too large", False), (unreserved, "x", True)])
    assert [p for p, _ in rounds.stopped] == [refused, unreserved] and not rounds.held
    assert refused.result.error_kind == "MirrorError" and "too large" in refused.result.error
    assert [p for p, _ in _hold([(late, "x", True)], holding=False).stopped] == [late]


def test_a_part_held_as_often_as_a_task_allows_stops_at_the_next_timeout():
    part = _reserved(time.time())
    for _ in range(left_open.HOLDS_PER_TASK):
        assert _hold([(part, "x", True)]).held == [part]
        left_open._settled(part, part.left_open.truncated(part.dest_end))  # type: ignore[union-attr]
        reserve(part, ((part.position, 3),), now=time.monotonic())
    rounds = _hold([(part, "writing failed: 2 records not acknowledged within 8000 ms", True)])
    assert [p for p, _ in rounds.stopped] == [part]


def test_a_settled_part_goes_on_after_what_landed_and_counts_its_late_records_as_copied():
    part = _reserved(time.time())
    _hold([(part, "x", True)])
    reservation: Any = part.left_open
    kept = reservation.truncated(55)  # two records of the round in doubt landed after all
    left_open._settled(part, kept)
    assert (part.dest_end, part.position) == (55, 1055)
    result = part.result
    assert (result.source_from, result.dest_from) == (1050, 50), "the epoch's copy still starts where it did"
    assert (result.source_until, result.dest_until, result.records) == (1055, 55, 2)
    assert part.left_open is None and not part.held_after_timeout
    assert part.announced == [kept]


def test_a_round_announced_on_its_own_past_the_pack_is_held_at_its_segment():
    part = member(dest_end=50, position=1050)
    segment = Segment(50, ((1050, 3),), 1053, written_at=time.time())  # closed: announced in a transaction
    part.announced = [segment]
    rounds = _hold([(part, "writing failed: 3 records not acknowledged within 8000 ms", True)])
    assert rounds.held == [part]
    held: Any = part.left_open
    assert (held.dest_start, held.dest_end, held.open) == (50, 53, True) and part.announced == []
    left_open._settled(part, held.truncated(51))
    assert (part.dest_end, part.position, part.result.records) == (51, 1051, 1)
