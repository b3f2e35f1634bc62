"""Follow mode's packing before a hand-over: the open reservations closed and each partition's
segments merged in one transaction per writer slot, the slots side by side (`hand_over.close_and_pack`).

The transactions are the slot writers' (tested against Kafka in the follow-mode integration and
fault tests); here a writer that records what it was asked to write stands in for one, to check
what one transaction carries, what the offset map says with or without it, and the bookkeeping.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from mirror_pipeline.link.state_keys import segment_key
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment, resolve
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.hand_over import close_and_pack
from tests.unit.test_reservations import landed, member, reserve


class Writer:
    """Records each transaction; `meet` makes every writer's transaction wait for the others'."""

    def __init__(self, fails: Exception | None = None, meet: threading.Barrier | None = None) -> None:
        self.fails, self.meet = fails, meet
        self.transactions: list[tuple[list[tuple[str, int, Segment]], list[str]]] = []

    def write_segments(self, puts: Any, deletes: Any, doing: str) -> None:
        if self.meet is not None:
            self.meet.wait(5)  # broken (an error) unless the slots' transactions are in flight together
        if self.fails is not None:
            raise self.fails
        self.transactions.append((list(puts), list(deletes)))


@pytest.fixture
def pool():
    with ThreadPoolExecutor(4) as executor:
        yield executor


def in_epoch(partition: int = 0) -> Member:
    """A part that announced a closed segment of 10 records, then a reservation 10 records landed under."""
    part = member()
    part.unit = replace(part.unit, partition=partition)
    reserve(part, ((1050, 10),))
    landed(part, 10)
    closing = reservations.closing(part)
    reservations.announced(part, closing, reservations.announcement(part, ((1060, 5),), 2.0, True), 0.0, 1.0, 8.0)
    landed(part, 10)
    return part


def of_another_slot(part: Member) -> Member:
    return next(p for p in (in_epoch(n) for n in range(1, 64)) if p.slot != part.slot)


def stops() -> tuple[list[tuple[Member, str]], Any]:
    stopped: list[tuple[Member, str]] = []
    return stopped, lambda part, kind, message: stopped.append((part, kind))


def test_one_transaction_closes_the_reservation_and_merges_the_epochs_segments(pool):
    part = in_epoch()
    before = list(part.announced)
    assert [s.open for s in before] == [False, True]
    writer = Writer()
    stopped, stop = stops()

    done, fenced = close_and_pack(pool, {part.slot: writer}, [part], stop)

    merged = Segment(50, ((1050, 20),), 1070, written_at=before[-1].written_at)
    assert writer.transactions == [([("m", 0, merged)], [segment_key("l", "m", 0, 60)])]
    assert (done, fenced, stopped) == ([part], [], [])
    assert part.announced == [merged] and part.reservation is None and part.reserved_until == 0.0
    # With the transaction, the offset map says what it said with the reservation closed alone;
    # without it, the reservation is in doubt, settled at the mirror's log end (`repair`) as before.
    packed, closed_alone = resolve([merged], 70), resolve([before[0], reservations.closing(in_epoch())], 70)
    assert packed.offset_map == closed_alone.offset_map and packed.in_doubt == closed_alone.in_doubt == ()
    assert resolve(before, 70).in_doubt == (before[1],)


def test_a_part_with_nothing_to_merge_has_its_reservation_closed_and_one_with_neither_writes_nothing(pool):
    only_reserved = member()
    reserve(only_reserved, ((1050, 10),))
    landed(only_reserved, 10)
    quiet = in_epoch()
    reservations.closed(quiet, reservations.closing(quiet))
    quiet.announced = [Segment(50, ((1050, 20),), 1070)]
    writer = Writer()

    done, _ = close_and_pack(pool, {only_reserved.slot: writer}, [only_reserved, quiet], stops()[1])

    assert writer.transactions == [([("m", 0, Segment(50, ((1050, 10),), 1060, written_at=1.0))], [])]
    assert done == [only_reserved] and only_reserved.reservation is None


def test_the_slots_transactions_are_in_flight_together(pool):
    first = in_epoch()
    second = of_another_slot(first)
    meet = threading.Barrier(2)
    writers = {first.slot: Writer(meet=meet), second.slot: Writer(meet=meet)}

    done, fenced = close_and_pack(pool, writers, [first, second], stops()[1])

    assert sorted(done, key=lambda p: p.slot) == sorted([first, second], key=lambda p: p.slot) and fenced == []
    assert all(len(w.transactions) == 1 for w in writers.values())


def test_a_fenced_slot_writes_nothing_and_keeps_its_reservation_open_and_another_failure_stops_its_parts(pool):
    part = in_epoch()
    fenced_part = of_another_slot(part)
    failing_part = next(p for p in (in_epoch(n) for n in range(64, 128)) if p.slot not in (part.slot, fenced_part.slot))
    writers = {
        part.slot: Writer(),
        fenced_part.slot: Writer(ConcurrentWriter("fenced")),
        failing_part.slot: Writer(MirrorError("broker gone")),
    }
    unfenced = list(fenced_part.announced)
    stopped, stop = stops()

    done, fenced = close_and_pack(pool, writers, [part, fenced_part, failing_part], stop)

    assert done == [part] and fenced == [fenced_part.slot]
    assert fenced_part.reservation is not None and fenced_part.announced == unfenced  # the retake settles it
    assert stopped == [(failing_part, MirrorError.__name__)]


def test_a_failed_part_is_left_alone(pool):
    part = in_epoch()
    part.fail("KafkaException", "boom")
    writer = Writer()
    assert close_and_pack(pool, {part.slot: writer}, [part], stops()[1]) == ([], [])
    assert writer.transactions == []
