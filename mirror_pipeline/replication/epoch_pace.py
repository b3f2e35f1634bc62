"""How long follow mode's epochs last, and how early the next one is started, from how its copy
tasks have been starting (`operations.follow`, `replication.epochs`).

A task ready too close to its own hand-over leaves its partitions to the
next epoch (`hand_over.wait_for_start`): fencing then could take the writers
back from the next epoch's task. When tasks take longer to be ready than an
epoch lets them (executors busy with other jobs or still coming, a loaded
machine), the next epoch's tasks, started as slowly, leave theirs too, and
so on: every epoch copied nothing. So epochs last at least `LATE_FACTOR`
times as long as the latest tasks of the last `LATENESS_EPOCHS` epochs were
late, and the next epoch starts as long before its hand-over as the last
tasks took to be ready. Epochs are back to what the operator asked for once
that many epochs' tasks were in time (not after one: how long a task waits
for a slot taken by other jobs varies from epoch to epoch).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# How long before an epoch ends the next one is planned and its job started, at least: its tasks
# start and open their clients meanwhile (0.3-1.5 s in a warm local session), then wait for the end.
HAND_OVER_LEAD_S = 3.0
# An epoch lasts at least this many times as long as tasks have been ready after their start: a
# task as late as the last ones is then ready well before the point where it would leave its
# partitions (`hand_over.late_margin_s`: at most a quarter of the epoch before its end).
LATE_FACTOR = 2.0
# How many of the latest epochs' lateness counts.
LATENESS_EPOCHS = 8
# An epoch that leaves out mirrors the destination does not list yet lasts at most this long, so
# that they join within seconds rather than a whole epoch later: a broker given a thousand new
# topics at once (auto-create on a wide link) listed the last of them tens of seconds afterwards.
WAITING_MIRRORS_EPOCH_S = 20.0


@dataclass
class EpochPace:
    """The pace of one follow-mode run: `epoch_s` is what the operator asked for."""

    epoch_s: float
    length_s: float = 0.0  # how long the next epochs last (0: `epoch_s`)
    lead_s: float = HAND_OVER_LEAD_S
    tasks_ready_s: float = 0.0  # how long after its job was submitted the last epoch's last task was ready
    # How late after its start each of the latest epochs' last task was ready (s; 0: in time).
    lateness_s: deque[float] = field(default_factory=lambda: deque(maxlen=LATENESS_EPOCHS))

    def __post_init__(self) -> None:
        self.length_s = self.length_s or self.epoch_s

    @property
    def waiting_length_s(self) -> float:
        """How long an epoch lasts that left out mirrors not listed yet: short, but never so short
        that tasks as late as the last ones would leave their partitions."""
        return min(self.length_s, max(WAITING_MIRRORS_EPOCH_S, LATE_FACTOR * max(self.lateness_s, default=0.0)))

    def plan_next_at(self, ends_at: float) -> float:
        """When to plan and start the epoch after one that ends at `ends_at` (`time.time`s): the lead,
        at most half an epoch."""
        return ends_at - min(self.lead_s, self.length_s / 2)

    def planned(self, planning_s: float) -> None:
        """A continuing epoch's planning took `planning_s`: the next is planned twice as early, plus
        the time its tasks take to be ready, so that they are ready by its hand-over."""
        self.lead_s = max(HAND_OVER_LEAD_S, 2 * planning_s + self.tasks_ready_s)

    def ended(self, submitted: float, starts_at: float, last_ready_at: float | None) -> None:
        """An epoch whose job was submitted at `submitted`, whose tasks were to fence at `starts_at`,
        ended; its last task was ready at `last_ready_at` (None: not known, the pace stays)."""
        if last_ready_at is None:
            return
        self.tasks_ready_s = max(0.0, last_ready_at - submitted)
        self.lateness_s.append(max(0.0, last_ready_at - starts_at))
        length = max(self.epoch_s, LATE_FACTOR * max(self.lateness_s))
        if length > self.epoch_s and length > 1.1 * self.length_s:
            log.warning(
                "follow: copy tasks were ready %.1f s after their epoch's start, too late for %g s epochs: "
                "epochs last %.0f s until tasks start in time",
                last_ready_at - starts_at,
                self.epoch_s,
                length,
            )
        elif length == self.epoch_s < self.length_s:
            log.warning("follow: copy tasks start in time again: epochs last %g s", self.epoch_s)
        self.length_s = length
