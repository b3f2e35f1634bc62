"""Follow mode: reservations renewed in transactions no round waits for (see `reservations`).

A round whose parts all go under their reservations announces nothing, so it
need not wait for a transaction: the renewals of its parts' reservations
whose window ends soon are started in the task's slot-writer threads, and
the rounds go on under the old reservations until they commit. Anything else
that uses a slot's writer (an announcement, a closing, a settling, a packing,
the task's end) collects them first: a transactional writer has one
transaction at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, wait
from dataclasses import dataclass

from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import reservations, slot_announcing
from mirror_pipeline.replication.group_reading import Member


@dataclass
class _InFlight:
    announcing: slot_announcing.Announcing
    segments: dict[int, Segment]  # the new reservations, by id of their part
    started: float  # `time.monotonic` before the round that renewed them: their deadline counts from it


class Renewals:
    """A task's renewal in flight: at most one at a time, of any number of parts."""

    def __init__(self, pool: Executor, writers: dict[int, SlotWriter], window_s: float, delivery_timeout_ms: int):
        self.pool, self.writers = pool, writers
        self.window_s, self.delivery_timeout_s = window_s, delivery_timeout_ms / 1000
        self.in_flight: _InFlight | None = None

    def due(self, part: Member, now: float, follow_until: float) -> bool:
        """`reservations.renewal_due`, unless the task stops reading (`follow_until`, `time.time`)
        before the reservation's window ends, or a renewal is in flight."""
        window_left = part.reserved_until - now
        return (
            self.in_flight is None
            and reservations.renewal_due(part, now, self.window_s)
            and time.time() + window_left < follow_until
        )

    def choose(
        self,
        news: Sequence[Member],
        sent: set[int],
        now: float,
        follow_until: float,
        next_due: float,
    ) -> list[Member]:
        """The reservations to renew with a round, all at once (a transaction per slot) once one is
        `due`: those of the round's parts `sent` under theirs. Not those of parts without records in
        the round: renewed, a partition that went quiet would leave an empty reservation open, which
        a closing cannot cut (nothing landed) and the next epoch's task would hold the partition
        for (`left_open`); the round closes them once their window is over. `next_due`: when the
        first window ends (`reservations.next_due`), or earlier."""
        if now < next_due - reservations.RENEW_WITH_WINDOW_LEFT * self.window_s:
            return []
        return [p for p in news if id(p) in sent and not (p.failed or p.ended) and self.due(p, now, follow_until)]

    def start(self, parts: list[Member], segments: dict[int, Segment], started: float) -> None:
        """Renew the reservations of `parts`, whose round was sent under them: each closed where its
        acknowledged records end, the next one (`segments`) opened there."""
        segment_of = segments.__getitem__
        announcing = slot_announcing.start(
            self.pool, self.writers, parts, lambda p: segment_of(id(p)), in_background=True
        )
        self.in_flight = _InFlight(announcing, segments, started)

    def collect(self, wait_for_it: bool, stop: Callable[[Member, str, str], None]) -> tuple[list[int], float] | None:
        """Note the renewal in flight once its transactions ended (`wait_for_it`: wait for them);
        None when none ended. Else the slots whose writer was fenced, and the slowest transaction (s)."""
        renewal = self.in_flight
        if renewal is None or not (wait_for_it or renewal.announcing.done()):
            return None
        self.in_flight = None
        deadline = renewal.started + self.delivery_timeout_s

        def note(part: Member, closed: Segment | None) -> None:
            reservations.announced(part, closed, renewal.segments[id(part)], renewal.started, self.window_s, deadline)

        _, fenced, slowest = slot_announcing.finish(renewal.announcing, note, stop)
        return fenced, slowest

    def end(self) -> None:
        """Wait for the transactions in flight, unnoted: the task ends, and closes their writers."""
        if self.in_flight is not None:
            wait(self.in_flight.announcing.outcomes.values())
