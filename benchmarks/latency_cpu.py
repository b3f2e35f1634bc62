"""CPU seconds per process group during one latency mode, the other load on the machine, and each
group's largest process (threads, peak RSS); also over the steady load alone (`mark`).

`throughput.CpuMeter` compares two snapshots: a process that exits in between
(every `run` process, MM2 or follow once stopped) would leave no trace in the
second one, and its CPU would count as someone else's. This samples every
second instead, so such a process is counted up to its last second.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from benchmarks.throughput import CpuMeter

#: The role of this benchmark's own process: its load and its probe, no part of a copier's cost.
BENCHMARK_ROLE = "benchmark"

#: CpuMeter's catch-all for our children that are no JVM, Spark worker or broker: here, the CLI processes;
#: and its "driver", this benchmark's own process (the load and the probe), not the Spark driver.
ROLE_NAMES = {"other-children": "cli", "driver": BENCHMARK_ROLE}
#: Threads and peak RSS are read this many times per CPU sample.
PEAK_READS_PER_SAMPLE = 10


class CpuSampler(threading.Thread):
    def __init__(self, meter: CpuMeter, every_s: float = 1.0):
        super().__init__(name="cpu-sampler", daemon=True)
        self.meter, self.every_s = meter, every_s
        self.stopping = threading.Event()
        self.first = self.last = meter.snapshot()
        # CPU seconds of each process when last seen; the processes running now count from here.
        self.seen = {pid: cpu for pid, (_, cpu) in self.first.get("pids", {}).items()}
        self.roles: dict[str, float] = {}
        # Per role, the most threads and the highest peak RSS (MiB) any one of its processes had:
        # a copy task is one Spark Python worker, the follow driver the `cli` process.
        self.peaks: dict[str, dict[str, float]] = {}
        # Per mark: the CPU seconds of each role and the wall clock when it was made.
        self.marks: dict[str, tuple[dict[str, float], float]] = {}
        self.sampling = threading.Lock()  # a mark samples at once, beside the sampler's thread

    def run(self) -> None:
        # Peaks are read ten times as often as CPU: a copy task's start (its checks' clients) lasts
        # about a tenth of a second, and a sample a second missed it.
        ticks = 0
        while not self.stopping.wait(self.every_s / PEAK_READS_PER_SAMPLE):
            ticks += 1
            if ticks % PEAK_READS_PER_SAMPLE == 0:
                self._sample()
            else:
                for pid, (role, _) in self.last.get("pids", {}).items():
                    self._peak(ROLE_NAMES.get(role, role), pid)

    def _sample(self) -> None:
        with self.sampling:
            snap = self.meter.snapshot()
            if not snap:
                return
            for pid, (role, cpu) in snap["pids"].items():
                role = ROLE_NAMES.get(role, role)
                self.roles[role] = self.roles.get(role, 0.0) + max(0.0, cpu - self.seen.get(pid, 0.0))
                self.seen[pid] = cpu
                self._peak(role, pid)
            self.last = snap

    def mark(self, name: str) -> None:
        """Note each role's CPU seconds now, for `between`."""
        self._sample()
        with self.sampling:
            self.marks[name] = (dict(self.roles), self.last.get("wall", 0.0))

    def between(self, start: str, end: str) -> dict[str, float]:
        """CPU seconds per role from mark `start` to mark `end`, and their `wall` time; empty without both."""
        if start not in self.marks or end not in self.marks:
            return {}
        (before, began), (after, ended) = self.marks[start], self.marks[end]
        out = {role: round(cpu - before.get(role, 0.0), 1) for role, cpu in sorted(after.items())}
        return {**{k: v for k, v in out.items() if v >= 0.05}, "wall": round(ended - began, 1)}

    def _peak(self, role: str, pid: int) -> None:
        status = _status(pid)
        if not status:
            return
        peak = self.peaks.setdefault(role, {"threads": 0, "rss_mib": 0.0})
        peak["threads"] = max(peak["threads"], status.get("Threads", 0))
        peak["rss_mib"] = max(peak["rss_mib"], round(status.get("VmHWM", 0) / 1024, 1))

    def stop(self) -> dict[str, Any]:
        """CPU seconds per role, `not-ours` (everything else on the machine) and the wall time, as CpuMeter.delta."""
        self.stopping.set()
        if self.ident is not None:  # started
            self.join(10)
        self._sample()
        if not self.first:
            return {}
        out = {k: round(v, 1) for k, v in sorted(self.roles.items()) if v >= 0.05}
        machine = self.last["machine_busy"] - self.first["machine_busy"]
        out["not-ours"] = round(max(0.0, machine - sum(self.roles.values())), 1)
        out["wall"] = round(self.last["wall"] - self.first["wall"], 1)
        return out

    def largest(self) -> dict[str, dict[str, float]]:
        """Per role, its largest process seen: {'threads': most threads, 'rss_mib': highest peak RSS}."""
        return {role: dict(peak) for role, peak in sorted(self.peaks.items())}


def _status(pid: int) -> dict[str, int]:
    """Threads and VmHWM (KiB) from /proc/PID/status; empty once the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("Threads", "VmHWM"):
            out[key] = int(value.split()[0])
    return out
