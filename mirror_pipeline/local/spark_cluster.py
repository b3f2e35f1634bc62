"""A local Spark cluster: a standalone master, two workers and a Spark Connect server (R-EX-3).

Everything comes from the installed `pyspark` package, which ships Spark's
jars (the Connect server's among them) and its launchers `bin/spark-class`
and `bin/spark-submit`: nothing is downloaded. The daemons listen on loopback
at fixed ports below Linux's ephemeral range: the master on `master_port`
(7077) and its web UI on the next port, worker i on `master_port + 2 + 2i`
and its UI on the one after, the Connect server on `connect_port` (15002).

Each daemon lives in `root/<name>/` (`spark.properties`, `pid`, `console.log`;
a worker's executors' logs under `work/`), detached from the caller like the
local brokers, and only a process whose command line still names that
daemon's `spark.properties` is ever signalled. `spark.json` in the root
records the ports of the last `up`, so `status` and `down` need no flags.

The Connect server runs its jobs on the workers and frees them when idle
(dynamic allocation), so a session on the master gets both workers too. It
and every executor run this interpreter, the one with confluent-kafka.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mirror_pipeline.config.spark_requirements import (
    CONNECT_SESSION_CONF,
    QUICK_JVM,
    REQUIRED_CONF,
    TASK_SLOTS_PER_CORE,
    WORKER_DAEMON_CONF,
)
from mirror_pipeline.local.jars import java_executable
from mirror_pipeline.local.processes import (
    WITH_DEFAULT_SIGNALS,
    file_size,
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
from mirror_pipeline.local.spark_daemons import DaemonInfo, SparkDaemon
from mirror_pipeline.model.errors import LocalClusterError

DEFAULT_MASTER_PORT = 7077
DEFAULT_CONNECT_PORT = 15002
WORKERS = 2
#: Each worker stands for one of a 2-core machine's cores and offers the local master's two task
#: slots per core (`spark_requirements.TASK_SLOTS_PER_CORE`: a copy task waits on the brokers more
#: than it computes). With one slot each, follow mode's epoch had one task on a wide link, holding
#: all 16 writer slots: 84 threads in its worker instead of the 64 two tasks keep.
WORKER_CORES = TASK_SLOTS_PER_CORE
WORKER_MEMORY = "1g"
#: What the Connect server's executors take of a worker (Spark's floor is 450 MiB).
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "256m"
CONNECT_DRIVER_MEMORY = "768m"
#: How long the Connect server keeps idle executors before handing the workers back.
CONNECT_IDLE_TIMEOUT = "30s"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
LAYOUT_FILE = "spark.json"
LOG4J = Path(__file__).with_name("spark-log4j2.properties")
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Inherited settings that would turn a daemon into something else (a Connect client, another master).
_FOREIGN_ENV = (
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_LOCAL_REMOTE",
    "MASTER",
    "PYSPARK_SUBMIT_ARGS",
    "SPARK_API_MODE",
    "SPARK_CONF_DIR",
    "SPARK_HOME",
)


def spark_home() -> Path:
    """The installed pyspark package: Spark's home, with `jars/` and `bin/` (found without importing it)."""
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or []) if spec else []
    home = Path(locations[0]) if locations else None
    has_connect = home is not None and any((home / "jars").glob("spark-connect_*.jar"))
    if home is None or not (home / "bin" / "spark-class").is_file() or not has_connect:
        raise LocalClusterError(
            "the installed pyspark package has no bin/spark-class or no Spark Connect jar; "
            "reinstall the project's packages (deploy/setup.sh)"
        )
    return home


class LocalSpark:
    """The master, `WORKERS` workers and the Connect server under `root`."""

    def __init__(self, root: Path, master_port: int = DEFAULT_MASTER_PORT, connect_port: int = DEFAULT_CONNECT_PORT):
        self.root = Path(root).expanduser().resolve()
        self.master_port = master_port
        self.connect_port = connect_port
        ports = [master_port + i for i in range(2 + 2 * WORKERS)] + [connect_port]
        if len(set(ports)) != len(ports) or not all(1024 <= p <= 65535 for p in ports):
            raise LocalClusterError(
                f"the master needs ports {master_port}..{master_port + 1 + 2 * WORKERS} and the "
                f"Connect server port {connect_port}: all distinct, within 1024..65535"
            )
        worker_ports = [(master_port + 2 + 2 * i, master_port + 3 + 2 * i) for i in range(WORKERS)]
        self.master = SparkDaemon("master", master_port, master_port + 1, self.root / "master")
        self.workers = [
            SparkDaemon(f"worker-{i + 1}", port, ui, self.root / f"worker-{i + 1}")
            for i, (port, ui) in enumerate(worker_ports)
        ]
        self.connect = SparkDaemon("connect", connect_port, None, self.root / "connect")
        self._log_starts: dict[str, int] = {}

    @classmethod
    def from_root(cls, root: Path) -> LocalSpark:
        """The cluster a previous `up` recorded under `root`, else the default ports."""
        try:
            data = json.loads((Path(root) / LAYOUT_FILE).read_text())
            return cls(root, int(data["master_port"]), int(data["connect_port"]))
        except (OSError, ValueError, KeyError, TypeError):
            return cls(root)

    @property
    def daemons(self) -> list[SparkDaemon]:
        return [self.master, *self.workers, self.connect]

    @property
    def master_url(self) -> str:
        return self.master.address

    @property
    def connect_url(self) -> str:
        return self.connect.address

    # -- public verbs --------------------------------------------------------

    def status(self) -> list[DaemonInfo]:
        return [self._info(d) for d in self.daemons]

    def up(self, timeout: float = START_TIMEOUT_S) -> list[DaemonInfo]:
        """Start every daemon not already running and wait until the workers have registered
        and the Connect server answers. Idempotent: a running daemon is left alone (same pid)."""
        home = spark_home()
        java_executable()  # fail early and clearly: Spark needs Java 17
        self.root.mkdir(parents=True, exist_ok=True)
        with root_lock(self.root):
            self._check_layout()
            (self.root / LAYOUT_FILE).write_text(
                json.dumps({"master_port": self.master_port, "connect_port": self.connect_port}) + "\n"
            )
            env = self._env(home)
            deadline = time.monotonic() + timeout
            if self._start_if_stopped(self.master, home, env):
                master_ports = (self.master.port, self.master_port + 1)
                self._wait(self.master, deadline, lambda: all(port_open(p) for p in master_ports))
            for daemon in [*self.workers, self.connect]:
                self._start_if_stopped(daemon, home, env)
            for worker in self.workers:
                self._wait(worker, deadline, lambda w=worker: self._registered(w))
            self._wait(self.connect, deadline, lambda: port_open(self.connect.port))
            return self.status()

    def down(self, timeout: float = STOP_TIMEOUT_S) -> list[DaemonInfo]:
        """Stop what `up` started (the Connect server first); return the daemons that were stopped.

        SIGTERM goes to each daemon's process group, so its executors and their
        Python workers stop with it; SIGKILL for any still alive after `timeout`.
        """
        if not self.root.is_dir():
            return []
        with root_lock(self.root):
            stopping = [(d, pid) for d in reversed(self.daemons) if (pid := running_pid(d)) is not None]
            for daemon in self.daemons:
                if running_pid(daemon) is None:
                    daemon.pid_file.unlink(missing_ok=True)
            for daemon, pid in stopping:
                _signal_group(daemon, pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for daemon, pid in stopping:
                if not wait_exit(daemon, pid, deadline):
                    _signal_group(daemon, pid, signal.SIGKILL)
                    if not wait_exit(daemon, pid, time.monotonic() + 10):
                        raise LocalClusterError(f"local Spark {daemon.name} (pid {pid}) did not exit after SIGKILL")
                daemon.pid_file.unlink(missing_ok=True)
            # An exiting process loses its command line before its sockets: a later `up` needs the ports.
            ports = [p for d, _ in stopping for p in (d.port, d.ui_port) if p is not None]
            until = time.monotonic() + 10
            while any(port_in_use(p) for p in ports) and time.monotonic() < until:
                time.sleep(0.1)
            return [DaemonInfo(d.name, d.address, _ui(d), False, pid, d.console_log) for d, pid in stopping]

    # -- internals -----------------------------------------------------------

    def _info(self, daemon: SparkDaemon) -> DaemonInfo:
        pid = running_pid(daemon)
        return DaemonInfo(daemon.name, daemon.address, _ui(daemon), pid is not None, pid, daemon.console_log)

    def _check_layout(self) -> None:
        """Refuse other ports while daemons of the recorded ones still run: `down` would lose them."""
        previous = LocalSpark.from_root(self.root)
        if (previous.master_port, previous.connect_port) == (self.master_port, self.connect_port):
            return
        if any(running_pid(d) is not None for d in previous.daemons):
            raise LocalClusterError(
                f"the local Spark cluster in {self.root} runs on master port {previous.master_port} and Connect "
                f"port {previous.connect_port}; run `local spark down` before changing its ports"
            )

    def _env(self, home: Path) -> dict[str, str]:
        conf_dir = self.root / "conf"
        conf_dir.mkdir(exist_ok=True)
        shutil.copyfile(LOG4J, conf_dir / "log4j2.properties")
        (self.root / "tmp").mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
        return {
            **env,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.root / "tmp"),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,  # the master, the workers and the Connect server
            # The Connect server's Python workers run the interpreter that has confluent-kafka.
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def _start_if_stopped(self, daemon: SparkDaemon, home: Path, env: dict[str, str]) -> bool:
        if running_pid(daemon) is not None:
            return False
        daemon.pid_file.unlink(missing_ok=True)
        for port in (daemon.port, daemon.ui_port):
            if port is not None and port_in_use(port):
                raise LocalClusterError(
                    f"port {port} for local Spark {daemon.name} is already in use by another process (not the "
                    f"daemon started from {daemon.dir}); stop it or choose other ports"
                )
        daemon.dir.mkdir(parents=True, exist_ok=True)
        daemon.properties.write_text("".join(f"{k} {v}\n" for k, v in self._properties(daemon).items()))
        self._log_starts[daemon.name] = file_size(daemon.console_log)
        with open(daemon.console_log, "ab") as console:
            console.write(f"--- started {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
            console.flush()
            if daemon is self.connect:  # the launcher sizes the Connect server like a daemon
                env = {**env, "SPARK_DAEMON_MEMORY": CONNECT_DRIVER_MEMORY}
            proc = subprocess.Popen(
                [*WITH_DEFAULT_SIGNALS, *self._command(daemon, home)],
                cwd=daemon.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        track_child(proc, daemon.properties)
        daemon.pid_file.write_text(f"{proc.pid}\n")
        return True

    def _command(self, daemon: SparkDaemon, home: Path) -> list[str]:
        props = ["--properties-file", str(daemon.properties)]
        if daemon is self.connect:
            return [
                str(home / "bin" / "spark-submit"),
                "--class",
                CONNECT_SERVER_CLASS,
                "--name",
                "Spark Connect server (mirror-pipeline)",
                "--master",
                self.master_url,
                "--driver-memory",
                CONNECT_DRIVER_MEMORY,
                *props,
            ]
        common = ["--host", "127.0.0.1", "--port", str(daemon.port), "--webui-port", str(daemon.ui_port), *props]
        if daemon is self.master:
            return [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", *common]
        return [
            str(home / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            *common,
            "--cores",
            str(WORKER_CORES),
            "--memory",
            WORKER_MEMORY,
            "--work-dir",
            str(daemon.dir / "work"),
            self.master_url,
        ]

    def _properties(self, daemon: SparkDaemon) -> dict[str, str]:
        if daemon is self.master:
            return {"spark.master.rest.enabled": "false"}
        if daemon is not self.connect:
            return {"spark.worker.cleanup.enabled": "true", "spark.worker.cleanup.appDataTtl": "86400"}
        return {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.connect_port),
            "spark.ui.enabled": "false",
            **REQUIRED_CONF,  # under Connect the server's conf rules
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": str(WORKER_CORES),
            "spark.executor.extraJavaOptions": QUICK_JVM,
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.minExecutors": "0",
            "spark.dynamicAllocation.executorIdleTimeout": CONNECT_IDLE_TIMEOUT,
            "spark.python.worker.reuse": "true",
            **WORKER_DAEMON_CONF,
            **CONNECT_SESSION_CONF,
        }

    def _registered(self, worker: SparkDaemon) -> bool:
        """Whether the master lists `worker` as ALIVE (its JSON status page)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master.ui_port}/json/", timeout=2) as response:
                workers = json.loads(response.read()).get("workers", [])
        except (OSError, ValueError, AttributeError):
            return False
        return any(w.get("port") == worker.port and w.get("state") == "ALIVE" for w in workers)

    def _wait(self, daemon: SparkDaemon, deadline: float, ready) -> None:
        """Wait until `ready()`; if the daemon exits or the deadline passes, stop it and explain."""
        while not ready():
            pid = running_pid(daemon)
            if pid is None:
                daemon.pid_file.unlink(missing_ok=True)
                raise LocalClusterError(
                    f"local Spark {daemon.name} ({daemon.address}) exited while starting; {self._log_excerpt(daemon)}"
                )
            if time.monotonic() >= deadline:
                _signal_group(daemon, pid, signal.SIGKILL)
                wait_exit(daemon, pid, time.monotonic() + 10)
                daemon.pid_file.unlink(missing_ok=True)
                raise LocalClusterError(
                    f"local Spark {daemon.name} ({daemon.address}) was not ready in time and "
                    f"was stopped; {self._log_excerpt(daemon)}"
                )
            time.sleep(0.25)

    def _log_excerpt(self, daemon: SparkDaemon) -> str:
        tail = tail_file(daemon.console_log, since=self._log_starts.get(daemon.name, 0))
        return f"the end of {daemon.console_log}:\n{tail}" if tail else f"it wrote nothing to {daemon.console_log}"


def _ui(daemon: SparkDaemon) -> str | None:
    return f"http://127.0.0.1:{daemon.ui_port}" if daemon.ui_port else None


def _signal_group(daemon: SparkDaemon, pid: int, sig: signal.Signals) -> None:
    """Signal the daemon and what it started (executors, Python workers): its process group,
    which `up` made its own; only while the daemon itself is still ours, so the group is too."""
    if not owns(pid, daemon):
        return
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
            return
    except ProcessLookupError:
        return
    send_signal(pid, sig)
