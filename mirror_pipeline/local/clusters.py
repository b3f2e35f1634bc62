"""Single-node KRaft Kafka clusters on this machine, for demos and integration tests.

Each cluster is one JVM acting as both broker and controller, with its own
directory `root/<name>/` (config, data, logs, pid file) and its own ports, so
several clusters stand in for the regions a mirror link connects. Brokers are
detached from the caller (new session, output to a file): `local up` returns
while they keep running, and `local down` stops them from another process.

Only what `up` started is ever signalled: a pid file alone is not trusted (pids
get reused), so the pid's command line must still name this cluster's
`server.properties` before it receives a signal.

A root's clusters share one security mode (`plaintext`, `ssl`,
`sasl_plaintext`, `sasl_ssl`), recorded with the layout; `security` keeps the
credentials of a secured root and says what a client needs to connect.

This module runs the clusters; `layout` says where each one's ports and files
are, `server_config` writes its broker config, `storage` formats it, and
`processes` watches, signals and reads the logs of the broker processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror_pipeline.local.certificates import write_private
from mirror_pipeline.local.jars import ensure_kafka_jars, java_command
from mirror_pipeline.local.layout import ClusterLayout, read_layout, write_layout
from mirror_pipeline.local.processes import (
    LOG_TAIL_LINES,
    WITH_DEFAULT_SIGNALS,
    admin_client,
    answers_metadata,
    exit_code,
    file_size,
    lost_a_bind_race,
    owns,
    port_in_use,
    port_open,
    root_lock,
    running_pid,
    send_signal,
    tail_file,
    track_child,
    wait_exit,
)
from mirror_pipeline.local.security import (
    ADMIN_USER,
    PLAINTEXT,
    add_user,
    check_mode,
    client_settings,
    ensure_credentials,
    install_scram_user,
    is_sasl,
    read_credentials,
)
from mirror_pipeline.local.server_config import server_properties
from mirror_pipeline.local.storage import format_storage, is_formatted
from mirror_pipeline.model.errors import LocalClusterError

DEFAULT_NAMES = ["us-west", "us-east", "eu-west", "ap-south", "ap-northeast"]
MAX_CLUSTERS = 5
DEFAULT_COUNT = 2
DEFAULT_BASE_PORT = 19092
#: Cluster i listens on base_port + i * PORT_STRIDE; its controller on that + 1.
PORT_STRIDE = 10000
#: Starts again after a bind failure: another socket can take a port between our check and the broker's bind.
BIND_RETRIES = 2
ROOT_ENV = "MIRROR_PIPELINE_LOCAL_DIR"
HEAP_ENV = "KAFKA_HEAP_OPTS"
#: The brokers' garbage collector and JIT settings, under the name Kafka's own scripts read.
PERFORMANCE_ENV = "KAFKA_JVM_PERFORMANCE_OPTS"
DEFAULT_PERFORMANCE = "-XX:+UseG1GC -XX:MaxGCPauseMillis=20"
#: Small enough for three brokers plus Spark on a 2-core laptop-sized machine.
DEFAULT_HEAP = "-Xmx768m -Xms256m"
#: A broker answers in 5-15 s on a quiet machine; on two cores shared with other JVMs (the test suite's
#: workers each start a trio) it has taken over a minute. Waiting longer only delays the error.
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
SERVER_LOG4J = Path(__file__).with_name("log4j2.properties")


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


class LocalKafka:
    """`count` single-node KRaft clusters under `root`, cluster i on `base_port + i*10000`."""

    #: (name, value) pairs over `server_config`'s in every broker this instance starts (the test suite's).
    broker_settings: tuple[tuple[str, str], ...] = ()

    def __init__(
        self, root: Path, count: int = DEFAULT_COUNT, base_port: int = DEFAULT_BASE_PORT, security: str = PLAINTEXT
    ):
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
        self.security = check_mode(security)
        self._clusters = [
            ClusterLayout(cluster_name(i), base_port + i * PORT_STRIDE, self.root / cluster_name(i))
            for i in range(count)
        ]
        #: Log sizes when this instance started each broker, so errors quote only new lines.
        self._log_starts: dict[str, dict[Path, int]] = {}

    @classmethod
    def from_root(cls, root: Path | None = None) -> LocalKafka:
        """The clusters a previous `up` recorded under `root`, else the defaults."""
        root = Path(root) if root is not None else default_root()
        layout = read_layout(root)
        if layout is None:
            return cls(root)
        return cls(root, count=layout["count"], base_port=layout["base_port"], security=layout["security"])

    def __repr__(self) -> str:
        return (
            f"LocalKafka(root={str(self.root)!r}, count={self.count}, base_port={self.base_port}, "
            f"security={self.security!r})"
        )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self._clusters]

    @property
    def bootstraps(self) -> list[str]:
        """Bootstrap addresses in cluster order (whether or not they are running)."""
        return [c.bootstrap for c in self._clusters]

    def client_properties(self, user: str = ADMIN_USER, cluster: int | str = 0) -> dict[str, str]:
        """The librdkafka settings to reach `cluster` (index or name) as `user`: never print them.

        Plaintext clusters have no users: just `bootstrap.servers`. `admin` is a super user.
        """
        return client_settings(read_credentials(self.root, self.security), self.layout(cluster).bootstrap, user)

    # -- public verbs --------------------------------------------------------

    def layout(self, which: int | str) -> ClusterLayout:
        """One cluster's files and ports, by index or name."""
        for index, cluster in enumerate(self._clusters):
            if which in (index, cluster.name):
                return cluster
        raise LocalClusterError(f"no local cluster {which!r}; the clusters are {', '.join(self.names)}")

    def status(self) -> list[ClusterInfo]:
        return [self._info(c) for c in self._clusters]

    def up(self, timeout: float = START_TIMEOUT_S) -> list[ClusterInfo]:
        """Start every cluster not already running and wait until all answer metadata.

        Idempotent: storage is formatted only on a cluster's first start, and a
        running cluster is left alone (same pid).
        """
        ensure_kafka_jars()
        self.root.mkdir(parents=True, exist_ok=True)
        with root_lock(self.root):
            return self._up(timeout)

    def _up(self, timeout: float) -> list[ClusterInfo]:
        self._check_layout()
        write_layout(self.root, self.count, self.base_port, self.security)
        creds = ensure_credentials(self.root, self.security)

        to_start = [c for c in self._clusters if running_pid(c) is None]
        for cluster in to_start:
            cluster.pid_file.unlink(missing_ok=True)
            self._check_ports_free(cluster)
            cluster.dir.mkdir(parents=True, exist_ok=True)
            # 0600: a secured broker's config holds its own passwords.
            write_private(cluster.properties, server_properties(cluster, self.security, creds, self.broker_settings))
        format_storage([c for c in to_start if not is_formatted(c)], creds)
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
        with root_lock(self.root):
            return self._down(timeout)

    def _down(self, timeout: float) -> list[ClusterInfo]:
        stopping: list[tuple[ClusterLayout, int]] = []
        for cluster in self._clusters:
            pid = running_pid(cluster)
            if pid is None:
                cluster.pid_file.unlink(missing_ok=True)
                continue
            send_signal(pid, signal.SIGTERM)
            stopping.append((cluster, pid))

        deadline = time.monotonic() + timeout
        for cluster, pid in stopping:
            if not wait_exit(cluster, pid, deadline):
                if owns(pid, cluster):
                    send_signal(pid, signal.SIGKILL)
                if not wait_exit(cluster, pid, time.monotonic() + 10):
                    raise LocalClusterError(
                        f"local Kafka cluster {cluster.name} (pid {pid}) did not exit after SIGKILL"
                    )
            cluster.pid_file.unlink(missing_ok=True)
        return [ClusterInfo(c.name, c.bootstrap, False, pid, c.dir) for c, pid in stopping]

    def create_user(self, name: str) -> None:
        """Give every cluster a user `name` with no ACL (idempotent); its secret is kept with the others.

        SASL modes: a random SCRAM-SHA-512 password, set through `admin` on each
        formatted cluster (a later format adds it). ssl mode: a certificate `CN=<name>`.
        """
        if self.security == PLAINTEXT or not self.root.is_dir():
            add_user(read_credentials(self.root, self.security), name)  # refuses: no users, or no `up` yet
        with root_lock(self.root):
            stopped = [c.name for c in self._clusters if is_formatted(c) and running_pid(c) is None]
            if is_sasl(self.security) and stopped:
                raise LocalClusterError(f"start {', '.join(stopped)} with `local up` before creating user {name!r}")
            creds = add_user(read_credentials(self.root, self.security), name)
            for cluster in self._clusters if is_sasl(self.security) else []:
                if is_formatted(cluster):
                    install_scram_user(self.client_properties(ADMIN_USER, cluster.name), name, creds.password(name))

    # -- internals -----------------------------------------------------------

    def _info(self, cluster: ClusterLayout) -> ClusterInfo:
        pid = running_pid(cluster)
        return ClusterInfo(cluster.name, cluster.bootstrap, pid is not None, pid, cluster.dir)

    def _check_layout(self) -> None:
        """Refuse a layout change that would orphan running brokers or reuse stale storage.

        KRaft records the controller's address when storage is formatted, so a
        formatted root cannot simply move to other ports.
        """
        layout = read_layout(self.root)
        if layout is None or layout == {"count": self.count, "base_port": self.base_port, "security": self.security}:
            return
        previous = LocalKafka(self.root, layout["count"], layout["base_port"], layout["security"])
        formatted = [c.name for c in previous._clusters if is_formatted(c)]
        # Formatted storage holds the controller's address and the SCRAM users of its mode.
        for key, flag in (("base_port", "--base-port"), ("security", "--security")):
            if layout[key] != getattr(self, key) and formatted:
                raise LocalClusterError(
                    f"{self.root} holds clusters made for {flag} {layout[key]} ({', '.join(formatted)}); "
                    f"use {flag} {layout[key]}, or run `local down` and delete that directory to start afresh"
                )
        orphans = [c.name for c in previous._clusters[self.count :] if running_pid(c) is not None]
        if orphans:
            raise LocalClusterError(
                f"clusters {', '.join(orphans)} from an earlier `up` with {layout['count']} "
                f"clusters are still running in {self.root}; run `local down` first"
            )

    def _check_ports_free(self, cluster: ClusterLayout) -> None:
        for port in (cluster.port, cluster.controller_port):
            if port_in_use(port):
                raise LocalClusterError(
                    f"port {port} for local Kafka cluster {cluster.name} is already in use by "
                    f"another process (not the broker started from {cluster.dir}); stop it or "
                    "choose another --base-port"
                )

    def _start(self, cluster: ClusterLayout) -> None:
        heap = os.environ.get(HEAP_ENV) or DEFAULT_HEAP
        cmd = java_command(
            "kafka.Kafka",
            str(cluster.properties),
            heap=heap,
            jvm_opts=[
                f"-Dlog4j2.configurationFile={SERVER_LOG4J}",
                f"-Dkafka.logs.dir={cluster.dir}",
                *(os.environ.get(PERFORMANCE_ENV) or DEFAULT_PERFORMANCE).split(),
                "-Djava.awt.headless=true",
            ],
        )
        self._log_starts[cluster.name] = {log: file_size(log) for log in (cluster.server_log, cluster.console_log)}
        with open(cluster.console_log, "ab") as console:
            console.write(f"--- started {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
            console.flush()
            proc = subprocess.Popen(
                [*WITH_DEFAULT_SIGNALS, *cmd],
                cwd=cluster.dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        track_child(proc, cluster.properties)
        cluster.pid_file.write_text(f"{proc.pid}\n")

    def _wait_ready(self, cluster: ClusterLayout, deadline: float, timeout: float) -> None:
        """Wait until the broker serves a metadata request; on failure stop it and explain."""
        admin = None
        probe = self.client_properties(ADMIN_USER, cluster.name)
        rebinds = 0
        while True:
            pid = running_pid(cluster)
            if (
                pid is None
                and rebinds < BIND_RETRIES
                and lost_a_bind_race((cluster.port, cluster.controller_port), self._log_starts.get(cluster.name))
            ):
                rebinds += 1
                self._start(cluster)
                continue
            if pid is None:
                code = exit_code(cluster)
                cluster.pid_file.unlink(missing_ok=True)
                raise LocalClusterError(
                    f"local Kafka cluster {cluster.name} ({cluster.bootstrap}) exited while "
                    f"starting{f' with code {code}' if code is not None else ''}; "
                    f"{self._log_excerpt(cluster)}"
                )
            if port_open(cluster.port):
                if admin is None:
                    admin = admin_client(cluster.bootstrap, probe)
                if answers_metadata(admin, min(5.0, max(0.5, deadline - time.monotonic()))):
                    return
            if time.monotonic() >= deadline:
                self._kill(cluster, pid)
                raise LocalClusterError(
                    f"local Kafka cluster {cluster.name} ({cluster.bootstrap}) did not answer "
                    f"within {timeout:.0f} s and was stopped; {self._log_excerpt(cluster)}"
                )
            time.sleep(0.25)

    def _kill(self, cluster: ClusterLayout, pid: int) -> None:
        if owns(pid, cluster):
            send_signal(pid, signal.SIGKILL)
            wait_exit(cluster, pid, time.monotonic() + 10)
        cluster.pid_file.unlink(missing_ok=True)

    def _log_excerpt(self, cluster: ClusterLayout) -> str:
        """The ends of server.log and console.log written since this `up` started the broker.

        Both matter: server.log has Kafka's story, console.log has what failed
        before logging started (a bad JVM option, a missing class).
        """
        starts = self._log_starts.get(cluster.name, {})
        parts: list[str] = []
        for log in (cluster.server_log, cluster.console_log):
            # console.log mostly repeats server.log's warnings: a few lines suffice then
            lines = LOG_TAIL_LINES if not parts else 8
            tail = tail_file(log, since=starts.get(log, 0), lines=lines)
            if tail:
                parts.append(f"the end of {log}:\n{tail}")
        return "\n".join(parts) or f"it wrote nothing to {cluster.server_log} or {cluster.console_log}"
