"""`mirror-pipeline run --link L --follow`: follow mode in the foreground (see `operations.follow`).

One line per epoch (one JSON object per line with --json), each epoch recorded
in the Dagster instance the UI reads, as a cycle is. Ctrl-C or SIGTERM stops
it gracefully: the epoch in flight finishes, is recorded, and the command
exits 0. A second Ctrl-C stops at once (the tasks are cancelled; the next
plan repairs what they left, as after a crash).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import threading
import time
from collections.abc import Sequence

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline import engine
from mirror_pipeline.cli.signals import stop_on_signals
from mirror_pipeline.cli.values import printable
from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.model.results import over_budget_note
from mirror_pipeline.model.text import some_of
from mirror_pipeline.operations.follow import RUN_WORKER_PID_ENV, Epoch


class _Report:
    """Prints each epoch and sync in one line and records it in the Dagster instance."""

    def __init__(self, config: PipelineConfig, link: str, mirrors: Sequence[str], as_json: bool, pipes=None):
        self.config, self.link, self.mirrors, self.as_json = config, link, tuple(mirrors), as_json
        self.origin = f"run --link {link} --follow"
        self.pipes = pipes  # launched by the link's Dagster follow job: its lines go to the run's log too

    def epoch(self, epoch: Epoch) -> None:
        d = epoch.result.to_dict() if epoch.result else None
        self._line(
            {"epoch": epoch.number, "cycle": d, "error": epoch.error or None}, epoch_line(epoch.number, d, epoch.error)
        )
        if epoch.result is not None:  # the mirrors the epoch changed (`record_cycle`)
            dagster_events.record_cycle(
                self.config,
                self.link,
                epoch.result,
                as_json=self.as_json,
                origin=f"{self.origin} (epoch {epoch.number})",
            )

    def synced(self, kind: str, result, error: str) -> None:
        d = result.to_dict() if result is not None else None
        changed = _sync_changed(kind, d)
        if not changed and not error:
            return  # a sync that changed nothing is not news
        self._line({"sync": kind, "result": d, "error": error or None}, f"{kind} sync: {error or changed}")
        if result is None:
            return
        if kind == "config":
            dagster_events.record_config_sync(self.config, self.link, result, origin=self.origin, as_json=self.as_json)
        else:
            dagster_events.record_offset_sync(
                self.config, self.link, result, self.mirrors, origin=self.origin, as_json=self.as_json
            )

    def _line(self, data: dict, text: str) -> None:
        click.echo(json.dumps(data, sort_keys=True, default=str) if self.as_json else printable(text))
        if self.pipes is not None:
            (self.pipes.log.warning if data.get("error") else self.pipes.log.info)(printable(text))


def epoch_line(number: int, d: dict | None, error: str) -> str:
    """An epoch in one line: its cycle's result (`CycleResult.to_dict`, None: not run) and error.
    Also how the latency benchmark renders the epochs of `--json`."""
    if d is None:
        return f"epoch {number}: not run: {error}"
    latency = [p["latency_max_ms"] for m in d["mirrors"].values() for p in m["partitions"] if p["latency_records"]]
    text = (
        f"epoch {number}: copied {d['records']:,} records ({d['bytes']:,} bytes) in {d['duration_s']:.1f}s "
        f"over {d['work_units']} partitions; lag after: {d['lag_after']:,}"
    )
    if latency:
        text += f"; max latency {max(latency)} ms"
    if taking_over := d.get("hand_over_ms"):
        ready, fenced = taking_over["ready"], taking_over["fenced"]
        text += f"; taken over {ready} ms after the hand-over time (fenced {fenced} ms after it)"
    if d.get("left_to_next_epoch"):
        text += (
            f"; {d['left_to_next_epoch']:,} partition(s) left to the next epoch "
            "(their copy task started too late to take over in this one, or was still waiting out records in "
            "doubt: the task before's, or a round not acknowledged in time)"
        )
    if d.get("rounds_held"):
        text += (
            f"; {d['rounds_held']:,} round(s) not acknowledged in time (a destination broker slow or stalled): "
            "their partitions were held until none of those records could land, then copied on"
        )
    if memory := over_budget_note(d.get("task_memory")):
        text += f"; {memory}"
    if waiting := d.get("not_listed_yet"):
        text += (
            f"; {len(waiting):,} mirror(s) created moments ago not copied in it, their topics not listed by the "
            f"destination yet ({some_of(waiting, shown=5)}): the next epoch, sooner than usual, takes them"
        )
    return text + (f"; {error}" if error else "")


def _sync_changed(kind: str, d: dict | None) -> str:
    """What a sync changed, in a few words; empty when nothing."""
    if d is None:
        return ""
    if kind == "config":
        return f"{d['configs_changed']} config(s) changed" if d.get("configs_changed") else ""
    return f"{d['committed']} group offset(s) committed" if d.get("committed") else ""


def follow(
    config: PipelineConfig,
    link: str,
    spark,
    mirrors: Sequence[str],
    epoch_s: float,
    as_json: bool,
    scanned: bool = False,
) -> int:
    """Run follow mode until Ctrl-C or SIGTERM; the number of epochs run. `scanned`: auto-create scanned
    just now (the first epoch does not scan again)."""
    stop = threading.Event()

    def announce() -> None:
        click.echo(
            # The epoch in flight ends within epoch_s; the next one, when it already took over at a
            # hand-over just before, runs its whole length too.
            f"stopping after the epoch in flight (within {2 * epoch_s:.0f}s); Ctrl-C again to stop at once",
            err=True,
        )

    def at_once() -> None:
        # The second time: do not wait for the epoch (PySpark's own handler cancels the jobs).
        _cancel_jobs(spark)
        raise KeyboardInterrupt

    # A follow process that seems stuck tells where each thread is on `kill -USR1` (to stderr), from C
    # as well: a thread blocked in a library call runs no Python signal handler until the call returns.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        # Installed after the session started: PySpark puts its own SIGINT handler in then.
        with stop_on_signals(stop, (signal.SIGINT, signal.SIGTERM), announce, at_once), _dagster_pipes() as pipes:
            if pipes is not None:
                _stop_when_orphaned(stop)
            if not as_json:
                click.echo(
                    f"following link '{link}' in epochs of {epoch_s:.0f}s; Ctrl-C stops after the epoch in flight",
                    err=True,
                )
            report = _Report(config, link, mirrors, as_json, pipes)
            return engine.follow(
                config, link, spark, report, stop, epoch_s=epoch_s, mirrors=list(mirrors) or None, scanned=scanned
            )
    finally:
        faulthandler.unregister(signal.SIGUSR1)


def _stop_when_orphaned(stop: threading.Event, every_s: float = 1.0) -> None:
    """Under a Dagster run: stop after the epoch in flight once the run worker that started this process is gone.

    A worker killed with -9 cannot pass its termination on, and its run is then
    marked failed: follow mode left running would copy beside the link's next
    runs, fencing them and being fenced at every turn, with no run to stop it from. The worker names
    itself (RUN_WORKER_PID_ENV): under load it can die while this process still starts Spark, and the
    parent seen then would already be the one it was handed to.
    """
    parent = _run_worker_pid()

    def watch() -> None:
        while not stop.is_set():
            if os.getppid() != parent:  # reparented: the parent died
                stop.set()  # first: the line below may find its stderr pipe's reader dead with the worker
                with contextlib.suppress(OSError):
                    click.echo(
                        "the Dagster run worker that started follow mode is gone: stopping after the epoch in flight",
                        err=True,
                    )
                return
            time.sleep(every_s)

    threading.Thread(target=watch, name="follow-orphan-watch", daemon=True).start()


def _run_worker_pid() -> int:
    try:
        return int(os.environ[RUN_WORKER_PID_ENV])
    except (KeyError, ValueError):
        return os.getppid()


def _dagster_pipes():
    """The Dagster Pipes session of the follow job that launched this process; none otherwise."""
    from dagster_pipes import DAGSTER_PIPES_CONTEXT_ENV_VAR, open_dagster_pipes

    return open_dagster_pipes() if os.environ.get(DAGSTER_PIPES_CONTEXT_ENV_VAR) else contextlib.nullcontext(None)


def _cancel_jobs(spark) -> None:
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:  # Spark Connect: interrupt the session's operations instead
        try:
            spark.interruptAll()
        except Exception:
            pass
