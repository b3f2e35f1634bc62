"""Follow mode (always-on, R-EX-4): one long-lived Spark application keeps a link's
mirrors copying as records arrive.

The work is cut into *epochs*. An epoch is a Spark job whose units have no
upper offset: every mirrored partition gets one, the units are dealt to half
the session's task slots, and each task copies records as they arrive until
the epoch ends, with the same chunk protocol, fencing and checks as a
cycle's unit. A little before that end (at least HAND_OVER_LEAD_S, or twice
what planning took plus what the last tasks took to start) the driver plans
the next epoch and starts its job in the other half of the slots: its tasks
fence the writers at the end and go on from where the offset map says, so no
epoch boundary stops the copy (`replication.epochs`). The driver then records
the epoch that ended (its ranges, as a cycle's lineage). Epochs last longer
than asked while tasks start too slowly for them (`replication.epoch_pace`).

An epoch that failed anything is followed by one planned in full, repairs
included, once the epoch in flight has ended: a crash anywhere is repaired
by that plan exactly as after a crashed cycle. What changes between epochs
is picked up at the next plan: new mirrors (auto-create runs before each
epoch), resumed mirrors, new source partitions (a full plan). A pause,
promote or failover does not wait for the epoch: it fences the partitions'
writers, so a task stops announcing chunks at once (R-LC-8).

Config sync and consumer-offset sync run beside the epochs, on the link's
`topic.config.sync.ms` and `consumer.offset.sync.ms`, so a link followed
without the Dagster daemon is whole; so do heartbeats, when the link emits
them, every `emit.heartbeats.interval.seconds`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.operations import auto_create
from mirror_pipeline.operations.heartbeats import HeartbeatEmitter
from mirror_pipeline.replication import cycle, epochs
from mirror_pipeline.replication.epoch_pace import EpochPace
from mirror_pipeline.replication.spark_runner import SparkTasksLost
from mirror_pipeline.sync import offset_sync
from mirror_pipeline.sync.config_sync import ConfigSyncFailed, sync_topic_configs

log = logging.getLogger(__name__)

# Longer epochs plan and record lineage less often; shorter ones record it sooner and stop sooner.
DEFAULT_EPOCH_S = 120.0
# With nothing to copy (every mirror paused, say), the next plan comes this much later.
IDLE_WAIT_S = 5.0
# Set by the follow job to its run worker's pid: follow mode started under Dagster stops once that
# process is no longer its parent, even when the worker died before follow mode could look.
RUN_WORKER_PID_ENV = "MIRROR_PIPELINE_RUN_WORKER_PID"
# How often the driver looks whether an epoch's job ended before its hand-over.
JOB_POLL_S = 0.2
# After an epoch that could not run at all (a cluster down), the next try comes this much later.
RETRY_WAIT_S = 10.0


@dataclass(frozen=True)
class Epoch:
    number: int
    result: CycleResult | None  # None: the epoch could not run (`error` says why)
    error: str = ""  # some mirrors failed (the result has the others), or the epoch could not run


class FollowReport(Protocol):
    """Where follow mode says what it did; called from one thread, in order."""

    def epoch(self, epoch: Epoch) -> None: ...

    def synced(self, kind: str, result: object, error: str) -> None: ...


def follow(
    open_ctx: Callable[[], LinkContext],
    spark,
    report: FollowReport,
    stop: threading.Event,
    epoch_s: float = DEFAULT_EPOCH_S,
    mirror_topics: Sequence[str] | None = None,
    scanned: bool = False,
) -> int:
    """Run epochs until `stop` is set; the epochs in flight when it is set finish and are
    reported. Returns the number of epochs run.

    Each epoch is planned after auto-create's scan, but the first when `scanned`
    (the caller scanned just before, to show its outcome: a scan of a wide
    source is seconds of metadata requests).

    An error that keeps the first epoch from starting (a cluster that does not
    answer, a config the destination refuses) is raised: the operator is at the
    terminal. Later ones, and an epoch whose Spark tasks were lost, are
    reported and retried with a full plan, as a scheduler would.
    """
    ctx = open_ctx()
    ctx.check_destination()
    ctx.check_source()
    if ctx.link.heartbeats_enabled:
        HeartbeatEmitter(ctx).beat()  # makes the heartbeats mirror, so the first epoch copies it already
    reporter = _Reporter(report)
    syncs = _SideSyncs(open_ctx, reporter, stop, mirror_topics)
    syncs.start()
    # Two epochs' jobs run at once around a hand-over; each waits in a thread of its own.
    jobs = ThreadPoolExecutor(2, thread_name_prefix="follow-epoch")
    number = 0
    running: epochs.RunningEpoch | None = None
    clean = True  # the epoch reported last copied everything it planned
    pace = EpochPace(epoch_s)
    try:
        while running is not None or not stop.is_set():
            if running is None:
                number += 1
                scan = ctx.link.auto_create_enable and not (number == 1 and scanned)
                started = _started(ctx, spark, jobs, number, pace, mirror_topics, scan)
                if isinstance(started, Epoch):  # it could not start
                    if number == 1:
                        raise MirrorError(started.error)
                    reporter.put(report.epoch, started)
                    stop.wait(RETRY_WAIT_S)
                    continue
                if started.job is None:  # nothing to copy (every mirror paused, say)
                    reporter.put(report.epoch, _finished(ctx, started, handed_over=False)[0])
                    stop.wait(IDLE_WAIT_S)
                    continue
                running = started
            _wait_for_hand_over(running, pace.plan_next_at(running.ends_at), stop)
            successor = None
            if clean and not stop.is_set() and not (running.job and running.job.done()):
                planning = time.monotonic()
                successor = _continued(ctx, spark, jobs, running, pace, mirror_topics)
                pace.planned(time.monotonic() - planning)
            epoch, clusters_failed = _finished(ctx, running, handed_over=successor is not None)
            pace.ended(running.submitted, running.starts_at, epochs.last_ready_at(running))
            reporter.put(report.epoch, epoch)
            clean = not epoch.error
            running = successor
            if successor is not None:
                number = successor.number
            elif clusters_failed:
                stop.wait(RETRY_WAIT_S)
    finally:
        stop.set()
        jobs.shutdown(wait=False, cancel_futures=True)
        syncs.join()
        reporter.close()
    return number


def _wait_for_hand_over(running: epochs.RunningEpoch, until: float, stop: threading.Event) -> None:
    """Until `until` (time.time), `stop`, or the epoch's job ending early (every task failed, say:
    the next epoch is then planned in full at once rather than at the hand-over)."""
    while not stop.is_set() and running.job is not None and not running.job.done():
        left = until - time.time()
        if left <= 0:
            return
        stop.wait(min(left, JOB_POLL_S))


def _started(
    ctx: LinkContext,
    spark,
    jobs: ThreadPoolExecutor,
    number: int,
    pace: EpochPace,
    mirror_topics: Sequence[str] | None,
    scan: bool,
) -> epochs.RunningEpoch | Epoch:
    """An epoch planned in full and started, or the epoch that could not start, saying why."""
    try:
        if scan:
            _scan(ctx)
        return epochs.start(ctx, spark, jobs, number, mirror_topics, pace.length_s, pace.waiting_length_s)
    except MirrorError as exc:
        return Epoch(number, None, str(exc))


def _continued(
    ctx: LinkContext,
    spark,
    jobs: ThreadPoolExecutor,
    running: epochs.RunningEpoch,
    pace: EpochPace,
    mirror_topics: Sequence[str] | None,
) -> epochs.RunningEpoch | None:
    """The epoch after `running`, started to take over at its end; None: planned in full after it."""
    try:
        map_end = epochs.offset_map_end(ctx)
        if ctx.link.auto_create_enable:
            _scan(ctx)
        return epochs.continue_from(
            ctx, spark, jobs, running, mirror_topics, pace.length_s, map_end, pace.waiting_length_s
        )
    except MirrorError as exc:
        log.warning("follow: the next epoch is planned once epoch %d has ended: %s", running.number, exc)
        return None


def _finished(ctx: LinkContext, running: epochs.RunningEpoch, handed_over: bool) -> tuple[Epoch, bool]:
    """The epoch as it ended, and whether it could not be recorded (a cluster down, say: the next
    plan waits a while). A lost task's epoch is planned again in full at once."""
    try:
        return Epoch(running.number, epochs.finish(ctx, running, handed_over)), False
    except cycle.CycleFailed as exc:
        return Epoch(running.number, exc.result, str(exc)), False
    except SparkTasksLost as exc:
        return Epoch(running.number, None, str(exc)), False
    except MirrorError as exc:
        return Epoch(running.number, None, str(exc)), True


def _scan(ctx: LinkContext) -> None:
    created = auto_create.scan(ctx)
    if created.errors:
        log.warning("auto-create failed for %s", "; ".join(f"'{t}': {e}" for t, e in created.errors.items()))


class _Reporter:
    """Calls the report from one thread of its own, in order.

    Recording an epoch (in the Dagster instance, say) then costs the copy
    nothing: the next epoch is planned at once, since records arriving between
    two epochs wait for the next one. The syncs' thread reports through it too,
    so the report's calls never overlap.
    """

    def __init__(self, report: FollowReport):
        self.report = report
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="follow-report", daemon=True)
        self.thread.start()

    def put(self, call: Callable, *args) -> None:
        self.queue.put((call, args))

    def synced(self, kind: str, result: object, error: str) -> None:
        self.put(self.report.synced, kind, result, error)

    def close(self) -> None:
        """Wait until everything put so far is reported."""
        self.queue.put(None)
        self.thread.join()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            call, args = item
            try:
                call(*args)
            except Exception:  # a report that fails must not stop the copying
                log.exception("follow: reporting failed")


class _SideSyncs:
    """Config sync, offset sync and heartbeats on their intervals, in a thread beside the epochs.

    The driver only waits on its Spark job during an epoch, so the syncs cost
    the copy nothing. Each sync has its own link context (clients are not
    shared between threads).
    """

    def __init__(
        self,
        open_ctx: Callable[[], LinkContext],
        report: _Reporter,
        stop: threading.Event,
        mirror_topics: Sequence[str] | None,
    ):
        self.open_ctx, self.report, self.stop = open_ctx, report, stop
        self.mirror_topics = list(mirror_topics) if mirror_topics else None
        self.thread = threading.Thread(target=self._run, name="follow-syncs", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        ctx = self.open_ctx()
        jobs: list[tuple[str, float, Callable[[LinkContext], object]]] = [
            ("config", ctx.link.config_sync_ms / 1000, self._config_sync),
            ("offsets", ctx.link.offset_sync_ms / 1000, self._offset_sync),
        ]
        if ctx.link.heartbeats_enabled:
            emitter = HeartbeatEmitter(ctx)
            jobs.append(("heartbeats", ctx.link.heartbeats_interval_s, lambda _ctx: emitter.beat()))
        due = {kind: 0.0 for kind, _, _ in jobs}
        if "heartbeats" in due:  # `follow` wrote one just before the first epoch
            due["heartbeats"] = time.monotonic() + ctx.link.heartbeats_interval_s
        while not self.stop.is_set():
            now = time.monotonic()
            for kind, interval, run in jobs:
                if now >= due[kind]:
                    try:
                        run(ctx)
                    except Exception as exc:  # a sync's bug must not end the copying beside it
                        log.exception("follow: %s sync failed", kind)
                        self.report.synced(kind, None, f"{type(exc).__name__}: {exc}")
                    due[kind] = time.monotonic() + interval
            self.stop.wait(max(0.1, min(due.values()) - time.monotonic()))

    def _config_sync(self, ctx: LinkContext) -> None:
        try:
            self.report.synced("config", sync_topic_configs(ctx, self.mirror_topics), "")
        except ConfigSyncFailed as exc:
            self.report.synced("config", exc.result, str(exc))
        except MirrorError as exc:
            self.report.synced("config", None, str(exc))

    def _offset_sync(self, ctx: LinkContext) -> None:
        try:
            self.report.synced("offsets", offset_sync.sync_offsets(ctx, self.mirror_topics), "")
        except MirrorError as exc:
            self.report.synced("offsets", None, str(exc))
