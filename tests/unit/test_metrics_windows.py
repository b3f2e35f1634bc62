"""Sliding windows of the R-OBS-1 metrics: what falls in, what falls out, and how copies become samples."""

from __future__ import annotations

import pytest

from mirror_pipeline.model.metrics import (
    BYTE_RATE,
    CHECKPOINT_LATENCY,
    LINK_WIDE,
    RECORDS_LAG,
    REPLICATION_LATENCY,
    CopySample,
    MetricWindows,
    Sample,
    SlidingWindow,
    add_checkpoint,
    add_copies,
    add_lags,
)
from mirror_pipeline.model.results import LatencyStats, MirrorCopyResult, PartitionCopy


def test_a_window_summarises_the_samples_inside_it_and_forgets_older_ones():
    window = SlidingWindow(60)
    for at, value in ((0, 10), (30, 2), (50, 6)):
        window.add(Sample.of(at, value))
    stats = window.stats(now=55)
    assert (stats.count, stats.min, stats.max, stats.sum, stats.avg) == (3, 2, 10, 18, 6)
    stats = window.stats(now=61)  # the sample at 0 is now older than the window
    assert (stats.count, stats.min, stats.max, stats.sum) == (2, 2, 6, 8)
    assert window.stats(now=200) is None


def test_samples_arriving_out_of_order_are_kept_by_their_own_time():
    window = SlidingWindow(10)
    window.add(Sample.of(100, 1))
    window.add(Sample.of(95, 7))  # read back late from the event log
    assert window.stats(now=104).max == 7
    assert window.stats(now=106).max == 1


def test_an_aggregate_sample_counts_every_value_behind_it():
    window = SlidingWindow(60)
    window.add(Sample(10, count=4, total=40, low=1, high=20))
    window.add(Sample.of(20, 5))
    stats = window.stats(now=30)
    assert (stats.count, stats.min, stats.max, stats.sum, stats.avg) == (5, 1, 20, 45, 9)


def test_copies_give_byte_rate_per_mirror_and_per_cycle_and_latency_per_record():
    windows = MetricWindows(300)
    cycle = dict(link="l", at=1000.0, duration_s=2.0, cycle_id="run/1", cycle_bytes=3000)
    add_copies(
        windows,
        [
            CopySample(
                mirror="a",
                bytes=1000,
                latency_count=10,
                latency_min_ms=5,
                latency_max_ms=50,
                latency_sum_ms=200,
                **cycle,
            ),
            CopySample(
                mirror="b",
                bytes=2000,
                latency_count=30,
                latency_min_ms=3,
                latency_max_ms=90,
                latency_sum_ms=600,
                **cycle,
            ),
        ],
    )
    snap = windows.snapshot(now=1010)
    assert snap[(BYTE_RATE, "l", "a")].max == 500 and snap[(BYTE_RATE, "l", "b")].max == 1000
    link_rate = snap[(BYTE_RATE, "l", LINK_WIDE)]
    assert (link_rate.count, link_rate.max) == (1, 1500)  # one sample per cycle: all its bytes over its duration
    latency = snap[(REPLICATION_LATENCY, "l", LINK_WIDE)]
    assert (latency.count, latency.min, latency.max, latency.sum, latency.avg) == (40, 3, 90, 800, 20)
    assert snap[(REPLICATION_LATENCY, "l", "a")].avg == 20


def test_checkpoints_and_lags_land_on_the_link_and_on_each_mirror():
    windows = MetricWindows(300)
    add_checkpoint(windows, "l", ["a", "b"], at=10, latency_ms=42.5)
    add_lags(windows, "l", at=10, lags={"a": 3, "b": 4})
    add_lags(windows, "l", at=20, lags={"a": 0, "b": 1})
    snap = windows.snapshot(now=30)
    assert snap[(CHECKPOINT_LATENCY, "l", LINK_WIDE)].max == 42.5 and snap[(CHECKPOINT_LATENCY, "l", "b")].count == 1
    link_lag = snap[(RECORDS_LAG, "l", LINK_WIDE)]
    assert (link_lag.count, link_lag.min, link_lag.max, link_lag.sum) == (2, 1, 7, 8)
    assert snap[(RECORDS_LAG, "l", "a")].max == 3


def test_an_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="unknown metric"):
        MetricWindows().add("bytes", "l", "", Sample.of(0, 1))


def test_a_copys_latency_is_exact_over_its_timed_partitions():
    def part(p, records, low, high, total):
        return PartitionCopy(p, 0, records, 0, records, records, records * 10, 0, low, high, total, records)

    copy = MirrorCopyResult("m", "s", (part(0, 4, 2, 9, 20), part(1, 0, -1, -1, 0), part(2, 6, 1, 30, 60)))
    assert copy.latency == LatencyStats(count=10, min_ms=1, max_ms=30, sum_ms=80)
    assert copy.latency.avg_ms == 8
    assert MirrorCopyResult("m", "s").latency.to_dict() == {"records": 0}
