"""The checks a copy task makes on the destination around writing a group of units:
after fencing (step 2: state, offset map and log ends as planned) and at the end
(step 4: every mirror partition ends where its last segment does). See `group_copy`.

A follow-mode unit that *continues* (planned while the epoch before still
copied its partition) takes its start from the offset map instead: the
newest segment announced since its plan, once the mirror's log end has
reached it (the epoch before's last round may still be landing); when that
segment is a reservation the task before left open, once the task has
settled it (`left_open`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, wait

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_store import (
    SegmentWrite,
    StateStore,
    live_segments,
    newest_starts,
    segment_writes,
    segment_writes_since,
)
from mirror_pipeline.link.topic_reading import SETTLE_TIMEOUT_S, TopicTail
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorDiverged, MirrorError, StateChanged
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.states import PAUSED, may_copy
from mirror_pipeline.replication import left_open
from mirror_pipeline.replication.copier import CopyContext
from mirror_pipeline.replication.group_reading import Member

log = logging.getLogger(__name__)

# How often a continuing unit asks whether the epoch before's last round has landed.
LANDED_POLL_S = 0.02
# A wait that long for it is logged: it holds up the task's take-over (`hand_over.note_take_over`).
SLOW_LANDING_S = 0.3
# How long reading ahead of a fence waits, at most, for a transaction open on the state or the map.
AHEAD_SETTLE_S = 0.3


class ReadAhead:
    """What a task taking over from the epoch before reads before it fences, so that its checks after
    the fence read only what was written since, through a reader already connected. It decides
    nothing: the checks still read the state and the offset map after the fence (`check_after_fencing`).

    Read after the fence from where the task's Spark worker last read it (an epoch or two before,
    or from 0 in a new worker), the state took 60-130 ms of each hand-over, in which no partition
    copied; the offset map, with a new consumer, 35-55 ms once that was gone.
    """

    def __init__(self, ctx: CopyContext, link: str, parts: list[Member]) -> None:
        self.ctx, self.link = ctx, link
        self.since = min(p.unit.map_snapshot_end for p in parts)
        self.map_tail: TopicTail | None = None
        self.map_writes: list[SegmentWrite] = []

    def read(self, admin: Callable[[], AdminClient]) -> None:
        """Best effort: whatever fails here is read after the fence as if nothing had been.

        A transaction left open on either topic (its writer killed mid-write) is not waited for
        beyond `AHEAD_SETTLE_S`: the broker ends it only after the writers' transaction timeout,
        and the task fences once this read is over. Fencing the map's writers ends theirs at once."""
        try:
            _state_store(self.ctx, self.link, admin(), settle_timeout=AHEAD_SETTLE_S).read_mirrors()
            conf = kc.client_config(self.ctx.dest_properties, self.link, "state-reader")
            tail = TopicTail(conf, admin(), self.ctx.offset_map_topic, self.ctx.dest_alias, self.since)
            try:
                writes = segment_writes(tail.read(settle_timeout=AHEAD_SETTLE_S), self.link)
            except BaseException:
                tail.close()
                raise
            # Kept only whole: the map's tail goes on from where these writes end.
            self.map_tail, self.map_writes = tail, writes
        except (MirrorError, KafkaException) as exc:
            log.info("the state and the offset map are read after fencing only: reading ahead failed (%s)", exc)

    def writes_since_plan(self) -> list[SegmentWrite]:
        """After the fence: the link's segments written since the plan (`segment_writes_since`)."""
        assert self.map_tail is not None
        return self.map_writes + segment_writes(self.map_tail.read(), self.link)

    def close(self) -> None:
        if self.map_tail is not None:
            self.map_tail.close()
        self.map_tail, self.map_writes = None, []


def _state_store(
    ctx: CopyContext, link: str, admin: AdminClient, settle_timeout: float = SETTLE_TIMEOUT_S
) -> StateStore:
    return StateStore(
        link,
        ctx.dest_alias,
        ctx.dest_properties,
        ctx.state_topic,
        ctx.offset_map_topic,
        admin=admin,
        settle_timeout=settle_timeout,
    )


def check_after_fencing(
    ctx: CopyContext,
    link: str,
    admin: AdminClient,
    pool: Executor,
    parts: list[Member],
    starting: bool = True,
    ahead: ReadAhead | None = None,
) -> None:
    """Step 2, for `parts` at once: the state, the offset map since the plan, and the log ends.

    A part whose mirror may no longer be copied, whose partition got a segment
    from another writer at or past where this task's copy ends, or whose log
    end is not that end, fails: it is not written to. A continuing part,
    `starting` its copy, first moves its start to the newest segment announced
    since its plan; taken back mid-copy (not `starting`) it is checked as any other, except one held
    (`left_open`): its log end is checked as it is settled, and here only that no other writer
    announced past its reservation.

    The state and the offset map are read side by side, both after fencing, which is all
    the check needs: a stop or another cycle that comes later fences this task's writers in
    turn. One after the other they took 0.07-0.17 s of every follow-mode epoch's start. The
    log ends are asked only for the parts whose mirror may still be copied: a deleted
    mirror's topic may be gone. The task's own admin client and `pool` serve the check: each
    client or thread of its own would add to the task's threads while it runs (`task_clients`).
    With `ahead` (a task taking over), both are read on from where it read them before the
    fence, and its reader is closed before the task goes on.
    """
    if not parts:
        return
    store = _state_store(ctx, link, admin)
    if ahead is not None and ahead.map_tail is not None:
        announced = pool.submit(ahead.writes_since_plan)
    else:
        announced = pool.submit(
            segment_writes_since,
            kc.client_config(ctx.dest_properties, link, "state-reader"),
            admin,
            ctx.offset_map_topic,
            ctx.dest_alias,
            link,
            min(p.unit.map_snapshot_end for p in parts),
        )
    try:
        mirrors = store.read_mirrors()
        for part in parts:
            info = mirrors.get(part.unit.mirror_topic)
            if not may_copy(info):
                part.paused = info is not None and info.state == PAUSED and not info.flags
                what = "deleted" if info is None else f"{info.state}{''.join(' ' + f for f in info.flags)}"
                part.fail(
                    StateChanged.__name__,
                    f"mirror '{part.unit.mirror_topic}' is {what} since this cycle "
                    f"planned; partition {part.unit.partition} was not copied to",
                )
        live = [p for p in parts if not p.failed]
        if not live:
            return
        held = [(p, p.left_open) for p in live if p.left_open is not None]
        live = [p for p in live if p.left_open is None]
        ends = _log_ends(ctx, admin, live) if live else {}
        writes = announced.result()
    finally:
        wait([announced])  # on every way out: its consumer is closed before the task goes on
        if ahead is not None:
            ahead.close()
    continuing = [p for p in live if p.unit.continues and starting]
    if continuing:
        _continue_from_map(continuing, live_segments(writes), ctx.writer_delivery_timeout_ms)
        live = [p for p in live if not p.failed and p.left_open is None]  # a held part is checked as it is settled
        continuing = [p for p in continuing if p.left_open is None]
        ends.update(_landed_ends(ctx, admin, [p for p in continuing if not p.failed and ends[_tp(p)] < p.dest_end]))
        _hold_short(continuing, ends, ctx.writer_delivery_timeout_ms)
        live = [p for p in live if p.left_open is None]
    newer = newest_starts(writes)
    for part, reservation in held:
        if newer.get(_tp(part), -1) > reservation.dest_start:
            part.fail(
                ConcurrentWriter.__name__,
                f"mirror '{part.unit.mirror_topic}' partition {part.unit.partition}: another writer wrote "
                f"to it while it was held; this unit stopped without writing",
            )
    for part in live:
        unit = part.unit
        if not (unit.continues and starting) and newer.get(_tp(part), -1) >= part.dest_end:
            part.fail(
                ConcurrentWriter.__name__,
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: another "
                f"cycle wrote to it after this cycle planned; this unit stopped without writing",
            )
        elif ends[_tp(part)] != part.dest_end:
            expected = "the offset map says" if unit.continues and starting else "the plan expected"
            part.fail(
                ConcurrentWriter.__name__,
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end "
                f"is {ends[_tp(part)]}, {expected} {part.dest_end}; "
                f"another writer is active or wrote since the plan",
            )


def _continue_from_map(
    parts: list[Member], announced: dict[tuple[str, int], list[Segment]], delivery_timeout_ms: int
) -> None:
    """Each part starts where the newest segment announced since its plan ends, if one does
    later than its plan; those segments are its to pack (`group_copy._pack`), with its own.

    A part whose newest segment is a reservation still open is held (`left_open`): the task before
    ended without closing it (killed, or fenced first), so records it sent may still land, and the
    part is read only once the task has settled the reservation at what landed.
    """
    for part in parts:
        segments = announced.get(_tp(part), [])
        part.announced = list(segments)
        newest = max(segments, key=lambda s: s.dest_start, default=None)
        left = newest if newest is not None else part.unit.continues_open
        if left is not None and left.open:
            left_open.hold(part, left, delivery_timeout_ms)
        elif newest is not None and newest.sure_end()[0] > part.dest_end:
            part.start_at(*newest.sure_end())


def _hold_short(continuing: list[Member], ends: dict[tuple[str, int], int], delivery_timeout_ms: int) -> None:
    """Hold a part whose mirror still ends short of the segment the epoch before announced last: that
    task announced it closed (it had packed) and its records were not acknowledged in time, so some
    may still land. It is settled at what landed as a reservation is (`left_open`); before, the part
    stopped until a plan's repair, two epochs later."""
    for part in continuing:
        newest = max(part.announced, key=lambda s: s.dest_start, default=None)
        if not part.failed and newest is not None and ends[_tp(part)] < part.dest_end == newest.dest_end:
            left_open.hold(part, newest.in_doubt(), delivery_timeout_ms)


def _landed_ends(ctx: CopyContext, admin: AdminClient, parts: list[Member]) -> dict[tuple[str, int], int]:
    """The log ends of `parts` once each has reached its part's start (the epoch before's last
    round landing), or as they are after the writers' delivery timeout."""
    ends: dict[tuple[str, int], int] = {}
    started = time.monotonic()
    deadline = started + ctx.writer_delivery_timeout_ms / 1000
    waiting = len(parts)
    while parts:
        ends.update(_log_ends(ctx, admin, parts))
        parts = [p for p in parts if ends[_tp(p)] < p.dest_end]
        if not parts or time.monotonic() >= deadline:
            break
        time.sleep(LANDED_POLL_S)
    if (waited := time.monotonic() - started) >= SLOW_LANDING_S:  # a take-over's pause (`hand_over`)
        log.warning("waited %d ms for the epoch before's last round to land on %d partition(s)", waited * 1000, waiting)
    return ends


def _tp(part: Member) -> tuple[str, int]:
    return part.unit.mirror_topic, part.unit.partition


def verify_log_ends(ctx: CopyContext, admin: AdminClient, parts: list[Member]) -> None:
    """Step 4: every mirror partition ends where its last segment does (one still held at the
    task's end has records in doubt: its reservation is settled by whoever takes it up, `left_open`)."""
    checked = [p for p in parts if not p.result.error and p.left_open is None]
    if not checked:
        return
    ends = _log_ends(ctx, admin, checked)
    for part in checked:
        landed = ends[(part.unit.mirror_topic, part.unit.partition)]
        if landed != part.result.dest_until:
            part.fail(
                MirrorDiverged.__name__,
                f"mirror '{part.unit.mirror_topic}' partition {part.unit.partition}: "
                f"log end is {landed} after copying, expected {part.result.dest_until}: records not "
                f"written by this link are in the mirror",
            )


def _log_ends(ctx: CopyContext, admin: AdminClient, parts: list[Member]) -> dict[tuple[str, int], int]:
    """The parts' mirror partitions' log ends, records of open transactions included: where a writer appends."""
    return kc.list_offsets(
        admin, [(p.unit.mirror_topic, p.unit.partition) for p in parts], "latest", ctx.dest_alias, read_committed=False
    )
