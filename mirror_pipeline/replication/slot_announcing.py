"""A group copy's announcements: segments of many partitions, one transaction per writer slot (see `group_copy`).

`start` writes them and `finish` waits for them: a follow-mode task renews
its reservations in transactions its rounds do not wait for (`reservations`),
and collects their outcome in a later round.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass

from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.group_reading import Member


@dataclass
class Announcing:
    """Announcements written in their slots' transactions: each slot's outcome, and the
    reservations they close (cut where each part's records ended when they were started)."""

    by_slot: dict[int, list[Member]]
    closed: dict[int, Segment | None]
    outcomes: dict[int, Future[float]]  # by slot: how long its transaction took (s)

    def done(self) -> bool:
        return all(outcome.done() for outcome in self.outcomes.values())


def start(
    pool: Executor,
    writers: dict[int, SlotWriter],
    parts: list[Member],
    segment_of: Callable[[Member], Segment | None],
    in_background: bool = False,
) -> Announcing:
    """Write each part's segment (`segment_of`; None: none) with its open reservation closed, one
    transaction per writer slot. The slots' transactions are independent, so their round trips
    overlap (a round of 16 slots one after another waited on 16 commits); a single slot's is
    written here unless `in_background`."""
    by_slot: dict[int, list[Member]] = defaultdict(list)
    for part in parts:
        by_slot[part.slot].append(part)
    closed = {id(p): reservations.closing(p) for p in parts}
    segments = {id(p): segment_of(p) for p in parts}

    def write(slot: int) -> float:
        began = time.monotonic()
        puts = []
        for p in by_slot[slot]:
            puts += [(p.unit.mirror_topic, p.unit.partition, s) for s in (closed[id(p)], segments[id(p)]) if s]
        writers[slot].write_segments(puts)
        return time.monotonic() - began

    outcomes: dict[int, Future[float]] = {}
    if len(by_slot) > 1 or in_background:
        outcomes = {slot: pool.submit(write, slot) for slot in sorted(by_slot)}
    for slot in by_slot.keys() - outcomes.keys():
        outcomes[slot] = Future()
        try:
            outcomes[slot].set_result(write(slot))
        except BaseException as exc:  # handed to `finish`, as a pool thread's would be
            outcomes[slot].set_exception(exc)
    return Announcing(dict(by_slot), closed, outcomes)


def finish(
    announcing: Announcing,
    note: Callable[[Member, Segment | None], None],
    stop: Callable[[Member, str, str], None],
) -> tuple[list[Member], list[int], float]:
    """Wait for `announcing`, `note` each part whose slot committed (with the reservation as closed)
    and `stop` the parts of a slot whose transaction failed otherwise.

    Returns the noted parts, the slots whose writer was fenced (nothing of them was written, and
    the caller takes them back) and how long the slowest transaction took (s).
    """
    # Every slot's transaction ends before any failure is raised: the caller may then close the writers.
    wait(announcing.outcomes.values())
    done: list[Member] = []
    fenced: list[int] = []
    slowest = 0.0
    for slot in sorted(announcing.by_slot):
        try:
            slowest = max(slowest, announcing.outcomes[slot].result())
        except ConcurrentWriter:
            fenced.append(slot)
            continue
        except MirrorError as exc:
            for part in announcing.by_slot[slot]:
                stop(part, MirrorError.__name__, str(exc))
            continue
        for part in announcing.by_slot[slot]:
            note(part, announcing.closed[id(part)])
        done += announcing.by_slot[slot]
    return done, fenced, slowest


def announce_by_slot(
    pool: Executor,
    writers: dict[int, SlotWriter],
    parts: list[Member],
    segment_of: Callable[[Member], Segment | None],
    note: Callable[[Member, Segment | None], None],
    stop: Callable[[Member, str, str], None],
) -> tuple[list[Member], list[int]]:
    """`start` and `finish`: the noted parts and the fenced slots."""
    done, fenced, _ = finish(start(pool, writers, parts, segment_of), note, stop)
    return done, fenced
