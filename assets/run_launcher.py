"""The run launcher of the project's Dagster instances: Dagster's default one, whose run workers can be checked.

Dagster's `DefaultRunLauncher` starts each run worker as a process of the code
server, and cannot tell whether that process still lives: a worker killed
mid-run (kill -9, the OOM killer, a reboot) leaves its run STARTED for ever.
The link's run queue then admits nothing more, the lag sensor sees a run
waiting and asks for no more, and the link's automation has stopped without a
word. With this launcher, Dagster's run monitoring (`run_monitoring` in
`deploy/dagster.yaml`) asks every poll whether each started run's worker is
alive, and marks the run failed, saying why, when it is not; the queue then
admits the link's next run.

Where the worker is. A launched run's worker reports its process id in its
first engine event ("Started process for run (pid: N)"); a run the CLI runs in
its own process (promote, failover, reverse) carries the process id and host in
`PID_TAG` and `HOST_TAG`. A process id is only trusted on the host that
recorded it, and only while the process with that id started before the run
reported it (a later process may reuse the id). Where neither tells (a code
server on another host, a worker that has not reported yet), the worker counts
as running: marking a live run failed would admit a second run beside it.

A run past its `dagster/max_runtime` is terminated by run monitoring and
marked failed; a worker that ignores the termination (hung in a call that never
returns) is killed `KILL_AFTER_S` later, so it stops holding clients and Spark
tasks. Killing a copy is safe: the copy is crash-safe, the next run repairs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

from dagster import DagsterEventType, DagsterRun
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._core.launcher.default_run_launcher import GRPC_INFO_TAG

PID_TAG = "mirror-pipeline/pid"
HOST_TAG = "mirror-pipeline/host"
# How long a launched run may go without reporting its worker's process before it counts as lost.
REPORT_GRACE_S = 120.0
KILL_AFTER_S = 30.0
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", ""}
_NEVER_REPORTED = -1


def in_process_run_tags() -> dict[str, str]:
    """Tags of a run this process executes itself (`execute_in_process`), so run monitoring can check it."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


class MonitoredRunLauncher(DefaultRunLauncher):
    """Dagster's default run launcher, plus the worker health check its run monitoring calls."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        worker = run_worker(self._instance, run)
        if isinstance(worker, str):
            return CheckRunHealthResult(WorkerStatus.RUNNING, worker)
        pid, reported_at = worker
        if pid == _NEVER_REPORTED:
            gone = f"the run worker never reported its process within {REPORT_GRACE_S:.0f} s of the run's start"
        elif process_alive(pid, started_by=reported_at):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker process {pid} is alive")
        else:
            gone = (
                f"the run worker (process {pid}) is gone: it was killed, crashed, or lost the instance's "
                f"storage before it could end the run"
            )
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"{gone}. Nothing it copied is lost: the link's next run goes on from where the mirrors end",
        )

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        worker = run_worker(self._instance, run) if run is not None else "no run"
        ended = super().terminate(run_id)
        if run is not None and not isinstance(worker, str) and _past_max_runtime(self._instance, run):
            threading.Thread(
                target=_kill_later, args=(*worker, KILL_AFTER_S), daemon=True, name=f"kill-hung-run-{run_id}"
            ).start()
        return ended


def run_worker(instance, run: DagsterRun) -> tuple[int, float] | str:
    """(process id, when it was reported) of the run's worker on this host, or why it cannot be known."""
    tags = run.tags
    if PID_TAG in tags:
        if tags.get(HOST_TAG) != socket.gethostname():
            return f"the run's process is on host {tags.get(HOST_TAG)!r}, not this one"
        try:
            return int(tags[PID_TAG]), _created_at(instance, run)
        except ValueError:
            return "the run's process id tag is not a number"
    if not _code_server_here(tags.get(GRPC_INFO_TAG)):
        return "the run's code server is not on this host"
    reported = _reported_worker(instance, run.run_id)
    if reported is not None:
        return reported
    started = _start_time(instance, run.run_id)
    if started is None or time.time() - started < REPORT_GRACE_S:
        return "the run worker has not reported its process yet"
    return _NEVER_REPORTED, 0.0


def _code_server_here(grpc_info: str | None) -> bool:
    try:
        info = json.loads(grpc_info or "")
    except ValueError:
        return False
    if not isinstance(info, dict):
        return False
    return bool(info.get("socket")) or info.get("host") in _LOCAL_HOSTS | {socket.gethostname()}


def _reported_worker(instance, run_id: str) -> tuple[int, float] | None:
    """The newest "Started process for run (pid: N)" engine event of the run: (N, its time)."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, ascending=False).records
    for record in records:
        event = record.event_log_entry.dagster_event
        metadata = event.engine_event_data.metadata if event is not None and event.engine_event_data else {}
        pid = metadata.get("pid")
        if pid is not None:
            try:
                return int(pid.value), record.event_log_entry.timestamp
            except (TypeError, ValueError):
                continue
    return None


def _start_time(instance, run_id: str) -> float | None:
    record = instance.get_run_record_by_id(run_id)
    return record.start_time if record is not None else None


def _created_at(instance, run: DagsterRun) -> float:
    record = instance.get_run_record_by_id(run.run_id)
    return record.create_timestamp.timestamp() if record is not None else time.time()


def _past_max_runtime(instance, run: DagsterRun) -> bool:
    bound = run.tags.get("dagster/max_runtime")
    started = _start_time(instance, run.run_id)
    if not bound or started is None:
        return False
    try:
        return time.time() - started > float(bound)
    except ValueError:
        return False


def process_alive(pid: int, started_by: float) -> bool:
    """Whether process `pid` runs and started no later than `started_by` (a Unix time): not a reuse of its id."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as system:
            boot = next(float(line.split()[1]) for line in system if line.startswith(b"btime "))
    except (OSError, StopIteration, IndexError, ValueError):
        return _signal_reaches(pid)  # no /proc (not Linux): the id alone
    if fields[0] == b"Z":
        return False  # exited, not yet reaped by its parent
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= started_by + 1.0  # /proc's boot time is whole seconds


def _signal_reaches(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_later(pid: int, reported_at: float, after_s: float) -> None:
    time.sleep(after_s)
    if process_alive(pid, started_by=reported_at):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
