"""The local brokers seen as processes: whose pid is whose, signals, ports, readiness, log tails.

A pid alone is not trusted (pids get reused): `owns` checks that the process
still names the cluster's `server.properties` before anyone signals it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol


class Daemon(Protocol):
    """A local process by its files: a broker's `layout.ClusterLayout`, a Spark `SparkDaemon`."""

    @property
    def properties(self) -> Path: ...
    @property
    def pid_file(self) -> Path: ...


LOG_TAIL_LINES = 30
#: Brokers started by this process, with their properties path. Kept so they
#: are reaped (no zombies, no "subprocess still running" warnings), and because
#: for a moment after Popen returns the child's /proc cmdline is still empty.
_CHILDREN: dict[int, tuple[subprocess.Popen, Path]] = {}


def track_child(proc: subprocess.Popen, properties: Path) -> None:
    """Remember a broker this process started from `properties` (see `_CHILDREN`)."""
    _CHILDREN[proc.pid] = (proc, properties)


def _cmdline(pid: int) -> list[str]:
    """The process's arguments; empty if it is gone or a zombie."""
    proc = Path("/proc")
    if proc.is_dir():
        try:
            raw = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            return []
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    # No procfs (macOS): ps prints the command line as one string.
    result = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
    return result.stdout.split() if result.returncode == 0 else []


def owns(pid: int, cluster: Daemon) -> bool:
    """True if `pid` is alive and is the broker of `cluster` (its properties path is an argument).

    Our own children are judged by Popen (which also reaps them): right after
    exec the kernel briefly shows an empty command line.
    """
    child = _CHILDREN.get(pid)
    if child is not None:
        proc, properties = child
        return proc.poll() is None and properties == cluster.properties
    return str(cluster.properties) in _cmdline(pid)


def running_pid(process: Daemon) -> int | None:
    """The pid in `process.pid_file`, if that process is alive and is `process` (see `owns`)."""
    try:
        pid = int(process.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if owns(pid, process) else None


@contextlib.contextmanager
def root_lock(root: Path) -> Iterator[None]:
    """Serialise `up`/`down` on one root across processes (say, a demo and a test run)."""
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def exit_code(cluster: Daemon) -> int | None:
    try:
        pid = int(cluster.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    child = _CHILDREN.get(pid)
    return child[0].poll() if child is not None else None


# A signal ignored by the process that starts a daemon stays ignored in the daemon, across exec,
# and a JVM started that way never installs its SIGTERM handler: `down` then waits its whole
# timeout before SIGKILL. That happens: Dagster's CLIs give SIGTERM the handler SIGINT has (its
# `setup_interrupt_handlers`), and a shell starts background jobs with SIGINT ignored, so test
# workers and runs started that way ignored SIGTERM, and every test worker's brokers took 30 s to
# stop. GNU env resets both to their defaults before it runs the daemon.
WITH_DEFAULT_SIGNALS = ["env", "--default-signal=TERM,INT"]


def send_signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_exit(cluster: Daemon, pid: int, deadline: float) -> bool:
    while owns(pid, cluster):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    _CHILDREN.pop(pid, None)
    return True


def port_in_use(port: int) -> bool:
    """Whether binding 127.0.0.1:port fails, as it would for the broker (SO_REUSEADDR like Java)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def lost_a_bind_race(ports: tuple[int, ...], log_starts: dict[Path, int] | None, wait: float = 10.0) -> bool:
    """Whether a broker died of a port taken between the free-port check and its bind, and the port is free again.

    `log_starts` are its logs' sizes when it was started; None for a broker this process did not start.
    Whoever took the port (often an outgoing connection) may hold it a moment longer: wait up to `wait` s.
    """
    if log_starts is None:
        return False
    said = "".join(tail_file(log, since=since, lines=400) for log, since in log_starts.items())
    if "java.net.BindException" not in said:
        return False
    deadline = time.monotonic() + wait
    while any(port_in_use(port) for port in ports):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def admin_client(bootstrap: str, settings: dict[str, str] | None = None) -> Any:
    """An AdminClient that stays quiet while the broker is still coming up.

    `settings` are the client settings of a secured cluster (security
    protocol, credentials); they never reach a log, since logging is off.
    """
    from confluent_kafka.admin import AdminClient

    # A callback among the settings: confluent-kafka takes it, its hints say str | int | float.
    conf: dict[str, Any] = {
        **(settings or {}),
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.max.ms": 500,
        "log_level": 0,
        "error_cb": lambda _err: None,
    }
    return AdminClient(conf)


def answers_metadata(admin: Any, timeout: float) -> bool:
    from confluent_kafka import KafkaException

    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def tail_text(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tail_file(path: Path, since: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of `path` after byte `since` (from 0 if the file rolled over)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = since if since <= size else 0
            f.seek(max(start, size - 64 * 1024))
            return tail_text(f.read().decode(errors="replace"), lines)
    except OSError:
        return ""
