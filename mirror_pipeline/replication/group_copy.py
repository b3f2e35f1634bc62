"""A task's units copied together: one writer per slot, one consumer, one producer, in rounds.

A copy unit alone (`copier.copy_unit`) pays a fixed price before its first record: a fenced
writer, three clients, a read of the link's state and of the offset map. On a wide link that
price, not the records, set a cycle's time. Here a task pays it once for all its units: a
cycle's small units (a chunk or less behind) and every partition of a follow-mode task.

The protocol is `copier`'s, kept per partition:

1. Fence: take the writer of every slot the units map to (`state_keys.writer_slot`).
2. Check, after fencing, for all units at once: the mirrors' state (a stop
   marks a mirror before it fences, R-LC-8), the offset-map topic since the
   plan's snapshot (no other writer announced a chunk), the mirrors' log ends.
3. Round by round: read what the consumer has for the units (up to each
   unit's end; at most one chunk's records and memory for all of them),
   announce each partition's part of the round as its segment (in follow
   mode, a reservation for many rounds, sent without a transaction and renewed
   in one no round waits for: `reservations`, `renewals`), the segments of a
   slot in one transaction, produce every record with idempotent producers,
   and wait until all are acknowledged. A round is announced only once every
   record of the round before is acknowledged: after a crash at most the last
   segment of each partition is in doubt (`repair`), as with one unit; each
   partition's own announced, partly landed segment is settled by the next plan.
4. Verify every partition's log end is where its last segment ends (R-MT-9).

A slot whose writer was fenced (a pause or stop of a mirror it also serves, or another cycle)
is taken back and its units checked again as at step 2: those that may go on read their
unannounced round again, a held one stays held, the others (the stopped mirror's, a partition
another writer wrote to) end with `StateChanged` or `ConcurrentWriter`; the task's other slots
go on meanwhile. In follow mode a slot fenced at the epoch's end is the next epoch's task taking
over (`hand_over`): its units end there, unannounced round dropped, and step 4 is that task's
check after fencing. A follow-mode round not acknowledged in time holds its partitions until
none of its records can land (`left_open`). Memory is the task's budget (`MemoryPlan`), shared
by the units: a round is one chunk.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from confluent_kafka import KafkaException

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import left_open, reservations, slot_announcing
from mirror_pipeline.replication.chunks import IDLE_TIMEOUT_S, POLL_S, ProducerSet, chunk_runs
from mirror_pipeline.replication.copier import CopyContext, InTurn, UnitResult, WorkUnit, copy_unit
from mirror_pipeline.replication.group_checks import ReadAhead, check_after_fencing, verify_log_ends
from mirror_pipeline.replication.group_reading import Member, RoundReader
from mirror_pipeline.replication.hand_over import (
    FollowTimes,
    await_quiet_map,
    close_and_pack,
    note_take_over,
    wait_for_start,
)
from mirror_pipeline.replication.renewals import Renewals
from mirror_pipeline.replication.round_sending import RoundSending
from mirror_pipeline.replication.split_reader import Reader
from mirror_pipeline.replication.task_clients import (
    SLOT_THREADS,
    Failures,
    open_admin,
    open_producers,
    open_reader,
    open_writers,
    producers_first,
)
from mirror_pipeline.replication.task_memory import (
    free_what_the_task_left,
    memory_plan,
    return_free_memory,
    rss,
    use_allocator_settings,
)
from mirror_pipeline.replication.throttling import ThrottleWatch

log = logging.getLogger(__name__)

# Times a task takes back a slot's writer fenced under it (see `_GroupCopy._retake`).
RETAKES_PER_SLOT = 3


def copy_units(units: Sequence[WorkUnit], ctx: CopyContext) -> list[UnitResult]:
    """Copy a task's units: one after another when `units` is `InTurn` (or a single bounded
    unit: the throughput path, `copier.copy_unit`), else all together (`copy_group`)."""
    if isinstance(units, InTurn) or (len(units) == 1 and not units[0].follows):
        return [copy_unit(unit, ctx) for unit in units]
    return copy_group(units, ctx)


def copy_group(units: Sequence[WorkUnit], ctx: CopyContext) -> list[UnitResult]:
    """Copy `units` together (see the module); expected failures come back in each unit's result."""
    parts = [Member.starting(u) for u in units]
    return_free_memory()
    rss_start = rss(reset_peak=True)[0]
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the copy loop makes no reference cycles (see `copier.copy_unit`)
    try:
        _GroupCopy(parts, ctx).run()
    except MirrorError as exc:
        _fail_all(parts, type(exc).__name__, str(exc))
    except KafkaException as exc:
        if kc.is_fenced(exc):
            _fail_all(parts, "ConcurrentWriter", "another cycle took over this partition's writer; this writer stopped")
        else:
            _fail_all(parts, "KafkaException", kc.describe_error(exc, {**ctx.source_properties, **ctx.dest_properties}))
    finally:
        if gc_was_enabled:
            gc.enable()
    rss_peak = rss()[1]
    for part in parts:
        part.result.rss_start_bytes, part.result.rss_peak_bytes = rss_start, rss_peak
    free_what_the_task_left()
    return [part.result for part in parts]


def _fail_all(parts: list[Member], kind: str, message: str) -> None:
    for part in parts:
        if not part.failed:
            part.fail(kind, f"mirror '{part.unit.mirror_topic}' partition {part.unit.partition}: {message}")


class _GroupCopy:
    def __init__(self, parts: list[Member], ctx: CopyContext) -> None:
        self.parts, self.ctx = parts, ctx
        self.link = parts[0].unit.link
        self.follow_s = max(p.unit.follow_s for p in parts)
        self.times = FollowTimes(0.0)  # follow mode's, set once the task is ready to copy
        self.writers: dict[int, SlotWriter] = {}
        self.consumers: list[Reader] = []
        self.out = ProducerSet(lambda: kc.producer({}), 0)  # none until `run` opens them (`producers_first`)
        self.failures: Failures = {}
        self.throttles = ThrottleWatch()
        self.retakes: dict[int, int] = defaultdict(int)
        self.window_s = reservations.window_s(ctx.writer_delivery_timeout_ms)
        self.next_due = math.inf  # when the next reservation's window ends (`time.monotonic`)
        self.ahead: ReadAhead | None = None  # what a task taking over read before its fence

    def run(self) -> None:
        # The slot writers' round trips (fences, a round's transactions) overlap in it.
        self.pool = ThreadPoolExecutor(SLOT_THREADS, thread_name_prefix="slot-writer")
        self.renewals = Renewals(self.pool, self.writers, self.window_s, self.ctx.writer_delivery_timeout_ms)
        try:
            admin = self.pool.submit(open_admin, self.ctx, self.link)  # beside the fences: it writes nothing
            units = [p.unit for p in self.parts]
            memory = memory_plan(
                self.ctx.task_memory_bytes, max(u.max_message_bytes for u in units), max(u.chunk_records for u in units)
            )
            use_allocator_settings(memory)
            # Opened before fencing (they write nothing): a follow epoch's next task opens them as this one copies.
            self.consumers.append(reader := open_reader(self.ctx, self.link, self.parts, memory))
            if early := producers_first(self.parts):
                self.out = open_producers(self.ctx, self.link, self.parts, memory, self.failures, self.throttles)
            self.writers.update(open_writers(self.pool, self.ctx, self.link, {p.slot for p in self.parts}))
            if continuing := any(p.unit.continues for p in self.parts):  # taking over from the epoch before
                self.ahead = ReadAhead(self.ctx, self.link, self.parts)
                reading_ahead = self.pool.submit(self.ahead.read, admin.result)
            if not wait_for_start(self.parts):
                return
            steps: dict[str, float] = {}  # when each step of a take-over ended (`note_take_over`)
            if continuing:
                wait([reading_ahead])
                await_quiet_map(admin.result(), self.ctx.offset_map_topic, self.ctx.dest_alias)
                steps["map quiet"] = time.time()
            for done in [self.pool.submit(w.fence) for w in self.writers.values()]:
                done.result()
            steps["fenced"] = time.time()
            self.admin = admin.result()
            check_after_fencing(self.ctx, self.link, self.admin, self.pool, self.parts, ahead=self.ahead)
            steps["checked"] = time.time()
            if all(p.ended for p in self.parts) and not left_open.held(self.parts):
                return
            if not early:
                self.out = open_producers(self.ctx, self.link, self.parts, memory, self.failures, self.throttles)
            if self.follow_s:
                self.times = FollowTimes.from_now(units)
                if continuing:
                    note_take_over(self.parts, {**steps, "ready": time.time()})
            self.rounds = RoundReader(
                reader,
                self.parts,
                memory.chunk_bytes,
                max(u.chunk_records for u in units),
                max(u.max_message_bytes for u in units),
                follow_until=self.times.follow_until,
            )
            self._copy_rounds()
            left_open.leave(self.parts)
            if self.times.follow_until and not self.times.hand_over_at:  # the last epoch: packed at its end
                self._close_and_pack()
            else:  # handed over, it packed before its last rounds (`FollowTimes.pack_due`)
                self._close_reservations(self.parts)
            if not self.times.hand_over_at:
                # Handed over, the next epoch's task checks the log ends after fencing (or the next
                # plan does): read here, they could already hold that task's records.
                verify_log_ends(self.ctx, self.admin, self.parts)
        finally:
            self.renewals.end()
            # Its threads first: a fence still running when another one failed must end before its
            # writer is destroyed under it (`closing`).
            self.pool.shutdown()
            for consumer in self.consumers:
                consumer.close()
            if self.ahead is not None:
                self.ahead.close()
            for writer in self.writers.values():
                writer.close()
            self.out.close()

    def _copy_rounds(self) -> None:
        idle_since = time.monotonic()
        rounds = self.rounds
        while rounds.reading() or rounds.news() or left_open.held(self.parts):
            self._collect_renewal(wait=False)
            if settling := left_open.due(self.parts, time.time()):
                self._settle(settling)
            elif not rounds.reading():  # only held parts: nothing to read until one is settled
                time.sleep(min(POLL_S, max(0.0, left_open.next_settling(self.parts) - time.time())))
            news = rounds.read_round()
            if news:
                idle_since = time.monotonic()
                self._write_round(news)
            elif not self.times.follow_until and time.monotonic() - idle_since > IDLE_TIMEOUT_S:
                rounds.fail_stalled()
            if self.times.follow_until and time.time() >= self.times.follow_until:
                return
            if time.monotonic() >= self.next_due:
                self._collect_renewal(wait=True)  # before `due` is read: a renewal moves the windows on
                self._close_reservations(reservations.due(self.parts, time.monotonic()))
                self.next_due = reservations.next_due(self.parts)
            if self.times.pack_due():
                self._close_and_pack()
                self.times.settle_stop()
                self.rounds.follow_until = self.times.follow_until

    def _write_round(self, news: list[Member]) -> None:
        """Announce, produce and land one round (step 3 of the module). Parts under their reservation
        are sent first, while the round's transactions commit: the others' announcements, the closings
        of reservations whose window is over (one transaction per slot a round, not two) and the
        renewals of those whose window ends soon; a round with nothing else to announce leaves its
        renewals in flight (`renewals`)."""
        ctx = self.ctx
        started = time.monotonic()
        land_by = started + ctx.writer_delivery_timeout_ms / 1000
        now = time.time()
        runs = {id(p): chunk_runs(p.chunk) for p in news}
        under, due = reservations.split_round(self.parts, news, runs, started)
        if self.renewals.in_flight is not None and (len(under) < len(news) or due):
            self._collect_renewal(wait=True)  # the round's announcements need the slots' writers
            under, due = reservations.split_round(self.parts, news, runs, started)
        reserving = bool(self.times.follow_until) and not self.times.packed
        sent = {id(p) for p in under}
        fresh = {id(p): reservations.announcement(p, runs[id(p)], now, reserving) for p in news if id(p) not in sent}
        unsent = set(fresh)
        renewing = []
        if reserving:
            renewing = self.renewals.choose(news, sent, started, self.times.follow_until, self.next_due)
        for part in renewing:  # the next reservation, from the round's first record
            fresh[id(part)] = reservations.announcement(part, runs[id(part)], now, True)

        def note(part: Member, closed: Segment | None) -> None:
            if id(part) in fresh:
                reservations.announced(part, closed, fresh[id(part)], started, self.window_s, land_by)
            else:
                reservations.closed(part, closed)

        sending = RoundSending(self.out, ctx.writer_delivery_timeout_ms, land_by)
        sending.send(under)
        if renewing and not unsent and not due:
            self.renewals.start(renewing, fresh, started)
            renewing = []
        announcing = [p for p in news if id(p) in unsent] + renewing + due
        announced, fenced = self._announce(announcing, lambda p: fresh.get(id(p)), note)
        sending.send([p for p in announced if id(p) in unsent])
        self.next_due = reservations.next_due(self.parts)
        if missed := sending.land(runs, self.failures, self.throttles):
            holding = bool(self.times.follow_until) and not self.times.taken_over()
            if holding:
                self._collect_renewal(wait=True)  # it may have renewed their reservations
            left_open.hold_or_stop(missed, self.rounds, holding, ctx.writer_delivery_timeout_ms)
        for slot in fenced:
            self._retake(slot)

    def _collect_renewal(self, wait: bool) -> None:
        """`Renewals.collect`; a slot fenced under it is taken back."""
        at_hand_over: set[int] = set()
        if collected := self.renewals.collect(wait, self._stop_unless_handed_over(at_hand_over)):
            self.times.note_announcement(collected[1])
            self.next_due = reservations.next_due(self.parts)
            for slot in sorted(set(collected[0]) | at_hand_over):
                self._retake(slot)

    def _close_reservations(self, parts: list[Member]) -> None:
        """Close the open reservations of `parts` (see `reservations`)."""
        self._collect_renewal(wait=True)  # it may have renewed them
        parts = [p for p in parts if p.reservation is not None and not p.failed]
        for slot in self._announce(parts, lambda p: None, reservations.closed)[1]:
            self._retake(slot)

    def _close_and_pack(self) -> None:
        """Close every open reservation and merge the epoch's segments (`hand_over.close_and_pack`)."""
        for slot in self._by_slot(lambda stop: close_and_pack(self.pool, self.writers, self.parts, stop), True)[1]:
            self._retake(slot)

    def _announce(
        self, parts: list[Member], segment_of: Callable[[Member], Segment | None], note: Callable[..., None]
    ) -> tuple[list[Member], list[int]]:
        """`announce_by_slot`, by `_by_slot`."""
        return self._by_slot(
            lambda stop: slot_announcing.announce_by_slot(self.pool, self.writers, parts, segment_of, note, stop),
            bool(parts),
        )

    def _by_slot(
        self, write: Callable[[Callable[[Member, str, str], None]], tuple[list[Member], list[int]]], writes: bool
    ) -> tuple[list[Member], list[int]]:
        """`write` the slots' transactions (given how to stop a part) once the renewal in flight is
        collected, timed for the stop before a hand-over (`FollowTimes.settle_stop`) when it `writes`;
        its noted parts and the fenced slots. A slot whose transaction failed at the hand-over counts
        as fenced: the next epoch's fence met it (which librdkafka may call UNKNOWN or _CONFLICT), and
        that epoch's task settles its parts (`left_open`)."""
        if writes:
            self._collect_renewal(wait=True)
        started = time.monotonic()
        at_hand_over: set[int] = set()
        done, fenced = write(self._stop_unless_handed_over(at_hand_over))
        if writes:
            self.times.note_announcement(time.monotonic() - started)
        return done, sorted(set(fenced) | at_hand_over)

    def _stop_unless_handed_over(self, at_hand_over: set[int]) -> Callable[[Member, str, str], None]:
        """Stop a part whose announcement failed; at the hand-over, note its slot in `at_hand_over`."""

        def stop(part: Member, kind: str, message: str) -> None:
            if self.times.taken_over():
                at_hand_over.add(part.slot)
            else:
                self.rounds.stop(part, kind, message)

        return stop

    def _settle(self, parts: list[Member]) -> None:
        """Settle reservations left open (`left_open`); read on from where they end."""
        self._collect_renewal(wait=True)
        self.out.serve_reports()  # the last of a held part's, before its failures are forgotten
        settled, fenced = left_open.settle(self.ctx, self.link, self.admin, self.writers, parts)
        for part in settled:
            self.failures.pop((part.unit.mirror_topic, part.unit.partition), None)
            self.rounds.take_up(part)
        for slot in fenced:
            self._retake(slot)

    def _retake(self, slot: int) -> None:
        """A slot's writer was fenced mid-copy (a pause or stop of a mirror the slot also serves, another
        cycle): take it back and check its parts again as at the start (against where each one's copy
        ends now); those that may go on read their round again, a held one (`left_open`) is settled
        under the writer taken back, the others stop. At most RETAKES_PER_SLOT times a slot."""
        members = [p for p in self.parts if p.slot == slot and not p.failed]
        for part in members:
            part.reserved_until = 0.0  # fenced: the next round announces anew, closing the reservation
        self.next_due = 0.0
        if self.times.taken_over():
            left_open.release(members)  # the next epoch's task settles them
            for part in members:  # and goes on from what landed
                self.rounds.hand_over(part)
            return
        if self.retakes[slot] >= RETAKES_PER_SLOT:
            for part in members:
                self.rounds.stop(
                    part, ConcurrentWriter.__name__, "another cycle took over this partition; this writer stopped"
                )
            return
        self.retakes[slot] += 1
        log.info("link '%s' writer slot %d was fenced by another writer: taking it back", self.link, slot)
        self.writers[slot].close()
        self.writers[slot] = SlotWriter(self.ctx.dest_properties, self.link, slot, self.ctx.offset_map_topic)
        self.writers[slot].fence()
        again = [p for p in members if p.has_news() or not p.ended or p.left_open is not None]  # not done
        for part in again:
            if part.left_open is None:
                self.rounds.rewind(part)
        check_after_fencing(self.ctx, self.link, self.admin, self.pool, again, starting=False)
        # A paused mirror's reservations are closed at what landed (every round of them was
        # acknowledged): its resume then finds nothing in doubt, and waits no fence wait.
        paused = [p for p in again if p.paused and p.reservation is not None]
        slot_announcing.announce_by_slot(
            self.pool, self.writers, paused, lambda p: None, reservations.closed, lambda *_: None
        )
        for part in again:
            if part.failed:
                self.rounds.reader.pause([part.source_tp])
