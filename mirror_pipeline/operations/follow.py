"""Follow mode (always-on, R-EX-4): one long-lived Spark application keeps a link's
mirrors copying as records arrive.

The work is cut into *epochs*. An epoch is a cycle (`cycle.run_cycle` with
`follow_s`) whose units have no upper offset: every mirrored partition
gets one, the units are dealt to as many long-lived tasks as the session has
slots, and each copies records as they arrive for the epoch's length, counted
from when the task is ready to copy (so a slow start never leaves an epoch
empty), with the same chunk protocol, fencing and checks as a cycle's unit. The driver then
records the epoch (its ranges, as a cycle's lineage), merges the partitions'
segments and plans the next one, so a crash anywhere is repaired by the next
plan exactly as after a crashed cycle.

What changes between epochs is picked up at the next plan: new mirrors
(auto-create runs before each epoch), resumed mirrors, new source partitions.
A pause, promote or failover does not wait for the epoch: it fences the
partitions' writers, so a task stops announcing chunks at once (R-LC-8).

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
from dataclasses import dataclass
from typing import Protocol

from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.operations import auto_create
from mirror_pipeline.operations.heartbeats import HeartbeatEmitter
from mirror_pipeline.replication import cycle
from mirror_pipeline.sync import offset_sync
from mirror_pipeline.sync.config_sync import ConfigSyncFailed, sync_topic_configs

log = logging.getLogger(__name__)

# Between two epochs no task copies (the tasks' end, planning, the job's start,
# each unit fencing and checking: 0.8-2.2 s measured with 8 partitions): records arriving then
# wait. Longer epochs make that rarer; shorter ones record lineage more often
# and stop sooner.
DEFAULT_EPOCH_S = 120.0
# With nothing to copy (every mirror paused, say), the next plan comes this much later.
IDLE_WAIT_S = 5.0
# Set by the follow job to its run worker's pid: follow mode started under Dagster stops once that
# process is no longer its parent, even when the worker died before follow mode could look.
RUN_WORKER_PID_ENV = "MIRROR_PIPELINE_RUN_WORKER_PID"
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
    """Run epochs until `stop` is set; the epoch in flight when it is set finishes and is
    reported. Returns the number of epochs run.

    Each epoch starts with auto-create's scan, but the first when `scanned`
    (the caller scanned just before, to show its outcome: a scan of a wide
    source is seconds of metadata requests).

    An error before the first epoch copied anything (a cluster that does not
    answer, a config the destination refuses) is raised: the operator is at the
    terminal. Later ones are reported and retried, as a scheduler would.
    """
    ctx = open_ctx()
    ctx.check_destination()
    ctx.check_source()
    if ctx.link.heartbeats_enabled:
        HeartbeatEmitter(ctx).beat()  # makes the heartbeats mirror, so the first epoch copies it already
    reporter = _Reporter(report)
    syncs = _SideSyncs(open_ctx, reporter, stop, mirror_topics)
    syncs.start()
    number = 0
    try:
        while not stop.is_set():
            number += 1
            scan = ctx.link.auto_create_enable and not (number == 1 and scanned)
            epoch, idle = _one_epoch(ctx, spark, number, epoch_s, mirror_topics, scan)
            if number == 1 and epoch.result is None:
                raise MirrorError(epoch.error)
            reporter.put(report.epoch, epoch)
            if epoch.result is None:
                stop.wait(RETRY_WAIT_S)
            elif idle:
                stop.wait(IDLE_WAIT_S)
    finally:
        stop.set()
        syncs.join()
        reporter.close()
    return number


def _one_epoch(
    ctx: LinkContext, spark, number: int, epoch_s: float, mirror_topics: Sequence[str] | None, scan: bool
) -> tuple[Epoch, bool]:
    """(the epoch, whether it had nothing to copy); `scan`: auto-create's scan first."""
    try:
        created = auto_create.scan(ctx) if scan else None
        if created is not None and created.errors:
            log.warning("auto-create failed for %s", "; ".join(f"'{t}': {e}" for t, e in created.errors.items()))
        result = cycle.run_cycle(ctx, spark, mirror_topics, follow_s=epoch_s)
        return Epoch(number, result), result.work_units == 0
    except cycle.CycleFailed as exc:
        return Epoch(number, exc.result, str(exc)), exc.result.work_units == 0
    except MirrorError as exc:
        return Epoch(number, None, str(exc)), True


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
