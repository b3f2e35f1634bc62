"""Follow mode's reservations: one announcement for many rounds of a partition (see `group_copy`).

A round announced segment by segment costs a transaction per writer slot
before its records: at 10 rounds a second that was most of follow mode's
latency (a round waited on its announcement, about 35 ms) and of the
destination's CPU. A follow-mode task instead announces a *reservation*: a
segment, marked open, for up to a chunk of consecutive source offsets from
where the partition's mirror ends. Rounds whose records continue it are
written under it without a transaction, for `window_s` after it was
announced; the next announcement of the partition (a gap in the source
offsets, the reservation full or its window over) closes it in the same
transaction, cut where its records ended. A reservation with nothing more
to write under it once its window is over (`due`) is closed in the task's
next round's transactions (a partition with no records in that round), or
on its own when no round comes, and every one before a hand-over and at the
task's end.

A partition with records in a round late in its reservation's window renews
it (`renewal_due`), with the round's others, in a transaction its rounds do
not wait for (`renewals`): it closes the reservation where its acknowledged
records end and opens the next one there, while the round's records (and
those of the rounds until it commits) still go under the old one. Whichever of the two is in the offset
map after a crash, its landed part is exactly its records up to the log end:
both cover the records sent meanwhile, as consecutive source offsets from
the same place. Waiting for that transaction had held up a round every
second (a few percent of the records, follow mode's p99 at 8 partitions).

Why this is as safe as a segment per round (`repair`, `chunks.chunk_delivery_timeout_ms`):
- every record written under a reservation is sent before the deadline of
  the round that announced it, counted from before that announcement, so a
  fenced task's records land within the fence wait as before, and a task
  stalled past the deadline sends none (`deadline`);
- a round is written only once the one before it is acknowledged, and a
  reservation holds at most a chunk: after a crash at most one chunk of a
  partition is in doubt, its open reservation, settled at the log end as
  any segment;
- only consecutive source offsets go under a reservation, so what landed of
  it is exactly its records up to the log end.
Until it is closed, readers that resolve the map against the log end (offset
sync, the planner) see its landed part as in doubt: the offset map trails the
mirror by at most `window_s`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.group_reading import Member

# How long rounds may go under one reservation: at most one transaction per partition in this time.
RESERVATION_S = 1.0
# A reservation is renewed when this share of its window is left: time for the renewal to commit
# (10-35 ms on this machine, longer under load) before a round would have to wait for it.
RENEW_WITH_WINDOW_LEFT = 0.1


def window_s(delivery_timeout_ms: int) -> float:
    """Half the writer's delivery timeout at most: a round written late in the window still has
    half of it to land before the reservation's deadline."""
    return min(RESERVATION_S, delivery_timeout_ms / 2000)


def fits(part: Member, runs: tuple[tuple[int, int], ...], now: float) -> bool:
    """Whether the part's round (its records' offset `runs`) may be written under its reservation."""
    held = part.reservation
    if held is None or now >= part.reserved_until or len(runs) != 1:
        return False
    start, count = runs[0]
    written = part.dest_end - held.dest_start
    return start == held.runs[0][0] + written and part.dest_end + count <= held.dest_end


def renewal_due(part: Member, now: float, window: float) -> bool:
    """Whether the part's reservation, which its round goes under, is renewed with it: little of its
    window is left, and records landed under it (the renewal closes it where they end)."""
    held = part.reservation
    return (
        held is not None
        and now >= part.reserved_until - RENEW_WITH_WINDOW_LEFT * window
        and part.dest_end > held.dest_start
    )


def announcement(part: Member, runs: tuple[tuple[int, int], ...], written_at: float, reserving: bool) -> Segment:
    """The segment that announces the part's round: a reservation from it when `reserving` and its
    records are consecutive, else the round's own segment."""
    if reserving and len(runs) == 1:
        start, count = runs[0]
        room = max(count, part.unit.chunk_records)
        return Segment(part.dest_end, ((start, room),), start + room, written_at=written_at, open=True)
    return Segment(part.dest_end, runs, part.position, written_at=written_at)


def closing(part: Member) -> Segment | None:
    """The part's open reservation cut where its records ended (None: it has none)."""
    if part.reservation is None:
        return None
    return part.reservation.truncated(part.dest_end)


def announced(
    part: Member, closed: Segment | None, new: Segment | None, now: float, window: float, deadline: float
) -> None:
    """Note a committed announcement: `closed` replaced the open reservation, `new` (if any) is the
    partition's newest segment, a reservation its rounds go under for `window`."""
    if closed is not None:
        part.announced = [closed if s.dest_start == closed.dest_start else s for s in part.announced]
    if new is not None:
        part.announced.append(new)
    part.reservation = new if new is not None and new.open else None
    part.reserved_until = now + window if part.reservation else 0.0
    part.reservation_deadline = deadline if part.reservation else 0.0


def closed(part: Member, closed: Segment | None) -> None:
    """Note a committed closing of the part's reservation, with nothing announced after it."""
    announced(part, closed, None, 0.0, 0.0, 0.0)


def deadline(part: Member, round_deadline: float) -> float:
    """When the part's round must be sent by: its reservation's deadline, or the round's own."""
    return part.reservation_deadline if part.reservation is not None else round_deadline


def due(parts: Sequence[Member], now: float) -> list[Member]:
    """Parts whose reservation's window is over: closed without waiting for their next round."""
    return [p for p in parts if p.reservation is not None and not p.failed and now >= p.reserved_until]


def split_round(
    parts: Sequence[Member], round_parts: Sequence[Member], runs: dict[int, tuple[tuple[int, int], ...]], now: float
) -> tuple[list[Member], list[Member]]:
    """The parts of a round that go under their reservation (`runs`: by id of a part), and the
    reservations to close beside the round (`due_beside`)."""
    return [p for p in round_parts if fits(p, runs[id(p)], now)], due_beside(parts, round_parts, now)


def due_beside(parts: Sequence[Member], round_parts: Sequence[Member], now: float) -> list[Member]:
    """Parts that are `due` and have no records in the round: their closings go in the round's
    transactions (a part of the round has its reservation closed by its own announcement)."""
    in_round = {id(p) for p in round_parts}
    return [p for p in due(parts, now) if id(p) not in in_round]


def next_due(parts: Sequence[Member]) -> float:
    """When the next reservation's window ends (`time.monotonic`), inf when none is open."""
    return min((p.reserved_until for p in parts if p.reservation is not None and not p.failed), default=math.inf)
