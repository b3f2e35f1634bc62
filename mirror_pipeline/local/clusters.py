"""Single-node KRaft Kafka clusters on this machine, for demos and integration tests.

Each cluster is one JVM acting as both broker and controller, with its own
directory `root/<name>/` (config, data, logs, pid file) and its own ports, so
several clusters stand in for the regions a mirror link connects. Brokers are
detached from the caller (new session, output to a file): `local up` returns
while they keep running, and `local down` stops them from another process.

Only what `up` started is ever signalled: a pid file alone is not trusted (pids
get reused), so the pid's command line must still name this cluster's
`server.properties` before it receives a signal.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mirror_pipeline.errors import LocalClusterError
from mirror_pipeline.local.jars import ensure_kafka_jars, java_command

DEFAULT_NAMES = ["us-west", "us-east", "eu-west", "ap-south", "ap-northeast"]
MAX_CLUSTERS = 5
DEFAULT_COUNT = 2
DEFAULT_BASE_PORT = 19092
#: Cluster i listens on base_port + i * PORT_STRIDE; its controller on that + 1.
PORT_STRIDE = 10000
ROOT_ENV = "MIRROR_PIPELINE_LOCAL_DIR"
HEAP_ENV = "KAFKA_HEAP_OPTS"
#: Small enough for three brokers plus Spark on a 2-core laptop-sized machine.
DEFAULT_HEAP = "-Xmx768m -Xms256m"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LAYOUT_FILE = "clusters.json"
SERVER_LOG4J = Path(__file__).with_name("log4j2.properties")

_LOG_TAIL_LINES = 30
_FORMATTED_MARKER = ".formatted"
#: Brokers started by this process, with their properties path. Kept so they
#: are reaped (no zombies, no "subprocess still running" warnings), and because
#: for a moment after Popen returns the child's /proc cmdline is still empty.
_CHILDREN: dict[int, tuple[subprocess.Popen, Path]] = {}


def default_root() -> Path:
    """Where clusters live: `$MIRROR_PIPELINE_LOCAL_DIR`, else `./.local-kafka`."""
    env = os.environ.get(ROOT_ENV)
    return Path(env).expanduser() if env else Path.cwd() / ".local-kafka"


def cluster_name(index: int) -> str:
    """Region-like name of cluster `index` (0-based), `cluster-N` past the list."""
    return DEFAULT_NAMES[index] if index < len(DEFAULT_NAMES) else f"cluster-{index}"


@dataclass(frozen=True)
class ClusterInfo:
    """What `up`, `status` and `down` report about one cluster."""

    name: str
    bootstrap: str
    running: bool
    pid: int | None
    data_dir: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bootstrap": self.bootstrap,
            "running": self.running,
            "pid": self.pid,
            "data_dir": str(self.data_dir),
        }


@dataclass(frozen=True)
class _Cluster:
    """Where one cluster's ports and files are; pure layout, no process state."""

    name: str
    port: int
    dir: Path

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_dirs(self) -> Path:
        return self.dir / "data"

    @property
    def pid_file(self) -> Path:
        return self.dir / "broker.pid"

    @property
    def server_log(self) -> Path:
        return self.dir / "server.log"

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"


class LocalKafka:
    """`count` single-node KRaft clusters under `root`, cluster i on `base_port + i*10000`."""

    def __init__(self, root: Path, count: int = DEFAULT_COUNT, base_port: int = DEFAULT_BASE_PORT):
        if not 1 <= count <= MAX_CLUSTERS:
            raise LocalClusterError(f"cluster count must be 1 to {MAX_CLUSTERS}, got {count}")
        top = base_port + (count - 1) * PORT_STRIDE + 1
        if base_port < 1024 or top > 65535:
            raise LocalClusterError(
                f"base port {base_port} with {count} clusters needs ports {base_port}..{top}; "
                "they must lie within 1024..65535"
            )
        self.root = Path(root).expanduser().resolve()
        self.count = count
        self.base_port = base_port
        self._clusters = [
            _Cluster(cluster_name(i), base_port + i * PORT_STRIDE, self.root / cluster_name(i))
            for i in range(count)
        ]
        #: Log sizes when this instance started each broker, so errors quote only new lines.
        self._log_starts: dict[str, dict[Path, int]] = {}

    @classmethod
    def from_root(cls, root: Path | None = None) -> LocalKafka:
        """The clusters a previous `up` recorded under `root`, else the defaults."""
        root = Path(root) if root is not None else default_root()
        layout = _read_layout(root)
        if layout is None:
            return cls(root)
        return cls(root, count=layout["count"], base_port=layout["base_port"])

    def __repr__(self) -> str:
        return f"LocalKafka(root={str(self.root)!r}, count={self.count}, base_port={self.base_port})"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self._clusters]

    @property
    def bootstraps(self) -> list[str]:
        """Bootstrap addresses in cluster order (whether or not they are running)."""
        return [c.bootstrap for c in self._clusters]

    # -- public verbs --------------------------------------------------------

    def status(self) -> list[ClusterInfo]:
        return [self._info(c) for c in self._clusters]

    def up(self, timeout: float = START_TIMEOUT_S) -> list[ClusterInfo]:
        """Start every cluster not already running and wait until all answer metadata.

        Idempotent: storage is formatted only on a cluster's first start, and a
        running cluster is left alone (same pid).
        """
        ensure_kafka_jars()
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock():
            return self._up(timeout)

    def _up(self, timeout: float) -> list[ClusterInfo]:
        self._check_layout()
        _write_layout(self.root, self.count, self.base_port)

        to_start = [c for c in self._clusters if self._running_pid(c) is None]
        for cluster in to_start:
            cluster.pid_file.unlink(missing_ok=True)
            self._check_ports_free(cluster)
            cluster.dir.mkdir(parents=True, exist_ok=True)
            cluster.properties.write_text(_server_properties(cluster))
        self._format([c for c in to_start if not (c.dir / _FORMATTED_MARKER).exists()])
        for cluster in to_start:
            self._start(cluster)

        deadline = time.monotonic() + timeout
        for cluster in self._clusters:
            self._wait_ready(cluster, deadline, timeout)
        return self.status()

    def down(self, timeout: float = STOP_TIMEOUT_S) -> list[ClusterInfo]:
        """Stop the clusters this root's `up` started; return those that were stopped.

        SIGTERM first (Kafka shuts down cleanly, so data survives a restart),
        SIGKILL for any still alive after `timeout` seconds.
        """
        if not self.root.is_dir():
            return []
        with self._lock():
            return self._down(timeout)

    def _down(self, timeout: float) -> list[ClusterInfo]:
        stopping: list[tuple[_Cluster, int]] = []
        for cluster in self._clusters:
            pid = self._running_pid(cluster)
            if pid is None:
                cluster.pid_file.unlink(missing_ok=True)
                continue
            _signal(pid, signal.SIGTERM)
            stopping.append((cluster, pid))

        deadline = time.monotonic() + timeout
        for cluster, pid in stopping:
            if not _wait_exit(cluster, pid, deadline):
                if _owns(pid, cluster):
                    _signal(pid, signal.SIGKILL)
                if not _wait_exit(cluster, pid, time.monotonic() + 10):
                    raise LocalClusterError(
                        f"local Kafka cluster {cluster.name} (pid {pid}) did not exit after SIGKILL"
                    )
            cluster.pid_file.unlink(missing_ok=True)
        return [ClusterInfo(c.name, c.bootstrap, False, pid, c.dir) for c, pid in stopping]

    # -- internals -----------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise `up`/`down` on one root across processes (say, a demo and a test run)."""
        with open(self.root / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _info(self, cluster: _Cluster) -> ClusterInfo:
        pid = self._running_pid(cluster)
        return ClusterInfo(cluster.name, cluster.bootstrap, pid is not None, pid, cluster.dir)

    def _running_pid(self, cluster: _Cluster) -> int | None:
        """The pid from the pid file, if that process is alive and is this cluster's broker."""
        try:
            pid = int(cluster.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _owns(pid, cluster) else None

    def _check_layout(self) -> None:
        """Refuse a layout change that would orphan running brokers or reuse stale storage.

        KRaft records the controller's address when storage is formatted, so a
        formatted root cannot simply move to other ports.
        """
        layout = _read_layout(self.root)
        if layout is None or layout == {"count": self.count, "base_port": self.base_port}:
            return
        previous = LocalKafka(self.root, layout["count"], layout["base_port"])
        if layout["base_port"] != self.base_port:
            formatted = [c.name for c in previous._clusters if (c.dir / _FORMATTED_MARKER).exists()]
            if formatted:
                raise LocalClusterError(
                    f"{self.root} holds clusters made for base port {layout['base_port']} "
                    f"({', '.join(formatted)}); use --base-port {layout['base_port']}, "
                    "or run `local down` and delete that directory to start afresh"
                )
        orphans = [
            c.name for c in previous._clusters[self.count :] if previous._running_pid(c) is not None
        ]
        if orphans:
            raise LocalClusterError(
                f"clusters {', '.join(orphans)} from an earlier `up` with {layout['count']} "
                f"clusters are still running in {self.root}; run `local down` first"
            )

    def _check_ports_free(self, cluster: _Cluster) -> None:
        for port in (cluster.port, cluster.controller_port):
            if _port_in_use(port):
                raise LocalClusterError(
                    f"port {port} for local Kafka cluster {cluster.name} is already in use by "
                    f"another process (not the broker started from {cluster.dir}); stop it or "
                    "choose another --base-port"
                )

    def _format(self, clusters: list[_Cluster]) -> None:
        """Format KRaft storage for first-time clusters, all in parallel (one JVM each)."""
        running: list[tuple[_Cluster, subprocess.Popen]] = []
        for cluster in clusters:
            shutil.rmtree(cluster.log_dirs, ignore_errors=True)  # leftovers of a failed format
            cmd = java_command(
                "kafka.tools.StorageTool",
                "format", "--standalone",
                "-t", _random_cluster_id(),
                "-c", str(cluster.properties),
                heap="-Xmx256m",
            )  # fmt: skip
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
            )
            running.append((cluster, proc))
        failures = []
        for cluster, proc in running:
            try:
                output, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
                failures.append(f"{cluster.name}: no result after 120 s\n{_tail_text(output)}")
                continue
            if proc.returncode != 0:
                failures.append(f"{cluster.name}: exit {proc.returncode}\n{_tail_text(output)}")
            else:
                (cluster.dir / _FORMATTED_MARKER).write_text(output)
        if failures:
            raise LocalClusterError("formatting Kafka storage failed for " + "\n".join(failures))

    def _start(self, cluster: _Cluster) -> None:
        heap = os.environ.get(HEAP_ENV) or DEFAULT_HEAP
        cmd = java_command(
            "kafka.Kafka",
            str(cluster.properties),
            heap=heap,
            jvm_opts=[
                f"-Dlog4j2.configurationFile={SERVER_LOG4J}",
                f"-Dkafka.logs.dir={cluster.dir}",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true",
            ],
        )
        self._log_starts[cluster.name] = {
            log: _file_size(log) for log in (cluster.server_log, cluster.console_log)
        }
        with open(cluster.console_log, "ab") as console:
            console.write(f"--- started {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
            console.flush()
            proc = subprocess.Popen(
                cmd,
                cwd=cluster.dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        _CHILDREN[proc.pid] = (proc, cluster.properties)
        cluster.pid_file.write_text(f"{proc.pid}\n")

    def _wait_ready(self, cluster: _Cluster, deadline: float, timeout: float) -> None:
        """Wait until the broker serves a metadata request; on failure stop it and explain."""
        admin = None
        while True:
            pid = self._running_pid(cluster)
            if pid is None:
                code = _exit_code(cluster)
                cluster.pid_file.unlink(missing_ok=True)
                raise LocalClusterError(
                    f"local Kafka cluster {cluster.name} ({cluster.bootstrap}) exited while "
                    f"starting{f' with code {code}' if code is not None else ''}; "
                    f"{self._log_excerpt(cluster)}"
                )
            if _port_open(cluster.port):
                if admin is None:
                    admin = _admin_client(cluster.bootstrap)
                if _answers_metadata(admin, min(5.0, max(0.5, deadline - time.monotonic()))):
                    return
            if time.monotonic() >= deadline:
                self._kill(cluster, pid)
                raise LocalClusterError(
                    f"local Kafka cluster {cluster.name} ({cluster.bootstrap}) did not answer "
                    f"within {timeout:.0f} s and was stopped; {self._log_excerpt(cluster)}"
                )
            time.sleep(0.25)

    def _kill(self, cluster: _Cluster, pid: int) -> None:
        if _owns(pid, cluster):
            _signal(pid, signal.SIGKILL)
            _wait_exit(cluster, pid, time.monotonic() + 10)
        cluster.pid_file.unlink(missing_ok=True)

    def _log_excerpt(self, cluster: _Cluster) -> str:
        """The ends of server.log and console.log written since this `up` started the broker.

        Both matter: server.log has Kafka's story, console.log has what failed
        before logging started (a bad JVM option, a missing class).
        """
        starts = self._log_starts.get(cluster.name, {})
        parts = []
        for log in (cluster.server_log, cluster.console_log):
            # console.log mostly repeats server.log's warnings: a few lines suffice then
            lines = _LOG_TAIL_LINES if not parts else 8
            tail = _tail_file(log, since=starts.get(log, 0), lines=lines)
            if tail:
                parts.append(f"the end of {log}:\n{tail}")
        return "\n".join(parts) or f"it wrote nothing to {cluster.server_log} or {cluster.console_log}"


# -- module helpers -----------------------------------------------------------


def _server_properties(cluster: _Cluster) -> str:
    """Broker+controller config for a one-node dev cluster (replication factor 1 everywhere)."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{cluster.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{cluster.port},CONTROLLER://127.0.0.1:{cluster.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{cluster.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(cluster.log_dirs),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        # 50 partitions (the default) make a fresh cluster's first consumer group
        # wait seconds while they are created; a dev cluster needs few.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        # The default 50 partitions make the first transaction on a fresh cluster wait seconds.
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.check.interval.ms": "5000",
        "log.cleaner.backoff.ms": "1000",
        # A writer killed mid-transaction holds readers of its topic back until
        # its transaction is aborted: check for timed-out ones every second.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }
    header = f"# Written by mirror-pipeline `local up` for cluster {cluster.name}; rewritten on each start.\n"
    return header + "".join(f"{k}={v}\n" for k, v in settings.items())


def _random_cluster_id() -> str:
    """A Kafka cluster id (16 random bytes, URL-safe base64) made without a JVM start.

    Same shape as `StorageTool random-uuid`, which avoids ids starting with '-'
    because they read as command-line flags.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _read_layout(root: Path) -> dict[str, int] | None:
    try:
        data = json.loads((Path(root) / LAYOUT_FILE).read_text())
        return {"count": int(data["count"]), "base_port": int(data["base_port"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_layout(root: Path, count: int, base_port: int) -> None:
    (root / LAYOUT_FILE).write_text(json.dumps({"count": count, "base_port": base_port}) + "\n")


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


def _owns(pid: int, cluster: _Cluster) -> bool:
    """True if `pid` is alive and is the broker of `cluster` (its properties path is an argument).

    Our own children are judged by Popen (which also reaps them): right after
    exec the kernel briefly shows an empty command line.
    """
    child = _CHILDREN.get(pid)
    if child is not None:
        proc, properties = child
        return proc.poll() is None and properties == cluster.properties
    return str(cluster.properties) in _cmdline(pid)


def _exit_code(cluster: _Cluster) -> int | None:
    try:
        pid = int(cluster.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    child = _CHILDREN.get(pid)
    return child[0].poll() if child is not None else None


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_exit(cluster: _Cluster, pid: int, deadline: float) -> bool:
    while _owns(pid, cluster):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    _CHILDREN.pop(pid, None)
    return True


def _port_in_use(port: int) -> bool:
    """Whether binding 127.0.0.1:port fails, as it would for the broker (SO_REUSEADDR like Java)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _admin_client(bootstrap: str) -> Any:
    """An AdminClient that stays quiet while the broker is still coming up."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "reconnect.backoff.max.ms": 500,
            "log_level": 0,
            "error_cb": lambda _err: None,
        }
    )


def _answers_metadata(admin: Any, timeout: float) -> bool:
    from confluent_kafka import KafkaException

    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def _tail_text(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tail_file(path: Path, since: int = 0, lines: int = _LOG_TAIL_LINES) -> str:
    """The last `lines` lines of `path` after byte `since` (from 0 if the file rolled over)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = since if since <= size else 0
            f.seek(max(start, size - 64 * 1024))
            return _tail_text(f.read().decode(errors="replace"), lines)
    except OSError:
        return ""
