"""A group copy's announcements: segments of many partitions, one transaction per writer slot (see `group_copy`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor

from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.group_reading import Member


def announce_by_slot(
    pool: Executor,
    writers: dict[int, SlotWriter],
    parts: list[Member],
    segment_of: Callable[[Member], Segment | None],
    note: Callable[[Member, Segment | None], None],
    stop: Callable[[Member, str, str], None],
) -> tuple[list[Member], list[int]]:
    """Write each part's segment (`segment_of`; None: none) with its open reservation closed, one
    transaction per writer slot, and `note` each part whose slot committed (with the reservation as
    closed). A slot whose transaction failed otherwise has its parts `stop`ped.

    Returns the noted parts and the slots whose writer was fenced: nothing of them was written,
    and the caller takes them back.
    """
    by_slot: dict[int, list[Member]] = defaultdict(list)
    for part in parts:
        by_slot[part.slot].append(part)
    closed = {id(p): reservations.closing(p) for p in parts}
    slots = sorted(by_slot)

    def write(slot: int) -> None:
        puts = []
        for p in by_slot[slot]:
            puts += [(p.unit.mirror_topic, p.unit.partition, s) for s in (closed[id(p)], segment_of(p)) if s]
        writers[slot].write_segments(puts)

    # The slots' transactions are independent: their round trips overlap (a round of 16 slots one
    # after another waited on 16 commits).
    outcomes = [pool.submit(write, slot) for slot in slots] if len(slots) > 1 else None
    done: list[Member] = []
    fenced: list[int] = []
    for i, slot in enumerate(slots):
        try:
            if outcomes:
                outcomes[i].result()
            else:
                write(slot)
        except ConcurrentWriter:
            fenced.append(slot)
            continue
        except MirrorError as exc:
            for part in by_slot[slot]:
                stop(part, MirrorError.__name__, str(exc))
            continue
        for part in by_slot[slot]:
            note(part, closed[id(part)])
        done += by_slot[slot]
    return done, fenced
