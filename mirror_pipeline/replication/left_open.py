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
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.hand_over import HAND_OVER_SKEW_S
from mirror_pipeline.replication.repair import landed_problem

log = logging.getLogger(__name__)


def hold(part: Member, reservation: Segment, delivery_timeout_ms: int) -> None:
    """Hold `part` at the reservation the task before left open, until none of its records can still land."""
    written_at = reservation.written_at or time.time()
    part.left_open = reservation
    part.settle_at = written_at + 2 * delivery_timeout_ms / 1000 + HAND_OVER_SKEW_S
    part.start_at(*reservation.sure_end())
    part.ended = True  # not read until settled
    # The merge of the epoch's segments (`hand_over.close_and_pack`) takes closed ones only.
    part.announced = [s for s in part.announced if not s.open]


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
        part.left_open = None


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
    ends = kc.list_offsets(admin, tps, "latest", ctx.dest_alias, read_committed=False)
    dest_conf = kc.client_config(ctx.dest_properties, link, "reader")
    source_conf = kc.client_config(ctx.source_properties, link, "reader")
    by_slot: dict[int, list[tuple[Member, Segment | None]]] = defaultdict(list)
    for part, tp in zip(parts, tps, strict=True):
        reservation, unit = part.left_open, part.unit
        assert reservation is not None
        end = ends[tp]
        if not reservation.sure_end()[0] <= end <= reservation.dest_end:
            part.fail(
                ConcurrentWriter.__name__,
                f"mirror '{unit.mirror_topic}' partition {unit.partition}: log end is {end}, outside the "
                f"reservation the task before left open (mirror offsets {reservation.dest_start} to "
                f"{reservation.dest_end}); another writer is active or wrote since; this unit stopped without writing",
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
            writers[slot].write_segments(puts, deletes, doing="closing reservations the task before left open")
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
                "%s[%d]: closed the reservation the task before left open at mirror offset %d",
                part.unit.mirror_topic,
                part.unit.partition,
                part.dest_end if kept is None else kept.dest_end,
            )
            _settled(part, kept)
            settled.append(part)
    return settled, fenced


def _settled(part: Member, kept: Segment | None) -> None:
    """The part goes on where the closed reservation ends (where it started, when nothing landed)."""
    assert part.left_open is not None
    part.start_at(*(kept.sure_end() if kept is not None else part.left_open.sure_end()))
    if kept is not None:
        part.announced.append(kept)
    part.left_open = None


def _key(link: str, part: Member) -> str:
    assert part.left_open is not None
    return segment_key(link, part.unit.mirror_topic, part.unit.partition, part.left_open.dest_start)
