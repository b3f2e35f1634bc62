"""Replication metrics over a sliding window (R-OBS-1), independent of how they are served.

Four metrics, per mirror topic and per link, each summarised over the last
`window_s` seconds as min, max, avg and sum (and the count behind them):

- `byte-rate`: bytes per second a copy wrote while it ran. One sample per
  recorded copy of a mirror (a cycle); the link's sample is the whole cycle's
  bytes over its duration.
- `replication-latency-ms`: per record, the time its copy was acknowledged by
  the mirror minus its source timestamp. A copy adds its records as one
  aggregate sample, so min, max, sum and avg are over records, exactly.
- `checkpoint-latency-ms`: per offset sync, the longest time from reading a
  source group's offsets to the destination acknowledging their
  translation; added to the link and to every mirror the sync covered.
- `replication-records-lag`: records not yet mirrored, sampled at intervals
  (a mirror's lag is the sum over its partitions, the link's over its mirrors).

Samples may arrive out of order (they are read back from an event log), so a
window keeps them by their own time, not by arrival.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

BYTE_RATE = "byte-rate"
REPLICATION_LATENCY = "replication-latency-ms"
CHECKPOINT_LATENCY = "checkpoint-latency-ms"
RECORDS_LAG = "replication-records-lag"
METRICS = (BYTE_RATE, REPLICATION_LATENCY, CHECKPOINT_LATENCY, RECORDS_LAG)
DEFAULT_WINDOW_S = 300.0
# The link as a whole, where a topic name would be.
LINK_WIDE = ""


@dataclass(frozen=True)
class Sample:
    """`count` values observed at `at` (epoch seconds), given by their sum, smallest and largest."""

    at: float
    count: int
    total: float
    low: float
    high: float

    @classmethod
    def of(cls, at: float, value: float) -> Sample:
        return cls(at, 1, float(value), float(value), float(value))


@dataclass(frozen=True)
class WindowStats:
    count: int
    min: float
    max: float
    avg: float
    sum: float

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "min": self.min, "max": self.max, "avg": self.avg, "sum": self.sum}


@dataclass
class SlidingWindow:
    window_s: float = DEFAULT_WINDOW_S
    _times: list[float] = field(default_factory=list)
    _samples: list[Sample] = field(default_factory=list)

    def add(self, sample: Sample) -> None:
        i = bisect.bisect_right(self._times, sample.at)
        self._times.insert(i, sample.at)
        self._samples.insert(i, sample)
        # A long-lived window (the exporter's lag) stays bounded even when nobody asks for its stats.
        self._drop_before(self._times[-1] - self.window_s)

    def stats(self, now: float) -> WindowStats | None:
        """Over the samples of (now - window, now]; None when there is none."""
        self._drop_before(now - self.window_s)
        samples = [s for s in self._samples if s.at <= now and s.count]
        if not samples:
            return None
        count = sum(s.count for s in samples)
        total = sum(s.total for s in samples)
        return WindowStats(count, min(s.low for s in samples), max(s.high for s in samples), total / count, total)

    def _drop_before(self, start: float) -> None:
        cut = bisect.bisect_right(self._times, start)
        del self._times[:cut], self._samples[:cut]


@dataclass
class MetricWindows:
    """One window per (metric, link, topic); `LINK_WIDE` as topic is the link's own."""

    window_s: float = DEFAULT_WINDOW_S
    _windows: dict[tuple[str, str, str], SlidingWindow] = field(default_factory=dict)

    def add(self, metric: str, link: str, topic: str, sample: Sample) -> None:
        if metric not in METRICS:
            raise ValueError(f"unknown metric '{metric}'")
        key = (metric, link, topic)
        if key not in self._windows:
            self._windows[key] = SlidingWindow(self.window_s)
        self._windows[key].add(sample)

    def snapshot(self, now: float) -> dict[tuple[str, str, str], WindowStats]:
        """Every window holding samples now, by (metric, link, topic)."""
        out: dict[tuple[str, str, str], WindowStats] = {}
        for key, window in sorted(self._windows.items()):
            stats = window.stats(now)
            if stats is not None:
                out[key] = stats
        return out


@dataclass(frozen=True)
class CopySample:
    """One mirror's part of one recorded copy, as the metrics need it."""

    link: str
    mirror: str
    at: float  # when the copy ended
    duration_s: float
    bytes: int
    latency_count: int = 0
    latency_min_ms: float = 0.0
    latency_max_ms: float = 0.0
    latency_sum_ms: float = 0.0
    # The whole cycle's figures, for the link's byte-rate (one sample per cycle).
    cycle_id: str = ""
    cycle_bytes: int = 0


def add_copies(windows: MetricWindows, copies: list[CopySample]) -> None:
    """Byte-rate and replication latency of recorded copies, per mirror and per link."""
    cycles: dict[tuple[str, str], list[CopySample]] = {}
    for c in copies:
        if c.duration_s > 0:
            windows.add(BYTE_RATE, c.link, c.mirror, Sample.of(c.at, c.bytes / c.duration_s))
        if c.latency_count:
            windows.add(REPLICATION_LATENCY, c.link, c.mirror, _latency_sample(c))
        cycles.setdefault((c.link, c.cycle_id or f"{c.at}"), []).append(c)
    for (link, _), parts in cycles.items():
        first = parts[0]
        if first.duration_s > 0:
            cycle_bytes = first.cycle_bytes or sum(p.bytes for p in parts)
            windows.add(BYTE_RATE, link, LINK_WIDE, Sample.of(first.at, cycle_bytes / first.duration_s))
        timed = [p for p in parts if p.latency_count]
        if timed:
            windows.add(
                REPLICATION_LATENCY,
                link,
                LINK_WIDE,
                Sample(
                    first.at,
                    sum(p.latency_count for p in timed),
                    sum(p.latency_sum_ms for p in timed),
                    min(p.latency_min_ms for p in timed),
                    max(p.latency_max_ms for p in timed),
                ),
            )


def _latency_sample(c: CopySample) -> Sample:
    return Sample(c.at, c.latency_count, c.latency_sum_ms, c.latency_min_ms, c.latency_max_ms)


def add_checkpoint(windows: MetricWindows, link: str, mirrors: list[str], at: float, latency_ms: float) -> None:
    """One offset sync's checkpoint latency, for the link and each mirror it covered."""
    for topic in {LINK_WIDE, *mirrors}:
        windows.add(CHECKPOINT_LATENCY, link, topic, Sample.of(at, latency_ms))


def add_lags(windows: MetricWindows, link: str, at: float, lags: dict[str, int]) -> None:
    """One sampling of the link's lag: each mirror's, and their sum for the link."""
    for mirror, lag in lags.items():
        windows.add(RECORDS_LAG, link, mirror, Sample.of(at, lag))
    if lags:
        windows.add(RECORDS_LAG, link, LINK_WIDE, Sample.of(at, sum(lags.values())))
