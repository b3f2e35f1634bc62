"""A group copy's reading: one consumer for every unit of a task, read in rounds (see `group_copy`).

A round holds at most one chunk: `round_records` records and `chunk_bytes`
of memory (key + value + RECORD_OVERHEAD_BYTES each, one record at least)
over all the units, from ROUND_PARTITIONS partitions at most. Records read past a full round are kept and start the
next one. A bounded unit stops being read at its `source_until` (its
partition is paused), however the consumer reached it: a record at or past
it, or its position moved past markers and aborted records it never hands out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirror_pipeline.link.state_keys import writer_slot
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.chunks import (
    CONSUME_BATCH,
    FIRST_CONSUME_BATCH,
    FOLLOW_WAIT_S,
    IDLE_TIMEOUT_S,
    POLL_S,
    Latency,
    chunk_timestamps,
    offset_of,
    without_errors,
)
from mirror_pipeline.replication.copier import UnitResult, WorkUnit
from mirror_pipeline.replication.split_reader import Reader
from mirror_pipeline.replication.task_memory import RECORD_OVERHEAD_BYTES


@dataclass(eq=False)
class Member:
    """One unit's progress inside a group copy."""

    unit: WorkUnit
    result: UnitResult
    position: int  # next source offset to read
    dest_end: int  # the mirror's log end after the last acknowledged round
    chunk: list[Message] = field(default_factory=list)
    held: int = 0  # memory of `chunk`
    ended: bool = False
    announced: list[Segment] = field(default_factory=list)  # follow mode: the epoch's segments
    # Follow mode: the open reservation (`group_copy`), until when rounds may still go under it,
    # and the deadline they must be sent by (the one of the round that announced it).
    reservation: Segment | None = None
    reserved_until: float = 0.0
    reservation_deadline: float = 0.0
    paused: bool = False  # its mirror was found paused after a fence (`group_checks`)
    # Follow mode: the reservation the task before left open, not read until it is settled at
    # `settle_at` (`time.time`), once none of its records can still land (`left_open`).
    left_open: Segment | None = None
    settle_at: float = 0.0
    # Follow mode: the reservation held is this task's own, a round under it not acknowledged in
    # time (`left_open.hold_after_timeout`).
    held_after_timeout: bool = False
    latency: Latency = field(default_factory=Latency)

    @classmethod
    def starting(cls, u: WorkUnit) -> Member:
        """A unit's member before it copied anything."""
        return cls(
            u,
            UnitResult(u.mirror_topic, u.partition, u.source_from, u.source_from, u.dest_start, u.dest_start),
            u.source_from,
            u.dest_start,
        )

    @property
    def slot(self) -> int:
        return writer_slot(self.unit.mirror_topic, self.unit.partition, self.unit.writer_slots)

    @property
    def failed(self) -> bool:
        return bool(self.result.error)

    @property
    def source_key(self) -> tuple[str, int]:
        """The source partition, as a consumed record names it (`Message.topic()`, `Message.partition()`)."""
        return self.unit.source_topic, self.unit.partition

    @property
    def source_tp(self) -> TopicPartition:
        return TopicPartition(*self.source_key)

    def fail(self, kind: str, message: str) -> None:
        if not self.result.error:
            self.result.error_kind, self.result.error = kind, message
        self.ended = True
        self.chunk = []
        self.held = 0

    def start_at(self, dest_end: int, position: int) -> None:
        """Copy from mirror offset `dest_end`, source offset `position`, rather than where planned."""
        self.go_on_from(dest_end, position)
        self.result.source_from, self.result.dest_from = position, dest_end

    def go_on_from(self, dest_end: int, position: int) -> None:
        """Copy on from mirror offset `dest_end`, source offset `position`: what the part copied ends there."""
        self.dest_end, self.position = dest_end, position
        self.result.source_until, self.result.dest_until = position, dest_end

    def landed(self, dest_end: int, stamps: list[tuple[int, int]], acked_ms: int) -> None:
        """The round in hand was acknowledged, the mirror partition now ending at `dest_end`; `stamps`
        are its records' (type, timestamp)s, `acked_ms` when it was acknowledged (its latency)."""
        result, chunk = self.result, self.chunk
        if chunk:
            valid_ts = chunk_timestamps(stamps)[1]
            if result.first_timestamp < 0 and valid_ts:
                result.first_timestamp = valid_ts[0]
            result.last_timestamp = stamps[-1][1]
            self.latency.add(valid_ts, acked_ms)
        result.records += len(chunk)
        result.bytes += self.held - len(chunk) * RECORD_OVERHEAD_BYTES
        result.source_until = self.position
        result.dest_until = self.dest_end = dest_end
        (result.latency_min_ms, result.latency_max_ms, result.latency_sum_ms, result.latency_records) = (
            self.latency.figures()
        )
        self.chunk, self.held = [], 0

    def has_news(self) -> bool:
        """Whether the round has something to announce: records, or (a bounded unit) a read
        position moved past records the consumer never hands out (markers, aborted data)."""
        if self.failed:
            return False
        return bool(self.chunk) or (not self.unit.follows and self.position > self.result.source_until)


# Partitions a round writes to at most: the round's records must land within the writer's delivery
# timeout, and a broker writing the first records of thousands of fresh partitions at once did not
# (2,500 partitions a task, 10,000 on one destination broker of this 2-core machine).
ROUND_PARTITIONS = 256
# Follow mode: the shortest time from one round's cut to the next's (see `RoundReader._first_of_round`).
FOLLOW_ROUND_S = 0.01


class RoundReader:
    """Reads rounds of records for a group's members from one consumer, assigned to them all."""

    def __init__(
        self,
        reader: Reader,
        members: Sequence[Member],
        chunk_bytes: int,
        round_records: int,
        max_message_bytes: int,
        follow_until: float = 0.0,
    ) -> None:
        """`follow_until`: follow mode, read as records arrive until this time (`time.time()`); 0: read
        the members' ranges and end."""
        self.reader, self.members = reader, list(members)
        self.chunk_bytes, self.round_records, self.max_message_bytes = chunk_bytes, round_records, max_message_bytes
        self.follow_until = follow_until
        # Looked up by a consumed record's (topic, partition), which confluent-kafka types Optional.
        self.by_tp: dict[tuple[str | None, int | None], Member] = {m.source_key: m for m in self.members}
        self.pending: list[Message] = []  # records read past a full round, first in the next
        self.record_bytes = 0  # memory per record in the last batch read (0: none yet)
        self.last_cut = 0.0  # when the last round was cut (time.monotonic)
        self.ending: list[TopicPartition] = []  # bounded units read to their end, paused as the round ends
        self.drained: set[tuple[str, int]] = set()  # bounded units whose last record is in hand (paused)
        reader.assign([TopicPartition(m.unit.source_topic, m.unit.partition, m.position) for m in self.reading()])

    def reading(self) -> list[Member]:
        """Members still being read (not at their end, not failed)."""
        return [m for m in self.members if not m.ended]

    def news(self) -> list[Member]:
        """Members with something to announce."""
        return [m for m in self.members if m.has_news()]

    def stop(self, member: Member, kind: str, message: str) -> None:
        """A member failed: nothing more of it is read or announced."""
        member.fail(kind, f"mirror '{member.unit.mirror_topic}' partition {member.unit.partition}: {message}")
        self.reader.pause([member.source_tp])

    def hand_over(self, member: Member) -> None:
        """Follow mode: the next epoch's task took the member's writer; its round in hand was never
        announced, so that task reads it again. Nothing more of it is read or announced here."""
        member.chunk, member.held, member.ended = [], 0, True
        self.reader.pause([member.source_tp])

    def hold(self, member: Member) -> None:
        """Follow mode: stop reading a member until it is taken up again (`left_open`); its round in
        hand, and what was read of it past the round, are dropped (read again from where it goes on)."""
        member.chunk, member.held, member.ended = [], 0, True
        self._drop_pending(member)
        self.reader.incremental_unassign([member.source_tp])

    def take_up(self, member: Member) -> None:
        """Read a member held until now (`left_open`: never assigned, or unassigned by `hold`) from its position."""
        member.ended = False
        unit = member.unit
        self.reader.incremental_assign([TopicPartition(unit.source_topic, unit.partition, member.position)])

    def rewind(self, member: Member) -> None:
        """Read a member again from where its last landed round ended (its round in hand was never announced)."""
        member.chunk, member.held, member.ended = [], 0, False
        member.position = member.result.source_until
        self._drop_pending(member)
        self.drained.discard(member.source_key)  # resumed below: paused again once read to its end
        tp = TopicPartition(member.unit.source_topic, member.unit.partition, member.position)
        self.reader.resume([member.source_tp])
        try:
            self.reader.seek(tp)
        except KafkaException:  # a partition not fetched from yet cannot be sought: assign it anew
            self.reader.incremental_unassign([member.source_tp])
            self.reader.incremental_assign([tp])

    def _drop_pending(self, member: Member) -> None:
        """Forget what was read of `member` past the round (read again from where it goes on)."""
        self.pending = [m for m in self.pending if (m.topic(), m.partition()) != member.source_key]

    def fail_stalled(self) -> None:
        """Bounded units that read nothing for IDLE_TIMEOUT_S though the plan expected records."""
        for part in self.reading():
            part.fail(
                MirrorError.__name__,
                f"source topic '{part.unit.source_topic}' partition {part.unit.partition}: no progress at offset "
                f"{part.position} for {IDLE_TIMEOUT_S:.0f}s (the plan expected records up to {part.unit.source_until})",
            )

    def read_round(self) -> list[Member]:
        """Read records into the live partitions' chunks until the round holds a chunk's records or
        memory, or nothing more comes; the partitions with something to announce."""
        try:
            return self._read_round()
        finally:
            self._pause_ended()

    def _read_round(self) -> list[Member]:
        held = records = self.round_partitions = 0
        while True:
            if self.pending:
                msgs, self.pending = self.pending, []
            elif (wait := self._wait(records > 0)) > POLL_S:
                msgs = self._first_of_round(wait)
            else:
                msgs = self.reader.consume(self._want(held, records), wait)
            if msgs:
                taken, held, full = self._take(msgs, held, records)
                records += taken
                if full:
                    return self.news()
                continue
            if not self.follow_until:
                # Only here is every record the consumer handed out in a chunk (nothing pending).
                self._note_ends()
                return self.news()
            news = self.news()
            if news or not self.reading() or time.time() >= self.follow_until:
                self.last_cut = time.monotonic()
                return news

    def _first_of_round(self, wait: float) -> list[Message]:
        """Follow mode, nothing read yet: the first record as it arrives, and what else comes until the
        round is FOLLOW_ROUND_S old (counted from the last round's cut).

        consume(n, timeout) returns only with n records or at its timeout: waiting in it held every
        round to FOLLOW_WAIT_S (p50 291 ms at 2,000 records/s); poll returns at the first record. The
        interval bounds a task to 100 rounds a second, each a produce request per partition: most go
        under a reservation, with no transaction (`reservations`). With a transaction per round it
        was 0.1 s, and the round's median latency 60 ms; under reservations 16 ms at 0.02 s, 10 ms at
        0.01 s, 7-8 ms at 0.005 s (MirrorMaker 2: 8-9 ms). At 0.005 s the destination broker did twice
        MirrorMaker 2's work and the p99 was no better: at 2,000 records/s, 0.01 s took a quarter off
        the CPU of the copy and the brokers (benchmarks/README, "Rounds 10 ms apart").
        """
        first = self.reader.poll(wait)
        if first is None:
            return []
        gather = self.last_cut + FOLLOW_ROUND_S - time.monotonic()
        more = self._want(0, 0) - 1
        return [first, *self.reader.consume(more, gather)] if gather > 0 and more > 0 else [first]

    def _wait(self, something_read: bool) -> float:
        if not self.follow_until:
            return POLL_S
        if something_read:
            return 0.0  # follow mode sends what arrived at once: latency
        return max(0.0, min(FOLLOW_WAIT_S, self.follow_until - time.time()))

    def _want(self, held: int, records: int) -> int:
        room = self.round_records - records
        if self.record_bytes:
            return max(1, min(CONSUME_BATCH, room, (self.chunk_bytes - held) // self.record_bytes + 1))
        # The first batch tells the records' size (see `chunks.ChunkReader._want`).
        return max(1, min(FIRST_CONSUME_BATCH, room, self.chunk_bytes // max(1, self.max_message_bytes)))

    def _take(self, msgs: list[Message], held: int, records: int) -> tuple[int, int, bool]:
        """Sort a consumed batch into the partitions' chunks; (records taken, memory held after,
        whether the round is full: the rest of the batch then waits in `pending`)."""
        taken = total = 0
        full = False
        for i, msg in enumerate(msgs):
            part = self.by_tp.get((msg.topic(), msg.partition()))
            if part is None:
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise MirrorError(f"reading the source failed: {err.name()}")  # the consumer's, not a partition's
                continue
            if part.ended:
                continue  # past a bounded unit's end, or its unit failed: never copied
            if msg.error() is not None:
                try:
                    without_errors([msg], part.unit, part.position)
                except MirrorError as exc:
                    part.fail(MirrorError.__name__, str(exc))
                    self.reader.pause([part.source_tp])
                continue
            offset = offset_of(msg)
            if offset >= part.unit.source_until:
                self._end(part, part.unit.source_until)
                continue
            key = msg.key()
            size = len(msg) + (len(key) if key is not None else 0) + RECORD_OVERHEAD_BYTES
            new_partition = not part.chunk
            if (held + size > self.chunk_bytes and (held or taken)) or (
                new_partition and self.round_partitions >= ROUND_PARTITIONS
            ):
                self.pending = msgs[i:]  # this record starts the next round
                self._stop_fetching_drained(self.pending)
                full = True
                break
            self.round_partitions += new_partition
            total += size
            part.chunk.append(msg)
            part.held += size
            part.position = offset + 1
            held += size
            taken += 1
            if part.position >= part.unit.source_until:
                self._end(part, part.unit.source_until)
            elif not self.follow_until and part.result.bytes + part.held >= part.unit.max_bytes:
                self._end(part, part.position)
            if records + taken >= self.round_records:
                self.pending = msgs[i + 1 :]
                self._stop_fetching_drained(self.pending)
                full = True
                break
        if taken:
            self.record_bytes = max(1, total // taken)
        return taken, held, full

    def _end(self, part: Member, position: int) -> None:
        """A bounded unit read everything it copies: its partition is no longer fetched from the
        round's end (`_pause_ended`); a record of it read until then is not copied."""
        part.position = max(part.position, position)
        part.ended = True
        self._stop_fetching(part)

    def _stop_fetching_drained(self, pending: list[Message]) -> None:
        """Bounded units whose last record waits in `pending` for a later round: nothing is left to
        fetch for them, so they are paused at this round's end too.

        A partition the consumer handed out everything of but that is not paused keeps its broker
        thread walking every assigned partition: one record read from each of 2,500 partitions
        kept it busy for 1.4 CPU-s after the last was read, 0.2 when each batch's partitions were
        paused at once. A round takes ROUND_PARTITIONS partitions at most, so a wide task's
        partitions wait in `pending` for later rounds: paused only as their round came, a run
        copying one record from each of 10,000 partitions (four tasks) cost the tasks' Python
        workers 9.6-9.8 CPU-s, against 9.1-9.3 paused here."""
        for msg in pending:
            part = self.by_tp.get((msg.topic(), msg.partition()))
            if part is not None and msg.error() is None and offset_of(msg) + 1 >= part.unit.source_until:
                self._stop_fetching(part)

    def _stop_fetching(self, part: Member) -> None:
        if part.source_key not in self.drained:
            self.drained.add(part.source_key)
            self.ending.append(part.source_tp)

    def _pause_ended(self) -> None:
        """Pause the partitions the round read to their end, in one call.

        Each pause is an operation the consumer's broker thread serves, and
        after each it walks every assigned partition: paused one by one, a task
        reading one record from each of 2,500 partitions walked them 2,500
        times (0.67 CPU-s of the task's 2.0); paused a round at a time, 0.3.
        """
        if self.ending:
            self.reader.pause(self.ending)
            self.ending = []

    def _note_ends(self) -> None:
        """Bounded units whose consumer position passed their end (across markers or aborted records)."""
        reading = self.reading()
        if not reading:
            return
        for part, tp in zip(reading, self.reader.position([p.source_tp for p in reading]), strict=True):
            if tp.offset >= 0:
                part.position = max(part.position, min(tp.offset, part.unit.source_until))
            if part.position >= part.unit.source_until:
                self._end(part, part.unit.source_until)
