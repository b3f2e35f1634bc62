"""Follow mode's hand-over between epochs as a copy task sees it (`replication.epochs`), and
the packing of its segments.

A task of the next epoch starts before the epoch ends, waits for that end
(`WorkUnit.starts_at`) and fences the partitions' writers then; the task it
takes over from, fenced at or after that time, stops without taking its
writers back (`FollowTimes.taken_over`). A task stops reading shortly before
its own hand-over, and one ready too close to it (a cold first start on a
loaded machine) does not fence at all (`wait_for_start`): fencing after the
next epoch's task would take the writers back from it, and its records would
land where that task's check cannot place them. Packing happens shortly
before the hand-over, after the next epoch's plan noted where the offset map
ended, so the next task reads the packed segments and merges them with its own.

A follow-mode round announces one segment per partition, so an epoch leaves
a partition with hundreds of them; readers of the offset map (the next plan,
offset sync) read every one. The task that announced them merges them,
fenced as it is, so no other writer's newer segment can be overwritten by an
older view (`copier._pack` does the same for a single unit). A continuing
unit merges, with its own, the segments the epoch before announced after its
plan read the map (`group_checks`).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirror_pipeline.link.state_keys import segment_key
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.link.topic_reading import topic_end
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import Segment, pack
from mirror_pipeline.replication import reservations, slot_announcing
from mirror_pipeline.replication.copier import WorkUnit
from mirror_pipeline.replication.group_reading import Member

log = logging.getLogger(__name__)

# A slot fenced this close to a task's hand-over is the next epoch's task taking over (the clocks
# of the driver and of executors on other hosts differ by this much at most).
HAND_OVER_SKEW_S = 2.0
# How long before its hand-over a task packs its segments, at most (a sixth of a short epoch).
# Its rounds after that are announced one by one, a transaction each (no reservation is left open
# at a hand-over): at 1 s those rounds, 0.8 % of a 120 s epoch's records, set follow mode's p99.
# Reserving on until the stop took that wait out (rounds of 17-20 ms instead of 30-90) but was not
# kept: a closing at the stop that the next task's fence met would leave reservations open, and
# each holds its partition for the fence wait (18 s); a round announced alone is only read again.
PACK_BEFORE_HAND_OVER_S = 0.5
# How long before its hand-over a task stops reading: its last round is then announced, its
# transactions ended, when the next task fences. A fence that meets a transaction in flight waits
# for the coordinator to end it, and librdkafka asks again for the writer's id only 0.5 s later:
# the next task waits for such a transaction before it fences (`await_quiet_map`). The margin is
# set when the task packs, from how long its announcements took (`settle_stop`): between these two.
STOP_BEFORE_HAND_OVER_S = 0.15
MIN_STOP_BEFORE_HAND_OVER_S = 0.03
ANNOUNCEMENTS_KEPT = 64
# How long a task taking over waits, at most, for a transaction in flight on the offset map before
# it fences (`await_quiet_map`), and how often it asks.
QUIET_MAP_WAIT_S = 0.3
QUIET_MAP_POLL_S = 0.005
# A take-over this long after the hand-over time is logged with its steps' times (`note_take_over`):
# most took 0.02-0.25 s in `benchmarks/latency.py`'s runs on a 2-core machine.
SLOW_TAKE_OVER_S = 0.5


def wait_for_start(parts: Sequence[Member]) -> bool:
    """Fence no sooner than the epoch before ends (`WorkUnit.starts_at`). False for a follow-mode
    task ready within `late_margin_s` of its own hand-over: it leaves its partitions to the next
    epoch's task untouched, which goes on from the offset map (no successor: the next full plan),
    and their results say so (`left_to_next_epoch`: the epoch's line tells why it copied nothing)."""
    starts_at, follow_s = max(p.unit.starts_at for p in parts), max(p.unit.follow_s for p in parts)
    if follow_s:
        ready_at = time.time()
        for part in parts:
            part.result.ready_at = ready_at
    delay = starts_at - time.time()
    if delay > 0:
        time.sleep(delay)
    ready_after_s = time.time() - starts_at
    late = bool(starts_at) and ready_after_s >= follow_s - late_margin_s(follow_s)
    if late:
        log.info("ready %.1f s after its epoch started: its partitions are left to the next epoch", ready_after_s)
        for part in parts:
            part.result.left_to_next_epoch = True
    return not late


def note_take_over(parts: Sequence[Member], steps: dict[str, float]) -> None:
    """Note in the results of a task that took over when it had fenced and was ready to copy, after
    the hand-over time: no task copies the partitions in between. `steps`: when each step of the
    take-over ended (`time.time`s, in order), with `fenced` and `ready`; a take-over slower than
    `SLOW_TAKE_OVER_S` is logged with them, which tells the step that held it up."""
    hand_over_at = max(p.unit.starts_at for p in parts)
    after_ms = {step: round((at - hand_over_at) * 1000) for step, at in steps.items()}
    for part in parts:
        part.result.fenced_after_hand_over_ms = after_ms["fenced"]
        part.result.ready_after_hand_over_ms = after_ms["ready"]
    if after_ms["ready"] >= SLOW_TAKE_OVER_S * 1000:
        log.warning(
            "a copy task took over %d partition(s) (%s) %d ms after the hand-over time; each step ended at (ms): %s",
            len(parts),
            ", ".join(f"{p.unit.mirror_topic}[{p.unit.partition}]" for p in parts[:4])
            + (", ..." if len(parts) > 4 else ""),
            after_ms["ready"],
            ", ".join(f"{step} {ms}" for step, ms in after_ms.items()),
        )


def await_quiet_map(admin: AdminClient, offset_map_topic: str, alias: str, wait_s: float = QUIET_MAP_WAIT_S) -> bool:
    """Before a task takes over, let a transaction in flight on the offset map end (up to `wait_s`);
    whether none was left. Best effort: fencing is what makes the hand-over safe, this only times it.

    The task before announces its last rounds one transaction each, and its stop margin
    (`FollowTimes.settle_stop`) is set from how long they took; one slower than that (the next
    epoch's tasks start on the same cores) was still in flight at the hand-over. A fence that meets
    a transaction waits for the coordinator to end it and asks again only after 0.5 s (librdkafka's
    fixed retry for a producer id): the hand-over then stalled every partition of the slot for
    over half a second. A transaction's records sit in the map past its last stable offset until it
    ends, so waiting for that offset to reach the log end, as it was read first, is waiting for
    every transaction then in flight (`topic_end`). The offset map has one partition (`state_store`)."""
    try:
        topic_end(admin, offset_map_topic, alias, timeout=wait_s, poll_s=QUIET_MAP_POLL_S)
    except (MirrorError, KafkaException) as exc:  # the fence goes ahead regardless
        log.info("fencing now: the offset map was not quiet within %.2f s (%s)", wait_s, exc)
        return False
    return True


def late_margin_s(follow_s: float) -> float:
    """How close to its hand-over a task is too late to fence: its fences and checks take a moment,
    and another host's clock may be up to HAND_OVER_SKEW_S ahead."""
    return min(HAND_OVER_SKEW_S, follow_s / 4)


@dataclass
class FollowTimes:
    """When a follow-mode task stops reading, and when the next epoch's task takes over (0: none)."""

    follow_until: float
    hand_over_at: float = 0.0
    follow_s: float = 0.0
    packed: bool = False
    # The latest rounds of announcements' durations (s), for `settle_stop`.
    announcements: deque[float] = field(default_factory=lambda: deque(maxlen=ANNOUNCEMENTS_KEPT))

    @classmethod
    def from_now(cls, units: Sequence[WorkUnit]) -> FollowTimes:
        """The times of a task ready to copy now."""
        follow_s, starts_at = max(u.follow_s for u in units), max(u.starts_at for u in units)
        if not starts_at:
            return cls(time.time() + follow_s)
        # Never past the hand-over, even for a task ready late: reading on, it would write under a
        # reservation still open when the next epoch's task fences it.
        hand_over_at = starts_at + follow_s
        return cls(hand_over_at - min(STOP_BEFORE_HAND_OVER_S, follow_s / 10), hand_over_at, follow_s)

    def taken_over(self) -> bool:
        """Whether a writer fenced now was fenced by the next epoch's task."""
        return bool(self.hand_over_at) and time.time() >= self.hand_over_at - HAND_OVER_SKEW_S

    def pack_due(self) -> bool:
        """True once, when the task should pack before the hand-over."""
        due = (
            bool(self.hand_over_at)
            and not self.packed
            and time.time() >= self.hand_over_at - min(PACK_BEFORE_HAND_OVER_S, self.follow_s / 6)
        )
        self.packed = self.packed or due
        return due

    def note_announcement(self, seconds: float) -> None:
        """How long a round of announcements (a transaction per writer slot, side by side) took."""
        self.announcements.append(seconds)

    def settle_stop(self) -> None:
        """Stop closer to the hand-over when announcements are quick: twice the median of the
        latest ones, plus 10 ms, before it (never earlier than `from_now`'s stop). The median, not
        the slowest: a last transaction slower than the margin is waited for by the next task
        (`await_quiet_map`), which costs the rest of that transaction, where the slowest of the
        latest 64 set a margin every hand-over paid."""
        if not self.hand_over_at:
            return
        typical = statistics.median(self.announcements) if self.announcements else STOP_BEFORE_HAND_OVER_S
        margin = min(STOP_BEFORE_HAND_OVER_S, max(MIN_STOP_BEFORE_HAND_OVER_S, 2 * typical + 0.01))
        self.follow_until = max(self.follow_until, self.hand_over_at - margin)


def close_and_pack(
    pool: Executor, writers: dict[int, SlotWriter], parts: list[Member], stop: Callable[[Member, str, str], None]
) -> tuple[list[Member], list[int]]:
    """Close the open reservations of `parts` and merge each one's announced segments, in one
    transaction per writer slot, the slots' transactions side by side; the parts written, and the
    slots whose writer was fenced (nothing of theirs was written). A part of a slot whose
    transaction failed otherwise is `stop`ped, as a failed closing is.

    One transaction, not a closing and then a merge: with the slots' merges one after another as
    well, the copy stood still for 164 ms half a second before each hand-over (8 partitions, as
    long as the hand-over's own pause). Either both are in the offset map or neither, each a state
    the two transactions also left between them."""
    by_slot: dict[int, list[Member]] = defaultdict(list)
    writes: dict[int, tuple[list[tuple[str, int, Segment]], list[str]]] = defaultdict(lambda: ([], []))
    closings: dict[int, Segment | None] = {}
    packed_of: dict[int, list[Segment]] = {}
    for part in parts:
        if part.failed:
            continue
        closings[id(part)] = closing = reservations.closing(part)
        segments = _with_reservation_closed(part, closing)
        packed, stale_starts = pack(segments) if len(segments) > 1 else (segments, [])
        unit = part.unit
        puts: list[tuple[str, int, Segment]] = []
        deletes: list[str] = []
        if len(packed) < len(segments):
            puts = [(unit.mirror_topic, unit.partition, seg) for seg in packed]
            deletes = [segment_key(unit.link, unit.mirror_topic, unit.partition, s) for s in stale_starts]
            packed_of[id(part)] = packed
        elif closing is not None:
            puts = [(unit.mirror_topic, unit.partition, closing)]
        elif part.reservation is None:
            continue  # nothing to close, nothing to merge: its slot is not written for it
        slot_puts, slot_deletes = writes[part.slot]
        slot_puts += puts
        slot_deletes += deletes
        by_slot[part.slot].append(part)

    def write(slot: int) -> float:
        began = time.monotonic()
        puts, deletes = writes[slot]
        writers[slot].write_segments(puts, deletes, doing="closing and packing the epoch's segments")
        return time.monotonic() - began

    def note(part: Member, closing: Segment | None) -> None:
        reservations.closed(part, closing)
        if id(part) in packed_of:
            part.announced = packed_of[id(part)]

    outcomes = {slot: pool.submit(write, slot) for slot in sorted(by_slot)}
    return slot_announcing.finish(slot_announcing.Announcing(dict(by_slot), closings, outcomes), note, stop)[:2]


def _with_reservation_closed(part: Member, closing: Segment | None) -> list[Segment]:
    """The part's announced segments with its open reservation as `closing` cuts it; none to merge
    when nothing landed under the reservation (the closing writes nothing, as `slot_announcing`'s)."""
    if part.reservation is None:
        return part.announced
    if closing is None:
        return []
    return [closing if s.dest_start == closing.dest_start else s for s in part.announced]
