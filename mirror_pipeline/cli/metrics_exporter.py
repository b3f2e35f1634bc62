"""The metrics of every link (R-OBS-1), summarised over a sliding window and served in Prometheus text format.

Where the figures come from:
- byte-rate, replication latency and checkpoint latency: the copies and
  offset syncs recorded in the Dagster instance the UI reads (Dagster runs
  and the CLI's runless records alike, see `metrics_history`), read back
  over the window at each collection;
- records lag and the mirror counts per state: sampled from the clusters by
  this process every `interval_s` (lag between copies is what an operator
  watches, and no copy records it).

Metric names and labels are documented in docs/console.md ("Metrics"); a window's
`count` says how many samples (records, for latency) stand behind it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from dagster import DagsterInstance
from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from mirror_pipeline import engine
from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.config.redaction import scrub
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.metrics import (
    LINK_WIDE,
    METRICS,
    MetricWindows,
    WindowStats,
    add_checkpoint,
    add_copies,
    add_lags,
)
from mirror_pipeline.model.states import count_per_state
from mirror_pipeline_dagster.metrics_history import recorded_checkpoints, recorded_copies

PREFIX = "mirror_pipeline"
UNITS = {
    "byte-rate": "bytes per second a copy wrote while it ran",
    "replication-latency-ms": "per record: acknowledged on the mirror minus its source timestamp, in ms",
    "checkpoint-latency-ms": "per offset sync: source offsets read to translation committed, in ms",
    "replication-records-lag": "source records not yet mirrored, sampled",
}
STATS = ("min", "max", "avg", "sum", "count")


@dataclass
class LinkMetrics:
    """What the exporter knows of its links: lag samples and states from the clusters, the rest from the instance."""

    config: PipelineConfig
    instance: DagsterInstance
    window_s: float
    links: list[str] = field(default_factory=list)
    _lags: MetricWindows = field(default_factory=MetricWindows)  # the lag samples so far (old ones drop out)
    states: dict = field(default_factory=dict)  # link -> {state: count}
    mirrors: dict = field(default_factory=dict)  # link -> [mirror topics]
    errors: dict = field(default_factory=dict)  # link -> why the last sample failed ("" when it did not)
    heartbeat_ages_ms: dict = field(default_factory=dict)  # link -> age of its newest mirrored heartbeat
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.links = self.links or sorted(self.config.links)
        self._lags = MetricWindows(self.window_s)

    def sample(self) -> None:
        """Each link's lag per mirror and its mirrors per state, now."""
        for link in self.links:
            try:
                infos, lags = engine.mirror_overview(self.config, link)
            except MirrorError as exc:
                with self._lock:
                    self.errors[link] = scrub(" ".join(str(exc).split()), self.config.secret_values())
                continue
            heartbeat_age_ms = self._heartbeat_age_ms(link)
            with self._lock:
                self.errors[link] = ""
                self.heartbeat_ages_ms[link] = heartbeat_age_ms
                self.states[link] = count_per_state(info.state for info in infos)
                self.mirrors[link] = sorted(info.mirror_topic for info in infos)
                add_lags(self._lags, link, time.time(), lags)

    def _heartbeat_age_ms(self, link: str) -> int | None:
        """None when the link has heartbeats off (asked of no cluster then) or none arrived yet."""
        try:
            return engine.heartbeat_status(self.config, link).age_ms
        except MirrorError:
            return None  # the lag sample just taken says whether the clusters answer

    def snapshot(self, now: float | None = None) -> dict[tuple[str, str, str], WindowStats]:
        """Every (metric, link, topic) window with samples, as of `now`."""
        now = time.time() if now is None else now
        windows = MetricWindows(self.window_s)
        since = now - self.window_s
        for link in self.links:
            add_copies(windows, recorded_copies(self.instance, link, since))
            for sync in recorded_checkpoints(self.instance, link, since):
                add_checkpoint(windows, link, list(sync.mirrors), sync.at, sync.latency_ms)
        with self._lock:
            lags = self._lags.snapshot(now)
        return {**windows.snapshot(now), **lags}

    def rows(self, now: float | None = None) -> list[dict]:
        """Every metric of every mirror and link; a window without samples has count 0 and sum 0."""
        snap = self.snapshot(now)
        rows = []
        with self._lock:
            mirrors = {link: list(self.mirrors.get(link, ())) for link in self.links}
        for link in self.links:
            for topic in [LINK_WIDE, *mirrors[link]]:
                for metric in METRICS:
                    stats = snap.get((metric, link, topic))
                    rows.append(
                        {
                            "metric": metric,
                            "link": link,
                            "topic": topic or None,
                            **(stats.to_dict() if stats else {"count": 0, "sum": 0.0}),
                        }
                    )
        return rows


class PrometheusCollector(Collector):
    """Builds every family at each scrape from `LinkMetrics` (nothing is cached between scrapes)."""

    def __init__(self, metrics: LinkMetrics):
        self.metrics = metrics

    def collect(self):
        families = {}
        for row in self.metrics.rows():
            scope = "topic" if row["topic"] else "link"
            name = f"{PREFIX}_{scope}_{row['metric'].replace('-', '_')}"
            labels = ["link", "topic", "stat"] if row["topic"] else ["link", "stat"]
            if name not in families:
                families[name] = GaugeMetricFamily(
                    name, f"{row['metric']} per {scope} over the window: {UNITS[row['metric']]}", labels=labels
                )
            for stat in STATS:
                if stat in row:
                    values = [row["link"], row["topic"], stat] if row["topic"] else [row["link"], stat]
                    families[name].add_metric(values, float(row[stat]))
        yield from families.values()
        yield from self._state_families()

    def _state_families(self):
        metrics = self.metrics
        mirrors = GaugeMetricFamily(f"{PREFIX}_link_mirrors", "mirrors of the link per state", labels=["link", "state"])
        up = GaugeMetricFamily(
            f"{PREFIX}_link_sample_success",
            "1 when the last sampling of the link's clusters succeeded",
            labels=["link"],
        )
        heartbeat = GaugeMetricFamily(
            f"{PREFIX}_link_heartbeat_age_seconds",
            "how long ago the source wrote the newest heartbeat found on the mirror, at the last sample "
            "(links with emit.heartbeats.enabled that have one)",
            labels=["link"],
        )
        with metrics._lock:
            for link in metrics.links:
                for state, count in sorted(metrics.states.get(link, {}).items()):
                    mirrors.add_metric([link, state], count)
                up.add_metric([link], 0.0 if metrics.errors.get(link, "unsampled") else 1.0)
                if metrics.heartbeat_ages_ms.get(link) is not None:
                    heartbeat.add_metric([link], metrics.heartbeat_ages_ms[link] / 1000)
        window = GaugeMetricFamily(f"{PREFIX}_metrics_window_seconds", "length of the sliding window")
        window.add_metric([], metrics.window_s)
        yield from (mirrors, up, heartbeat, window)


def registry_for(metrics: LinkMetrics) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PrometheusCollector(metrics))
    return registry


def serve(metrics: LinkMetrics, host: str, port: int, interval_s: float, on_error, stop: threading.Event) -> None:
    """Serve /metrics on host:port and sample every `interval_s` until `stop` is set.

    A link that cannot be sampled is said once, when it starts failing, and again when it recovers.
    The first sampling comes before the port opens: a scrape never sees a link without its mirrors.
    """
    said: dict[str, str] = {}

    def sample_and_say() -> None:
        metrics.sample()
        for link, why in sorted(metrics.errors.items()):
            if why != said.get(link, ""):
                on_error(f"link {link}: not sampled: {why}" if why else f"link {link}: sampled again")
                said[link] = why

    sample_and_say()
    server, thread = start_http_server(port, addr=host, registry=registry_for(metrics))
    try:
        while not stop.wait(interval_s):
            sample_and_say()
    finally:
        server.shutdown()
        thread.join(5)
