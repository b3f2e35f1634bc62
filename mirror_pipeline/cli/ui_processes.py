"""The processes `mirror-pipeline ui` starts, kept alive: a part that dies is started again after a backoff.

Each child leads a process group of its own. Once the UI serves, a child that
exits (killed, crashed, out of memory) is reported in one line on stderr, what
is left of its group is killed (the code server's run workers among it: run
monitoring marks their runs failed, and the link's next run copies on), and
the child is started again after `backoff_s(...)`: 1 s, doubling to at most
`MAX_BACKOFF_S` while it keeps dying within `STABLE_S` of its start. The
others go on: the webserver and the daemon reconnect to a code server that
comes back on the same socket.

Stopping (Ctrl-C, SIGTERM, SIGHUP) goes child by child in reverse order of
start: SIGINT, as Ctrl-C stops each, then a kill of whatever of its group is
left after `STOP_WAIT_S`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import click

POLL_S = 0.5
STOP_WAIT_S = 30.0  # per child, after SIGINT, before its process group is killed
LEFTOVER_WAIT_S = 10.0  # for what a child started (a run, the inner code server) once the child has exited
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
STABLE_S = 120.0  # a child up this long has recovered: its next death waits FIRST_BACKOFF_S again


class Stop(Exception):
    """SIGTERM or SIGHUP: stop as on Ctrl-C."""


def backoff_s(deaths_in_a_row: int) -> float:
    """How long to wait before starting a child again after its `deaths_in_a_row`-th quick death (1, 2, ...)."""
    return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, deaths_in_a_row - 1))


def how_it_ended(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


@dataclass
class _Child:
    name: str
    argv: list[str]
    env: dict
    ready: Callable[[], bool] | None
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restarts: int = 0


class Children:
    """The Dagster processes, started in order, supervised, stopped in reverse order."""

    def __init__(self, log: Callable[[str], None] | None = None) -> None:
        self._children: list[_Child] = []
        self._log = log or (lambda line: click.echo(line, err=True))

    def start(self, name: str, argv: list[str], env: dict, ready: Callable[[], bool] | None = None) -> None:
        """Start `name`; `ready()` says when a restarted one serves again (the others wait for nothing)."""
        child = _Child(name, argv, env, ready)
        self._children.append(child)
        self._spawn(child)

    def _spawn(self, child: _Child) -> subprocess.Popen[bytes]:
        child.proc = proc = subprocess.Popen(
            child.argv, env=child.env, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_child_signals
        )
        child.started_at = time.monotonic()
        return proc

    def exited(self) -> tuple[str, int] | None:
        for child in self._children:
            if child.proc is not None and child.proc.poll() is not None:
                return child.name, child.proc.returncode
        return None

    def supervise(self) -> None:
        """Until interrupted (KeyboardInterrupt or `Stop`): start again every child that exits."""
        while True:
            for child in self._children:
                if child.proc is not None and child.proc.poll() is not None:
                    self._restart(child)
            time.sleep(POLL_S)

    def _restart(self, child: _Child) -> None:
        proc = child.proc
        assert proc is not None
        lived_s = time.monotonic() - child.started_at
        child.quick_deaths = child.quick_deaths + 1 if lived_s < STABLE_S else 1
        wait_s = backoff_s(child.quick_deaths)
        _end_group(proc, sleep=time.sleep)  # Ctrl-C meanwhile stops the UI
        child.restarts += 1
        self._log(
            f"mirror-pipeline ui: {child.name} {how_it_ended(proc.returncode)} after {lived_s:.0f} s; "
            f"starting it again in {wait_s:.0f} s (restart {child.restarts})"
        )
        time.sleep(wait_s)
        proc = self._spawn(child)
        if child.ready is not None:
            deadline = time.monotonic() + 600
            while not child.ready() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
        if proc.poll() is None:
            self._log(f"mirror-pipeline ui: {child.name} is running again")

    def stop(self) -> None:
        """Each in reverse order: SIGINT (as Ctrl-C), wait, then kill what is left of its group. Idempotent."""
        for child in reversed(self._children):
            proc = child.proc
            if proc is None:
                continue
            if proc.poll() is None:
                _signal(proc.pid, signal.SIGINT)
            deadline = time.monotonic() + STOP_WAIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                _quiet_sleep(POLL_S)
            _end_group(proc, sleep=_quiet_sleep)
        self._children.clear()


def _end_group(proc: subprocess.Popen, sleep: Callable[[float], None]) -> None:
    """After the group's leader: a moment for what it started to end by itself, then kill what is left."""
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    while proc.poll() is not None and _group_alive(proc.pid) and time.monotonic() < deadline:
        sleep(POLL_S)
    if _group_alive(proc.pid):
        _kill_group(proc.pid)
    proc.wait()


def _quiet_sleep(seconds: float) -> None:
    """A second Ctrl-C while stopping does not cut the stop short."""
    try:
        time.sleep(seconds)
    except (KeyboardInterrupt, Stop):
        pass


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child_signals() -> None:
    """In the child, before exec: SIGINT stops it even where this process ignores it (a `cmd &` of a
    script), and on Linux it gets SIGINT if this process dies without stopping it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001 - best effort; never keep a child from starting
        pass
