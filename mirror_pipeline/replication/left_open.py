"""Follow mode: a reservation the task before left open, settled by the task that took over.

A task closes its reservations before its hand-over. One it left open (it was
killed, or the next epoch's fence met its last transactions on a loaded
machine) may still have records in flight: its producers sent them under the
reservation, and fencing its writer slot does not stop them. But the task
that took over has fenced that slot, so nothing more is announced under the
old writer, and every record under a reservation is sent before the deadline
of the round that announced it (`reservations`): none lands later than the
reservation's `written_at` plus the link's fence wait (twice the writers'
delivery timeout, `chunks.chunk_delivery_timeout_ms`), give or take the
clocks of two hosts (`HAND_OVER_SKEW_S`).

Until then the task holds the partition (`hold`: not read; its other
partitions copy on). Then it settles it as a repair does (`repair`): what
landed of the reservation is its records up to the mirror's log end, which
are checked record by record against the source, and the reservation is
closed there (deleted when nothing of it landed) in a transaction of the
slot's writer; the partition is read on from where that ends. Before, the
unit failed and the partition waited for a full plan: in follow mode two
epochs, since the epoch after was planned before the failure was known.

A task's own reservation is in the same doubt when a round under it is not
acknowledged within the writers' delivery timeout (a destination broker that
stalled, a leader that moved): librdkafka gives the records up, but a
request already sent may still be written. The task holds that partition the
same way (`hold_after_timeout`) and settles it at the same bound, counted
from when the reservation was written: every record under it was sent before
its deadline. Before, the partition stopped for the rest of the epoch (up to
two minutes by default) and its reservation waited for the next epoch's task.
A part held HOLDS_PER_TASK times in a task stops at the next one, as before.
Past its pack a task announces closed segments, not reservations: a round's
own segment in doubt is held the same way, taken as a reservation, and so is
the last of them by the next epoch's task when the task before ended still
holding it (`group_checks`).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence

from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_keys import segment_key
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorDiverged, MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.copier import CopyContext
from mirror_pipeline.replication.group_reading import Member, RoundReader
from mirror_pipeline.replication.hand_over import HAND_OVER_SKEW_S
from mirror_pipeline.replication.repair import landed_problem

log = logging.getLogger(__name__)

# Rounds not acknowledged in time that a task holds a partition for (`hold_after_timeout`); the
# next one stops the partition until the next plan.
HOLDS_PER_TASK = 3


def hold(part: Member, reservation: Segment, delivery_timeout_ms: int) -> None:
    """Hold `part` at the reservation the task before left open, until none of its records can still land."""
    _held_at(part, reservation, delivery_timeout_ms)
    part.start_at(*reservation.sure_end())
    part.ended = True  # not read until settled


def _held_at(part: Member, reservation: Segment, delivery_timeout_ms: int) -> None:
    part.left_open = reservation
    written_at = reservation.written_at or time.time()
    part.settle_at = written_at + 2 * delivery_timeout_ms / 1000 + HAND_OVER_SKEW_S
    # The merge of the epoch's segments (`hand_over.close_and_pack`) takes closed ones only, and the
    # held one once it is settled.
    part.announced = [s for s in part.announced if not s.open and s.dest_start != reservation.dest_start]


def hold_after_timeout(part: Member, reason: str, delivery_timeout_ms: int) -> bool:
    """Hold a part whose round under its own reservation, or announced on its own (past the pack),
    was not acknowledged (`reason`) until none of its records can still land (see the module);
    False when it was held HOLDS_PER_TASK times already. The caller stops reading it
    (`RoundReader.hold`); what it copied so far stays its own."""
    reservation = part.reservation
    newest = max(part.announced, key=lambda s: s.dest_start, default=None)
    if reservation is None and newest is not None and newest.dest_start == part.dest_end:
        reservation = newest.in_doubt()  # the round's own segment: none of it acknowledged
    if reservation is None or part.failed or part.result.rounds_held >= HOLDS_PER_TASK:
        return False
    part.result.rounds_held += 1
    part.held_after_timeout = True
    part.reservation, part.reserved_until, part.reservation_deadline = None, 0.0, 0.0
    _held_at(part, reservation, delivery_timeout_ms)
    log.warning(
        "mirror '%s' partition %d: %s; holding it at mirror offset %d for %.1fs, until none of those records can "
        "still land, then copying on from what landed",
        part.unit.mirror_topic,
        part.unit.partition,
        reason,
        part.dest_end,
        max(0.0, part.settle_at - time.time()),
    )
    return True


def hold_or_stop(missed: list[tuple[Member, str, bool]], rounds: RoundReader, holding: bool, timeout_ms: int) -> None:
    """Parts whose round did not land (`RoundSending.land`): held when `holding` (follow mode, not
    yet taken over) and their records are in doubt (`hold_after_timeout`), else stopped."""
    for part, reason, in_doubt in missed:
        if part.failed:
            continue
        if holding and in_doubt and hold_after_timeout(part, reason, timeout_ms):
            rounds.hold(part)
        else:
            rounds.stop(part, MirrorError.__name__, reason)


def held(parts: Sequence[Member]) -> list[Member]:
    return [p for p in parts if p.left_open is not None and not p.failed]


def due(parts: Sequence[Member], now: float) -> list[Member]:
    """Held parts none of whose reservation's records can still land (`time.time` `now`)."""
    return [p for p in held(parts) if now >= p.settle_at]


def next_settling(parts: Sequence[Member]) -> float:
    """When the next held part may be settled (`time.time`), inf when none is held."""
    return min((p.settle_at for p in held(parts)), default=float("inf"))


def leave(parts: Sequence[Member]) -> None:
    """At the task's end: parts still held are left to the next epoch's task (or the next plan)."""
    for part in held(parts):
        part.result.left_to_next_epoch = True


def release(parts: Sequence[Member]) -> None:
    """Stop holding `parts` without settling them: their slot's writer was fenced, and whoever
    fenced it (the next epoch's task, or a verb's repair) settles their reservations."""
    for part in held(parts):
        part.left_open, part.held_after_timeout = None, False


def settle(
    ctx: CopyContext, link: str, admin: AdminClient, writers: dict[int, SlotWriter], parts: list[Member]
) -> tuple[list[Member], list[int]]:
    """Settle held `parts` at their mirror's log end (see the module); a part whose landed records
    are not what the reservation maps fails, unwritten, for the next plan's repair to flag.

    Returns the parts settled (to be read again from where they now end) and the slots whose
    writer was fenced meanwhile (their parts still held: the caller takes the slots back).
    """
    if not parts:
        return [], []
    tps = [(p.unit.mirror_topic, p.unit.partition) for p in parts]
    try:
        # Asked no longer than a round waits: the task's other partitions wait meanwhile.
        asking_s = ctx.writer_delivery_timeout_ms / 1000
        ends = kc.list_offsets(admin, tps, "latest", ctx.dest_alias, read_committed=False, timeout=asking_s)
    except MirrorError as exc:  # the destination does not answer yet: held on, tried again
        for part in parts:
            part.settle_at = time.time() + ctx.writer_delivery_timeout_ms / 1000
        log.warning("reservations left open stay held, their mirrors' log ends unknown: %s", exc)
        return [], []
    dest_conf = kc.client_config(ctx.dest_properties, link, "reader")
    source_conf = kc.client_config(ctx.source_properties, link, "reader")
    by_slot: dict[int, list[tuple[Member, Segment | None]]] = defaultdict(list)
    for part, tp in zip(parts, tps, strict=True):
        reservation, unit = part.left_open, part.unit
        assert reservation is not None
        end = ends[tp]
        if not part.dest_end <= end <= reservation.dest_end:  # at or past what is sure to have landed
            part.fail(
                ConcurrentWriter.__name__,
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end is {end}, outside the "
                f"reservation left open (mirror offsets {part.dest_end} to {reservation.dest_end}); another "
                f"writer is active or wrote since; this unit stopped without writing",
            )
            continue
        kept = reservation.truncated(end)
        where = (unit.mirror_topic, unit.source_topic, unit.partition)
        if kept is not None and (problem := landed_problem(dest_conf, source_conf, *where, kept)):
            part.fail(MirrorDiverged.__name__, problem)
            continue
        by_slot[part.slot].append((part, kept))
    settled: list[Member] = []
    fenced: list[int] = []
    for slot, items in sorted(by_slot.items()):
        puts = [(p.unit.mirror_topic, p.unit.partition, kept) for p, kept in items if kept is not None]
        deletes = [_key(link, p) for p, kept in items if kept is None]
        try:
            writers[slot].write_segments(puts, deletes, doing="closing reservations left open")
        except ConcurrentWriter:
            fenced.append(slot)
            continue
        except MirrorError as exc:
            for part, _ in items:
                said = f"mirror '{part.unit.mirror_topic}' partition {part.unit.partition}: {exc}"
                part.fail(MirrorError.__name__, said)
            continue
        for part, kept in items:
            log.info(
                "%s[%d]: closed the reservation %s left open at mirror offset %d; copying on from there",
                part.unit.mirror_topic,
                part.unit.partition,
                "a round not acknowledged in time" if part.held_after_timeout else "the task before",
                part.dest_end if kept is None else kept.dest_end,
            )
            _settled(part, kept)
            settled.append(part)
    return settled, fenced


def _settled(part: Member, kept: Segment | None) -> None:
    """The part goes on where the closed reservation ends (where it started, when nothing landed).
    Records of its own that landed after all count as copied (their bytes and latency are not known)."""
    assert part.left_open is not None
    end = kept.sure_end() if kept is not None else part.left_open.sure_end()
    if part.held_after_timeout:
        part.result.records += end[0] - part.dest_end
        part.go_on_from(*end)
    else:
        part.start_at(*end)
    if kept is not None:
        part.announced.append(kept)
    part.left_open, part.held_after_timeout = None, False


def _key(link: str, part: Member) -> str:
    assert part.left_open is not None
    return segment_key(link, part.unit.mirror_topic, part.unit.partition, part.left_open.dest_start)
