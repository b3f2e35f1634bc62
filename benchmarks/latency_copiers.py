"""The copiers the latency benchmark times, each behind the same small interface.

- `Mm2`: MirrorMaker 2 in dedicated mode, with its defaults, started with its own
  script's JVM options (see `mm2_latency_properties`, `MM2_HEAP`);
- `CliCycles`: `mirror-pipeline run --link L` processes, back to back or on a
  fixed cadence (a schedule);
- `Follow`: one long-running `mirror-pipeline run --link L --follow` process,
  stopped with SIGTERM like a supervisor stops it.

A copier is started, told when the load has ended, drained (wait until it has
copied everything it will), then stopped; `info()` says what it did.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import MM2_SINGLE_NODE, REPO, log_tail, mm2_properties_text, say, start_mm2, stop_mm2
from benchmarks.latency_load import MEASURED, Load, Tracker
from mirror_pipeline.cli.follow import epoch_line

#: A `run` process that takes longer than this is killed (with its Spark JVM) and counted as failed.
CYCLE_TIMEOUT_S = 900


def cli_command() -> list[str]:
    """The virtualenv's `mirror-pipeline` script next to this interpreter, else `python -m mirror_pipeline`."""
    script = Path(sys.executable).with_name("mirror-pipeline")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mirror_pipeline"]


def cli_env() -> dict[str, str]:
    """The CLI's environment: no inherited config path or Dagster instance.

    The processes run in the benchmark's work directory, so what `run` records
    lands in its `./.dagster-home`, not in the instance the UI reads.
    """
    return {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MIRROR_PIPELINE_CONFIG")}


def follow_options() -> dict[str, Any]:
    """What `run --help` says about `--follow` and `--epoch-seconds` (being built elsewhere as this is written)."""
    out = subprocess.run([*cli_command(), "run", "--help"], capture_output=True, text=True, cwd=REPO, env=cli_env())
    text = " ".join(out.stdout.split())
    found = {"follow": "--follow" in text, "epoch_seconds": "--epoch-seconds" in text}
    m = re.search(r"--epoch-seconds[^\[]*\[default:\s*([0-9.]+)", text)
    if m:
        found["epoch_seconds_default"] = float(m.group(1))
    return found


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process we started in its own session, with what it started (its Spark JVM)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


class Copier:
    name = "?"
    warm_up = False  # measure only once it runs (first record mirrored)

    def __init__(self, source_topic: str, mirror_topic: str):
        self.source_topic, self.mirror_topic = source_topic, mirror_topic
        # What the load writes and the tracker reads, in the same order: these two, or a wide link's
        # topics (`spread_over`; the names above then only label the mode).
        self.sources, self.mirrors = [source_topic], [mirror_topic]
        self.load_start: float | None = None
        self.load_end: float | None = None

    def spread_over(self, sources: list[str], mirrors: list[str]) -> Copier:
        self.sources, self.mirrors = sources, mirrors
        return self

    def watch(self, tracker: Tracker, load: Load) -> None:
        """The tracker and load of the measurement, for a copier that decides by itself when it is done."""

    def start(self, t0: float) -> None:
        raise NotImplementedError

    def started_load(self) -> None:
        self.load_start = time.monotonic()

    def ended_load(self) -> None:
        self.load_end = time.monotonic()

    def alive(self) -> bool:
        return True

    def drain(self, tracker: Tracker, load: Load, timeout_s: float) -> bool:
        """Wait until every measured record arrived; False on timeout (or when the copier died)."""
        return tracker.wait_all(load, MEASURED, timeout_s, self.alive)

    def stop(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        return {}


#: MM2's JVM as `bin/connect-mirror-maker.sh` starts it: that script's heap, and the JVM options
#: `bin/kafka-run-class.sh` adds (less -XX:MaxInlineLevel=15, the default since JDK 14).
MM2_HEAP = "-Xms256M -Xmx2G"
MM2_JVM_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


def mm2_latency_properties(a: str, b: str, topic: str) -> str:
    """MM2 as its users run it: its defaults, but for what these two single-node clusters require.

    Not the throughput benchmark's settings, which serve its bulk copy and change
    what MM2 runs (two tasks, a topic scan every second, no checkpoints).
    Here every MM2 default holds (one task, `refresh.topics.interval.seconds`
    600: the topic exists before MM2 starts, so its first scan finds it;
    checkpoints, heartbeats and offset syncs on), except:
    """
    settings = {
        "clusters": "a, b",
        "a.bootstrap.servers": a,
        "b.bootstrap.servers": b,
        "a->b.enabled": "true",
        "a->b.topics": topic,  # this mode's topic(s) only: the other modes' topics are on `a` too
        "b->a.enabled": "false",
        **MM2_SINGLE_NODE,  # one broker per cluster
        # The local brokers run no authorizer: there are no ACLs to sync, and every attempt fails.
        "sync.topic.acls.enabled": "false",
    }
    return mm2_properties_text(settings, "benchmarks/latency_copiers.py")


class Mm2(Copier):
    name = "mm2"
    warm_up = True

    def __init__(self, workdir: Path, a: str, b: str, topic: str):
        super().__init__(topic, f"a.{topic}")
        self.workdir, self.props = workdir, mm2_latency_properties(a, b, topic)
        self.proc: subprocess.Popen | None = None

    def start(self, t0: float) -> None:
        self.proc, self.log = start_mm2(self.workdir, self.props, heap=MM2_HEAP, jvm_opts=MM2_JVM_OPTS)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            self.exit_code_before_stop = self.proc.poll()
            stop_mm2(self.proc)

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"log": str(self.log)}
        if getattr(self, "exit_code_before_stop", None) is not None:
            out["died"] = f"exited with code {self.exit_code_before_stop} before it was stopped"
            out["log_tail"] = log_tail(self.log)
        return out


class CliCycles(Copier):
    """`run --link L` processes: back to back (`period_s` None) or started every `period_s` from the load's start.

    A start that falls while the previous run still runs waits for it (a link's
    runs are queued one at a time); the start is then late, and says so. The
    loop ends after the first successful run that started after the load ended
    (that one saw every record), or sooner, once the load has ended and every
    record arrived (a run that started just before the load's last record).
    """

    def __init__(
        self,
        name: str,
        config: Path,
        link: str,
        source_topic: str,
        mirror_topic: str,
        workdir: Path,
        period_s: float | None = None,
    ):
        super().__init__(source_topic, mirror_topic)
        self.name, self.config, self.link, self.workdir, self.period_s = name, config, link, workdir, period_s
        # Back to back, runs are measured once running, as MM2 and follow are: the first run after a
        # Spark Connect server starts also starts its executors (~20 s), which a link's sensor, asking
        # for a run every few seconds, pays once. A schedule's cadence is measured from the load's start.
        self.warm_up = period_s is None
        self.cycles: list[dict[str, Any]] = []
        self.caught_up = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"cycles-{name}", daemon=True)
        self.log = workdir / f"{name}-runs.log"
        self.everything_arrived: Callable[[], bool] = lambda: False

    def watch(self, tracker: Tracker, load: Load) -> None:
        # A few seconds' grace: the run's last records are committed, the tracker may not have read them yet.
        self.everything_arrived = lambda: tracker.wait_all(load, MEASURED, 5.0)

    def start(self, t0: float) -> None:
        self.t0 = t0
        self.thread.start()

    def _loop(self) -> None:
        k = 1
        while not self.stopping.is_set():
            if self.period_s:
                due = self.t0 + k * self.period_s
                k += 1
                if self.stopping.wait(max(0.0, due - time.monotonic())):
                    return
                late = max(0.0, time.monotonic() - due)
            else:
                late = 0.0
            started = time.monotonic()
            after_load = self.load_end is not None and started >= self.load_end
            entry = self.run_once()
            entry.update({"start_s": round(started - self.t0, 2), "late_s": round(late, 2), "after_load": after_load})
            self.cycles.append(entry)
            say(
                f"{self.name}: run {len(self.cycles)} at {entry['start_s']:.0f}s: {entry.get('records', '?')} records "
                f"in {entry['wall_s']:.1f}s wall (cycle {entry.get('duration_s', '?')}s), rc {entry['rc']}"
            )
            if self.load_end is not None and entry["rc"] == 0 and (after_load or self.everything_arrived()):
                self.caught_up.set()
                return

    def run_once(self) -> dict[str, Any]:
        cmd = [*cli_command(), "run", "--link", self.link, "--config", str(self.config), "--json"]
        started = time.monotonic()
        with open(self.log, "ab") as err:
            err.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
            err.flush()
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=cli_env(),
                start_new_session=True,
            )
            try:
                stdout, _ = proc.communicate(timeout=CYCLE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                stdout = b""
        entry: dict[str, Any] = {"rc": proc.returncode, "wall_s": round(time.monotonic() - started, 2)}
        try:
            result = json.loads(stdout)
            entry.update(
                {
                    "records": result.get("records"),
                    "duration_s": round(result.get("duration_s", 0), 2),
                    "lag_after": result.get("lag_after"),
                }
            )
        except (ValueError, AttributeError):
            entry["stdout_tail"] = stdout.decode(errors="replace")[-300:]
        return entry

    def drain(self, tracker: Tracker, load: Load, timeout_s: float) -> bool:
        self.caught_up.wait(timeout_s)
        # The run's records are committed on b; give the tracker a moment to read them.
        return tracker.wait_all(load, MEASURED, 10.0)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(CYCLE_TIMEOUT_S + 30)

    def info(self) -> dict[str, Any]:
        walls = [c["wall_s"] for c in self.cycles]
        cycles = [c["duration_s"] for c in self.cycles if "duration_s" in c]
        return {
            "runs": self.cycles,
            "runs_count": len(self.cycles),
            "failed": sum(1 for c in self.cycles if c["rc"]),
            "wall_s_mean": round(sum(walls) / len(walls), 2) if walls else None,
            "cycle_s_mean": round(sum(cycles) / len(cycles), 2) if cycles else None,
            "late_s_max": max((c["late_s"] for c in self.cycles), default=0.0),
            "log": str(self.log),
        }


class ProcessCopier(Copier):
    """A copier that is one long-running process (`proc`), stopped with a signal; what happened lands in `result`."""

    name = "?"
    log: Path
    proc: subprocess.Popen | None = None
    result: dict[str, Any]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop_process(self, sig: signal.Signals, timeout_s: float) -> None:
        """`sig` to the process alone; its whole group SIGKILLed if it still runs `timeout_s` later."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self.result["died"] = f"exited with code {self.proc.returncode} before it was stopped"
            self.result["log_tail"] = log_tail(self.log)
            return
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            rc = None
            self.result["killed"] = f"still running {timeout_s:.0f}s after {sig.name}; killed"
        self.result.update({"stopped_with": sig.name, "exit_code": rc, "stop_s": round(time.monotonic() - started, 2)})
        if rc:
            self.result["log_tail"] = log_tail(self.log)
        say(f"{self.name}: {sig.name} -> exit code {rc} after {self.result['stop_s']}s")


class Follow(ProcessCopier):
    """`run --link L --follow --json [--epoch-seconds N]`: one process, stopped with SIGTERM (it finishes
    its epoch). Its epochs come as JSON, for their figures (a copy task's memory), and are kept and logged
    as the line the text output has (`cli.follow.epoch_line`)."""

    warm_up = True
    #: The lines of its output worth a place in the report: each epoch (as rendered), the stop.
    NEWS = ("epoch ", "stopping ")

    def __init__(
        self,
        name: str,
        config: Path,
        link: str,
        source_topic: str,
        mirror_topic: str,
        workdir: Path,
        epoch_s: float | None,
        stop_timeout_s: float,
    ):
        super().__init__(source_topic, mirror_topic)
        self.name, self.config, self.link, self.workdir = name, config, link, workdir
        self.epoch_s, self.stop_timeout_s = epoch_s, stop_timeout_s
        self.log = workdir / f"{name}.log"
        self.result = {"log": str(self.log)}
        self.epochs: list[tuple[float, str]] = []  # (monotonic time the line came, the line)
        self.task_memory: list[dict[str, int]] = []  # each epoch's largest copy task (`TaskMemory.to_dict`)
        self.t0 = 0.0

    def start(self, t0: float) -> None:
        cmd = [*cli_command(), "run", "--link", self.link, "--config", str(self.config), "--follow", "--json"]
        if self.epoch_s is not None:
            cmd += ["--epoch-seconds", f"{self.epoch_s:g}"]
        say(f"{self.name}: starting {' '.join(cmd[-7:])} (log: {self.log})")
        self.result["command"] = " ".join(cmd)
        self.t0 = t0
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=cli_env(),
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read_output, name=f"{self.name}-output", daemon=True)
        self.reader.start()

    def _read_output(self) -> None:
        """Copy the process's output to the log, each line stamped; keep the epoch lines and when they came.

        The stamps put the epoch boundaries on the same clock as the load (see `info`).
        """
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log, "w") as log:
            for raw in self.proc.stdout:
                at = time.monotonic()
                line = raw.decode(errors="replace").rstrip()
                if line.startswith("{"):
                    line = self._epoch(line) or line
                log.write(f"[{at - self.t0:8.1f}s] {line}\n")
                log.flush()
                if line.startswith(self.NEWS):
                    self.epochs.append((at, line))

    def _epoch(self, line: str) -> str:
        """An epoch's line (its task memory noted); '' for other news (a sync) or a line not JSON."""
        try:
            news = json.loads(line)
        except ValueError:
            return ""
        if not isinstance(news, dict) or "epoch" not in news:
            return ""
        cycle = news.get("cycle") or {}
        if memory := cycle.get("task_memory"):
            self.task_memory.append(memory)
        return epoch_line(news["epoch"], news.get("cycle"), news.get("error") or "")

    def stop(self) -> None:
        """SIGTERM to the process alone (not its group: the Spark JVM must outlive the epoch in flight)."""
        self.stop_process(signal.SIGTERM, self.stop_timeout_s)

    def info(self) -> dict[str, Any]:
        if self.proc is not None:
            self.reader.join(10)
        # When each line was printed, in seconds from the measured load's start (negative: before it).
        ref = self.load_start if self.load_start is not None else self.t0
        epochs = [{"at_s": round(at - ref, 1), "line": line} for at, line in self.epochs]
        return {**self.result, "epochs": epochs, "task_memory": self.task_memory}
